/* parquet_export.c: one run's database -> its rank's partitions of a job's Parquet tables
 * (docs/columnar.md), through DuckDB's C library (duckdb_dl.h): the rows read from SQLite are
 * appended to tables of an in-memory DuckDB (its appender), the per-rank summary is computed
 * there (one window over the blocks' +size/-size in event order), and each table is written
 * with `COPY ... (FORMAT parquet, PARTITION_BY (host, rank), KV_METADATA ...)` into a private
 * directory inside JOB, then moved into place.
 * Called by `memscope export --format=parquet` (cmd_export.c). Workload: once per rank; memory
 * is DuckDB's for the run's blocks (about 100 bytes a block) plus SQLite's cursor. */
#include "columnar.h"
#include "duckdb_dl.h"
#include "job.h"

#include "common/files.h"
#include "common/ms_error.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tables in the order they are moved into place: rank_summary last. */
static const char *const tables[] = {"processes", "sites", "steps",    "blocks",
                                     "events",    "usage", "timeline", "rank_summary"};
#define NTABLES (sizeof tables / sizeof tables[0])

int ms_columnar_table(const char *name)
{
    for (size_t i = 0; i < NTABLES; i++)
        if (!strcmp(name, tables[i]))
            return 1;
    return 0;
}

#ifndef MEMSCOPE_HAVE_DUCKDB_H
int ms_parquet_export(const struct ms_parquet_opts *o, char *err, size_t errlen)
{
    (void)o;
    struct ms_duckdb d;
    int rc = ms_duckdb_load(&d, err, errlen); /* says how to get it */
    ms_duckdb_release(&d);
    return rc < 0 ? rc : ms_errf(err, errlen, MS_ENOTFOUND, "built without DuckDB");
}
#else
/* mkdir -p of path (0755). 0 or -errno. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* A host name that is a safe directory name and needs no quoting in SQL or Hive paths. */
static int host_ok(const char *h)
{
    if (!h[0] || !strcmp(h, ".") || !strcmp(h, "..") || strlen(h) > 253)
        return 0;
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

struct exp {
    struct ms_duckdb d;
    duckdb_database ddb;
    duckdb_connection con;
    int have_ddb, have_con;
    sqlite3 *db;
    char *err;
    size_t errlen;
};

/* Runs sql in DuckDB; 0 or MS_EDB with DuckDB's message (what: the step). */
static int duck(struct exp *x, const char *sql, const char *what)
{
    duckdb_result r;
    if (x->d.query(x->con, sql, &r) == DuckDBSuccess) {
        x->d.destroy_result(&r);
        return 0;
    }
    const char *m = x->d.result_error(&r);
    int rc = ms_errf(x->err, x->errlen, MS_EDB, "%s: %s", what, m ? m : "DuckDB failed");
    x->d.destroy_result(&r);
    return rc;
}

/* Appends the rows of the SQLite query sel to DuckDB table name (created before with the
 * same number of columns). 0 or an error (set). */
static int copy_rows(struct exp *x, const char *name, const char *sel)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db, sel, -1, &st, NULL) != SQLITE_OK)
        return ms_errf(x->err, x->errlen, MS_EDB, "reading the run's %s: %s", name,
                       sqlite3_errmsg(x->db));
    duckdb_appender app;
    if (x->d.appender_create(x->con, NULL, name, &app) != DuckDBSuccess) {
        sqlite3_finalize(st);
        return ms_errf(x->err, x->errlen, MS_EDB, "DuckDB: cannot append to %s", name);
    }
    int ncol = sqlite3_column_count(st), rc = 0, s;
    while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < ncol && rc == 0; i++) {
            duckdb_state ds;
            switch (sqlite3_column_type(st, i)) {
            case SQLITE_NULL: ds = x->d.append_null(app); break;
            case SQLITE_INTEGER: ds = x->d.append_int64(app, sqlite3_column_int64(st, i)); break;
            case SQLITE_FLOAT: ds = x->d.append_double(app, sqlite3_column_double(st, i)); break;
            default:
                ds = x->d.append_varchar_length(app, (const char *)sqlite3_column_text(st, i),
                                                (idx_t)sqlite3_column_bytes(st, i));
            }
            if (ds != DuckDBSuccess)
                rc = MS_EDB;
        }
        if (rc == 0 && x->d.appender_end_row(app) != DuckDBSuccess)
            rc = MS_EDB;
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = ms_errf(x->err, x->errlen, MS_EDB, "reading the run's %s: %s", name,
                     sqlite3_errmsg(x->db));
    else if (rc < 0) {
        const char *m = x->d.appender_error(app);
        ms_errf(x->err, x->errlen, rc, "DuckDB: appending to %s: %s", name, m ? m : "failed");
    }
    sqlite3_finalize(st);
    if (x->d.appender_destroy(&app) != DuckDBSuccess && rc == 0)
        rc = ms_errf(x->err, x->errlen, MS_EDB, "DuckDB: appending to %s failed", name);
    return rc;
}

