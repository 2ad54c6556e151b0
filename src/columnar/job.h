/* job.h: a job directory open in DuckDB, each table a view (job_sql.c); for the columnar
 * commands that run several queries (ranks.c). Private to src/columnar. */
#ifndef MS_COLUMNAR_JOB_H
#define MS_COLUMNAR_JOB_H

#include "duckdb_dl.h"

#ifdef MEMSCOPE_HAVE_DUCKDB_H
struct ms_job {
    struct ms_duckdb d;
    duckdb_database db;
    duckdb_connection con;
    int open;
    char tmp[4096]; /* DuckDB's temp_directory: a private one in TMPDIR, removed by close */
};

/* Loads DuckDB, opens a database in memory with JOB's tables as views (their files' schema
 * versions checked). 0 or a negative code with the reason in err (ms_job_sql's). Released by
 * ms__job_close (also after a failure: nothing to do then). */
int ms__job_open(struct ms_job *j, const char *job_dir, char *err, size_t errlen);
void ms__job_close(struct ms_job *j);
/* Runs sql into *r (the caller destroys it with j->d.destroy_result on success); 0 or
 * MS_EINVAL with DuckDB's message in err. */
int ms__job_query(struct ms_job *j, const char *sql, duckdb_result *r, char *err, size_t errlen);
/* Removes dir and what is in it (no link is followed). */
void ms__remove_tree(const char *dir);
#endif

#endif
