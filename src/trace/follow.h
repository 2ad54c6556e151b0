/* follow.h: a trace follower: reads the raw traces of a trace directory while their writers
 * still run (docs/monitor.md), and keeps per process what the live monitor reports: live bytes,
 * peak, allocations and frees per layer and device, the step, live bytes per owner category,
 * live bytes per call stack, and how far behind it is.
 *
 * The agent publishes a record by a release-store of its chunk's `used` and a chunk by a
 * release-store of its magic (format.h), so another process reading the file with pread sees
 * only whole records and whole chunk headers: the follower never writes to the files and never
 * waits for a writer. Each poll it lists the directory (new processes' files), reads the
 * headers of chunks added since the last poll, and decodes the records committed since then.
 *
 * Threads commit independently: a free on one thread may be read before the allocation it frees
 * on another. Decoded events therefore wait in a per-process queue and are applied in time order
 * once they are older than the poll's horizon (the caller's: now minus a grace period while the
 * program runs, everything at the end); the queue's length is the lag
 * (memscope_trace_lag_events). A poll reads at most MS_FOLLOW_POLL_BYTES per file, so that a
 * monitor that fell behind catches up over several polls instead of stalling its server.
 *
 * Reused by the live monitor (src/cli/monitor.c) and meant for a conversion while the program
 * runs. Workload: a few polls a second over files that grow by up to hundreds of MB/s. Memory:
 * one map entry per live block and per distinct stack (capped: MS_FOLLOW_MAX_BLOCKS,
 * MS_FOLLOW_MAX_STACKS). */
#ifndef MS_TRACE_FOLLOW_H
#define MS_TRACE_FOLLOW_H

#include "common/u64map.h"
#include "reader.h"

#include <stddef.h>
#include <stdint.h>

#define MS_FOLLOW_MAX_DEVICES 16 /* CUDA devices followed (ordinals 0..15) */
#define MS_FOLLOW_MAX_PROCS 4096 /* processes followed in one directory */
#define MS_FOLLOW_MAX_BLOCKS ((size_t)1 << 28)
#define MS_FOLLOW_MAX_STACKS ((size_t)1 << 22)
#define MS_FOLLOW_STACK_FRAMES 16 /* frames kept per stack, innermost first */
#define MS_FOLLOW_POLL_BYTES (64u << 20)
#define MS_FOLLOW_MAX_PENDING ((size_t)1 << 24) /* events held back; beyond, applied at once */
#define MS_FOLLOW_STEP_RING 240  /* the last steps whose peaks are kept (the forecaster's window) */
#define MS_FOLLOW_MAX_POOLS 16   /* pools (memscope_pool_*) followed per process; others ignored */
#define MS_FOLLOW_SITE_CACHE 256 /* direct-mapped stack id -> site cache per process */

/* Layers: the heap (malloc & co.), anonymous mmap, then one per CUDA device. */
enum {
    MS_FOLLOW_HEAP,
    MS_FOLLOW_MMAP,
    MS_FOLLOW_DEVICE0,
    MS_FOLLOW_LAYERS = 2 + MS_FOLLOW_MAX_DEVICES
};

/* Owner categories (a bounded set: the labels of memscope.torch's owner tags, docs/torch.md). */
enum {
    MS_OWNER_WEIGHT,
    MS_OWNER_GRADIENT,
    MS_OWNER_OPTIMIZER_STATE,
    MS_OWNER_ACTIVATION,
    MS_OWNER_OTHER, /* any other owner, and blocks allocated with none */
    MS_OWNER_COUNT
};

/* The category's name as the metrics label it ("weight", ... "other"). */
const char *ms_follow_owner_name(int cat);
/* The category of an owner string (levels joined with '@', as docs/torch.md's "PTA@weight"):
 * the first level that names one, else MS_OWNER_OTHER. */
int ms_follow_owner_category(const char *s, size_t len);

struct ms_follow_layer {
    int64_t live, peak;
    uint64_t allocs, frees;
};

/* One call stack's figures (the sites of a process, in the order first allocated from). */
struct ms_follow_site {
    uint32_t stack_id;
    int64_t live;
    uint64_t allocs;
    int64_t mark[2]; /* live at the last two ms_follow_mark_sites (0 before: none was live) */
};

/* The peak of one step (from the end of the step before to its STEP record): host (heap + mmap)
 * live bytes and each device's. */
struct ms_follow_step_peak {
    uint64_t step; /* its number: 1 for the first STEP record */
    uint64_t ns;   /* the STEP record's time */
    int64_t host;
    int64_t dev[MS_FOLLOW_MAX_DEVICES];
};

/* A pool of a custom allocator (memscope_pool_reserve/alloc, NVTX memory heaps): its regions
 * and the blocks handed out inside them (address -> int64_t size each, the form
 * ms_pool_free_extents of src/analyze reads). */
struct ms_follow_pool {
    char name[64];
    struct ms_u64map used, regions;
    int64_t used_bytes, reserved_bytes;
};

struct ms_follow_file; /* one trace file (follow.c) */
struct ms_follow_thread;
struct ms_follow_event;

/* What one process's modules are: where its ELF files are mapped (MODULE records). */
struct ms_follow_module {
    uint64_t bias, lo, hi;
    char *path; /* owned */
};

