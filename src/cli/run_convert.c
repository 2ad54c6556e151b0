/* run_convert.c: `memscope run`'s conversion in a child process. A conversion that dies (libdw
 * exits or crashes when memory runs out while it reads debug information; a bug) then takes
 * only the child: memscope says so, removes what the child had half-written, keeps the traces
 * and returns the program's status. Called by cmd_run.c once the program has ended.
 *
 * The child sends its result (rc, ms_store_result, message) through a pipe in one write; a
 * SIGINT, SIGTERM or SIGHUP memscope receives meanwhile is passed on to it, and it stops as
 * the conversion does in-process (-EINTR). */
#include "cli.h"

#include "common/files.h"
#include "common/ms_error.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct result {
    int rc;
    struct ms_store_result res;
    char err[512];
};

/* Removes the files and directories the conversion of pid left beside db_path: its temporary
 * database (<db>.tmp.<pid>.<n>, files.h) and its packing directory (<db>.packing-<pid>-*,
 * embed.c), both named by that process, ours. */
static void remove_leftovers(const char *db_path, pid_t pid)
{
    char dir[PATH_MAX], tmp_prefix[PATH_MAX], pack_prefix[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", db_path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : db_path;
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(tmp_prefix, sizeof tmp_prefix, "%s.tmp.%ld.", base, (long)pid);
    snprintf(pack_prefix, sizeof pack_prefix, "%s.packing-%ld-", base, (long)pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[PATH_MAX * 2 + 2], inner[PATH_MAX * 3 + 3];
    while ((e = readdir(d))) {
        if (!strncmp(e->d_name, tmp_prefix, strlen(tmp_prefix))) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        } else if (!strncmp(e->d_name, pack_prefix, strlen(pack_prefix))) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            DIR *p = opendir(path);
            struct dirent *f;
            while (p && (f = readdir(p)))
                if (strcmp(f->d_name, ".") && strcmp(f->d_name, "..")) {
                    snprintf(inner, sizeof inner, "%s/%s", path, f->d_name);
                    unlink(inner);
                }
            if (p)
                closedir(p);
            rmdir(path);
        }
    }
    closedir(d);
}

int run_convert(const struct ms_store_options *o, volatile int *stop, struct ms_store_result *res,
                char *err, size_t errlen)
{
    int fds[2];
    if (pipe(fds) < 0) /* then in this process */
        return ms_store_convert(o, res, err, errlen);
    /* The signals that end memscope wait while the child is made and put on the cleanup list:
     * one that came between would leave the child converting after memscope is gone. */
    sigset_t fatal, old;
    sigemptyset(&fatal);
    sigaddset(&fatal, SIGINT);
    sigaddset(&fatal, SIGTERM);
    sigaddset(&fatal, SIGHUP);
    sigprocmask(SIG_BLOCK, &fatal, &old);
    pid_t pid = fork();
    if (pid > 0)
        ms_cleanup_add_child(pid); /* a signal that ends memscope ends the child first */
    if (pid != 0)
        sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return ms_store_convert(o, res, err, errlen);
    }
    if (pid == 0) {
        ms_cleanup_reset(); /* the parent's temporary files are the parent's to remove */
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(fds[0]);
        struct result r;
        memset(&r, 0, sizeof r);
        r.rc = ms_store_convert(o, &r.res, r.err, sizeof r.err);
        ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    struct result r;
    size_t got = 0;
    int passed_on = 0;
    while (got < sizeof r) {
        ssize_t n = read(fds[0], (char *)&r + got, sizeof r - got);
        if (n > 0) {
            got += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            if (*stop && !passed_on) { /* the child stops too, and says -EINTR */
                kill(pid, *stop);
                passed_on = 1;
            }
        } else {
            break; /* the child is gone */
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        if (*stop && !passed_on) {
            kill(pid, *stop);
            passed_on = 1;
        }
    }
    ms_cleanup_forget_child(pid);
    if (got == sizeof r) {
        *res = r.res;
        return ms_errf(err, errlen, r.rc, "%s", r.err);
    }
    memset(res, 0, sizeof *res);
    remove_leftovers(o->db_path, pid);
    if (WIFSIGNALED(status))
        snprintf(err, errlen, "the conversion crashed (%s)%s", strsignal(WTERMSIG(status)),
                 WTERMSIG(status) == SIGKILL ? ": out of memory?" : "");
    else
        snprintf(err, errlen,
                 "the conversion ended without finishing (exit status %d: out of "
                 "memory while reading debug information? --no-symbols skips it)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return MS_EIO;
}
