/* run_files.c: what `memscope run` does around the program with files and processes that are
 * not its own: the output's lock (one run at a time per output), the agents' messages kept in
 * the trace directory, why a program could not be traced, and whether a descendant still
 * writes a trace; where the agent is, and the directories it makes and removes. Called by
 * cmd_run.c; docs/cli.md ("Files") states the rules. */
#include "cli.h"

#include "common/files.h"
#include "common/usage.h"

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
                ms_usage_is_file(e->d_name); /* memscope's own samples, not the agent's */
    closedir(d);
    return empty;
}

/* Why the agent could not load into program (found as execvp finds it): a static executable
 * has no dynamic loader to honour LD_PRELOAD, and the loader ignores LD_PRELOAD for a setuid or
 * setgid program run by another user. */
void run_untraceable_reason(const char *program, char *why, size_t len)
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
    struct stat st;
    int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
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
    /* ELF64: a dynamically linked program has a PT_INTERP program header. */
    unsigned char eh[64];
    int dynamic = -1;
    if (pread(fd, eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh, "\177ELF", 4) &&
        eh[4] == 2) {
        uint64_t phoff;
        uint16_t phentsize, phnum;
        memcpy(&phoff, eh + 32, 8);
        memcpy(&phentsize, eh + 54, 2);
        memcpy(&phnum, eh + 56, 2);
        dynamic = 0;
        for (uint16_t i = 0; i < phnum && i < 256 && phentsize >= 4; i++) {
            uint32_t type;
            if (pread(fd, &type, 4, (off_t)(phoff + (uint64_t)i * phentsize)) != 4)
                break;
            if (type == 3) /* PT_INTERP */
                dynamic = 1;
        }
    }
    close(fd);
    if (dynamic == 0)
        snprintf(why, len,
                 "it is statically linked, so there is no dynamic loader to load "
                 "memscope's agent (LD_PRELOAD) into it");
    else
        snprintf(why, len, "memscope's agent did not load into it (was LD_PRELOAD removed?)");
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
            fprintf(stderr, "%s(pid %.*s, said while the program's stderr was elsewhere)\n", buf,
                    (int)(len - 4), e->d_name);
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
