/* main.c: the memscope command. Dispatches to one cmd_<name>() per subcommand through the
 * commands[] table; a first argument that is an option or a program (msMemScope's form,
 * `memscope [options] prog args`) means `run`, unless it is a mistyped command's name and no
 * program (mistyped_command). */
#include "cli.h"
#include "analyze/analyze.h"
#include "common/files.h"
#include "common/ms_error.h"

#include "version.h"

#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_log_level = 1;

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memscope: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memscope: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see memscope --help)\n", stderr);
    va_end(ap);
    return 2;
}

void cli_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    if (level < cli_log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "memscope [%s]: ", names[level < 0 ? 0 : level > 3 ? 3 : level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_site_skip(const char *cmd, const char *what, const char *list)
{
    char err[256];
    if (ms_site_rule_add(&ms_site_rule, list, err, sizeof err) == 0)
        return 0;
    return usage_error("%s%s%s: %s", cmd ? cmd : "", cmd ? ": " : "", what, err);
}

static const char usage[] =
    "usage: memscope run [options] [--] program [args...]\n"
    "       memscope [options] program [args...]        (msMemScope form; same as run)\n"
    "       memscope import TRACE_DIR -o run.db         (raw traces -> database)\n"
    "       memscope pack TRACE_DIR|FILE.mst...         (raw traces -> packed traces)\n"
    "       memscope export run.db --format=csv|db|parquet|torch-snapshot|pprof|collapsed|\n"
    "                      speedscope|perfetto [-o FILE]  (memscope export --help)\n"
    "       memscope sql JOB \"SQL\" [--format=table|csv|json]  (a job's Parquet tables)\n"
    "       memscope ranks JOB [--layer=NAME] [--json]   (the rank that differs, and why)\n"
    "       memscope analyze KIND|all|list run.db [options]   (memscope analyze --help)\n"
    "       memscope plot run.db [-o mem.svg] [--layer=NAME]   (live bytes over time)\n"
    "       memscope view run.db [--port N]               (the viewer, in a browser)\n"
    "       memscope report run.db [-o run.html]          (the viewer as one HTML file)\n"
    "       memscope usage --pid PID... [--devices N...] [--interval S] [--duration S]\n"
    "                      [-o report.json] [--plot usage.svg]   (processes not traced)\n"
    "       memscope usage --pid PID --into TRACE_DIR [--interval S]  (run's sampler)\n"
    "       memscope attach PID [-o OUT] [--duration=S]   (record a running process)\n"
    "       memscope monitor TRACE_DIR [--listen HOST:PORT] [--limit BYTES] [--once]\n"
    "       memscope top [TRACE_DIR | --pid PID | --targets HOST:PORT,...]  (live view)\n"
    "       memscope --compare --input-path=A.db,B.db [-o DIR]  (two runs, msMemScope's form)\n"
#ifdef MEMSCOPE_HAVE_SNAPSHOT
    "       memscope snapshot FILE [--json] [-o run.db] [--state-at N]\n"
#endif
    "       memscope --help | --version\n"
    "\n"
    "Run `memscope run --help` for the recording options.\n";

/* own_signals: the command handles SIGINT and SIGTERM itself (run stops its conversion and
 * keeps the traces, view stops its server); the others get on_fatal_signal. */
static const struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    int own_signals;
} commands[] = {
    {"run", cmd_run, 1},           {"import", cmd_import, 0},   {"export", cmd_export, 0},
    {"analyze", cmd_analyze, 0},   {"pack", cmd_pack, 0},       {"plot", cmd_plot, 0},
    {"view", cmd_view, 1},         {"report", cmd_report, 0},   {"usage", cmd_usage, 1},
    {"attach", cmd_attach, 1},     {"monitor", cmd_monitor, 1}, {"top", cmd_top, 1},
    {"sql", cmd_sql, 0},           {"ranks", cmd_ranks, 0},
#ifdef MEMSCOPE_HAVE_SNAPSHOT
    {"snapshot", cmd_snapshot, 0},
#endif
};

/* SIGINT, SIGTERM, SIGHUP: the temporary files and directories of this process are removed
 * (and its conversion child ended, which removes its own: files.h's cleanup list), then the
 * signal ends memscope as it would have (SA_RESETHAND): exit status 128 + the signal. */
static void on_fatal_signal(int sig)
{
    ms_cleanup_run();
    raise(sig);
}

static void cleanup_on_signals(void)
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

/* Whether process pid holds the file path (its agent's trace descriptor) open. */
int cli_holds_file(long pid, const char *path)
{
    char fds[64], link[PATH_MAX + 32], target[PATH_MAX];
    snprintf(fds, sizeof fds, "/proc/%ld/fd", pid);
    DIR *d = opendir(fds);
    if (!d)
        return 0;
    struct dirent *e;
    int held = 0;
    while (!held && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            held = !strcmp(target, path);
        }
    }
    closedir(d);
    return held;
}

