/* cmd_sql.c: `memscope sql JOB "SQL" [--format=table|csv|json]`: one query over a job's
 * Parquet tables (each table of JOB a view; ms_job_sql, src/columnar; docs/columnar.md). */
#include "cli.h"

#include "columnar/columnar.h"
#include "common/ms_error.h"

#include <stdio.h>
#include <string.h>

static const char sql_usage[] =
    "usage: memscope sql JOB \"SQL\" [--format=table|csv|json]\n"
    "\n"
    "Runs one query (DuckDB's SQL) over the job directory JOB that `memscope export\n"
    "--format=parquet -o JOB` fills: each table (blocks, sites, events, processes, steps,\n"
    "usage, timeline, rank_summary) is a view of all its ranks' files, with host and rank as columns.\n"
    "  --format=FORMAT     table (default), csv (a header line, then the rows), json (an\n"
    "                      array of objects)\n";

int cmd_sql(int argc, char **argv)
{
    const char *job = NULL, *sql = NULL, *format = "table";
    int missing = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(sql_usage, stdout);
            return 0;
        } else if ((v = cli_opt_value(argc, argv, &i, "--format", &missing))) {
            if (missing)
                return usage_error("sql: --format needs a value");
            format = v;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("sql: unknown option '%s'", a);
        } else if (!job) {
            job = a;
        } else if (!sql) {
            sql = a;
        } else {
            return usage_error("sql: unexpected argument '%s' (give the query as one argument)", a);
        }
    }
    if (!job || !sql)
        return usage_error("sql: give a job directory and a query");
    enum ms_sql_format fmt;
    if (!strcmp(format, "table"))
        fmt = MS_SQL_TABLE;
    else if (!strcmp(format, "csv"))
        fmt = MS_SQL_CSV;
    else if (!strcmp(format, "json"))
        fmt = MS_SQL_JSON;
    else
        return usage_error("sql: --format needs table, csv or json, not '%s'", format);
    char err[2048] = "";
    int rc = ms_job_sql(job, sql, fmt, stdout, err, sizeof err);
    if (rc == 0 && fflush(stdout) != 0) {
        cli_error("sql: cannot write to stdout");
        return 1;
    }
    if (rc < 0) {
        cli_error("sql: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    return 0;
}
