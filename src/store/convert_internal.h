/* convert_internal.h: the converter's state (struct conv and what it holds), shared by the
 * convert*.c files (the passes and their parts) and the sinks (sink_*.c, convert_sink.h: the
 * outputs). Private to src/store. */
#ifndef MS_CONVERT_INTERNAL_H
#define MS_CONVERT_INTERNAL_H

#include "store.h"

#include "convert_sink.h"

#include "common/u64map.h"
#include "common/usage.h"
#include "common/usage_pages.h"
#include "batch.h"
#include "embed.h"
#include "common/ms_error.h"
#include "common/files.h"
#include "common/buf.h"
#include "common/grow.h"
#include "common/ns.h"
#include "trace/reader.h"
#include "snapshot/snapshot.h"
#include "common/db_schema.h"
#include "stack_text.h"
#include "strtab.h"
#include "symbolize.h"
#include "version.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 65536u
#define MAX_THREADS (1u << 20)     /* over all files */
#define MAX_STACKS (1u << 26)      /* over all files */
#define MAX_STACK_PCS (1ull << 30) /* pcs held over all stacks */
#define MAX_MODULES 65536u         /* per process */
#define MAX_LIVE (1u << 28)        /* live blocks over all processes */
#define MAX_PCS_PER_PROCESS (1u << 26)
#define MAX_STRINGS (1u << 26)
#define MAX_STRING_BYTES (1ull << 32)
#define MAX_NODES (1u << 31) /* stack_nodes rows over all processes */
#define MAX_POOLS 1024u
#define MAX_OWNER_DEPTH 64
#define MAX_OWNER_BYTES 4096
#define MAX_OPEN_RANGES 4096
#define REORDER 65536u   /* blocks rows awaiting their turn (a power of two) */
#define TREND_POINTS 100 /* analyze trend's time samples: TREND_POINTS + 1 */

struct layer_stats {
    int64_t allocs, frees, alloc_bytes, peak_bytes, peak_ns, live_bytes, live_blocks, unmatched;
    int64_t peak_event, peak_alloc; /* the MALLOC that reached the peak: event and block ids */
};

/* One memory layer of one process: its live blocks and statistics. */
struct layer_state {
    struct ms_u64map live; /* address -> conv.blocks slot */
    struct layer_stats st;
    int used; /* a process_stats row is written (heap and mmap always) */
    /* Compact output: where the blocks closed since the current peak begin in conv.cand (the
     * peak's live set is those of them allocated before it and the blocks still live that
     * were). */
    size_t peak_from;
};

/* A module of a process. A library loaded where a closed one was (dlclose, then dlopen) starts
 * a new epoch of the process's modules: stacks read after its MODULE record (pass 1 order) are
 * symbolized with the modules of their epoch, the older stacks with the closed library. */
struct module {
    uint64_t bias, lo, hi;
    char *path;
    uint32_t epoch_from, epoch_to; /* the epochs it belongs to: [from, to); to = UINT32_MAX */
};

