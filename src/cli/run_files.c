/* run_files.c: what `memscope run` does around the program with files and processes that are
 * not its own: the output's lock (one run at a time per output), the agents' messages kept in
 * the trace directory, why a program could not be traced (or must not be started: a sanitizer),
 * how it ended (a death by a signal is said), and whether a descendant still writes a trace;
 * where the agent is, and the directories it makes and removes. Called by cmd_run.c;
 * docs/cli.md ("Files") states the rules. */
#include "cli.h"

#include "common/elf_probe.h"
#include "common/files.h"
#include "common/term_text.h"
#include "common/usage.h"
#include "common/usage_pages.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pid of a process that is still running and writing one of the traces in dir (a
 * descendant that outlived the program), or 0. A process counts when it holds the trace file
 * open: a pid of another pid namespace (a child of unshare -p is pid 1 there) or a reused pid
 * does not. */
long run_running_writer(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    long pid = 0;
    char path[PATH_MAX * 2 + 2], real[PATH_MAX];
    while (!pid && (e = readdir(d))) {
        unsigned long long p, n;
        char tail[8];
        if (sscanf(e->d_name, "%llu.%llu.%7s", &p, &n, tail) != 3 || strcmp(tail, "mst") ||
            p == 0 || p == (unsigned long long)getpid())
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (realpath(path, real) && cli_holds_file((long)p, real))
            pid = (long)p;
    }
    closedir(d);
    return pid;
}

/* Whether dir holds nothing (but ., .. and the usage samples). */
int run_dir_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                ms_usage_is_file(e->d_name) || /* memscope's own samples, not the agent's */
                ms_pages_is_file(e->d_name);
    closedir(d);
    return empty;
}

/* Opens program as execvp finds it (a name without '/' on PATH): a read-only descriptor, or
 * -1. */
static int open_program(const char *program)
{
    char path[PATH_MAX];
    const char *p = program;
    if (!strchr(program, '/')) {
        const char *dirs = getenv("PATH");
        p = NULL;
        for (const char *s = dirs ? dirs : "/usr/bin:/bin"; s && *s && !p;) {
            const char *e = strchr(s, ':');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            if (snprintf(path, sizeof path, "%.*s/%s", (int)n, n ? s : ".", program) <
                    (int)sizeof path &&
                access(path, X_OK) == 0)
                p = path;
            s = e ? e + 1 : NULL;
        }
    }
    return p ? open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
}

/* Why the agent could not load into program (found as execvp finds it): a static executable
 * has no dynamic loader to honour LD_PRELOAD, a 32-bit program cannot load the 64-bit agent,
 * and the loader ignores LD_PRELOAD for a setuid or setgid program run by another user. */
void run_untraceable_reason(const char *program, char *why, size_t len)
{
    struct stat st;
    int fd = open_program(program);
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        snprintf(why, len, "memscope's agent did not load into it");
        return;
    }
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid())) {
        close(fd);
        snprintf(why, len,
                 "it is a setuid or setgid program, and the dynamic loader ignores "
                 "LD_PRELOAD for those");
        return;
    }
    struct ms_elf_info ei;
    int rc = S_ISREG(st.st_mode) ? ms_elf_inspect(fd, &ei) : -1;
    close(fd);
    if (rc == 0 && ei.elf && !ei.native)
        snprintf(why, len,
                 "it is a 32-bit program (or another machine's), which cannot load memscope's "
                 "64-bit agent");
    else if (rc == 0 && ei.elf && !ei.dynamic)
        snprintf(why, len,
                 "it is statically linked, so there is no dynamic loader to load "
                 "memscope's agent (LD_PRELOAD) into it");
    else
        snprintf(why, len, "memscope's agent did not load into it (was LD_PRELOAD removed?)");
}

/* Whether program (found as execvp finds it) needs a sanitizer runtime beside which the agent
 * cannot record (docs/cli.md, "Sanitizers"; common/elf_probe.h): 1 with the reason in why,
 * else 0. */
int run_sanitized_program(const char *program, char *why, size_t len)
{
    struct stat st;
    struct ms_elf_info ei;
    int fd = open_program(program);
    int rc = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? ms_elf_inspect(fd, &ei) : -1;
    if (fd >= 0)
        close(fd);
    if (rc < 0 || !ei.sanitizer_blocks)
        return 0;
    if (ei.sanitizer[0] == 'a') /* linked in: malloc is the program's own */
        snprintf(why, len,
                 "it is built with %s (%s), which serves malloc from inside the program, where "
                 "memscope's agent cannot see it",
                 ei.sanitizer_kind, ei.sanitizer);
    else
        snprintf(why, len,
                 "it is built with %s (it needs %s), whose runtime must be the first library "
                 "loaded and replaces malloc, so memscope's agent cannot load before it",
                 ei.sanitizer_kind, ei.sanitizer);
    return 1;
}

/* Whether memscope runs under a seccomp filter (set by whoever started it: systemd, a
 * container): the program inherits it, and the agent cannot see what it allows (sandbox.c
 * reads only the filters the program installs). */
static int seccomp_filtered(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *s = strstr(buf, "\nSeccomp:");
    return s && atoi(s + 9) == 2;
}

/* Says that the program died of signal signo (docs/cli.md: memscope still writes what was
 * recorded, and exits with 128+N). */
