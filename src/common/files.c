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
#include <sys/random.h>
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
    int n = snprintf(buf, len, "%s%s%016llx", path, tag, random_tag());
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
    /* the longest name the conversion opens: "<path>.tmp.<16 digits>" and SQLite's journal */
    if (random_name(tmp, sizeof tmp, path, ".tmp.") < 0 ||
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
    o->tmp[0] = 0;
    return rc;
}

void ms_output_abort(struct ms_output *o)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0])
        unlink(o->tmp); /* ours: created with O_EXCL by ms_output_open */
    o->tmp[0] = 0;
}