/* The DuckDB tables (docs/columnar.md, schema 1) and the SQLite queries that fill them. */
static const struct {
    const char *name, *ddl, *sel;
} loads[] = {
    {"processes",
     "CREATE TABLE processes (pid BIGINT, ppid BIGINT, exe VARCHAR, cmdline VARCHAR, "
     "start_ns BIGINT, end_ns BIGINT)",
     "SELECT pid, ppid, exe, cmdline, start_ns, end_ns FROM processes ORDER BY id"},
    {"sites",
     "CREATE TABLE sites_raw (site BIGINT, pid BIGINT, depth BIGINT, c_text VARCHAR, "
     "py_text VARCHAR)",
     "SELECT s.id, p.pid, s.depth, s.c_text, s.py_text FROM stacks s JOIN processes p ON "
     "p.id = s.process_id ORDER BY s.id"},
    {"frames_raw",
     "CREATE TABLE frames_raw (site BIGINT, pos BIGINT, function VARCHAR, file VARCHAR, line "
     "BIGINT, module VARCHAR)",
     /* each stack's native frames, innermost first: its path in the tree of frames */
     "WITH RECURSIVE w(site, pos, node) AS (SELECT id, 0, node_id FROM stacks WHERE node_id IS "
     "NOT NULL UNION ALL SELECT w.site, w.pos + 1, n.parent FROM w JOIN stack_nodes n ON n.id = "
     "w.node WHERE n.parent IS NOT NULL) SELECT w.site, w.pos, fs.text, fl.text, f.line, m.path "
     "FROM w JOIN stack_nodes n ON n.id = w.node JOIN frames f ON f.id = n.frame_id LEFT JOIN "
     "strings fs ON fs.id = f.function_id LEFT JOIN strings fl ON fl.id = f.file_id LEFT JOIN "
     "modules m ON m.id = f.module_id ORDER BY w.site, w.pos"},
    {"steps", "CREATE TABLE steps (pid BIGINT, step BIGINT, start_ns BIGINT, end_ns BIGINT)",
     "SELECT p.pid, s.step, s.start_ns, s.end_ns FROM steps s JOIN processes p ON p.id = "
     "s.process_id ORDER BY s.process_id, s.step"},
    {"blocks",
     "CREATE TABLE blocks_raw (pid BIGINT, layer VARCHAR, layer_id BIGINT, device VARCHAR, "
     "addr BIGINT, size BIGINT, alloc_ns BIGINT, free_ns BIGINT, alloc_event BIGINT, "
     "free_event BIGINT, thread BIGINT, site BIGINT, owner VARCHAR, alloc_step BIGINT)",
     "SELECT p.pid, l.name, b.layer, l.device, b.addr, b.size, b.alloc_ns, b.free_ns, "
     "b.alloc_event_id, b.free_event_id, t.tid, b.stack_id, o.label, b.step FROM blocks b "
     "JOIN processes p ON p.id = b.process_id LEFT JOIN layers l ON l.id = b.layer LEFT JOIN "
     "threads t ON t.id = b.thread_id LEFT JOIN owners o ON o.id = b.owner_id ORDER BY "
     "b.allocation_id"},
    {"events",
     "CREATE TABLE events (event BIGINT, pid BIGINT, ts_ns BIGINT, kind BIGINT, layer VARCHAR, "
     "thread BIGINT, addr BIGINT, size BIGINT, site BIGINT, allocation BIGINT, name VARCHAR)",
     "SELECT e.id, p.pid, e.ts_ns, e.kind, l.name, t.tid, e.addr, e.size, e.stack_id, "
     "e.allocation_id, e.name FROM events e JOIN processes p ON p.id = e.process_id LEFT JOIN "
     "layers l ON l.id = e.layer LEFT JOIN threads t ON t.id = e.thread_id WHERE e.kind NOT IN "
     "(1, 2) ORDER BY e.id"},
    {"usage",
     "CREATE TABLE usage (pid BIGINT, ts_ns BIGINT, rss_anon BIGINT, rss_file BIGINT, "
     "rss_shmem BIGINT, stack BIGINT, swap BIGINT, pss BIGINT, uss BIGINT, threads BIGINT, "
     "cgroup_current BIGINT, cgroup_max BIGINT, live_bytes BIGINT, exited BIGINT, "
     "private_anon BIGINT)",
     "SELECT p.pid, u.ts_ns, u.rss_anon, u.rss_file, u.rss_shmem, u.stack, u.swap, u.pss, "
     "u.uss, u.threads, u.cgroup_current, u.cgroup_max, u.live_bytes, u.exited, u.private_anon "
     "FROM usage_samples u JOIN processes p ON p.id = u.process_id ORDER BY u.rowid"},
};

