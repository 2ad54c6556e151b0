/* expand.c: the full database (one row per event, memscope_dump) from a compact one: its packed
 * traces are written out to a private directory and converted again, and what the compact
 * database already knew replaces what a second conversion would recompute: the symbolized
 * stacks (as they were when the run ended: binaries may have changed since), the run's meta,
 * trace file names, the tables computed for the analyses and the inefficient findings written
 * back. Workload: once per export or per
 * analysis that reads every event; as fast as the conversion (about 0.7 s per million events). */
#include "store.h"

#include "embed.h"
#include "stack_text.h"
#include "common/ms_error.h"
#include "common/db_ids.h"
#include "common/files.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ms_store_is_compact(sqlite3 *db)
{
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'store'", -1, &st, NULL) !=
        SQLITE_OK)
        return 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        yes = v && strcmp(v, "compact") == 0;
    }
    sqlite3_finalize(st);
    return yes;
}

/* Removes the files of dir (created by ms_embed_extract: plain names) and dir. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[PATH_MAX];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
                unlink(path);
        closedir(d);
    }
    rmdir(dir);
    ms_cleanup_forget(dir);
}

static int meta_int(sqlite3 *db, const char *key, long long dflt)
{
    sqlite3_stmt *st;
    long long v = dflt;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK)
        return (int)dflt;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return (int)v;
}

/* What the compact database knew, into the new full one at path. */
static int carry_over(const char *path, const char *compact_path, char *err, size_t errlen)
{
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return MS_EDB;
    }
    sqlite3_stmt *att;
    int rc = 0;
    if (sqlite3_prepare_v2(db, "ATTACH ? AS c", -1, &att, NULL) != SQLITE_OK)
        rc = MS_EDB;
    else {
        sqlite3_bind_text(att, 1, compact_path, -1, SQLITE_STATIC);
        if (sqlite3_step(att) != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_finalize(att);
    }
    static const char sql[] =
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;"
        "DELETE FROM strings; INSERT INTO strings SELECT * FROM c.strings;"
        "DELETE FROM modules; INSERT INTO modules SELECT * FROM c.modules;"
        "DELETE FROM frames; INSERT INTO frames SELECT * FROM c.frames;"
        "DELETE FROM meta; INSERT INTO meta SELECT * FROM c.meta WHERE key != 'store';"
        "UPDATE processes SET trace_file = (SELECT p.trace_file FROM c.processes p "
        "  WHERE p.id = processes.id);"
        "DELETE FROM inefficient; INSERT INTO inefficient SELECT * FROM c.inefficient;"
        /* what the first conversion computed (from raw traces it can do more than from the
         * packed ones these are) */
        "DELETE FROM site_stats; INSERT INTO site_stats SELECT * FROM c.site_stats;"
        "DELETE FROM live_samples; INSERT INTO live_samples SELECT * FROM c.live_samples;"
        "DELETE FROM step_live; INSERT INTO step_live SELECT * FROM c.step_live;"
        "DELETE FROM decompose_points; INSERT INTO decompose_points SELECT * FROM "
        "  c.decompose_points;"
        "DELETE FROM decompose_live; INSERT INTO decompose_live SELECT * FROM c.decompose_live;"
        "DELETE FROM owner_peaks; INSERT INTO owner_peaks SELECT * FROM c.owner_peaks;"
        "COMMIT;";
    /* A database of format version 2 has the stack tree; version 1 the frames of each stack,
     * whose path becomes one node per (stack, position): stack * 4096 + position. */
    static const char tree[] = "DELETE FROM stacks; DELETE FROM stack_nodes;"
                               "INSERT INTO stacks SELECT * FROM c.stacks;"
                               "INSERT INTO stack_nodes SELECT * FROM c.stack_nodes;";
    static const char v1[] =
        "DELETE FROM stacks; DELETE FROM stack_nodes;"
        "INSERT INTO stacks SELECT id, process_id, depth, c_text, py_text,"
        "  CASE WHEN EXISTS (SELECT 1 FROM c.stack_frames f WHERE f.stack_id = s.id"
        "    AND f.position = 0) THEN id * 4096 END, NULL FROM c.stacks s;"
        "INSERT INTO stack_nodes SELECT f.stack_id * 4096 + f.position,"
        "  CASE WHEN EXISTS (SELECT 1 FROM c.stack_frames g WHERE g.stack_id = f.stack_id"
        "    AND g.position = f.position + 1) THEN f.stack_id * 4096 + f.position + 1 END,"
        "  f.frame_id FROM c.stack_frames f WHERE f.position < 4095;";
    int has_tree = 0;
    sqlite3_stmt *st;
    if (rc == 0 &&
        sqlite3_prepare_v2(db, "SELECT 1 FROM c.sqlite_master WHERE name = 'stack_nodes'", -1, &st,
                           NULL) == SQLITE_OK) {
        has_tree = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    if (rc == 0 && sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        rc = MS_EDB;
    if (rc == 0 && (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
                    sqlite3_exec(db, has_tree ? tree : v1, NULL, NULL, NULL) != SQLITE_OK ||
                    sqlite3_exec(db,
                                 "UPDATE meta SET value = " MS_DB_FORMAT_VERSION_SQL
                                 " WHERE key = 'format_version'; COMMIT; DETACH c",
                                 NULL, NULL, NULL) != SQLITE_OK))
        rc = MS_EDB;
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
    if (rc == 0) /* the compact database's stacks have no text: a full one holds it */
        rc = ms_stack_text_fill(db, err, errlen);
    if (sqlite3_close(db) != SQLITE_OK && rc == 0) {
        snprintf(err, errlen, "cannot close %s", path);
        rc = MS_EDB;
    }
    return rc;
}

int ms_store_expand(const char *compact_path, const char *db_path, int dump,
                    const volatile int *stop, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(db_path, &st) == 0 && !S_ISREG(st.st_mode)) {
        return ms_errf(err, errlen, MS_EREFUSED,
                       "%s exists and is not a regular file: a database is written only "
                       "to a regular file (it is renamed there)",
                       db_path);
    }
    sqlite3 *db;
    if (sqlite3_open_v2(compact_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", compact_path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return MS_EIO;
    }
    if (!ms_store_is_compact(db)) {
        int memscope = meta_int(db, "format_version", 0) > 0;
        snprintf(err, errlen,
                 memscope ? "%s is not a compact memscope database"
                          : "%s is not a memscope database",
                 compact_path);
        sqlite3_close(db);
        return memscope ? MS_EINVAL : MS_EFORMAT;
    }
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s.traces-XXXXXX", db_path) >= sizeof dir) {
        snprintf(err, errlen, "path too long: %s", db_path);
        sqlite3_close(db);
        return -ENAMETOOLONG;
    }
    if (!ms_temp_dir_create(dir)) {
        int rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        sqlite3_close(db);
        return rc;
    }
    int rc = ms_embed_extract(db, dir, err, errlen);
    unsigned depth = (unsigned)meta_int(db, "call_stack_c", 0);
    sqlite3_close(db);
    if (rc == 0) {
        snprintf(err, errlen, "%s holds no traces", compact_path);
        rc = MS_EFORMAT;
    }
    char tmp[PATH_MAX + 64] = "";
    if (rc > 0) {
        rc = ms_temp_name(tmp, sizeof tmp, db_path, ".tmp.");
        if (rc < 0)
            snprintf(err, errlen, "path too long: %s", db_path);
    }
    if (rc == 0) {
        /* the stacks come from the compact database: no second symbolization */
        struct ms_store_options o = {.trace_dir = dir,
                                     .db_path = tmp,
                                     .exit_status = -1,
                                     .call_stack_c = depth,
                                     .stop = stop,
                                     .no_dump = 1};
        struct ms_store_result res;
        rc = ms_store_convert(&o, &res, err, errlen);
        if (rc == 0) { /* tmp is ours from here on */
            ms_cleanup_add(tmp, 0);
            rc = carry_over(tmp, compact_path, err, errlen);
            if (rc == 0 && dump) /* from the carried-over stacks and findings */
                rc = ms_dump_create_file(tmp, err, errlen);
            if (rc == 0 && ms_oom_seen()) {
                rc = MS_ENOMEM;
                snprintf(err, errlen, "out of memory while expanding %s", compact_path);
            }
            if (rc == 0 && rename(tmp, db_path) < 0) {
                rc = -errno;
                snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, db_path, strerror(errno));
            }
            if (rc < 0)
                unlink(tmp);
            ms_cleanup_forget(tmp);
        }
    }
    remove_dir(dir);
    return rc;
}

