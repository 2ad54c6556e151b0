/* ranks.c: `memscope ranks`' figures (columnar.h says the rule): one query of rank_summary
 * (a row per rank and layer, written at export), the median and MAD in DuckDB, then for each
 * outlier one query of the blocks of two ranks only (the outlier's and the median rank's: their
 * partitions are the only files read). Called by cmd_ranks.c, which prints. Workload: a job of
 * 10,000 ranks is 10,000 rank_summary files' rows; the outliers' blocks are read in full. */
#include "columnar.h"
#include "duckdb_dl.h"
#include "job.h"

#include "common/ms_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIFFERS 5

void ms_ranks_release(struct ms_ranks *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nranks; i++) {
        free(r->ranks[i].host);
        for (size_t k = 0; k < r->ranks[i].ndiffers; k++)
            free(r->ranks[i].differs[k].site);
        free(r->ranks[i].differs);
    }
    free(r->ranks);
    free(r->median_host);
    memset(r, 0, sizeof *r);
}

/* A layer name as memscope writes them (heap, mmap, pool:NAME, cuda:0:pta ...): safe inside an
 * SQL string. */
static int layer_ok(const char *s)
{
    if (!s[0] || strlen(s) >= 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr(":_.-", *s)))
            return 0;
    return 1;
}

#ifndef MEMSCOPE_HAVE_DUCKDB_H
int ms_ranks_compute(const char *job_dir, const char *layer, struct ms_ranks *r, char *err,
                     size_t errlen)
{
    (void)job_dir, (void)layer, (void)layer_ok;
    memset(r, 0, sizeof *r);
    struct ms_duckdb d;
    int rc = ms_duckdb_load(&d, err, errlen);
    ms_duckdb_release(&d);
    return rc;
}
#else

/* Value (col, row) of res as an integer; dflt when NULL. */
static long long get_i64(struct ms_job *j, duckdb_result *res, idx_t col, idx_t row, long long dflt)
{
    if (j->d.value_is_null(res, col, row))
        return dflt;
    char *v = j->d.value_varchar(res, col, row);
    long long x = v ? strtoll(v, NULL, 10) : dflt;
    j->d.free(v);
    return x;
}

static char *get_str(struct ms_job *j, duckdb_result *res, idx_t col, idx_t row)
{
    char *v = j->d.value_is_null(res, col, row) ? NULL : j->d.value_varchar(res, col, row);
    char *s = strdup(v ? v : "");
    j->d.free(v);
    return s;
}

/* The layer filter on blocks b for layer (host: the heap and the mmap layer). */
static void layer_cond(char *buf, size_t n, const char *layer)
{
    if (!strcmp(layer, "host"))
        snprintf(buf, n, "b.layer IN ('heap', 'mmap')");
    else
        snprintf(buf, n, "b.layer = '%s'", layer);
}

/* Fills rk->differs: the sites whose live bytes at rk's peak differ most from the median
 * rank's at its peak. */
static int differs(struct ms_job *j, struct ms_ranks *r, struct ms_rank *rk, char *err,
                   size_t errlen)
{
    char cond[128], sql[4096], site[256];
    layer_cond(cond, sizeof cond, r->layer);
    duckdb_result v; /* a job without sites (none exported yet): the site ids */
    int have_sites = 0;
    if (ms__job_query(j, "SELECT 1 FROM duckdb_views() WHERE view_name = 'sites'", &v, err,
                      errlen) == 0) {
        have_sites = j->d.row_count(&v) > 0;
        j->d.destroy_result(&v);
    }
    snprintf(site, sizeof site, "%s",
             have_sites ? "coalesce(s.first_frame, '(no stack)')"
                        : "coalesce('site ' || b.site, '(no stack)')");
    snprintf(sql, sizeof sql,
             "WITH pk AS (SELECT host, rank, peak_event FROM rank_summary WHERE layer = '%s' AND "
             "((host = '%s' AND rank = %lld) OR (host = '%s' AND rank = %lld))), "
             "live AS (SELECT b.host, b.rank, %s AS site, "
             "sum(b.size)::BIGINT AS bytes FROM blocks b JOIN pk ON pk.host = b.host AND pk.rank = "
             "b.rank %s WHERE %s AND ((b.host = '%s' AND b.rank = %lld) OR (b.host = '%s' AND "
             "b.rank = %lld)) AND b.alloc_event <= pk.peak_event AND (b.free_event IS NULL OR "
             "b.free_event > pk.peak_event) GROUP BY ALL), "
             "o AS (SELECT site, bytes FROM live WHERE host = '%s' AND rank = %lld), "
             "m AS (SELECT site, bytes FROM live WHERE host = '%s' AND rank = %lld) "
             "SELECT coalesce(o.site, m.site) AS site, coalesce(o.bytes, 0) - coalesce(m.bytes, "
             "0) AS diff FROM o FULL JOIN m ON o.site = m.site WHERE diff <> 0 ORDER BY "
             "abs(diff) DESC, site LIMIT %d",
             r->layer, rk->host, rk->rank, r->median_host, r->median_rank, site,
             have_sites ? "LEFT JOIN sites s ON s.host = b.host AND s.rank = b.rank AND s.site = "
                          "b.site"
                        : "",
             cond, rk->host, rk->rank, r->median_host, r->median_rank, rk->host, rk->rank,
             r->median_host, r->median_rank, MAX_DIFFERS);
    duckdb_result res;
    int rc = ms__job_query(j, sql, &res, err, errlen);
    if (rc < 0)
        return rc;
    idx_t n = j->d.row_count(&res);
    rk->differs = calloc(n + 1, sizeof *rk->differs);
    if (!rk->differs)
        rc = ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    for (idx_t i = 0; i < n && rc == 0; i++) {
        rk->differs[i].site = get_str(j, &res, 0, i);
        rk->differs[i].bytes = get_i64(j, &res, 1, i, 0);
        rk->ndiffers++;
        if (!rk->differs[i].site)
            rc = ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    }
    j->d.destroy_result(&res);
    return rc;
}