/* What DuckDB computes from the loaded tables: the blocks' free step (the first step that
 * ended at or after the free), the sites' frames, and rank_summary: per layer, and "host"
 * (the heap and the mmap layer together), the peak of live bytes (a running sum of +size at
 * each allocation and -size at each free, in event order: the order of the run's events),
 * the first time and step it was reached, the bytes and blocks live at the end, the bytes
 * and blocks allocated. */
static const char derive_sql[] =
    "CREATE TABLE blocks AS SELECT b.*, s.step AS free_step FROM blocks_raw b ASOF LEFT JOIN "
    "steps s ON b.pid = s.pid AND b.free_ns <= s.end_ns ORDER BY b.alloc_event;"
    "CREATE TABLE sites AS SELECT s.site, s.pid, s.depth, f.frames, string_split(s.c_text, "
    "chr(10)) AS frame_text, string_split(s.c_text, chr(10))[1] AS first_frame, s.py_text FROM "
    "sites_raw s LEFT JOIN (SELECT site, list({'function': function, 'file': file, 'line': "
    "line, 'module': module} ORDER BY pos) AS frames FROM frames_raw GROUP BY site) f USING "
    "(site) ORDER BY s.site;"
    "CREATE TABLE rank_summary AS WITH b AS (SELECT layer, * EXCLUDE (layer) FROM blocks "
    "UNION ALL SELECT 'host' AS layer, * EXCLUDE (layer) FROM blocks WHERE layer_id IN (1, 2)), "
    "d AS (SELECT layer, alloc_event AS ev, alloc_ns AS ts, size AS delta, alloc_step AS step "
    "FROM b UNION ALL SELECT layer, free_event, free_ns, -size, NULL FROM b WHERE free_event "
    "IS NOT NULL), r AS (SELECT layer, ev, ts, step, sum(delta) OVER (PARTITION BY layer ORDER "
    "BY ev ROWS UNBOUNDED PRECEDING) AS live FROM d), p AS (SELECT layer, max(live) AS "
    "peak_bytes, first(ts ORDER BY live DESC, ev) AS peak_ns, first(step ORDER BY live DESC, "
    "ev) AS peak_step, first(ev ORDER BY live DESC, ev) AS peak_event FROM r GROUP BY layer), t AS (SELECT layer, count(*) AS allocs, "
    "sum(size)::BIGINT AS alloc_bytes, coalesce(sum(size) FILTER (WHERE free_event IS NULL), "
    "0)::BIGINT AS live_bytes, count(*) FILTER (WHERE free_event IS NULL) AS live_blocks FROM b "
    "GROUP BY layer) SELECT t.layer, p.peak_bytes::BIGINT AS peak_bytes, p.peak_ns, "
    "p.peak_step, p.peak_event, t.live_bytes, t.live_blocks, t.alloc_bytes, t.allocs FROM t JOIN p USING "
    "(layer) ORDER BY t.layer;"
    /* timeline: per process and layer, at most 1000 intervals of the rank's span (those with an
     * event), each with its highest live bytes and those at its end */
    "CREATE TABLE timeline AS WITH d AS (SELECT pid, layer, device, alloc_event AS ev, alloc_ns "
    "AS ts, size AS delta FROM blocks UNION ALL SELECT pid, layer, device, free_event, free_ns, "
    "-size FROM blocks WHERE free_event IS NOT NULL), s AS (SELECT min(ts) AS t0, "
    "greatest(max(ts) - min(ts), 1) AS span FROM d), r AS (SELECT pid, layer, device, ev, "
    "least(floor((ts - s.t0) * 1000.0 / s.span), 999)::BIGINT AS k, s.t0, s.span, sum(delta) "
    "OVER (PARTITION BY pid, layer ORDER BY ev ROWS UNBOUNDED PRECEDING) AS live FROM d, s) "
    "SELECT pid, layer, any_value(device) AS device, k AS point, (any_value(t0) + k * "
    "any_value(span) // 1000)::BIGINT AS ts_ns, max(live)::BIGINT AS max_live_bytes, "
    "arg_max(live, ev)::BIGINT AS live_bytes FROM r GROUP BY pid, layer, k ORDER BY pid, "
    "layer, k;";

