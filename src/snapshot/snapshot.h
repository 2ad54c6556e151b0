/* snapshot.h: the PyTorch CUDA memory snapshot model over every format generation.
 *
 * A snapshot is what torch.cuda.memory._dump_snapshot() pickles (or its JSON form): segments
 * (cudaMalloc'ed ranges) tiled by blocks, and per-device traces of allocator actions. This
 * module reads one file (pickle protocols 2-5 through unpickle.h, JSON through json.h) into
 * flat arrays: segments, blocks, per-device events, and deduplicated frames and stacks.
 * Generations handled: a bare list of segments (torch 1.13 and memory_snapshot()); dicts with
 * segments and device_traces; legacy blocks with `history` and no `address`; frames,
 * time_us, compile_context, user_metadata, allocator_settings, external_annotations; several
 * devices; empty traces. See docs/snapshot.md.
 *
 * Callers: cmd_snapshot.c (summary, --state-at, -o db), tests. Workload: files of up to
 * several GB; the model costs about 40 bytes per event and 48 per block, frames are kept
 * once per distinct content, and stacks once per distinct content as references to the
 * reader's frame lists (no copy), so shared frame lists stay shared. */
#ifndef MS_SNAPSHOT_H
#define MS_SNAPSHOT_H

#include "unpickle.h"

#include <stdint.h>
#include <stdio.h>

enum ms_snap_action {
    MS_SA_ALLOC,
    MS_SA_FREE_REQUESTED,
    MS_SA_FREE_COMPLETED,
    MS_SA_SEGMENT_ALLOC,
    MS_SA_SEGMENT_FREE,
    MS_SA_SEGMENT_MAP,
    MS_SA_SEGMENT_UNMAP,
    MS_SA_SNAPSHOT,
    MS_SA_OOM,
    MS_SA_ANNOTATE,
    MS_SA_OTHER, /* an action name we do not know; kept and counted */
    MS_SA_COUNT,
};
extern const char *const ms_snap_action_names[MS_SA_COUNT];

enum ms_snap_block_state {
    MS_SB_ACTIVE_ALLOCATED,
    MS_SB_ACTIVE_PENDING_FREE,
    MS_SB_INACTIVE,
    MS_SB_OTHER,
    MS_SB_COUNT,
};
extern const char *const ms_snap_state_names[MS_SB_COUNT];

/* A string inside the snapshot's input or its reader's arena (not NUL-terminated). */
struct ms_str {
    const char *p;
    size_t n;
};

struct ms_snap_frame {
    struct ms_str file, func;
    int64_t line;
};

/* Stack ids are 1-based; 0 means "no frames". A stack refers to the reader's frame list (a
 * LIST or TUPLE of frame dicts) instead of copying it; ms_snapshot_stack_frame() gives its
 * frame ids. */
struct ms_snap_stack {
    ms_pv list; /* the frame list, a value of the snapshot's reader */
    uint32_t depth;
    uint32_t site; /* frame id (1-based) of the allocation site (see docs), 0 if none */
};

struct ms_snap_block {
    uint64_t addr, size, requested;
    uint32_t stack;
    uint8_t state;        /* enum ms_snap_block_state */
    uint8_t addr_derived; /* legacy block: addr = segment address + sizes of earlier blocks */
};

struct ms_snap_segment {
    int64_t device;
    uint64_t addr, total, allocated, active, requested;
    int64_t stream;
    int64_t pool[2];
    uint32_t stack;
    uint8_t large, expandable;
    uint64_t first_block, nblocks; /* into blocks */
};

#define MS_SNAP_NO_TIME INT64_MIN

struct ms_snap_event {
    uint64_t addr; /* `device_free` for oom */
    uint64_t size;
    int64_t stream;
    int64_t time_us; /* MS_SNAP_NO_TIME when absent */
    uint32_t stack;
    uint8_t action; /* enum ms_snap_action */
};

struct ms_snap_trace {
    int64_t device; /* index in device_traces */
    struct ms_snap_event *events;
    uint64_t nevents;
};

struct ms_snap_annotation {
    struct ms_str name, stage;
    int64_t device, time_us;
};

enum { MS_SNAP_PICKLE = 0, MS_SNAP_JSON = 1 };

/* One loaded snapshot. The caller owns the struct; ms_snapshot_release() frees its contents.
 * Strings point into the mapped file or the reader's arena and live as long as the struct. */
struct ms_snapshot {
    int format;    /* MS_SNAP_PICKLE or MS_SNAP_JSON */
    int protocol;  /* pickle protocol (0 if no PROTO), -1 for JSON */
    int bare_list; /* the top level was a list of segments */
    uint64_t file_size;
    struct ms_unpickle u;
    ms_pv root;
    ms_pv allocator_settings; /* ABSENT when missing */

    struct ms_snap_segment *segs;
    uint64_t nsegs;
    struct ms_snap_block *blocks;
    uint64_t nblocks;
    struct ms_snap_trace *traces;
    uint64_t ntraces;
    struct ms_snap_annotation *annotations;
    uint64_t nannotations;

    struct ms_snap_frame *frames; /* frames[0] unused; ids are 1-based */
    uint32_t nframes;             /* including the unused slot */
    struct ms_snap_stack *stacks; /* stacks[0] is the empty stack */
    uint32_t nstacks;

