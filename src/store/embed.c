/* embed.c: the traces of a run inside its compact database (see embed.h). Workload: a few
 * files per run, megabytes to gigabytes each, read and written in MS_EMBED_PART pieces. */
#include "embed.h"

#include "common/ms_error.h"
#include "common/files.h"
#include "trace/pack.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void *pack_all(void *arg)
{
    struct ms_embed *e = arg;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* The conversion needs the packed traces only at its end: packing takes the CPU time the
     * conversion's threads leave (the packer's threads inherit this thread's priority). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    for (size_t i = 0; i < e->n && e->rc == 0; i++) {
        if (!ends_with(e->paths[i], ".mst")) {
            e->packed[i] = e->paths[i];
            continue;
        }
        size_t len = strlen(e->work_dir) + strlen(base_name(e->paths[i])) + 2;
        char *out = malloc(len);
        if (!out) {
            e->rc = MS_ENOMEM;
            snprintf(e->err, sizeof e->err, "out of memory");
            break;
        }
        snprintf(out, len, "%s/%s", e->work_dir, base_name(e->paths[i]));
        /* the stacks' frames are in the database's tables: the traces keep their ids only */
        int rc =
            ms_pack_file_flags(e->paths[i], out, cpus > 0 ? (int)cpus : 1, MS_PACK_STACK_IDS, NULL);
        if (rc == MS_EINVAL || rc == MS_EFORMAT || rc == MS_ETRUNC) {
            /* already packed, or not a trace the packer takes: stored as it is */
            unlink(out);
            free(out);
            e->packed[i] = e->paths[i];
            continue;
        }
        e->packed[i] = out;
        if (rc < 0) {
            e->rc = rc;
            snprintf(e->err, sizeof e->err, "cannot pack %s: %s", e->paths[i], ms_strerror(rc));
        }
    }
    return NULL;
}

int ms_embed_start(struct ms_embed *e, const char *const *paths, size_t n, const char *db_path,
                   char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    e->paths = calloc(n + 1, sizeof *e->paths);
    e->packed = calloc(n + 1, sizeof *e->packed);
    size_t wl = strlen(db_path) + 48;
    e->work_dir = malloc(wl);
    if (!e->paths || !e->packed || !e->work_dir) {
        return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (!(e->paths[i] = strdup(paths[i]))) {
            return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
        }
    e->n = n;
    /* named by this process (memscope run removes it if the conversion dies: run_convert.c) */
    snprintf(e->work_dir, wl, "%s.packing-%ld-XXXXXX", db_path, (long)getpid());
    if (!ms_temp_dir_create(e->work_dir)) {
        int rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s", e->work_dir, strerror(errno));
        free(e->work_dir);
        e->work_dir = NULL; /* not ours */
        return rc;
    }
    int rc = pthread_create(&e->thread, NULL, pack_all, e);
    if (rc != 0) {
        return ms_errf(err, errlen, -rc, "cannot start the packing thread: %s", strerror(rc));
    }
    e->started = 1;
    return 0;
}

static int join(struct ms_embed *e)
{
    if (e->started) {
        pthread_join(e->thread, NULL);
        e->started = 0;
    }
    return e->rc;
}

static int embed_file(sqlite3_stmt *ins, const char *path, const char *name, char *buf, char *err,
                      size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        return ms_errf(err, errlen, rc, "cannot read %s: %s", path, strerror(errno));
    }
    int rc = 0;
    for (int64_t part = 0; rc == 0; part++) {
        size_t got = 0;
        while (got < MS_EMBED_PART) {
            ssize_t r = read(fd, buf + got, MS_EMBED_PART - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                rc = -errno;
                snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
                break;
            }
            if (r == 0)
                break;
            got += (size_t)r;
        }
        if (rc < 0 || (got == 0 && part > 0))
            break;
        sqlite3_bind_text(ins, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 2, part);
        sqlite3_bind_blob(ins, 3, buf, (int)got, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            snprintf(err, errlen, "cannot store %s: %s", name,
                     sqlite3_errmsg(sqlite3_db_handle(ins)));
            rc = MS_EDB;
        }
        sqlite3_reset(ins);
        if (got < MS_EMBED_PART)
            break;
    }
    close(fd);
    return rc;
}