/* The run's host name (meta hostname) into buf; "" when it has none. */
static void run_host(sqlite3 *db, char *buf, size_t n)
{
    sqlite3_stmt *st;
    buf[0] = 0;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'hostname'", -1, &st, NULL) !=
        SQLITE_OK)
        return;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* meta value key of the run as text into buf ("" when none). */
static void run_meta(sqlite3 *db, const char *key, char *buf, size_t n)
{
    sqlite3_stmt *st;
    buf[0] = 0;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* A string as an SQL literal's inside (quotes doubled) into buf; 0, or -1 when too long. */
static int sql_quote(char *buf, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s; s++) {
        if (k + 3 > n)
            return -1;
        if (*s == '\'')
            buf[k++] = '\'';
        buf[k++] = *s;
    }
    buf[k] = 0;
    return 0;
}

static int write_tables(struct exp *x, const struct ms_parquet_opts *o, const char *host,
                        const char *tmp)
{
    int rc = 0;
    for (size_t i = 0; i < sizeof loads / sizeof loads[0] && rc == 0; i++) {
        rc = duck(x, loads[i].ddl, "DuckDB: creating a table");
        if (rc == 0)
            rc = copy_rows(x,
                           strstr(loads[i].ddl, "sites_raw")    ? "sites_raw"
                           : strstr(loads[i].ddl, "blocks_raw") ? "blocks_raw"
                                                                : loads[i].name,
                           loads[i].sel);
    }
    if (rc == 0)
        rc = duck(x, derive_sql, "DuckDB: computing the rank's summary");
    char qtmp[PATH_MAX * 2], qjob[512], sql[PATH_MAX * 2 + 1024];
    if (rc == 0 && (sql_quote(qtmp, sizeof qtmp, tmp) < 0 ||
                    sql_quote(qjob, sizeof qjob, o->job ? o->job : "") < 0))
        rc = ms_errf(x->err, x->errlen, MS_EINVAL, "the job directory or the job id is too long");
    if (rc == 0 && o->jsonl_table) { /* one table as JSON lines, host and rank as columns */
        snprintf(sql, sizeof sql,
                 "COPY (SELECT *, '%s' AS host, %lld AS rank FROM %s) TO '%s' (FORMAT json)", host,
                 o->rank, o->jsonl_table, qtmp);
        return duck(x, sql, "DuckDB: writing JSON lines");
    }
    for (size_t i = 0; i < NTABLES && rc == 0; i++) {
        /* host and rank are partition keys: in the directory names, not in the files */
        snprintf(
            sql, sizeof sql,
            "COPY (SELECT *, '%s' AS host, %lld AS rank FROM %s) TO '%s/%s' (FORMAT "
            "parquet, COMPRESSION zstd, PARTITION_BY (host, rank), KV_METADATA {memscope_schema: '%d', memscope_table: '%s', host: '%s', "
            "rank: '%lld', job: '%s'})",
            host, o->rank, tables[i], qtmp, tables[i], MS_COLUMNAR_SCHEMA, tables[i], host, o->rank,
            qjob);
        rc = duck(x, sql, "DuckDB: writing Parquet");
    }
    return rc;
}