/* One trace file = one traced process image. */
struct proc {
    char *path;
    const char *name; /* file name within the trace dir */
    struct ms_trace tr;
    int64_t id; /* processes.id */
    int have_process;
    uint64_t ppid;
    char *exe, *cmdline; /* from the PROCESS record; cmdline NUL-separated, cmdlen bytes */
    size_t cmdlen;
    struct module *mods;
    size_t nmods, amods;
    uint32_t mod_epoch;           /* bumped by a module that overlaps a live one */
    struct ms_u64map stack_ids;   /* trace stack id -> database stack id */
    struct ms_u64map pyframe_ids; /* trace Python frame id -> conv.pyframes index + 1 */
    struct ms_u64map pystack_ids; /* trace stack id -> conv.pystacks index + 1 */
    struct ms_u64map kernels;     /* CUDA function handle -> conv.kernels index + 1 */
    /* PyTorch's CUDA caching allocator as the Python package saved it at exit
     * (<pid>.pta.pickle beside the trace, docs/cuda.md), NULL when none */
    struct ms_snapshot *pta;
    uint32_t stack_first, stack_end; /* this file's range in conv.stacks */
    int64_t first_ns, last_ns;
    int have_events;
    uint64_t lost;
    struct layer_state *ls; /* by layer id; see proc_layer() */
    size_t nls;
    int64_t steps;   /* memscope_step() calls so far: the current step is steps + 1 */
    int64_t moments; /* step ends and OOMs so far: a block whose life spans one keeps
                                  its row in the compact database */
    int64_t step_start_ns;
    /* The heap and the mmap layer together (host_peaks: --max-peak's default budget): live
     * bytes now, the first MALLOC that reached their highest sum (its bytes, time, event and
     * block ids), and, compact output, where the blocks closed since then begin in conv.cand */
    int64_t host_live, host_peak, host_peak_ns, host_peak_event, host_peak_alloc;
    size_t host_from;
    struct conv_mm *mm; /* its reservations and their commits (convert_mmap.c), NULL: none */
    /* A forked image: its parent's heap and mmap bytes live at the fork (convert_cow.c), which
     * are live in it too (its usage samples' live bytes count them) */
    int64_t inherited_live;
};

/* A trace's monotonic time ns as epoch ns (modular arithmetic: right either way), clamped into
 * [0, MS_NS_MAX] (common/ns.h): a damaged or hostile header cannot put a timestamp out of the
 * range every reader's arithmetic relies on. */
static inline int64_t conv__epoch_ns(const struct proc *p, uint64_t ns)
{
    return ms_ns_clamp((int64_t)(ns - p->tr.hdr.start_mono_ns + p->tr.hdr.start_real_ns));
}

/* Trace stack ids of the PyTorch allocator's stacks: PTA_STACK_BASE + the snapshot's stack id
 * (the agent's ids are below 2^21). */
#define PTA_STACK_BASE 0xc0000000u

struct stack_def {
    uint64_t *pcs;
    uint32_t depth;
    uint32_t trace_id; /* the id in its trace file (for its PYSTACK record) */
    uint32_t epoch;    /* its process's module epoch when it was read (struct module) */
};

/* A Python code object described by a PYFRAME record. */
struct pyframe {
    char *file, *func;
    int64_t firstline;
};

/* The Python part of a stack (PYSTACK record): frame ids and lines, innermost first. */
struct pystack {
    uint32_t *pairs;
    uint32_t depth;
};

/* A range (memscope_range_push) not popped yet. */
struct open_range {
    int64_t id, start_ns, start_event;
    char *name;
};

struct thread {
    uint32_t proc, serial, tid;
    int64_t first_ns, last_ns;
    uint64_t events;
    /* Owner labels pushed on this thread, joined with '@' in owner (owner_len bytes);
     * owner_ends[i] is the length after label i. owner_id is the owners row of the join. */
    char *owner;
    size_t owner_len, owner_cap;
    size_t owner_ends[MAX_OWNER_DEPTH];
    int owner_depth, owner_overflow;
    int64_t owner_id;
    struct open_range *ranges;
    int nranges;
    size_t aranges;
    /* Compact output: the block of this thread's last MALLOC while no MALLOC or FREE came
     * after it (a FREE of it now makes it temporary), and its site_stats index. */
    int64_t tmp_alloc;
    uint32_t tmp_site;
    uint32_t last_site; /* its last MALLOC's site_stats index + 1, 0: none */
    /* Tracer calls not returned yet: frame id and start time. */
    struct pycall {
        uint32_t frame;
        int64_t start_ns;
    } * calls;
    size_t ncalls, acalls_sz;
};