int ms_store_full_open(struct ms_store_full *f, const char *db_path, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", db_path);
    sqlite3 *db;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return 0; /* the caller's own open says why */
    }
    int compact = ms_store_is_compact(db);
    sqlite3_close(db);
    if (!compact)
        return 0;
    if ((size_t)snprintf(f->dir, sizeof f->dir, "%s/memscope-full-XXXXXX", ms_tmp_dir()) >=
        sizeof f->dir) {
        return ms_errf(err, errlen, -ENAMETOOLONG, "TMPDIR is too long");
    }
    if (!ms_temp_dir_create(f->dir)) {
        int rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s", f->dir, strerror(errno));
        f->dir[0] = 0;
        return rc;
    }
    snprintf(f->path, sizeof f->path, "%s/full.db", f->dir);
    int rc = ms_store_expand(db_path, f->path, 0, NULL, err, errlen);
    if (rc < 0)
        ms_store_full_close(f);
    return rc;
}

void ms_store_full_close(struct ms_store_full *f)
{
    if (f->dir[0]) {
        unlink(f->path); /* ms_store_expand's, in our own directory */
        rmdir(f->dir);
        ms_cleanup_forget(f->dir);
        f->dir[0] = 0;
    }
}

int ms_store_replay(const char *compact_path,
                    int (*sink)(void *ctx, const struct ms_store_row *row), void *ctx, char *err,
                    size_t errlen)
{
    sqlite3 *db;
    if (sqlite3_open_v2(compact_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", compact_path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return MS_EIO;
    }
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/memscope-replay-XXXXXX", ms_tmp_dir()) >=
        sizeof dir) {
        snprintf(err, errlen, "TMPDIR is too long");
        sqlite3_close(db);
        return -ENAMETOOLONG;
    }
    if (!ms_temp_dir_create(dir)) {
        int rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        sqlite3_close(db);
        return rc;
    }
    int rc = ms_embed_extract(db, dir, err, errlen);
    unsigned depth = (unsigned)meta_int(db, "call_stack_c", 0);
    sqlite3_close(db);
    if (rc == 0) {
        snprintf(err, errlen, "%s holds no traces", compact_path);
        rc = MS_EFORMAT;
    }
    if (rc > 0) {
        struct ms_store_options o = {.trace_dir = dir,
                                     .exit_status = -1,
                                     .call_stack_c = depth,
                                     .compact = 1,
                                     .sink = sink,
                                     .sink_ctx = ctx};
        struct ms_store_result res;
        rc = ms_store_convert(&o, &res, err, errlen);
    }
    remove_dir(dir);
    return rc;
}