/* Moves tmp/TABLE/host=H/rank=R to JOB/TABLE/host=H/rank=R for each table (an empty table
 * wrote none). */
static int move_into_place(const struct ms_parquet_opts *o, const char *host, const char *tmp,
                           char *err, size_t errlen)
{
    char from[PATH_MAX], to[PATH_MAX], dir[PATH_MAX];
    for (size_t i = 0; i < NTABLES; i++) {
        struct stat st;
        if ((size_t)snprintf(from, sizeof from, "%s/%s/host=%s/rank=%lld", tmp, tables[i], host,
                             o->rank) >= sizeof from ||
            (size_t)snprintf(dir, sizeof dir, "%s/%s/host=%s", o->job_dir, tables[i], host) >=
                sizeof dir ||
            (size_t)snprintf(to, sizeof to, "%.*s/rank=%lld", PATH_MAX - 32, dir, o->rank) >=
                sizeof to)
            return ms_errf(err, errlen, MS_EINVAL, "the job directory's path is too long");
        if (stat(from, &st) < 0)
            continue;
        int rc = make_dirs(dir);
        if (rc < 0)
            return ms_errf(err, errlen, rc, "cannot create %s: %s", dir, strerror(-rc));
        if (o->replace)
            ms__remove_tree(to);
        if (rename(from, to) < 0)
            return ms_errf(err, errlen, -errno, "cannot move %s to %s: %s", from, to,
                           strerror(errno));
    }
    return 0;
}

