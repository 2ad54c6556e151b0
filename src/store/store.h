/* store.h: turns the raw traces of a run into the SQLite database (docs/database.md), and
 * exports that database as msMemScope CSV.
 *
 * Called by the CLI (memscope run, import, export). Workload: millions to hundreds of millions
 * of events per run; conversion streams over the traces and never holds all events in memory. */
#ifndef MS_STORE_H
#define MS_STORE_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

/* One events row as the conversion makes it (docs/database.md, table events): the values of
 * its columns, has_* 0 where the column is NULL. Text is valid during the sink call only. */
struct ms_store_row {
    int64_t id, ts_ns, process_id, thread_id, addr, size, stack_id, allocation_id;
    int64_t owner_id;       /* MALLOC and FREE: the block's owner then (a tag may change it
                               later: blocks.owner_id is the last), 0: none */
    int kind, layer, flags; /* flags -1: NULL */
    int has_addr, has_size;
    const char *func; /* NULL: NULL */
    const char *name; /* NULL: NULL; name_len bytes */
    size_t name_len;
};

struct ms_store_options {
    const char *trace_dir;   /* directory holding the run's <pid>.<n>.mst files */
    const char *db_path;     /* database to create; an existing file is replaced */
    const char *const *argv; /* the traced command line (meta.command_line), may be NULL */
    int exit_status;         /* meta.exit_status; -1 when unknown */
    unsigned call_stack_c;   /* meta.call_stack_c */
    const char *events;      /* meta.events, e.g. "alloc,free" */
    int symbolize;           /* nonzero: resolve frames to function/file/line */
    unsigned oom_k;          /* OOM_RECENT_ALLOC / OOM_TOP_ALLOC rows after each OOM
                                   (msMemScope's --analysis=oom:K); 0: the default, 10 */
    int compact;             /* the compact database (docs/database.md): no MALLOC/FREE
                                   events rows, blocks rows only for the blocks live at exit,
                                   at a peak or across a step end, and the traces themselves,
                                   packed, in trace_files */
    int no_traces;           /* compact: without trace_files (the traces are not packed): for
                                   a caller that reads the tables only and removes the file
                                   (the pytest plugin); no analysis that replays can read it */
    int no_dump;             /* full database without memscope_dump (expansions: the
                                   caller adds it after, or reads events only) */
    /* Windows between MARK events named window_start + ID and window_end + ID: each one's
     * memory (tables mark_windows, mark_window_sites: docs/database.md). NULL: none. */
    const char *window_start, *window_end;
    /* Replay: every events row goes to sink (in id order) instead of a database, and db_path
     * is not written (NULL); see ms_store_replay. */
    int (*sink)(void *ctx, const struct ms_store_row *row);
    void *sink_ctx;
    const volatile int *stop; /* when it becomes nonzero (a signal handler sets it) the
                                   conversion stops with -EINTR and leaves nothing behind;
                                   NULL: never */
};

struct ms_store_result {
    uint64_t events;         /* events written */
    uint64_t processes;      /* trace files read */
    uint64_t damaged_chunks; /* chunks whose records stopped early */
    uint64_t lost_events;    /* events the agents reported as not recorded */
    char warning[512];       /* first damage message over all traces, "" when none */
};

/* Converts. Returns 0, or a negative MS_E* / -errno code with a one-line English reason in
 * err (errlen bytes). On error no partial database is left at db_path. */
int ms_store_convert(const struct ms_store_options *o, struct ms_store_result *res, char *err,
                     size_t errlen);

/* Replays the events of the compact database at compact_path: its traces converted again
 * (written out to a private directory beside it, removed after), every events row of a full
 * database handed to sink in id order, and nothing written. Returns 0, the sink's negative
 * code (which stops the replay), or a negative code with a reason in err. */
int ms_store_replay(const char *compact_path,
                    int (*sink)(void *ctx, const struct ms_store_row *row), void *ctx, char *err,
                    size_t errlen);

/* 1 when db is a compact database (meta store = compact: docs/database.md), else 0. */
int ms_store_is_compact(sqlite3 *db);

/* Writes the full database (one row per event) of the compact database at compact_path to
 * db_path (replaced when complete; nothing is left there on error): its traces are converted
 * again, with the compact database's stacks, meta and findings; with memscope_dump when dump is
 * nonzero (what the user reads), without for a private copy. stop as in ms_store_options.
 * Returns 0 or a negative code with a reason in err (MS_EINVAL: not a compact database). */
int ms_store_expand(const char *compact_path, const char *db_path, int dump,
                    const volatile int *stop, char *err, size_t errlen);

/* A full database to read where a compact one was given: ms_store_full_open() expands a compact
 * database into a private temporary directory (TMPDIR, else /tmp) and sets path to it; for any
 * other file path is db_path itself. ms_store_full_close() removes what open created. */
struct ms_store_full {
    char path[4096 + 64];
    char dir[4096]; /* "" when nothing was created */
};
int ms_store_full_open(struct ms_store_full *f, const char *db_path, char *err, size_t errlen);
void ms_store_full_close(struct ms_store_full *f);

/* msMemScope's memscope_dump table of a full database (dump.c). ms_dump_create() creates and
 * fills it from events (inside the caller's transaction); ms_dump_create_file() does so in the
 * database file at db_path. ms_dump_refresh() rewrites the rows whose ID is in the result of
 * ids_sql (a SELECT of event ids), when db has the table: after an analysis wrote findings
 * that show in them. 0 or a negative code with a reason in err. */
int ms_dump_create(sqlite3 *db, char *err, size_t errlen);
int ms_dump_create_file(const char *db_path, char *err, size_t errlen);
int ms_dump_refresh(sqlite3 *db, const char *ids_sql, char *err, size_t errlen);
/* 1 when db has memscope_dump as a table (not an older memscope's view), else 0. */
int ms_dump_is_table(sqlite3 *db);

/* 0 when db is a memscope database of a format version this build reads, else a negative
 * code with the reason in err. */
int ms_store_check_version(sqlite3 *db, char *err, size_t errlen);

/* 0 when no size or byte count of db is negative (a damaged or forged database: every reader
 * refuses it rather than print negative memory), else MS_EFORMAT with the table, the column and
 * the value in err. One scan of events and blocks in a full database (0.24 s per 4M events). */
int ms_store_check_sizes(sqlite3 *db, char *err, size_t errlen);

/* Writes the pools of the database at db_path to out as a PyTorch memory snapshot, pickled
 * (torch_export.c; docs/snapshot.md). MS_ENOTFOUND: the run has no pool. Returns 0 or a
 * negative code with a reason in err. */
int ms_store_export_torch(const char *db_path, FILE *out, char *err, size_t errlen);

/* Writes every event of the database at db_path to out as msMemScope's CSV (header included).
 * Returns 0 or a negative code with a reason in err. Refuses databases of a newer format. */
int ms_store_export_csv(const char *db_path, FILE *out, char *err, size_t errlen);

#endif