/* A block that is live now. */
struct block {
    int64_t alloc_id, addr, size, alloc_ns, alloc_event_id, stack_id; /* stack_id 0: none */
    int64_t owner_id, step;                                           /* owner_id 0: none */
    int64_t base_owner_id; /* the owner at allocation (describe tags extend it) */
    int64_t moments;       /* its process's moments at allocation */
    uint32_t thread_id;    /* threads.id */
    uint32_t next_free;    /* free-list link when the slot is unused */
    uint32_t keep;         /* accessed or retagged: a row in the compact database */
    const char *func;
};

/* A blocks row waiting in conv.closed to be written (block_close). */
struct closed_block {
    struct block b; /* b.alloc_id 0: an empty place */
    int64_t process_id, free_ns, free_event;
    int layer, have_free;
};

/* One thread's records, positioned at its next event. */
struct stream {
    struct ms_trace_stream s;
    struct ms_record r;
    int64_t ts; /* r.ns as epoch ns */
    uint32_t proc, serial, thread;
    /* A stream of the PyTorch allocator's events of one device (the snapshot's device trace),
     * merged by time with the traced threads; NULL for a traced thread. */
    const struct ms_snap_trace *pta;
    uint64_t pta_next;
    struct pta_pre *pre; /* blocks and segments older than the trace, streamed first */
    size_t npre, pre_next;
    struct pta_size *sizes; /* the allocs whose block is live at the end, by event index */
    size_t nsizes, size_next;
    const char *func;      /* the function name of the current pseudo record */
    uint64_t requested;    /* the size the program asked for (alloc), 0 when not known */
    uint32_t owner_thread; /* PyTorch allocator: the thread whose owner its blocks take */
};

/* An alloc of the trace whose block is live in the snapshot's final state, which gives the
 * block's size as the allocator rounded it. */
struct pta_size {
    uint64_t event, size;
};

/* A PyTorch allocator block or segment allocated before its trace began (its free is in the
 * trace, or it is live in the snapshot's final state, without an alloc in the trace). */
struct pta_pre {
    uint64_t addr, size;
    uint32_t stack;
    int seg;
};

struct kept_chunk; /* convert_blocks.c */

struct conv {
    const struct conv_sink *sink; /* the output (convert_sink.h) */
    int fill_rc; /* pass 2: a stream could not be read (no memory to decode a packed chunk) */
    const struct ms_store_options *o;
    struct ms_store_result *res;
    char *err;
    size_t errlen;
    sqlite3 *db;
    char *tmp_path;

