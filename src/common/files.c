/* files.c: creating and replacing files safely (files.h): the one place where memscope's
 * outputs and temporary files are named and opened. Used by the conversion, the packer, the
 * snapshot import, exports, reports, plots and the Python extension; the agent has its own few
 * lines (it links nothing). */
#include "files.h"
#include "ms_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ms_file_create(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    return fd < 0 ? -errno : fd;
}

/* 64 bits no other process can predict: getrandom, or (never seen: a kernel without it) the
 * pid, the clock and a counter, still unique, and O_EXCL|O_NOFOLLOW keep a guess harmless. */
static unsigned long long random_tag(void)
{
    static unsigned counter;
    unsigned long long r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((unsigned long long)getpid() << 40) ^ ((unsigned long long)ts.tv_nsec << 16) ^
           (unsigned long long)ts.tv_sec ^ ((unsigned long long)++counter << 56);
}

static int random_name(char *buf, size_t len, const char *path, const char *tag)
{
    int n = snprintf(buf, len, "%s%s%ld.%016llx", path, tag, (long)getpid(), random_tag());
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int ms_temp_name(char *buf, size_t len, const char *path, const char *tag)
{
    for (int tries = 0; tries < 100; tries++) {
        int rc = random_name(buf, len, path, tag);
        if (rc < 0)
            return rc;
        struct stat st;
        if (lstat(buf, &st) < 0 && errno == ENOENT)
            return 0;
    }
    return -EEXIST;
}

int ms_temp_create(char *buf, size_t len, const char *path, const char *tag)
{
    for (int tries = 0; tries < 100; tries++) {
        int rc = random_name(buf, len, path, tag);
        if (rc == 0 && (rc = ms_file_create(buf)) == -EEXIST)
            continue; /* taken (by chance, or planted): another name */
        if (rc < 0)
            buf[0] = 0;
        else
            ms_cleanup_add(buf, 0);
        return rc;
    }
    buf[0] = 0;
    return -EEXIST;
}

const char *ms_tmp_dir(void)
{
    const char *t = getenv("TMPDIR");
    struct stat st;
    if (t && *t && strlen(t) < PATH_MAX - 64 && stat(t, &st) == 0 && S_ISDIR(st.st_mode) &&
        access(t, W_OK | X_OK) == 0)
        return t;
    return "/tmp";
}

int ms_db_path_check(const char *path)
{
    char tmp[PATH_MAX + 64];
    size_t cwd = 0;
    if (path[0] != '/') {
        char dir[PATH_MAX];
        if (!getcwd(dir, sizeof dir))
            return -ENAMETOOLONG;
        cwd = strlen(dir) + 1;
    }
    /* the longest name the conversion opens: "<path>.tmp.<pid>.<16 digits>" (a pid of up to 7
     * digits: pid_max is at most 2^22) and SQLite's journal */
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.4194304.0123456789abcdef", path);
    if (n < 0 || (size_t)n >= sizeof tmp ||
        cwd + strlen(tmp) + sizeof "-journal" - 1 > MS_SQLITE_PATH_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* The descriptor a name of the process's own descriptors stands for, or -1: the user named
 * one of its open files, which is written as it is (not a link to follow or to replace). */
static int named_descriptor(const char *path)
{
    if (!strcmp(path, "/dev/stdout"))
        return STDOUT_FILENO;
    if (!strcmp(path, "/dev/stderr"))
        return STDERR_FILENO;
    const char *n = !strncmp(path, "/dev/fd/", 8)          ? path + 8
                    : !strncmp(path, "/proc/self/fd/", 14) ? path + 14
                                                           : NULL;
    if (!n || *n < '0' || *n > '9' || strlen(n) > 9)
        return -1;
    char *end;
    long fd = strtol(n, &end, 10);
    return *end ? -1 : (int)fd;
}

int ms_output_open(struct ms_output *o, const char *path)
{
    struct stat st;
    o->path = path;
    o->tmp[0] = 0;
    o->fd = -1;
    int named = named_descriptor(path);
    if (named >= 0) {
        o->fd = fcntl(named, F_DUPFD_CLOEXEC, 3);
        return o->fd < 0 ? -errno : 0;
    }
    /* lstat: a symbolic link is replaced like a regular file, never followed */
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return -EISDIR;
        /* a device or FIFO at path itself: in place (O_NOFOLLOW: one that became a link since
         * is not followed; the same file, or nothing) */
        o->fd = open(path, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        if (o->fd < 0)
            return -errno;
        struct stat now;
        if (fstat(o->fd, &now) < 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
            close(o->fd);
            o->fd = -1;
            return -EAGAIN;
        }
        return 0;
    }
    int rc = ms_temp_create(o->tmp, sizeof o->tmp, path, ".tmp.");
    if (rc < 0)
        return rc;
    o->fd = rc;
    return 0;
}

int ms_output_commit(struct ms_output *o)
{
    int rc = 0;
    if (o->fd >= 0 && close(o->fd) < 0)
        rc = -errno;
    o->fd = -1;
    if (rc == 0 && ms_oom_seen())
        rc = MS_ENOMEM; /* what was written may miss what a failed allocation hid */
    if (rc == 0 && o->tmp[0] && rename(o->tmp, o->path) < 0)
        rc = -errno;
    if (rc < 0)
        ms_output_abort(o);
    else if (o->tmp[0])
        ms_cleanup_forget(o->tmp);
    o->tmp[0] = 0;
    return rc;
}

void ms_output_abort(struct ms_output *o)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0]) {
        unlink(o->tmp); /* ours: created with O_EXCL by ms_output_open */
        ms_cleanup_forget(o->tmp);
    }
    o->tmp[0] = 0;
}

