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
    long long rank;      /* the partition's rank, >= 0 */
    const char *job;     /* the job id in the metadata; NULL: none ("") */
    int replace;         /* 1: replace a partition of the same host and rank */
};

/* Adds the run's rows to JOB as the partitions host=HOST/rank=RANK of each table
 * (JOB/TABLE/host=HOST/rank=RANK/data_0.parquet). Written in a private directory in JOB first
 * and moved into place table by table, rank_summary last (a rank is in the job when its
 * rank_summary is). Returns 0, or a negative code with the reason in err: MS_ENOTFOUND (no
 * DuckDB library: err says how to get it), MS_EINVAL (a host that cannot be a directory name;
 * host and rank already in JOB and replace 0), MS_EFORMAT / MS_EDB (the database), MS_EIO. */
int ms_parquet_export(const struct ms_parquet_opts *o, char *err, size_t errlen);

enum ms_sql_format { MS_SQL_TABLE, MS_SQL_CSV, MS_SQL_JSON };

/* Runs one query over JOB's tables (each a view of its Parquet files, host and rank as
 * columns) and writes the result to out in format fmt. Returns 0, or a negative code with the
 * reason in err (MS_ENOTFOUND: no JOB, no table in it, or no DuckDB library; MS_EINVAL: the
 * query failed, DuckDB's message; MS_EFORMAT: a file DuckDB cannot read, named; MS_EVERSION:
 * files of a newer schema). */
int ms_job_sql(const char *job_dir, const char *sql, enum ms_sql_format fmt, FILE *out, char *err,
               size_t errlen);

#endif