    struct proc *procs;
    size_t nprocs;
    /* the usage monitor's samples (convert_usage.c), sorted by time: ts_ns in the events' epoch
     * ns, pid replaced by the index of the process's image in procs; usage_live[i]: the heap
     * and mmap bytes live in sample i's process at its time, set in pass 2 */
    struct ms_usage_sample *usage;
    size_t nusage, usage_next;
    int64_t *usage_live;
    char **usage_paths; /* the usage and pages files read, for the compact database's trace_files */
    size_t nusage_paths;
    /* copy-on-write (convert_cow.c): the forked images with a pagemap walk, by fork time; the
     * next one whose parent's live blocks pass 2 has not counted yet */
    struct cow_child *cow;
    size_t ncow, cow_next;
    /* what NVML reported at the agents' steps and exits (CUDA_USAGE records), each with the
     * bytes the hooked driver calls had live on that device then (convert_cuda.c) */
    struct dev_usage {
        int64_t process_id, ts_ns;
        uint64_t device, process_used, device_used, device_total; /* device: ordinal */
        int64_t hooked;
    } * devusage;
    size_t ndevusage, adevusage;
    struct stack_def *stacks;
    size_t nstacks, astacks;
    uint64_t stack_pcs;
    struct thread *threads;
    size_t nthreads;
    struct block *blocks;
    size_t nblocks, ablocks;
    uint32_t free_block;
    size_t live_total;
    /* Blocks rows are written in allocation-id order as far as a window of REORDER ids allows
     * (write_block): closed[id % REORDER] holds closed block id until every id before it is
     * written or passed over. closed_next: the smallest id neither written nor passed over. */
    struct closed_block *closed;
    int64_t closed_next;
    /* Compact output (o->compact): no MALLOC or FREE rows, and blocks rows only for the blocks
     * the analyses read there (docs/database.md). The rows kept when a block closes go through
     * the window too, written during pass 2 by a thread of their own (convert_blocks.c): main
     * fills kept_fill and queues it (kept_head..kept_tail, under kept_mu), the thread writes. */
    pthread_t kept_thread;
    int kept_running, kept_closed, kept_rc;
    pthread_mutex_t kept_mu;
    pthread_cond_t kept_cv;
    struct kept_chunk *kept_fill, *kept_head, *kept_tail;
    /* The connection is used by one thread at a time: while threads share it (the
     * symbolization's, the kept blocks', pass 2's annotations), each holds db_mu to use it. */
    pthread_mutex_t db_mu;
    pthread_mutex_t err_mu;   /* err: the first message of any thread */
    struct ms_embed embed;    /* the packed traces on their way into trace_files */
    struct conv_windows *win; /* NULL unless o->window_start (convert_windows.c) */
    /* Compact output: allocations per (process, layer, stack): the site_stats rows. */
    struct site_stat {
        int64_t process_id, stack_id, owner_id, step; /* owner at allocation */
        int layer;
        int64_t allocs, bytes, temporary, temp_bytes, live_blocks, live_bytes;
    } * sites;
    size_t nsites, asites;
    struct ms_u64map site_ids; /* hash of (process, layer, stack, owner, step) -> sites index */
    /* Compact output: live bytes over the default layers of every process as MALLOC and FREE
     * rows add and remove them (decompose's total), its peak, and where the blocks closed
     * since then begin in cand. cand: the closed blocks that were live at their layer's
     * current peak or at this one, in the order they closed, each once (convert_compact.c). */
    int64_t all_live, all_peak, all_peak_alloc;
    size_t all_from;
    struct closed_block *cand;
    size_t ncand, acand;
    /* Compact output: trend's series over the default layers, computed here when the last
     * event's time is known before pass 2 (t1_guess: raw traces only; checked at the end) */
    int trend_ok;
    int64_t t1_guess, trend_live, trend_max;
    int64_t trend_samples[TREND_POINTS + 1];
    int trend_k;
    struct step_live {
        int64_t event_id, process_id, step, live;
    } * step_lives;
    size_t nstep_lives, astep_lives;
    /* Compact output: decompose's owner series (live bytes per owner at each STEP row, or at
     * ten times over the run, and at the end; each owner's peak), exact unless a tag changed a
     * block's owner (retagged) */
    int retagged;
    int64_t all_peak_event, all_peak_ns, run_start_ns;
    int64_t *own_live, *own_peak;
    size_t nown;
    struct dpoint {
        int kind; /* 0: a STEP row, 1: a time sample */
        int64_t process_id, step, ts;
        size_t first, n; /* its (owner, live) pairs in dpairs */
    } * dpoints;
    size_t ndpoints, adpoints;
    int64_t (*dpairs)[2];
    size_t ndpairs, adpairs;
    int dsample;                      /* time samples taken */
    int64_t trend_next, dsample_next; /* the next sample times (trend's, decompose's) */
    int have_trend_next, have_dsample_next;

    int64_t next_event, next_alloc, next_frame, next_module, next_range, next_node;
    int64_t first_event_ns, last_event_ns; /* of the events rows (meta) */
    struct ms_strtab strings;
    struct ms_strtab owners;     /* owner strings -> owners.id */
    struct ms_symcache symcache; /* ELF files read for symbolization, shared by processes */
    /* Symbolization on a thread of its own while pass 2 matches the heap events (compact
     * output): it alone uses the database, the strings and the stacks until pass 2 waits for
     * it (conv__sym_join). */
    pthread_t sym_thread;
    int sym_running, sym_rc;
    char **pools; /* pool names; pool i has layers MS_LAYER_POOL0 + 2i and + 2i + 1 */
    size_t npools;
    struct exec_note *execs; /* EXEC records (convert_exec.c) */
    size_t nexecs, aexecs;
    struct pyframe *pyframes;
    size_t npyframes, apyframes;
    struct pystack *pystacks;
    size_t npystacks, apystacks;

