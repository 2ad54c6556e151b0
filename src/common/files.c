/* files.c: creating and replacing files safely (files.h). Used by the conversion, the packer,
 * exports and reports; the agent has its own few lines (it links nothing). */
#include "files.h"
#include "ms_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ms_file_create(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    return fd < 0 ? -errno : fd;
}

int ms_temp_name(char *buf, size_t len, const char *path, const char *tag)
{
    static unsigned counter;
    for (int tries = 0; tries < 1000; tries++) {
        int n = snprintf(buf, len, "%s%s%ld.%u", path, tag, (long)getpid(), counter++);
        if (n < 0 || (size_t)n >= len)
            return -ENAMETOOLONG;
        struct stat st;
        if (lstat(buf, &st) < 0 && errno == ENOENT)
            return 0;
    }
    return -EEXIST;
}

int ms_output_open(struct ms_output *o, const char *path)
{
    struct stat st;
    o->path = path;
    o->tmp[0] = 0;
    o->fd = -1;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return -EISDIR;
        o->fd = open(path, O_WRONLY | O_CLOEXEC); /* a device or FIFO: in place */
        return o->fd < 0 ? -errno : 0;
    }
    int rc = ms_temp_name(o->tmp, sizeof o->tmp, path, ".tmp.");
    if (rc == 0 && (rc = ms_file_create(o->tmp)) >= 0) {
        o->fd = rc;
        return 0;
    }
    o->tmp[0] = 0;
    return rc;
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