static int run_command(int argc, char **argv);

/* The optimal string alignment distance between a and b (insertions, deletions, substitutions
 * and swaps of two neighbours, each 1), capped at 9; both are short (a command name, one
 * word of the command line: longer words are 9 away). */
static int edit_distance(const char *a, const char *b)
{
    enum { N = 24 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= N || lb >= N)
        return 9;
    int d[N][N];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb] < 9 ? d[la][lb] : 9;
}

/* Whether name (no '/') is an executable file in a directory of PATH, as execvp finds it. */
static int on_path(const char *name)
{
    const char *dirs = getenv("PATH");
    char path[PATH_MAX];
    for (const char *s = dirs ? dirs : "/usr/bin:/bin"; s;) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        struct stat st;
        if (snprintf(path, sizeof path, "%.*s/%s", (int)n, n ? s : ".", name) < (int)sizeof path &&
            access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return 1;
        s = e ? e + 1 : NULL;
    }
    return 0;
}

/* The command a mistyped first word means ("anaylze" -> "analyze"), or NULL: one edit away
 * for names of up to 4 letters, two for longer ones. A word that names a program (a path, or a
 * program on PATH) is never taken for a typo: msMemScope's form runs it. */
static const char *mistyped_command(const char *word)
{
    static const char *const extra[] = {"help"};
    if (!word[0] || word[0] == '-' || strchr(word, '/') || on_path(word))
        return NULL;
    const char *best = NULL;
    int best_d = 9;
    size_t n = sizeof commands / sizeof commands[0];
    for (size_t i = 0; i < n + 1; i++) {
        const char *name = i < n ? commands[i].name : extra[0];
        int d = edit_distance(word, name);
        if (d < best_d && d <= (strlen(name) <= 4 ? 1 : 2)) {
            best_d = d;
            best = name;
        }
    }
    return best;
}

/* Everything memscope printed on stdout must have reached it (a full disk, /dev/full): else the
 * command fails, even --help and --version. */
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
static void huge_page_heap(char **argv)
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

int main(int argc, char **argv)
{
    huge_page_heap(argv);
    sqlite3_config(SQLITE_CONFIG_LOG, sqlite_log, NULL);
    /* the program's own allocation wrappers, for every command that names call sites */
    const char *skip = getenv("MEMSCOPE_SITE_SKIP");
    int rc = skip && *skip ? cli_site_skip(NULL, "MEMSCOPE_SITE_SKIP", skip) : 0;
    /* said before anything runs, not when a temporary directory is first needed */
    const char *tmpdir = getenv("TMPDIR");
    if (rc == 0 && tmpdir && *tmpdir && strcmp(ms_tmp_dir(), tmpdir) != 0)
        cli_log(2,
                "TMPDIR '%s' is not a directory memscope can write; its temporary "
                "directories go to /tmp",
                tmpdir);
    if (rc == 0)
        rc = run_command(argc, argv);
    ms_site_rule_release(&ms_site_rule);
    if (rc == 0 && ms_oom_seen()) { /* an answer printed after a failed allocation */
        fprintf(stderr, "memscope: out of memory (an allocation failed): the output above may be "
                        "incomplete\n");
        rc = 1;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == 0)
            fprintf(stderr, "memscope: cannot write to stdout: %s\n", strerror(errno));
        return rc ? rc : 1;
    }
    return rc;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("memscope version %s\n", MEMSCOPE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            if (!commands[i].own_signals)
                cleanup_on_signals();
            return commands[i].fn(argc - 1, argv + 1);
        }
    const char *typo = mistyped_command(argv[1]);
    if (typo)
        return usage_error("'%s' is neither a command nor a program on PATH: did you mean %s?",
                           argv[1], typo);
    /* msMemScope form: options then the program; with --compare, no program (offline compare) */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--compare"))
            return cmd_compare_ms(argc, argv);
        int takes_value = !strcmp(argv[i], "-i") || !strcmp(argv[i], "--input-path") ||
                          !strcmp(argv[i], "-o") || !strcmp(argv[i], "--output-path");
        if (argv[i][0] != '-')
            break; /* the program */
        i += takes_value;
    }
    argv[0] = "run";
    return cmd_run(argc, argv);
}
