/* pin.c: `memscope view` keeps the database it opened, not its path (pin.h). The viewer loads
 * its model once, but the findings' analyses, a compact database's replay and its expansion
 * each open the database again later, by name: a file renamed over the path in between (a new
 * run written to the same name) would mix two runs in one page. Opening "/proc/self/fd/N"
 * reaches the file descriptor N holds, whatever is at the path now; but SQLite's default VFS
 * resolves symbolic links in a name (to put its journal beside the real file), and the link
 * /proc/self/fd/N reads as the old path, and it opens every file with O_NOFOLLOW, which refuses
 * that link. So a VFS that is SQLite's default one except for these two, for these names only,
 * becomes the default (its open through the VFS's replaceable system call, "open"). Called by
 * api.c's ms_view_open. */
#include "pin.h"

#include "common/ms_error.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FD_PREFIX "/proc/self/fd/"

static sqlite3_vfs pin_vfs;
static int (*base_full_pathname)(sqlite3_vfs *, const char *, int, char *);
static int (*base_open)(const char *, int, int);

static int is_pinned(const char *name)
{
    return !strncmp(name, FD_PREFIX, strlen(FD_PREFIX));
}

/* SQLite's open, but following the link /proc/self/fd/N: it is the open file itself. */
static int open_pinned(const char *name, int flags, int mode)
{
    return base_open(name, is_pinned(name) ? flags & ~O_NOFOLLOW : flags, mode);
}

/* The name as it is for /proc/self/fd/N (the descriptor's own file); else the base VFS's. */
static int full_pathname(sqlite3_vfs *vfs, const char *name, int nout, char *out)
{
    if (!is_pinned(name))
        return base_full_pathname(vfs, name, nout, out);
    size_t n = strlen(name);
    if (n + 1 > (size_t)nout)
        return SQLITE_CANTOPEN;
    memcpy(out, name, n + 1);
    return SQLITE_OK;
}

/* Makes pin_vfs, a copy of the default VFS but for full_pathname, the default. 0 or MS_EDB. */
static int register_vfs(void)
{
    if (base_full_pathname)
        return 0;
    if (sqlite3_initialize() != SQLITE_OK)
        return MS_EDB;
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (!base || !base->xFullPathname || base->iVersion < 3 || !base->xGetSystemCall ||
        !base->xSetSystemCall)
        return MS_EDB;
    sqlite3_syscall_ptr open_fn = base->xGetSystemCall(base, "open");
    if (!open_fn)
        return MS_EDB;
    pin_vfs = *base; /* its methods and their state (pAppData): a file opened is a unix file */
    pin_vfs.pNext = NULL;
    pin_vfs.zName = "memscope-pin";
    pin_vfs.xFullPathname = full_pathname;
    base_open = (int (*)(const char *, int, int))open_fn;
    if (base->xSetSystemCall(base, "open", (sqlite3_syscall_ptr)open_pinned) != SQLITE_OK)
        return MS_EDB;
    base_full_pathname = base->xFullPathname;
    if (sqlite3_vfs_register(&pin_vfs, 1) != SQLITE_OK) {
        base->xSetSystemCall(base, "open", open_fn);
        base_full_pathname = NULL;
        return MS_EDB;
    }
    return 0;
}

int ms_view_pin(const char *path, char *out, size_t outlen)
{
    /* O_NONBLOCK: a FIFO at path opens at once (and is refused below) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st, st2;
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode))
        rc = MS_EINVAL;
    else if ((size_t)snprintf(out, outlen, FD_PREFIX "%d", fd) >= outlen)
        rc = -ENAMETOOLONG;
    else if (stat(out, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
        rc = MS_ENOTFOUND; /* no /proc here */
    else
        rc = register_vfs();
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}