int ms_embed_finish(struct ms_embed *e, sqlite3 *db, char *err, size_t errlen)
{
    int rc = join(e);
    if (rc < 0) {
        return ms_errf(err, errlen, rc, "%s", e->err);
    }
    sqlite3_stmt *ins = NULL;
    char *buf = malloc(MS_EMBED_PART);
    if (!buf) {
        return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    }
    if (sqlite3_prepare_v2(db, "INSERT INTO trace_files (name, part, data) VALUES (?, ?, ?)", -1,
                           &ins, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "trace_files: %s", sqlite3_errmsg(db));
        free(buf);
        return MS_EDB;
    }
    for (size_t i = 0; i < e->n && rc == 0; i++)
        rc = embed_file(ins, e->packed[i], base_name(e->paths[i]), buf, err, errlen);
    sqlite3_finalize(ins);
    free(buf);
    return rc;
}

void ms_embed_release(struct ms_embed *e)
{
    join(e);
    for (size_t i = 0; i < e->n; i++) {
        if (e->packed && e->packed[i] && e->packed[i] != e->paths[i]) {
            unlink(e->packed[i]); /* a copy in our own work directory */
            free(e->packed[i]);
        }
        free(e->paths[i]);
    }
    if (e->work_dir) {
        rmdir(e->work_dir);
        ms_cleanup_forget(e->work_dir);
    }
    free(e->paths);
    free(e->packed);
    free(e->work_dir);
    memset(e, 0, sizeof *e);
}

static int name_ok(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0 && strlen(name) < NAME_MAX;
}

int ms_embed_extract(sqlite3 *db, const char *dir, char *err, size_t errlen)
{
    /* the parts are sorted without their data, then read one by one: sorting the blobs made
     * SQLite's sorter hold every trace in memory (128 MB for 20M events) */
    sqlite3_stmt *st, *blob;
    if (sqlite3_prepare_v2(db, "SELECT name, part, id FROM trace_files ORDER BY name, part", -1,
                           &st, NULL) != SQLITE_OK)
        return 0; /* no such table: a full database, or one of an older memscope */
    if (sqlite3_prepare_v2(db, "SELECT data FROM trace_files WHERE id = ?", -1, &blob, NULL) !=
        SQLITE_OK) {
        sqlite3_finalize(st);
        return ms_errf(err, errlen, MS_EDB, "trace_files: %s", sqlite3_errmsg(db));
    }
    int rc = 0, files = 0, fd = -1, s;
    char cur[NAME_MAX + 1] = "", path[PATH_MAX];
    int64_t next_part = 0;
    while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        int64_t part = sqlite3_column_int64(st, 1);
        if (!name_ok(name)) {
            snprintf(err, errlen, "trace_files: a file name that is not a plain name");
            rc = MS_EFORMAT;
            break;
        }
        if (strcmp(name, cur) != 0) {
            if (fd >= 0 && close(fd) < 0 && rc == 0)
                rc = -errno;
            fd = -1;
            if (part != 0) {
                snprintf(err, errlen, "trace_files: %s has no part 0", name);
                rc = MS_EFORMAT;
                break;
            }
            snprintf(cur, sizeof cur, "%s", name);
            if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
                snprintf(err, errlen, "path too long: %s/%s", dir, name);
                rc = -ENAMETOOLONG;
                break;
            }
            fd = ms_file_create(path);
            if (fd < 0) {
                rc = fd;
                snprintf(err, errlen, "cannot create %s: %s", path, strerror(-fd));
                break;
            }
            files++;
            next_part = 0;
        }
        if (part != next_part++) {
            snprintf(err, errlen, "trace_files: %s misses part %lld", name,
                     (long long)next_part - 1);
            rc = MS_EFORMAT;
            break;
        }
        sqlite3_bind_int64(blob, 1, sqlite3_column_int64(st, 2));
        if (sqlite3_step(blob) != SQLITE_ROW) {
            snprintf(err, errlen, "trace_files: %s", sqlite3_errmsg(db));
            rc = MS_EDB;
            break;
        }
        const char *data = sqlite3_column_blob(blob, 0);
        size_t len = (size_t)sqlite3_column_bytes(blob, 0);
        for (size_t off = 0; off < len && rc == 0;) {
            ssize_t w = write(fd, data + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = -errno;
                snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
            } else {
                off += (size_t)w;
            }
        }
        sqlite3_reset(blob);
    }
    if (rc == 0 && s != SQLITE_DONE) {
        snprintf(err, errlen, "trace_files: %s", sqlite3_errmsg(db));
        rc = MS_EDB;
    }
    if (fd >= 0 && close(fd) < 0 && rc == 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    }
    sqlite3_finalize(st);
    sqlite3_finalize(blob);
    return rc < 0 ? rc : files;
}