int ms_ranks_compute(const char *job_dir, const char *layer, struct ms_ranks *r, char *err,
                     size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (!layer)
        layer = "host";
    if (!layer_ok(layer))
        return ms_errf(err, errlen, MS_EINVAL, "'%s' is not a layer name", layer);
    snprintf(r->layer, sizeof r->layer, "%s", layer);
    struct ms_job j;
    int rc = ms__job_open(&j, job_dir, err, errlen);
    if (rc < 0)
        return rc;
    char sql[2048];
    snprintf(sql, sizeof sql,
             "WITH r AS (SELECT host, rank, peak_bytes, peak_ns, peak_step, live_bytes FROM "
             "rank_summary WHERE layer = '%s'), m AS (SELECT quantile_disc(peak_bytes, 0.5) AS "
             "med FROM r), d AS (SELECT quantile_disc(abs(r.peak_bytes - m.med), 0.5) AS mad "
             "FROM r, m) SELECT r.host, r.rank, r.peak_bytes, r.peak_ns, r.peak_step, "
             "r.live_bytes, m.med, d.mad FROM r, m, d ORDER BY r.host, r.rank",
             layer);
    duckdb_result res;
    if ((rc = ms__job_query(&j, sql, &res, err, errlen)) < 0) {
        ms__job_close(&j);
        return rc;
    }
    idx_t n = j.d.row_count(&res);
    if (n == 0)
        rc = ms_errf(err, errlen, MS_ENOTFOUND, "%s: no rank has layer '%s' in rank_summary",
                     job_dir, layer);
    else if (!(r->ranks = calloc(n, sizeof *r->ranks)))
        rc = ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    for (idx_t i = 0; i < n && rc == 0; i++) {
        struct ms_rank *rk = &r->ranks[r->nranks++];
        rk->host = get_str(&j, &res, 0, i);
        rk->rank = get_i64(&j, &res, 1, i, -1);
        rk->peak_bytes = get_i64(&j, &res, 2, i, 0);
        rk->peak_ns = get_i64(&j, &res, 3, i, 0);
        rk->peak_step = get_i64(&j, &res, 4, i, -1);
        rk->leaked_bytes = get_i64(&j, &res, 5, i, 0);
        r->median_peak = get_i64(&j, &res, 6, i, 0);
        r->mad = get_i64(&j, &res, 7, i, 0);
        if (!rk->host)
            rc = ms_errf(err, errlen, MS_ENOMEM, "out of memory");
        else if (strchr(rk->host, '\''))
            rc = ms_errf(err, errlen, MS_EFORMAT, "%s: a host directory named with a quote",
                         job_dir);
    }
    j.d.destroy_result(&res);
    if (rc == 0) {
        /* 3.5 x 1.4826 x MAD, at least 10% of the median (columnar.h) */
        double t = 3.5 * 1.4826 * (double)r->mad, floor = (double)r->median_peak / 10;
        r->threshold = (long long)(t > floor ? t : floor);
        for (size_t i = 0; i < r->nranks; i++) {
            struct ms_rank *rk = &r->ranks[i];
            long long dev = rk->peak_bytes - r->median_peak;
            rk->outlier = (dev < 0 ? -dev : dev) > r->threshold;
            r->total_peak += rk->peak_bytes;
            if (rk->peak_bytes > r->max_peak)
                r->max_peak = rk->peak_bytes;
            if (!r->median_host && rk->peak_bytes == r->median_peak) {
                r->median_host = strdup(rk->host);
                r->median_rank = rk->rank;
                if (!r->median_host)
                    rc = ms_errf(err, errlen, MS_ENOMEM, "out of memory");
            }
        }
        r->imbalance = r->median_peak ? (double)r->max_peak / (double)r->median_peak : 0;
    }
    for (size_t i = 0; i < r->nranks && rc == 0; i++)
        if (r->ranks[i].outlier && r->median_host)
            rc = differs(&j, r, &r->ranks[i], err, errlen);
    ms__job_close(&j);
    if (rc < 0)
        ms_ranks_release(r);
    return rc;
}
#endif
