/* model.h: what the viewer (`memscope view`, `memscope report`) knows of a run, held in memory.
 *
 * Built once from a database (compact: its traces replayed; full: its events table), then only
 * read, by any number of server threads at once. Workload: up to tens of millions of events.
 * A MALLOC/FREE pair costs one block (about 18 bytes, encoded: blockstore.h) and two changes
 * of live bytes (about 4 bytes each, encoded: timeline.h): about 13 bytes per event (the total
 * of several memory tracks adds 4 per event), 130 MB for 10M events, plus at most 256 MiB of
 * blocks kept decoded (blockstore.h). Every query costs at most one pass over the blocks, or a
 * binary search plus a bounded scan of one track's changes per pixel.
 * NEEDSWORK: the model still grows with the run and is built by replaying the traces at every
 * start (issue 45: tables written by the conversion, read through indexes, instead). */
#ifndef MS_VIEW_MODEL_H
#define MS_VIEW_MODEL_H

#include "common/u64map.h"
#include "blockstore.h"
#include "timeline.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

#define MS_VIEW_MAX_TRACKS 256
#define MS_VIEW_CHUNK 256 /* blocks per entry of the lifetime index (max_free) */

static inline uint32_t ms_vblock_owner(const struct ms_vblock *b)
{
    return b->owner_track >> 8;
}

static inline uint32_t ms_vblock_track(const struct ms_vblock *b)
{
    return b->owner_track & 0xff;
}

/* A track: one (process, layer), with its live bytes after each of its MALLOC/FREE events
 * (ts ascending), encoded in chunks with the min/max of each (timeline.h), so that a window's
 * extremes cost a bounded scan. */
struct ms_vtrack {
    int64_t process_id, pid, layer;
    char layer_name[32];
    int reserve; /* a region pools carve blocks from: not added to the total */
    struct ms_vline own;
    const struct ms_vline *line; /* own, or another track's (the total of a single memory
                                    track) */
    int64_t peak, peak_ns, allocs, alloc_bytes;
};

/* The ACCESS events of one block (memscope_access, PyTorch's op-level accesses): the first, the
 * last, and the longest time between two (MindStudio Insight's access statistics). */
struct ms_vaccess {
    int64_t first_ns, last_ns, max_gap;
};

struct ms_vstep {
    int64_t process_id, step, ts_ns;
};

struct ms_vmark {
    int64_t process_id, ts_ns;
    char name[64];
};

/* A range (memscope_range_push .. pop, NVTX's push .. pop) of one thread: its name, its times
 * (end INT64_MAX: still open at the end) and how many of the thread's ranges enclose it. */
struct ms_vrange {
    int64_t process_id, start_ns, end_ns;
    uint32_t depth;
    char name[44];
};
#define MS_VIEW_MAX_RANGES ((size_t)1 << 20) /* kept at most; later ones are counted only */

/* A pool (the pools table): its blocks' layer and the layer of the regions it carves from. */
struct ms_vpool {
    char name[64];
    int64_t layer, reserve_layer;
};

/* The usage monitor's samples of one process image (usage_samples, docs/usage.md), in time
 * order: its RSS (anonymous + file + shared), PSS and USS; -1 where not read. */
struct ms_vusage_point {
    int64_t ts, rss, pss, uss;
};
struct ms_vusage {
    int64_t process_id, pid;
    struct ms_vusage_point *p;
    size_t n, cap;
};
#define MS_VIEW_MAX_USAGE 16 /* processes whose usage is drawn: the first ones */

/* What NVML said a CUDA device had in use (usage_devices' device_used, docs/usage.md: read at
 * each traced process's steps and exit), in time order: one series per device, whichever
 * process asked. */
struct ms_vdevice_point {
    int64_t ts, used;
};
struct ms_vdevice {
    int64_t device; /* the CUDA ordinal */
    struct ms_vdevice_point *p;
    size_t n, cap;
};
#define MS_VIEW_MAX_DEVICES 16 /* devices whose memory used is drawn: the lowest ordinals */

struct ms_view_model {
    sqlite3 *db;              /* read only; frames and stacks are looked up here on demand */
    struct ms_vblocks blocks; /* read with ms_view_block() */
    size_t nblocks;
    /* The index of lifetimes: blocks are in allocation order (sorted set when alloc_ns never
     * decreases), and max_free[c] is the latest free_ns among blocks [c * MS_VIEW_CHUNK,
     * (c + 1) * MS_VIEW_CHUNK): the blocks alive in a window are found without visiting the
     * chunks whose blocks were all freed before it nor those allocated after it. */
    int sorted;
    int64_t *max_free;
    int any_reserve; /* a track is a pool's reserve layer (its blocks are not in the total) */
    struct ms_u64map access; /* block index -> struct ms_vaccess, for accessed blocks only */
    struct ms_vpool *pools;
    size_t npools;
    struct ms_vtrack *tracks;
    size_t ntracks;
    struct ms_vstep *steps;
    size_t nsteps, capsteps;
    struct ms_vmark *marks;
    size_t nmarks, capmarks;
    struct ms_vrange *ranges; /* in start order */
    size_t nranges, capranges;
    uint64_t ranges_dropped; /* past MS_VIEW_MAX_RANGES */
    struct ms_vusage *usage; /* by process, in processes.id order */
    size_t nusage;
    struct ms_vdevice *devices; /* by ordinal */
    size_t ndevices;
    int64_t t0, t1;     /* first and last event */
    int64_t total_peak; /* peak of the sum of all non-reserve tracks, and when */
    int64_t total_peak_ns;
    uint64_t events;
};

/* The usage monitor's part of the model (model_usage.c), for model.c: the usage samples and the
 * devices' memory used read into m (none from a database without them); 0 or a negative code.
 * The release frees them. */
int ms__vmodel_read_usage(struct ms_view_model *m);
void ms__vmodel_usage_release(struct ms_view_model *m);

/* Block i (< nblocks), decoded. */
static inline struct ms_vblock ms_view_block(const struct ms_view_model *m, size_t i)
{
    return ms_vblocks_get(&m->blocks, i);
}

/* Loads the model of the database at path (opened read only). 0, or a negative code with a
 * one-line reason in err. The caller releases with ms_view_model_release(). */
int ms_view_model_load(struct ms_view_model *m, const char *path, char *err, size_t errlen);
void ms_view_model_release(struct ms_view_model *m);

/* Calls fn(ctx, i) for each block i alive at some time in [a, b) (allocated before b, freed
 * after a), in index order; stops at fn's first nonzero return, which it returns. */
int ms_view_alive(const struct ms_view_model *m, int64_t a, int64_t b,
                  int (*fn)(void *ctx, size_t i), void *ctx);

/* 1 when block b is live at t (allocated at or before t, freed after). */
static inline int ms_vblock_live_at(const struct ms_vblock *b, int64_t t)
{
    return b->alloc_ns <= t && b->free_ns > t;
}

#endif