    /* internals */
    void *map;
    size_t map_len;
    void *frame_map, *stack_map; /* content hash maps */
    uint64_t hash_seed;          /* random per reader: a file cannot aim for hash collisions */
    size_t cap_frames, cap_rank, cap_stacks;
    uint8_t *frame_rank;  /* per frame: 0 Python file, 1 other known file, 2 none */
    uint32_t plain_frame; /* id of the frame read from a non-dict item, 0 if none yet */
    uint32_t *scratch;    /* frame ids of the stack being interned */
    size_t scratch_cap;
    char err[320];
};

/* Prepares s (caps: NULL for the unpickler's defaults). Never fails. */
void ms_snapshot_init(struct ms_snapshot *s, const struct ms_unpickle_caps *caps);

/* Reads the snapshot at path (pickle or JSON, detected from the first byte). Returns 0, or a
 * negative MS_E* / -errno code with s->err saying why (MS_EREFUSED for a pickle that would
 * import or call code; MS_EFORMAT when the data is not a snapshot). */
int ms_snapshot_load_file(struct ms_snapshot *s, const char *path);

/* Same over len bytes at data, which must outlive s. */
int ms_snapshot_load_mem(struct ms_snapshot *s, const void *data, size_t len);

/* Frame id (1-based) of frame k (0: innermost) of stack `stack`; 0 when out of range. */
uint32_t ms_snapshot_stack_frame(const struct ms_snapshot *s, uint32_t stack, uint32_t k);

/* Frees everything s holds. Accepts a zeroed or released struct. */
void ms_snapshot_release(struct ms_snapshot *s);

/* Writes the summary (docs/snapshot.md) to out: JSON when json is nonzero, else text.
 * top is the number of allocation sites listed per device. Returns 0 or MS_EIO. */
int ms_snapshot_write_summary(const struct ms_snapshot *s, FILE *out, int json, int top);

/* --- allocator state at an event (state.c) --- */

/* The size of the block PyTorch's caching allocator gives a request of `size` bytes (its
 * round_size: a multiple of 512 bytes, at least 512). The trace's alloc and free entries carry
 * the request; segments' blocks the allocator's size, which can be larger still (a remainder
 * too small to split stays in the block), so this is the estimate for blocks known from the
 * trace only. */
static inline uint64_t ms_snap_round_size(uint64_t size)
{
    uint64_t r = size < 512 ? 512 : (size + 511) / 512 * 512;
    return r >= size ? r : size; /* no overflow near UINT64_MAX */
}

struct ms_snap_state_block {
    uint64_t addr, size, requested;
    uint32_t stack;
    uint8_t state;
};
struct ms_snap_state_segment {
    uint64_t addr, size;
    int64_t stream;
    uint64_t first_block, nblocks; /* into blocks, sorted by address */
};
/* The allocator state just after one event. The caller owns it; release with
 * ms_snap_state_release(). */
struct ms_snap_state {
    int64_t device;
    int64_t event;                      /* -1: before the first event */
    struct ms_snap_state_segment *segs; /* sorted by address */
    uint64_t nsegs;
    struct ms_snap_state_block *blocks; /* active blocks only, grouped by segment */
    uint64_t nblocks;
    struct ms_snap_state_block *orphans; /* active blocks inside no segment */
    uint64_t norphans;
};

/* Reconstructs the state of device's allocator just after trace event `event` (-1: before
 * the first) by undoing later events from the final segments, as PyTorch's viewer does.
 * Cost: O(events after `event` + blocks log blocks). Returns 0, MS_EINVAL (no such device or
 * event) or MS_ENOMEM. */
int ms_snapshot_state_at(const struct ms_snapshot *s, int64_t device, int64_t event,
                         struct ms_snap_state *st);
void ms_snap_state_release(struct ms_snap_state *st);

/* Writes st as JSON (docs/snapshot.md); inactive gaps inside each segment are listed as
 * blocks with state "inactive" so the segments are tiled as in the final `segments`. */
int ms_snap_state_write_json(const struct ms_snapshot *s, const struct ms_snap_state *st,
                             FILE *out);

/* --- database import (import.c) --- */

/* Writes the snapshot as a memscope database (docs/database.md, "Snapshot import") at
 * db_path, replacing it (written to a temporary name, renamed at the end: no partial file is
 * left on error). The tables and indexes are a run's database's, created by the same SQL
 * (common/db_schema.h; the indexes once the rows are written); with MS_SNAP_DB_DUMP in flags,
 * msMemScope's memscope_dump table too, filled from those rows (`memscope snapshot -o`; the
 * viewer's import leaves it out). source_path is recorded as the process's exe. Returns 0 or
 * a negative code with a reason in err. */
#define MS_SNAP_DB_DUMP 1u
int ms_snapshot_write_db(const struct ms_snapshot *s, const char *source_path, const char *db_path,
                         unsigned flags, char *err, size_t errlen);

/* Internal: helpers shared by the snapshot's .c files. */
const struct ms_snap_trace *ms__snap_trace(const struct ms_snapshot *s, int64_t device);
void ms__json_str(FILE *out, const char *p, size_t n);

#endif