    char **kernels; /* CUDA kernel names (CUDA_FUNC records) */
    size_t nkernels, akernels;
    uint8_t cuda_layers[MS_CUDA_LAYERS * (MS_CUDA_NODEV + 1)]; /* device layers used */
    /* The Attr additions of the next events row (JSON object text), NULL for none: set by the
     * CUDA events just before they write their row, taken by write_event_full. */
    const char *attr;
    size_t attr_len;
    int64_t row_owner; /* a replay: the owner of the next row's block (ms_store_row.owner_id) */

    struct ms_batch events_ins, blocks_ins; /* multi-row INSERTs of the per-event rows */
    sqlite3_stmt *ins_string, *ins_frame, *ins_stack, *ins_stack_node;
    sqlite3_stmt *ins_owner, *ins_step, *ins_range, *ins_pytrace, *ins_usage;
};

/* ---- convert_rows.c: the row code below every part and sink ---------------------------------- */

/* Sets err (the first error only) and returns rc. */
int conv__fail(struct conv *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Binds v to parameter i, or NULL when not present. */
void conv__bind_opt(sqlite3_stmt *st, int i, int64_t v, int present);
/* Sets the out-of-memory error (what was being done); returns its code. */
int conv__oom(struct conv *c, const char *what);
/* Prepares sql into *st; 0 or an error (set). */
int conv__prepare(struct conv *c, sqlite3_stmt **st, const char *sql);
/* Runs one prepared insert that has its parameters bound. */
int conv__step_reset(struct conv *c, sqlite3_stmt *st, const char *what);
/* Grows array *a of n elements of size sz to hold one more (cap: max elements). */
int conv__grow(void **a, size_t *alloc, size_t n, size_t sz, size_t max);
/* qsort comparison of uint64_t values (or structs that start with one). */
int conv__cmp_u64(const void *a, const void *b);
/* Runs sql (several statements); 0 or an error (set). */
int conv__exec(struct conv *c, const char *sql, const char *what);
/* An error of an ms_batch call (what: the insert); of the database (its message). */
int conv__batch_fail(struct conv *c, int rc, const char *what);
int conv__db_fail(struct conv *c, const char *what);
/* Opens c->db: a new file beside o->db_path (renamed there on success by ms_store_convert),
 * or a database in memory; then pragmas (the sink's page size and cache), the schema and the
 * prepared inserts. 0 or an error (set). */
int conv__open_file(struct conv *c, const char *pragmas);
int conv__open_memory(struct conv *c, const char *pragmas);
/* Adds events row e of s to the events batch (id ++c->next_event, Attr c->attr, cleared). */
int conv__event_row(struct conv *c, const struct stream *s, const struct conv_event *e);
/* Writes the rows still held: the blocks window, the events and blocks batches. */
int conv__flush_rows(struct conv *c);
/* Failure injection (tests): MEMSCOPE_FAULT_CONVERT crashes a conversion to a file here. */
void conv__fault_point(void);
/* The rows of the small tables in c->db, each through its prepared insert: what every sink's
 * step, range, stack and usage members do today (convert_sink.h). 0 or an error (set). */
int conv__step_row(struct conv *c, const struct conv_step *st);
int conv__range_row(struct conv *c, const struct conv_range *r);
int conv__stack_row(struct conv *c, const struct conv_stack *st);
int conv__usage_row(struct conv *c, const struct conv_usage *u);
/* The python_trace_<pid> view (the compact and the replay sink's). */
char *conv__python_trace_view_sql(unsigned long long pid, const char *cols);

/* ---- convert_meta.c: the threads, processes and meta rows (after pass 2) -------------------- */

int conv__write_meta(struct conv *c); /* before conv__write_processes (cmdline NULs) */
int conv__write_threads(struct conv *c);
int conv__write_processes(struct conv *c);

/* ---- convert_match.c: pass 2's matching, above the sink -------------------------------------- */

/* The state of layer id in process p, created on first use; NULL when out of memory. */
struct layer_state *conv__proc_layer(struct conv *c, struct proc *p, int layer);
/* An event record of a traced thread (pass 2, in time order). */
int conv__on_event(struct conv *c, struct stream *s);
/* A munmap record. */
int conv__on_munmap(struct conv *c, const struct stream *s);
/* Hands the block in slot to the sink and frees the slot. free_event 0: no free event
 * (replaced by an allocation at the same address); have_free 0: still live at the end. */
int conv__block_close(struct conv *c, struct proc *p, int layer, uint32_t slot, int have_free,
                      int64_t free_ns, int64_t free_event);

/* Writes an events row; name and flags are the annotation columns (NULL / -1 for none). */
int conv__write_event_full(struct conv *c, const struct stream *s, int kind, int layer,
                           int64_t addr, int have_addr, int64_t size, int have_size,
                           const char *func, int64_t stack, int64_t alloc_id, const char *name,
                           size_t name_len, int flags);
int conv__write_event(struct conv *c, const struct stream *s, int kind, int layer, int64_t addr,
                      int64_t size, int have_size, const char *func, int64_t stack,
                      int64_t alloc_id);
/* An alloc of s->r in layer; func: the allocating function's name (NULL: from the record). */
int conv__on_alloc(struct conv *c, const struct stream *s, int layer, const char *func);
/* An alloc of [addr, addr + size) in layer by s, with database stack id stack and func. */
int conv__alloc_block(struct conv *c, const struct stream *s, int layer, uint64_t addr,
                      uint64_t size, uint32_t stack, const char *func);
/* The database stack id of s->r's trace stack id (0: none). */
uint32_t conv__stack_of(struct conv *c, const struct stream *s);
/* A free of the block at s->r.addr in layer (heap free, pool free, pool release). */
int conv__on_free(struct conv *c, const struct stream *s, int layer, const char *func);
/* Ends the live block in slot with a FREE event by s. */
int conv__free_block(struct conv *c, const struct stream *s, int layer, uint32_t slot,
                     const char *func);

/* ---- convert_blocks.c: the blocks rows -------------------------------------------------------- */

/* Writes the blocks row of cb now. */
int conv__block_row(struct conv *c, const struct closed_block *cb);
/* Writes the blocks row of cb, or keeps it in the window (closed) until the blocks allocated
 * before it are written. */
int conv__write_block(struct conv *c, const struct closed_block *cb);
/* Writes the rows still waiting in the window. */
int conv__drain_blocks(struct conv *c);
/* A closed block by allocation id, for sorting rows (they are 150 bytes) before writing them;
 * conv__cmp_block_ref orders them for qsort. */
struct block_ref {
    int64_t id;
    const struct closed_block *cb;
};
int conv__cmp_block_ref(const void *a, const void *b);
/* Compact output: starts the thread that writes the kept blocks' rows during pass 2 (none if
 * it cannot start: conv__keep_block writes them). Returns 0. */
int conv__kept_start(struct conv *c);
/* Compact output: the row of a kept block, to the thread or (none, or after it) written here
 * under db_mu. Returns 0 or an error (the thread's, if it stopped on one). */
int conv__keep_block(struct conv *c, const struct closed_block *cb);
/* Hands the last rows to the thread and waits for it; failed: the conversion failed, the rows
 * are dropped. Returns 0 or the thread's error. */
int conv__kept_join(struct conv *c, int failed);

/* ---- convert_annotations.c: called by the passes ---------------------------------------------- */

/* An annotation record (EXTENSION) of a traced thread. */
int conv__on_annotation(struct conv *c, struct stream *s);
/* The rows of what was still open at the end: ranges, each process's last step, the pools. */
int conv__write_annotations(struct conv *c);

/* convert_exec.c: programs started untraced. An EXEC or EXEC_FAILED record (pass 2, in time
 * order; not an event). */
int conv__on_exec(struct conv *c, struct stream *s);
/* The untraced rows: each EXEC not followed by EXEC_FAILED whose program wrote no trace. */
int conv__write_untraced(struct conv *c);
void conv__execs_release(struct conv *c);

/* ---- convert_symbols.c: called by the passes -------------------------------------------------- */

/* Symbolizes process p's stacks and writes its modules, strings, frames and stacks rows. */
int conv__symbolize_process(struct conv *c, struct proc *p);
/* Symbolizes every process: on a thread of its own (compact output) or before returning. */
int conv__symbolize_start(struct conv *c);
/* Waits for the symbolization's thread, if it runs; returns its result. */
int conv__sym_join(struct conv *c);
/* The text of a PyTorch allocator stack ("file(line): function" lines, innermost first) into b;
 * empty for other stacks. */
int conv__py_text(struct conv *c, struct proc *p, const struct stack_def *sd, struct ms_buf *b);

/* ---- convert_compact.c: the computed tables (both kinds), the compact database's part -------- */

/* ---- convert_windows.c: the memory of each window between two MARKs (when asked for) ---- */

/* Sets up c->win when o->window_start and o->window_end are set; 0 or MS_ENOMEM. */
int conv__windows_init(struct conv *c);
void conv__windows_release(struct conv *c);
/* A MARK row named name (len bytes), written as event c->next_event. */
int conv__windows_mark(struct conv *c, const char *name, size_t len);
/* A MALLOC of the heap or the mmap layer (event c->next_event). */
int conv__windows_alloc(struct conv *c, int64_t alloc_id, int64_t size);
/* The end of a block of the heap or the mmap layer (freed now, or live at the end). */
int conv__windows_close(struct conv *c, int64_t alloc_id, int64_t size, int64_t stack);
/* Tables mark_windows and mark_window_sites. */
int conv__windows_write(struct conv *c);

/* Starts packing the traces (and PyTorch's allocator pickles beside them) on other threads. */
int conv__compact_start(struct conv *c);
/* Counts a MALLOC or FREE (events row event_id) in site_stats and the series. */
int conv__compact_event(struct conv *c, const struct stream *s, int kind, int layer, int64_t size,
                        int64_t stack, int64_t alloc_id, int64_t event_id);
/* Counts a block live at the end in its site_stats row (cb->have_free 0; else nothing). */
int conv__live_at_end(struct conv *c, const struct closed_block *cb);
/* 1 for a layer the analyses cover by default (not the annotations, not a pool's regions). */
int conv__default_layer(int layer);
/* Live bytes of the default layers change by delta (trend's series). */
void conv__compact_live(struct conv *c, int64_t delta);
/* Trend's and decompose's time samples due before an event at ts. */
int conv__compact_sample(struct conv *c, int64_t ts);
/* A STEP row of process p was written: trend's live bytes of p at that step end, decompose's
 * live bytes per owner. */
int conv__compact_step(struct conv *c, const struct proc *p, int64_t ts);
/* Keeps the row of a closed block if the compact database has it. */
int conv__compact_block(struct conv *c, struct proc *p, const struct closed_block *cb);
/* Writes the kept blocks rows, in allocation order. */
int conv__compact_write_blocks(struct conv *c);
/* The computed tables (site_stats, trend's and decompose's series; both kinds of database). */
int conv__computed_write(struct conv *c);

/* convert_mmap.c: address-space reservations (docs/database.md, "The mmap layer"). */
struct conv_mm;
/* An MMAP_RESERVE, MMAP_COMMIT or MMAP_DECOMMIT record of s. */
int conv__mmap_record(struct conv *c, struct stream *s);
/* An MMAP_ALLOC of s in a process with reservations (p->mm). */
int conv__mmap_alloc(struct conv *c, struct stream *s);
/* munmap: ends the parts of reservations and commits in the range; *hit: 1 when there were. */
int conv__mmap_munmap(struct conv *c, const struct stream *s, int *hit);
/* Ends with a FREE event by func every live mmap block that starts in [addr, addr + len);
 * *nhits: how many (convert_match.c). */
int conv__mmap_end_blocks(struct conv *c, const struct stream *s, uint64_t addr, uint64_t len,
                          const char *func, size_t *nhits);
/* The layers and pools rows of the reservations' layer, when a process had any. */
int conv__mmap_write_layers(struct conv *c);

/* convert_usage.c: the usage monitor's samples (common/usage.h, docs/usage.md).
 * conv__usage_load reads every <trace dir>/usage-<pid>.msu (none: no rows; a damaged one: a
 * warning and none of its rows); conv__usage_until notes the live bytes of every sample taken before
 * time ts (pass 2 calls it before each event, and with INT64_MAX at the end);
 * conv__usage_write writes the usage_samples rows. 0 or a negative code. */
int conv__usage_load(struct conv *c);
void conv__usage_until(struct conv *c, int64_t ts);
int conv__usage_write(struct conv *c);
/* The index in c->procs of the image of pid running at monotonic time mono (the last one whose
 * agent started by then, else the first); -1 when pid wrote no trace. */
ptrdiff_t conv__proc_at(const struct conv *c, uint32_t pid, uint64_t mono);

/* convert_cow.c: copy-on-write traced to the blocks (common/usage_pages.h, docs/usage.md).
 * conv__cow_load reads the pagemap walks of <trace dir>/usage-<pid>.msp (after
 * conv__usage_load, which lists them); conv__cow_until counts, for each forked image whose fork
 * came before ts, its parent's live blocks in its walk (pass 2 calls it before each event, and
 * with INT64_MAX at its end, while the parents' live sets are those at the fork);
 * conv__cow_write writes usage_cow and usage_cow_stacks. 0 or a negative code. */
struct cow_child;
int conv__cow_load(struct conv *c);
int conv__cow_until(struct conv *c, int64_t ts);
int conv__cow_write(struct conv *c);
/* The usage_devices rows (convert_cuda.c). 0 or a negative code. */
int conv__devusage_write(struct conv *c);
void conv__cow_release(struct conv *c);
void conv__mmap_release(struct proc *p);

/* ---- convert_cuda.c: called by the passes ----------------------------------------------------- */

/* Loads <trace dir>/<pid>.pta.pickle into p->pta; a file that cannot be read is a warning. */
void conv__load_pta(struct conv *c, struct proc *p);
/* Fills s->pre with the PyTorch blocks and segments of device trace t older than the trace. */
int conv__pta_find_pre(struct conv *c, const struct ms_snapshot *sn, const struct ms_snap_trace *t,
                       struct stream *s);
/* Advances a PyTorch allocator stream to its next memory event; 1, or 0 at its end. */
int conv__pta_fill(struct conv *c, struct stream *s);
/* A CUDA driver record (CUDA_MEM, OOM, LAUNCH, USAGE); 0 or an error (set). */
int conv__on_cuda(struct conv *c, struct stream *s);
/* A PyTorch allocator event: blocks in pta:N, segments in pta_segment:N. */
int conv__on_pta(struct conv *c, struct stream *s);
/* The layers rows of the CUDA layers some event used (docs/cuda.md). */
int conv__write_cuda_layers(struct conv *c);

#endif