int ms_parquet_export(const struct ms_parquet_opts *given, char *err, size_t errlen)
{
    struct exp x = {.err = err, .errlen = errlen};
    struct ms_parquet_opts opts = given ? *given : (struct ms_parquet_opts){0};
    const struct ms_parquet_opts *o = &opts;
    char meta_rank[32], meta_job[128];
    if (!given || !o->db_path || !(o->job_dir || o->jsonl_out) || o->rank < -1)
        return ms_errf(err, errlen, MS_EINVAL,
                       "ms_parquet_export: a database, JOB and a rank >= 0");
    if (o->jsonl_table && (!o->jsonl_out || !ms_columnar_table(o->jsonl_table)))
        return ms_errf(err, errlen, MS_EINVAL,
                       "no table '%s' (blocks, sites, events, processes, steps, usage, "
                       "timeline, rank_summary)",
                       o->jsonl_table);
    int rc = ms_duckdb_load(&x.d, err, errlen);
    if (rc < 0)
        return rc;
    struct ms_store_full full;
    rc = ms_store_full_open(&full, o->db_path, err, errlen);
    if (rc < 0) {
        ms_duckdb_release(&x.d);
        return rc;
    }
    char host[256], tmp[PATH_MAX] = "", mark[PATH_MAX];
    if (sqlite3_open_v2(full.path, &x.db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        rc = ms_errf(err, errlen, MS_EDB, "cannot open %s: %s", o->db_path, sqlite3_errmsg(x.db));
    if (rc == 0)
        rc = ms_store_check_version(x.db, err, errlen);
    if (rc == 0 && o->rank < 0) { /* the rank the run recorded (common/job_env.h), else 0 */
        run_meta(x.db, "rank", meta_rank, sizeof meta_rank);
        opts.rank = meta_rank[0] ? strtoll(meta_rank, NULL, 10) : 0;
        if (opts.rank < 0)
            opts.rank = 0;
    }
    if (rc == 0 && !o->job) {
        run_meta(x.db, "job", meta_job, sizeof meta_job);
        opts.job = meta_job;
    }
    if (rc == 0) {
        if (o->host)
            snprintf(host, sizeof host, "%s", o->host);
        else
            run_host(x.db, host, sizeof host);
        if (!host_ok(host))
            rc = ms_errf(err, errlen, MS_EINVAL,
                         "host '%s' cannot be a partition's directory name (letters, digits, '.', "
                         "'-', '_'): give --host",
                         host);
    }
    if (rc == 0 && o->jsonl_table) {
        int fd = ms_temp_create(tmp, sizeof tmp, o->jsonl_out, ".tmp.");
        if (fd < 0) {
            rc = ms_errf(err, errlen, fd, "cannot create a file beside %s: %s", o->jsonl_out,
                         strerror(-fd));
            tmp[0] = 0;
        } else
            close(fd);
    }
    if (rc == 0 && !o->jsonl_table) {
        snprintf(mark, sizeof mark, "%s/rank_summary/host=%s/rank=%lld", o->job_dir, host, o->rank);
        struct stat st;
        if (!o->replace && stat(mark, &st) == 0)
            rc = ms_errf(err, errlen, MS_EINVAL,
                         "%s already holds host %s rank %lld (%s): give --replace to replace it",
                         o->job_dir, host, o->rank, mark);
    }
    if (rc == 0 && !o->jsonl_table && (rc = make_dirs(o->job_dir)) < 0)
        rc = ms_errf(err, errlen, rc, "cannot create %s: %s", o->job_dir, strerror(-rc));
    if (rc == 0 && !o->jsonl_table) {
        snprintf(tmp, sizeof tmp, "%s/.memscope-export-XXXXXX", o->job_dir);
        if (!ms_temp_dir_create(tmp)) {
            rc = ms_errf(err, errlen, -errno, "cannot create a directory in %s: %s", o->job_dir,
                         strerror(errno));
            tmp[0] = 0;
        }
    }
    if (rc == 0) {
        if (x.d.open(NULL, &x.ddb) != DuckDBSuccess)
            rc = ms_errf(err, errlen, MS_EDB, "DuckDB: cannot open a database in memory");
        else
            x.have_ddb = 1;
    }
    if (rc == 0) {
        if (x.d.connect(x.ddb, &x.con) != DuckDBSuccess)
            rc = ms_errf(err, errlen, MS_EDB, "DuckDB: cannot connect");
        else
            x.have_con = 1;
    }
    if (rc == 0)
        rc = duck(&x, "SET threads = 2", "DuckDB: setup");
    if (rc == 0 && !o->jsonl_table) { /* what DuckDB spills goes into the private directory */
        char set[PATH_MAX * 2 + 64], qt[PATH_MAX * 2];
        if (sql_quote(qt, sizeof qt, tmp) == 0) {
            snprintf(set, sizeof set, "SET temp_directory = '%s/.spill'", qt);
            rc = duck(&x, set, "DuckDB: setup");
        }
    }
    if (rc == 0)
        rc = write_tables(&x, o, host, tmp);
    if (rc == 0 && !o->jsonl_table)
        rc = move_into_place(o, host, tmp, err, errlen);
    if (rc == 0 && o->jsonl_table && rename(tmp, o->jsonl_out) < 0)
        rc = ms_errf(err, errlen, -errno, "cannot rename %s to %s: %s", tmp, o->jsonl_out,
                     strerror(errno));
    else if (rc == 0 && o->jsonl_table) {
        ms_cleanup_forget(tmp);
        tmp[0] = 0;
    }
    if (x.have_con)
        x.d.disconnect(&x.con);
    if (x.have_ddb)
        x.d.close(&x.ddb);
    if (tmp[0]) {
        ms__remove_tree(tmp);
        ms_cleanup_forget(tmp);
    }
    sqlite3_close(x.db);
    ms_store_full_close(&full);
    ms_duckdb_release(&x.d);
    return rc;
}
#endif