char *ms_temp_dir_create(char *tmpl)
{
    if (!mkdtemp(tmpl))
        return NULL;
    ms_cleanup_add(tmpl, 1);
    return tmpl;
}

/* The cleanup list, read by the signal handler. A slot is taken with an atomic exchange of its
 * state from 0 (free) to 3 (being written: threads may add at once), and published as 1 (a
 * file) or 2 (a directory) once its path is written, so the handler never reads a path being
 * written. */
static struct {
    volatile sig_atomic_t state; /* 0 free, 1 file, 2 directory, 3 being written */
    char path[PATH_MAX + 64];
} cleanup[MS_CLEANUP_MAX];
static volatile pid_t cleanup_children[MS_CLEANUP_MAX];

void ms_cleanup_add(const char *path, int is_dir)
{
    size_t n = strlen(path);
    if (n >= sizeof cleanup[0].path)
        return;
    for (int i = 0; i < MS_CLEANUP_MAX; i++) {
        sig_atomic_t free_slot = 0;
        if (__atomic_compare_exchange_n(&cleanup[i].state, &free_slot, 3, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            memcpy(cleanup[i].path, path, n + 1);
            __atomic_store_n(&cleanup[i].state, is_dir ? 2 : 1, __ATOMIC_RELEASE);
            return;
        }
    }
}

void ms_cleanup_forget(const char *path)
{
    for (int i = 0; i < MS_CLEANUP_MAX; i++) {
        sig_atomic_t state = __atomic_load_n(&cleanup[i].state, __ATOMIC_ACQUIRE);
        if ((state == 1 || state == 2) && !strcmp(cleanup[i].path, path))
            __atomic_store_n(&cleanup[i].state, 0, __ATOMIC_RELEASE);
    }
}

void ms_cleanup_add_child(pid_t pid)
{
    for (int i = 0; i < MS_CLEANUP_MAX; i++)
        if (!cleanup_children[i]) {
            cleanup_children[i] = pid;
            return;
        }
}

void ms_cleanup_forget_child(pid_t pid)
{
    for (int i = 0; i < MS_CLEANUP_MAX; i++)
        if (cleanup_children[i] == pid)
            cleanup_children[i] = 0;
}

void ms_cleanup_reset(void)
{
    for (int i = 0; i < MS_CLEANUP_MAX; i++) {
        cleanup[i].state = 0;
        cleanup_children[i] = 0;
    }
}

/* Removes name in directory dirfd, a directory's entries first (depth levels at most), with
 * system calls only (a signal handler's). */
static void remove_at(int dirfd, const char *name, int depth)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno != EISDIR)
        return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && depth > 0) {
        char buf[4096];
        long n;
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct linux_dirent64 {
                    unsigned long long ino;
                    long long off;
                    unsigned short reclen;
                    unsigned char type;
                    char name[];
                } *d = (void *)(buf + off);
                if (strcmp(d->name, ".") && strcmp(d->name, ".."))
                    remove_at(fd, d->name, depth - 1);
                off += d->reclen;
            }
        }
    }
    if (fd >= 0)
        close(fd);
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

void ms_cleanup_run(void)
{
    int saved = errno;
    for (int i = 0; i < MS_CLEANUP_MAX; i++) {
        pid_t pid = cleanup_children[i];
        if (pid > 0) {
            kill(pid, SIGTERM);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            cleanup_children[i] = 0;
        }
    }
    for (int i = MS_CLEANUP_MAX - 1; i >= 0; i--) {
        int state = cleanup[i].state;
        if (state == 1 || state == 2)
            remove_at(AT_FDCWD, cleanup[i].path, state == 2 ? 2 : 0);
        if (state == 1) { /* a temporary database's journal: SQLite's, beside our file */
            char journal[sizeof cleanup[i].path + 8];
            size_t n = strlen(cleanup[i].path);
            memcpy(journal, cleanup[i].path, n);
            memcpy(journal + n, "-journal", sizeof "-journal");
            unlink(journal);
        }
        cleanup[i].state = 0;
    }
    errno = saved;
}
