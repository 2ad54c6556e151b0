/* columnar.h: a job's ranks as Parquet tables (docs/columnar.md), written and read through
 * DuckDB's C library (duckdb_dl.h, loaded when needed). Called by `memscope export
 * --format=parquet` and `memscope sql`; returns errors, never prints. */
#ifndef MS_COLUMNAR_H
#define MS_COLUMNAR_H

#include <stddef.h>
#include <stdio.h>

/* The version of the tables' schema (docs/columnar.md), in every file's key-value metadata
 * (memscope_schema). */
#define MS_COLUMNAR_SCHEMA 1

struct ms_parquet_opts {
    const char *db_path; /* the run's database, compact or full */
    const char *job_dir; /* JOB: created when missing */
    const char *host;    /* the partition's host; NULL: the run's (meta hostname) */
    long long rank;      /* the partition's rank, >= 0; -1: the run's (meta rank), else 0 */
    const char *job;     /* the job id in the metadata; NULL: the run's (meta job), else "" */
    int replace;         /* 1: replace a partition of the same host and rank */
    /* Instead of the Parquet partitions: one table's rows as JSON lines (the Parquet column
     * names, host and rank added), to the file jsonl_out (replaced when complete); job_dir
     * and replace are not used then. */
    const char *jsonl_table, *jsonl_out;
};

/* Adds the run's rows to JOB as the partitions host=HOST/rank=RANK of each table
 * (JOB/TABLE/host=HOST/rank=RANK/data_0.parquet). Written in a private directory in JOB first
 * and moved into place table by table, rank_summary last (a rank is in the job when its
 * rank_summary is). Returns 0, or a negative code with the reason in err: MS_ENOTFOUND (no
 * DuckDB library: err says how to get it), MS_EINVAL (a host that cannot be a directory name;
 * host and rank already in JOB and replace 0), MS_EFORMAT / MS_EDB (the database), MS_EIO. */
int ms_parquet_export(const struct ms_parquet_opts *o, char *err, size_t errlen);
/* 1 when name is one of the tables (docs/columnar.md). */
int ms_columnar_table(const char *name);

enum ms_sql_format { MS_SQL_TABLE, MS_SQL_CSV, MS_SQL_JSON };

/* Runs one query over JOB's tables (each a view of its Parquet files, host and rank as
 * columns) and writes the result to out in format fmt. Returns 0, or a negative code with the
 * reason in err (MS_ENOTFOUND: no JOB, no table in it, or no DuckDB library; MS_EINVAL: the
 * query failed, DuckDB's message; MS_EFORMAT: a file DuckDB cannot read, named; MS_EVERSION:
 * files of a newer schema). */
int ms_job_sql(const char *job_dir, const char *sql, enum ms_sql_format fmt, FILE *out, char *err,
               size_t errlen);

/* `memscope ranks` (ranks.c): each rank's peak of one layer ("host": the heap and the mmap
 * layer together), the job's figures, and the outliers by a robust rule: a rank is an outlier
 * when its peak differs from the median peak by more than max(3.5 x 1.4826 x MAD, 10% of the
 * median) (MAD: the median absolute deviation; 1.4826 x MAD estimates the standard deviation,
 * 3.5 is Iglewicz and Hoaglin's cut for the modified z-score; the 10% floor keeps ranks that
 * are all nearly equal from being outliers for a few bytes). For each outlier, the call sites
 * (their first frame) whose bytes live at its peak differ most from those of the median rank
 * (a rank whose peak is the median) at its own peak. */
struct ms_rank_site {
    char *site;      /* "function (file:line)", malloc'd */
    long long bytes; /* the outlier's bytes minus the median rank's */
};

struct ms_rank {
    char *host;
    long long rank, peak_bytes, peak_ns, peak_step, leaked_bytes; /* peak_step -1: none */
    int outlier;
    struct ms_rank_site *differs; /* outliers: up to 5, largest difference first */
    size_t ndiffers;
};

struct ms_ranks {
    char layer[64];
    long long median_peak, mad, threshold, total_peak, max_peak;
    double imbalance; /* max peak / median peak (0 when the median is 0) */
    char *median_host;
    long long median_rank;
    struct ms_rank *ranks; /* by host, then rank */
    size_t nranks;
};

/* Computes r (the caller's struct, released with ms_ranks_release) from JOB's rank_summary and
 * the outliers' blocks; layer NULL: "host". 0 or a negative code with the reason in err
 * (MS_ENOTFOUND: no rank has that layer, or ms_job_sql's). */
int ms_ranks_compute(const char *job_dir, const char *layer, struct ms_ranks *r, char *err,
                     size_t errlen);
void ms_ranks_release(struct ms_ranks *r);

#endif
