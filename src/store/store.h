/* store.h: turns the raw traces of a run into the SQLite database (docs/database.md), and
 * exports that database as msMemScope CSV.
 *
 * Called by the CLI (memscope run, import, export). Workload: millions to hundreds of millions
 * of events per run; conversion streams over the traces and never holds all events in memory. */
#ifndef MS_STORE_H
#define MS_STORE_H

#include <stdint.h>
#include <stdio.h>

struct ms_store_options {
    const char *trace_dir;      /* directory holding the run's <pid>.<n>.mst files */
    const char *db_path;        /* database to create; an existing file is replaced */
    const char *const *argv;    /* the traced command line (meta.command_line), may be NULL */
    int exit_status;            /* meta.exit_status; -1 when unknown */
    unsigned call_stack_c;      /* meta.call_stack_c */
    const char *events;         /* meta.events, e.g. "alloc,free" */
    int symbolize;              /* nonzero: resolve frames to function/file/line */
    unsigned oom_k;             /* OOM_RECENT_ALLOC / OOM_TOP_ALLOC rows after each OOM
                                   (msMemScope's --analysis=oom:K); 0: the default, 10 */
    const volatile int *stop;   /* when it becomes nonzero (a signal handler sets it) the
                                   conversion stops with -EINTR and leaves nothing behind;
                                   NULL: never */
};

struct ms_store_result {
    uint64_t events;          /* events written */
    uint64_t processes;       /* trace files read */
    uint64_t damaged_chunks;  /* chunks whose records stopped early */
    uint64_t lost_events;     /* events the agents reported as not recorded */
    char warning[512];        /* first damage message over all traces, "" when none */
};

/* Converts. Returns 0, or a negative MS_E* / -errno code with a one-line English reason in
 * err (errlen bytes). On error no partial database is left at db_path. */
int ms_store_convert(const struct ms_store_options *o, struct ms_store_result *res, char *err,
                     size_t errlen);

/* Writes every event of the database at db_path to out as msMemScope's CSV (header included).
 * Returns 0 or a negative code with a reason in err. Refuses databases of a newer format. */
int ms_store_export_csv(const char *db_path, FILE *out, char *err, size_t errlen);

#endif
