/* startup.c: what the memscope command sets up before and around a command (cli.h): its heap in
 * huge pages (a second start with GLIBC_TUNABLES, the user's environment put back), SQLite's
 * log of failed allocations, and the removal of temporary files when a signal ends it. */
#include "cli.h"
#include "common/files.h"
#include "common/ms_error.h"

#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* SIGINT, SIGTERM, SIGHUP: the temporary files and directories of this process are removed
 * (and its conversion child ended, which removes its own: files.h's cleanup list), then the
 * signal ends memscope as it would have (SA_RESETHAND): exit status 128 + the signal. */
static void on_fatal_signal(int sig)
{
    ms_cleanup_run();
    raise(sig);
}

void cli_cleanup_on_signals(void)
{
    struct sigaction sa = {.sa_handler = on_fatal_signal, .sa_flags = SA_RESETHAND};
    sigfillset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* a signal ignored by whoever started memscope (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

/* SQLite's log: it reports every allocation that failed, which a query may have hidden. */
static void sqlite_log(void *arg, int code, const char *msg)
{
    (void)arg;
    (void)msg;
    if ((code & 0xff) == SQLITE_NOMEM)
        ms_oom_note();
}

/* The environment variable that marks memscope's second start (below) and holds the user's
 * GLIBC_TUNABLES: "=value", or "-" when it was unset. */
#define REEXEC_MARK "MEMSCOPE_GLIBC_TUNABLES"

/* Whether the kernel gives huge pages to memory that asks for them (transparent huge pages
 * "always" or "madvise"). */
static int thp_available(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

/* memscope's own heap in huge pages. The conversion's hash maps and block records are read at
 * random over tens of MB (half its main thread's time was on those loads), and in huge pages it
 * takes a quarter less time (a PyTorch run's: 0.87 s instead of 1.14; bench/RESULTS.md), the
 * address translations of 4 KiB pages being what it saves. glibc's malloc asks for huge
 * pages when GLIBC_TUNABLES holds glibc.malloc.hugetlb=1, read once as a program starts: so
 * memscope starts itself again with it added, and that second start puts the user's
 * environment back at once, so that the traced program and everything memscope starts see it
 * unchanged. Not when the user set hugetlb (their choice), the kernel gives no huge pages, or
 * memscope's own file cannot be executed again (then it goes on as it is). */
void cli_huge_page_heap(char **argv)
{
    const char *mark = getenv(REEXEC_MARK);
    if (mark && mark[0] != '=' && strcmp(mark, "-") != 0)
        mark = NULL; /* not a mark of ours: the first start replaces it */
    if (mark) {      /* the second start: the user's environment back */
        if (mark[0] == '=')
            setenv("GLIBC_TUNABLES", mark + 1, 1);
        else
            unsetenv("GLIBC_TUNABLES");
        unsetenv(REEXEC_MARK);
        return;
    }
    const char *t = getenv("GLIBC_TUNABLES");
    if ((t && strstr(t, "glibc.malloc.hugetlb")) || !thp_available())
        return;
    char old[4096], val[4096 + 32], self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1); /* a path (valgrind, gdb) */
    if (n <= 0 || (t && strlen(t) + 1 >= sizeof old))
        return;
    self[n] = 0;
    snprintf(old, sizeof old, "%s%s", t ? "=" : "-", t ? t : "");
    snprintf(val, sizeof val, "%s%sglibc.malloc.hugetlb=1", t ? t : "", t && *t ? ":" : "");
    if (setenv(REEXEC_MARK, old, 1) == 0 && setenv("GLIBC_TUNABLES", val, 1) == 0)
        execv(self, argv);
    /* not started again: as before */
    if (old[0] == '=')
        setenv("GLIBC_TUNABLES", old + 1, 1);
    else
        unsetenv("GLIBC_TUNABLES");
    unsetenv(REEXEC_MARK);
}

void cli_sqlite_oom_log(void)
{
    sqlite3_config(SQLITE_CONFIG_LOG, sqlite_log, NULL);
}