void run_say_killed(int signo, int core)
{
    const char *abbrev = sigabbrev_np(signo);
    const char *hint = "";
    if (signo == SIGSYS && seccomp_filtered())
        hint = ": a seccomp filter (a sandbox) forbade a system call it made; memscope itself "
               "runs under one (Seccomp: 2 in /proc/self/status), which the program and "
               "memscope's agent inherit and the agent cannot read";
    else if (signo == SIGSYS)
        hint = ": a seccomp filter (a sandbox) forbade a system call it made";
    else if (signo == SIGKILL)
        hint = ": sent by another process or the kernel (the OOM killer, a time or memory limit)";
    else if (signo == SIGXFSZ)
        hint = ": it wrote past the file size limit (ulimit -f)";
    else if (signo == SIGXCPU)
        hint = ": it ran past its CPU time limit (ulimit -t)";
    cli_error("the program was killed by SIG%s (%s)%s%s; what it recorded until then is kept",
              abbrev ? abbrev : "?", strsignal(signo), core ? ", core dumped" : "", hint);
}

/* The output file's lock (<output>.lock, flock): one run at a time writes a given output. */
static int lock_fd = -1, lock_created;
static char lock_path[PATH_MAX + 160];

void run_unlock_output(void)
{
    if (lock_fd < 0)
        return;
    if (lock_created)
        unlink(lock_path); /* ours (O_EXCL), removed while still locked */
    close(lock_fd);
    lock_fd = -1;
}

/* Takes the lock of out_file for this process (released at exit): 0, -EBUSY when another run
 * holds it, or -errno. A lock file left by a run that died is reused, not removed. */
int run_lock_output(const char *out_file)
{
    snprintf(lock_path, sizeof lock_path, "%s.lock", out_file);
    for (int tries = 0; tries < 5; tries++) {
        int fd = ms_file_create(lock_path);
        lock_created = fd >= 0;
        if (fd == -EEXIST && (fd = open(lock_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
            fd = -errno;
        if (fd < 0)
            return fd;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            close(fd);
            if (lock_created)
                unlink(lock_path);
            return e == EWOULDBLOCK ? -EBUSY : -e;
        }
        struct stat a, b; /* still the file at that name (not removed by its last holder)? */
        if (fstat(fd, &a) == 0 && lstat(lock_path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            lock_fd = fd;
            atexit(run_unlock_output);
            return 0;
        }
        close(fd);
    }
    return -EBUSY;
}

/* Prints what agents could not say on the program's stderr (they write <pid>.msg in the trace
 * directory when the program's fd 2 is no longer memscope's stderr), and removes those files. */
void run_print_agent_messages(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[PATH_MAX], buf[4096];
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".msg"))
            continue;
        if (strlen(dir) + len + 2 > sizeof path)
            continue;
        snprintf(path, sizeof path, "%.2048s/%.1024s", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            /* the file is in a directory the program can write: its bytes are escaped (each
             * message is one line) */
            for (char *line = buf, *nl; *line; line = nl) {
                nl = strchr(line, '\n');
                if (nl)
                    *nl++ = 0;
                else
                    nl = line + strlen(line);
                if (*line)
                    fprintf(stderr, "%s\n", ms_term_text(line));
            }
            fprintf(stderr, "(pid %s, said while the program's stderr was elsewhere)\n",
                    ms_term_text(e->d_name));
        }
        unlink(path);
    }
    closedir(d);
}

/* Returns the directory of the running memscope binary in buf. */
int run_exe_dir(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return 0;
}

/* Finds libmemscope.so: $MEMSCOPE_AGENT, next to the binary (build tree), or in the install
 * tree relative to the binary (<prefix>/bin -> <prefix>/lib/memscope). */
int run_find_agent(char *out, size_t len)
{
    const char *env = getenv("MEMSCOPE_AGENT");
    char dir[PATH_MAX];
    if (env && *env) {
        if (access(env, R_OK) != 0)
            return -1;
        return realpath(env, out) ? 0 : -1;
    }
    if (run_exe_dir(dir, sizeof dir) < 0)
        return -1;
    const char *cands[] = {"/libmemscope.so", "/" MEMSCOPE_AGENT_RELDIR "/libmemscope.so"};
    for (size_t i = 0; i < 2; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s%s", dir, cands[i]);
        if (access(path, R_OK) == 0 && realpath(path, out))
            return 0;
    }
    (void)len;
    return -1;
}

/* Creates path and its missing parents (0700). 0 or -errno (-ENOTDIR: not a directory). The
 * outermost directory it created goes to made (len bytes; "" when it created none), so that a
 * run that fails can remove what it made and nothing else. */
int run_mkdir_p(const char *path, char *made, size_t len)
{
    char buf[PATH_MAX];
    if (len)
        made[0] = 0;
    if (!path[0])
        return -ENOENT;
    if (strlen(path) >= sizeof buf)
        return -ENAMETOOLONG;
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0700) == 0) {
            if (len && !made[0])
                snprintf(made, len, "%s", buf);
        } else if (errno != EEXIST) {
            return -errno;
        }
        *p = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(buf, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Removes dir and its parents while they are empty and inside made (what run_mkdir_p made). */
void run_rmdirs(const char *dir, const char *made)
{
    size_t top = strlen(made);
    char d[PATH_MAX];
    if (!top || snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d)
        return;
    if (strstr(d + (strlen(d) > top ? top : strlen(d)), "/.."))
        return; /* "made/../x" is not inside made: remove nothing */
    while (strlen(d) >= top && !strncmp(d, made, top) && (d[top] == 0 || d[top] == '/')) {
        if (rmdir(d) < 0 && errno != ENOENT) /* not made: a failed mkdir -p */
            break;
        char *slash = strrchr(d, '/');
        if (!slash || slash == d)
            break;
        *slash = 0;
    }
}

/* Removes the files of dir (one level: a trace directory memscope made) and dir. */
int run_remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(dir) < 0 ? -errno : 0;
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
