/* job_sql.c: one SQL query over a job's Parquet tables (docs/columnar.md) in DuckDB: each
 * table directory of JOB becomes a view of read_parquet over its partitions (host and rank
 * put back as columns), the files' schema versions are checked first, and the result is
 * written as a table, CSV or JSON. Called by `memscope sql` (cmd_sql.c). Workload: DuckDB's;
 * it reads only the columns and row groups a query needs. */
#include "columnar.h"
#include "duckdb_dl.h"
#include "job.h"

#include "common/files.h"
#include "common/ms_error.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef MEMSCOPE_HAVE_DUCKDB_H
int ms_job_sql(const char *job_dir, const char *sql, enum ms_sql_format fmt, FILE *out, char *err,
               size_t errlen)
{
    (void)job_dir, (void)sql, (void)fmt, (void)out;
    struct ms_duckdb d;
    int rc = ms_duckdb_load(&d, err, errlen);
    ms_duckdb_release(&d);
    return rc;
}
#else

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void ms__remove_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A JOB's table names are memscope's own: letters and '_' only. */
static int table_name(const char *s)
{
    if (!s[0] || s[0] == '.')
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
            return 0;
    return 1;
}

static void put_csv(FILE *out, const char *v)
{
    if (!strpbrk(v, ",\"\n\r")) {
        fputs(v, out);
        return;
    }
    fputc('"', out);
    for (; *v; v++) {
        if (*v == '"')
            fputc('"', out);
        fputc(*v, out);
    }
    fputc('"', out);
}

static void put_json_str(FILE *out, const char *v)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* A value DuckDB printed that JSON may carry as a number. */
static int json_number(duckdb_type t)
{
    switch (t) {
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_UTINYINT:
    case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_UINTEGER:
    case DUCKDB_TYPE_UBIGINT:
    case DUCKDB_TYPE_HUGEINT:
    case DUCKDB_TYPE_DOUBLE:
    case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DECIMAL: return 1;
    default: return 0;
    }
}

static int print_result(struct ms_duckdb *d, duckdb_result *r, enum ms_sql_format fmt, FILE *out,
                        char *err, size_t errlen)
{
    idx_t ncol = d->column_count(r), nrow = d->row_count(r);
    if (ncol > 4096)
        return ms_errf(err, errlen, MS_ELIMIT, "more than 4096 columns");
    size_t *width = calloc(ncol + 1, sizeof *width);
    if (!width)
        return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    if (fmt == MS_SQL_TABLE) { /* the widths of the columns first */
        for (idx_t c = 0; c < ncol; c++)
            width[c] = strlen(d->column_name(r, c));
        for (idx_t row = 0; row < nrow; row++)
            for (idx_t c = 0; c < ncol; c++) {
                char *v = d->value_is_null(r, c, row) ? NULL : d->value_varchar(r, c, row);
                size_t n = v ? strlen(v) : 4;
                if (n > width[c])
                    width[c] = n > 80 ? 80 : n;
                if (v)
                    d->free(v);
            }
    }
    if (fmt == MS_SQL_JSON)
        fputc('[', out);
    else
        for (idx_t c = 0; c < ncol; c++) {
            if (c)
                fputc(fmt == MS_SQL_CSV ? ',' : ' ', out);
            if (fmt == MS_SQL_CSV)
                put_csv(out, d->column_name(r, c));
            else
                fprintf(out, "%-*s", c + 1 < ncol ? (int)width[c] : 0, d->column_name(r, c));
        }
    if (fmt != MS_SQL_JSON)
        fputc('\n', out);
    for (idx_t row = 0; row < nrow; row++) {
        if (fmt == MS_SQL_JSON)
            fputs(row ? ",\n{" : "\n{", out);
        for (idx_t c = 0; c < ncol; c++) {
            int null = d->value_is_null(r, c, row);
            char *v = null ? NULL : d->value_varchar(r, c, row);
            const char *s = v ? v : "";
            if (fmt == MS_SQL_JSON) {
                if (c)
                    fputs(", ", out);
                put_json_str(out, d->column_name(r, c));
                fputs(": ", out);
                if (null)
                    fputs("null", out);
                else if (json_number(d->column_type(r, c)))
                    fputs(s, out);
                else
                    put_json_str(out, s);
            } else {
                if (c)
                    fputc(fmt == MS_SQL_CSV ? ',' : ' ', out);
                if (fmt == MS_SQL_CSV)
                    put_csv(out, s);
                else
                    fprintf(out, "%-*s", c + 1 < ncol ? (int)width[c] : 0, null ? "NULL" : s);
            }
            if (v)
                d->free(v);
        }
        if (fmt == MS_SQL_JSON)
            fputc('}', out);
        else
            fputc('\n', out);
    }
    if (fmt == MS_SQL_JSON)
        fputs(nrow ? "\n]\n" : "]\n", out);
    free(width);
    return 0;
}

