/* convert_sink.h: the conversion's outputs as one interface (a sink). Private to src/store.
 *
 * Pass 2 (convert_match.c: matching allocations and frees; convert_annotations.c,
 * convert_cuda.c, convert_mmap.c: the annotation, CUDA and mmap records) produces events rows
 * and closed blocks without knowing where they go; the sink chosen by ms_store_convert
 * (conv__sink_of) decides. One implementation per output:
 *   - sink_full.c:    the full database (one events row per event, every blocks row, the
 *                     stacks' text and memscope_dump);
 *   - sink_compact.c: the compact database (no MALLOC/FREE rows, the blocks rows the analyses
 *                     read, the computed tables, the packed traces; docs/database.md);
 *   - sink_replay.c:  every events row to the caller's callback (ms_store_replay: the viewer,
 *                     the analyses that replay a compact database, the CSV export of one);
 *                     the small tables go to a database in memory, nothing to a file.
 * The rows of the small tables come through the sink too (a step, a range, a stack, a usage
 * sample: struct conv_step, conv_range, conv_stack, conv_usage below); every sink writes them
 * into its database today, with convert_rows.c's conv__*_row, and an output that keeps them
 * elsewhere replaces those members only.
 * The row code the sinks share (the events batch, opening the database, errors) is
 * convert_rows.c's, below them all. */
#ifndef MS_CONVERT_SINK_H
#define MS_CONVERT_SINK_H

#include <stddef.h>
#include <stdint.h>

struct conv;
struct stream;
struct proc;
struct closed_block;

/* One events row (docs/database.md, table events) as pass 2 produced it; the id, time,
 * process and thread come from the conversion (c->next_event, s). name/flags: the annotation
 * columns (NULL / -1 for none). */
struct conv_event {
    int kind, layer, have_addr, have_size, flags;
    int64_t addr, size, stack, alloc_id;
    const char *func, *name;
    size_t name_len;
};

/* A steps row (docs/database.md, table steps): step `step` of process process_id from start_ns
 * to end_ns; end_event: the STEP events row that ended it, 0 for the last step of a process
 * (still open at the end: NULL). */
struct conv_step {
    int64_t process_id, step, start_ns, end_ns, end_event;
};

/* A ranges row: range id of thread_id (threads.id) in process_id, name (NUL-terminated),
 * nested depth deep in parent (0: none); end_event 0: never popped (end_ns and end_event
 * NULL). */
struct conv_range {
    int64_t id, process_id, thread_id, depth, parent, start_ns, end_ns, start_event, end_event;
    const char *name;
};

/* A stacks row: stack id of process_id, depth native frames; py_text (py_text_len bytes,
 * NULL: none) the text of a PyTorch allocator stack; node and py_node its native and Python
 * paths in stack_nodes (0: none). */
struct conv_stack {
    int64_t id, process_id, depth, node, py_node;
    const char *py_text;
    size_t py_text_len;
};

/* The usage_samples columns that may be NULL, in the table's order (v[] and have[] of struct
 * conv_usage). */
enum {
    CONV_USAGE_RSS_ANON,
    CONV_USAGE_RSS_FILE,
    CONV_USAGE_RSS_SHMEM,
    CONV_USAGE_STACK,
    CONV_USAGE_SWAP,
    CONV_USAGE_PSS,
    CONV_USAGE_USS,
    CONV_USAGE_THREADS,
    CONV_USAGE_CGROUP_CURRENT,
    CONV_USAGE_CGROUP_MAX,
    CONV_USAGE_PRIVATE_ANON,
    CONV_USAGE_NCOLS
};

/* A usage_samples row (docs/usage.md): the usage monitor's sample of process_id at ts_ns,
 * live_bytes of its heap and mmap layer then; v[i] is NULL unless have[i]. */
struct conv_usage {
    int64_t process_id, live_bytes;
    uint64_t ts_ns;
    int exited;
    uint64_t v[CONV_USAGE_NCOLS];
    unsigned char have[CONV_USAGE_NCOLS];
};

struct conv_sink {
    /* 1: the output is a database file (it gets the tables beside events and blocks: usage
     * samples, copy-on-write, device usage, the mmap layer's layers; the computed tables;
     * fault injection).
     * 0: the replay, whose rows go to a callback. */
    int file;
    /* 1: symbolization may run on a thread of its own during pass 2 (no row is written before
     * the first annotation record) */
    int sym_thread;
    /* After pass 1: the database (c->db) and what runs beside pass 2. */
    int (*open)(struct conv *c);
    /* Just before pass 2. */
    int (*pass2_begin)(struct conv *c);
    /* An events row: takes id ++c->next_event and clears c->attr (its Attr column). */
    int (*event)(struct conv *c, const struct stream *s, const struct conv_event *e);
    /* A block closed (freed, replaced, or live at the end: cb->have_free 0) in process p. */
    int (*block)(struct conv *c, struct proc *p, const struct closed_block *cb);
    /* A steps row (pass 2 at each STEP record, then each process's last step at the end). */
    int (*step)(struct conv *c, const struct conv_step *st);
    /* A ranges row (a range popped, or still open at the end). */
    int (*range)(struct conv *c, const struct conv_range *r);
    /* A stacks row, once per stack as it is symbolized: on the symbolization's thread when
     * sym_thread (holding c->db_mu, as every user of c->db does then). */
    int (*stack)(struct conv *c, const struct conv_stack *st);
    /* A usage_samples row, by time (only when file is 1). */
    int (*usage)(struct conv *c, const struct conv_usage *u);
    /* The SQL of msMemScope's per-process python_trace_<pid> (columns cols of python_trace):
     * a table (full) or a view (compact, replay); sqlite3_mprintf'd, NULL: out of memory. */
    char *(*python_trace_sql)(unsigned long long pid, const char *cols);
    /* After every other table: the rows still held, and the output's own tables. */
    int (*finish)(struct conv *c);
};

extern const struct conv_sink conv__sink_full, conv__sink_compact, conv__sink_replay;

#endif