struct ms_follow_proc {
    uint64_t pid, ppid;
    char exe[256];
    uint32_t image; /* the newest image's n in <pid>.<n>.mst */
    struct ms_follow_layer layer[MS_FOLLOW_LAYERS];
    int64_t owner_live[MS_OWNER_COUNT];    /* live bytes of every layer by owner category */
    int64_t host_live, host_peak;          /* heap + mmap */
    uint64_t step;                         /* STEP records applied */
    uint64_t lost_events;                  /* LOST records' counts and the header's */
    uint64_t first_ns, last_ns;            /* the first and last event applied (CLOCK_MONOTONIC) */
    uint64_t pending;                      /* events decoded, not yet applied (the lag) */
    uint64_t unread_bytes;                 /* committed bytes a poll's cap left for the next */
    uint64_t damaged;                      /* chunks whose records stopped at damage */
    int64_t host_hw;                       /* the highest host_live since the caller reset it */
    int64_t dev_hw[MS_FOLLOW_MAX_DEVICES]; /* the same for each device's live bytes */
    /* the peaks of the last MS_FOLLOW_STEP_RING steps: step k's at steps[(k - 1) % RING]
     * (allocated at the first STEP record; NULL in a program that marks none) */
    struct ms_follow_step_peak *steps;
    int64_t step_host_hw, step_dev_hw[MS_FOLLOW_MAX_DEVICES]; /* the current step's so far */
    struct ms_follow_site *site;                              /* nsite sites */
    size_t nsite, asite;
    struct ms_follow_pool *pools; /* npools pools */
    size_t npools;
    /* what NVML reported at the last CUDA_USAGE record of each device (agent: steps, exit) */
    uint32_t dev_seen; /* bit d: device d reported */
    uint64_t dev_used[MS_FOLLOW_MAX_DEVICES], dev_total[MS_FOLLOW_MAX_DEVICES],
        dev_proc_used[MS_FOLLOW_MAX_DEVICES];
    /* internal */
    struct ms_u64map blocks[3];            /* heap, mmap, CUDA: addr -> struct block (follow.c) */
    struct ms_u64map sites;                /* stack id -> index in site */
    uint64_t scache[MS_FOLLOW_SITE_CACHE]; /* stack id << 32 | site index, 0: empty */
    struct ms_u64map stacks;               /* stack id -> struct stack */
    uint64_t *pcs;
    size_t npcs, apcs;
    struct ms_follow_module *mods;
    size_t nmods, amods;
    struct ms_u64map tmap; /* (image << 32 | thread serial) -> index in threads */
    struct ms_follow_thread *threads;
    size_t nthreads, athreads;
    struct ms_follow_event *ev; /* the queue: ev[ev0 .. nev) */
    size_t ev0, nev, aev;
    int unsorted; /* an event was queued before one of a later time */
    uint64_t order;
};

/* One call stack's live bytes (ms_follow_top_stacks, ms_follow_top_growing). */
struct ms_follow_stack_live {
    uint32_t stack_id;
    int64_t live;
    uint64_t allocs;
    int64_t growth; /* live - mark[0]: what it gained since the older mark */
};

struct ms_follow {
    char dir[4096];
    struct ms_follow_file *files;
    size_t nfiles, afiles;
    struct ms_follow_proc *procs; /* in the order first seen */
    size_t nprocs, aprocs;
    struct ms_u64map fmap; /* (pid << 24 | image) -> index in files + 1 */
    struct ms_u64map pmap; /* pid -> index in procs */
    unsigned char *buf;    /* a chunk's new bytes */
    size_t abuf;
    struct ms_trace_cursor *cur;
    uint64_t polls, events, bytes_read;
};

/* Starts following directory dir (nothing read yet). Returns 0, -ENOTDIR when dir is not a
 * directory, or another negative errno when it cannot be opened. */
int ms_follow_init(struct ms_follow *f, const char *dir);

/* Frees everything the follower holds. Accepts a zeroed struct. */
void ms_follow_release(struct ms_follow *f);

/* Reads what the writers committed since the last poll and applies the decoded events whose
 * time is at most horizon_ns (UINT64_MAX: all of them, for a last poll after the writers
 * ended). Returns the number of events applied, or MS_ENOMEM (the state is then consistent
 * but may miss events). */
long ms_follow_poll(struct ms_follow *f, uint64_t horizon_ns);

/* The stack's frames (innermost first, at most MS_FOLLOW_STACK_FRAMES): returns their count
 * (0 for an unknown stack) and points *pcs at them (valid until the next poll). */
size_t ms_follow_stack(const struct ms_follow_proc *p, uint32_t stack_id, const uint64_t **pcs);

/* The k stacks of process p with the most live bytes, most first, into out[0..k). Returns how
 * many were written. */
size_t ms_follow_top_stacks(const struct ms_follow_proc *p, struct ms_follow_stack_live *out,
                            size_t k);

/* The k stacks of process p that gained the most live bytes since the older of the last two
 * ms_follow_mark_sites (growth > 0 only), most first, into out[0..k). Returns how many. */
size_t ms_follow_top_growing(const struct ms_follow_proc *p, struct ms_follow_stack_live *out,
                             size_t k);

/* Marks each site's live bytes now: mark[0] takes mark[1]'s, mark[1] the live bytes. The
 * caller (the monitor, every few seconds) keeps the marks' times; growth over the window is
 * then live - mark[0] over now minus the older mark's time. */
void ms_follow_mark_sites(struct ms_follow_proc *p);

/* The peak of step k of p when it is still kept (one of the last MS_FOLLOW_STEP_RING), else
 * NULL. */
const struct ms_follow_step_peak *ms_follow_step_peak(const struct ms_follow_proc *p, uint64_t k);

/* Says process pid has ended: its files are read once more by the next poll, then closed (a
 * program that starts thousands of processes must not hold a descriptor for each). */
void ms_follow_retire(struct ms_follow *f, uint64_t pid);

/* Events decoded and not yet applied, over every process: the lag. */
uint64_t ms_follow_lag(const struct ms_follow *f);

#endif
