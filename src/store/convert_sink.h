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
    /* The SQL of msMemScope's per-process python_trace_<pid> (columns cols of python_trace):
     * a table (full) or a view (compact, replay); sqlite3_mprintf'd, NULL: out of memory. */
    char *(*python_trace_sql)(unsigned long long pid, const char *cols);
    /* After every other table: the rows still held, and the output's own tables. */
    int (*finish)(struct conv *c);
};

extern const struct conv_sink conv__sink_full, conv__sink_compact, conv__sink_replay;

#endif