/* Runs sql; 0, or rc with "what: DuckDB's message" in err. With res, the result is the
 * caller's to destroy on success. */
static int query(struct ms_duckdb *d, duckdb_connection con, const char *sql, duckdb_result *res,
                 int rc, const char *what, char *err, size_t errlen)
{
    duckdb_result r;
    if (d->query(con, sql, &r) == DuckDBSuccess) {
        if (res)
            *res = r;
        else
            d->destroy_result(&r);
        return 0;
    }
    const char *m = d->result_error(&r);
    ms_errf(err, errlen, rc, "%s%s", what, m ? m : "DuckDB failed");
    d->destroy_result(&r);
    return rc;
}

/* Views of JOB's tables; the first file of a newer schema (or none) is an error. */
static int make_views(struct ms_duckdb *d, duckdb_connection con, const char *job, char *err,
                      size_t errlen)
{
    DIR *dir = opendir(job);
    if (!dir)
        return ms_errf(err, errlen, MS_ENOTFOUND, "cannot open job directory %s: %s", job,
                       strerror(errno));
    struct dirent *e;
    int rc = 0, n = 0;
    char sql[3 * PATH_MAX], q[2 * PATH_MAX];
    size_t k = 0;
    for (const char *s = job; *s && k + 3 < sizeof q; s++) { /* an SQL literal's inside */
        if (*s == '\'')
            q[k++] = '\'';
        q[k++] = *s;
    }
    q[k] = 0;
    while (rc == 0 && (e = readdir(dir))) {
        if (!table_name(e->d_name))
            continue;
        snprintf(sql, sizeof sql, "%s/%s", job, e->d_name);
        struct stat st;
        if (stat(sql, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        snprintf(sql, sizeof sql,
                 "CREATE VIEW %s AS SELECT * FROM read_parquet('%s/%s/*/*/*.parquet', "
                 "hive_partitioning = true, hive_types = {'host': VARCHAR, 'rank': BIGINT})",
                 e->d_name, q, e->d_name);
        char what[300];
        snprintf(what, sizeof what, "%s/%s: ", job, e->d_name);
        rc = query(d, con, sql, NULL, MS_EFORMAT, what, err, errlen);
        n += rc == 0;
    }
    closedir(dir);
    if (rc == 0 && !n)
        return ms_errf(err, errlen, MS_ENOTFOUND,
                       "%s holds no table (memscope export RUN --format=parquet -o %s adds a rank)",
                       job, job);
    /* every file says its schema version (KV metadata memscope_schema): those of rank_summary
     * are read (one per rank, written last by each export: 256 ranks' in 0.7 s), or every
     * file when a job has no rank_summary */
    struct stat rs;
    char rsdir[PATH_MAX + 16];
    snprintf(rsdir, sizeof rsdir, "%s/rank_summary", job);
    int have_rs = stat(rsdir, &rs) == 0 && S_ISDIR(rs.st_mode);
    snprintf(sql, sizeof sql,
             "SELECT file_name, decode(value) FROM parquet_kv_metadata('%s/%s/*/*/*.parquet') "
             "WHERE decode(key) = 'memscope_schema' AND TRY_CAST(decode(value) AS INTEGER) > %d "
             "LIMIT 1",
             q, have_rs ? "rank_summary" : "*", MS_COLUMNAR_SCHEMA);
    duckdb_result r;
    if (rc == 0 && (rc = query(d, con, sql, &r, MS_EFORMAT, "", err, errlen)) == 0) {
        if (d->row_count(&r)) {
            char *f = d->value_varchar(&r, 0, 0), *v = d->value_varchar(&r, 1, 0);
            rc = ms_errf(err, errlen, MS_EVERSION,
                         "%s: written with memscope's columnar schema %s; this memscope reads "
                         "version %d or older",
                         f ? f : "?", v ? v : "?", MS_COLUMNAR_SCHEMA);
            d->free(f);
            d->free(v);
        }
        d->destroy_result(&r);
    }
    return rc;
}

int ms__job_open(struct ms_job *j, const char *job_dir, char *err, size_t errlen)
{
    memset(j, 0, sizeof *j);
    int rc = ms_duckdb_load(&j->d, err, errlen);
    if (rc < 0)
        return rc;
    if (j->d.open(NULL, &j->db) != DuckDBSuccess) {
        ms_duckdb_release(&j->d);
        return ms_errf(err, errlen, MS_EDB, "DuckDB: cannot open a database in memory");
    }
    if (j->d.connect(j->db, &j->con) != DuckDBSuccess) {
        j->d.close(&j->db);
        ms_duckdb_release(&j->d);
        return ms_errf(err, errlen, MS_EDB, "DuckDB: cannot connect");
    }
    j->open = 1;
    rc = query(&j->d, j->con, "SET threads = 2", NULL, MS_EDB, "DuckDB: ", err, errlen);
    /* what a big query spills goes to a private directory in TMPDIR, not DuckDB's default
     * .tmp in the current directory */
    const char *t = getenv("TMPDIR");
    snprintf(j->tmp, sizeof j->tmp, "%s/memscope-duckdb-XXXXXX", t && *t ? t : "/tmp");
    if (rc == 0 && !ms_temp_dir_create(j->tmp))
        j->tmp[0] = 0; /* DuckDB's default then */
    if (rc == 0 && j->tmp[0] && !strchr(j->tmp, '\'')) {
        char set[sizeof j->tmp + 64];
        snprintf(set, sizeof set, "SET temp_directory = '%s'", j->tmp);
        rc = query(&j->d, j->con, set, NULL, MS_EDB, "DuckDB: ", err, errlen);
    }
    if (rc == 0)
        rc = make_views(&j->d, j->con, job_dir, err, errlen);
    if (rc < 0)
        ms__job_close(j);
    return rc;
}

void ms__job_close(struct ms_job *j)
{
    if (!j->open)
        return;
    j->d.disconnect(&j->con);
    j->d.close(&j->db);
    ms_duckdb_release(&j->d);
    j->open = 0;
    if (j->tmp[0]) {
        ms__remove_tree(j->tmp);
        ms_cleanup_forget(j->tmp);
        j->tmp[0] = 0;
    }
}

int ms__job_query(struct ms_job *j, const char *sql, duckdb_result *r, char *err, size_t errlen)
{
    return query(&j->d, j->con, sql, r, MS_EINVAL, "", err, errlen);
}

int ms_job_sql(const char *job_dir, const char *sql, enum ms_sql_format fmt, FILE *out, char *err,
               size_t errlen)
{
    struct ms_job j;
    int rc = ms__job_open(&j, job_dir, err, errlen);
    if (rc < 0)
        return rc;
    duckdb_result r;
    if ((rc = ms__job_query(&j, sql, &r, err, errlen)) == 0) {
        rc = print_result(&j.d, &r, fmt, out, err, errlen);
        j.d.destroy_result(&r);
    }
    ms__job_close(&j);
    return rc;
}
#endif
