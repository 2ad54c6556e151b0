/* agent.h: internals shared by the files of libmemscope.so, the LD_PRELOAD agent.
 *
 * The agent records every heap and anonymous-mmap event of the process it is loaded into,
 * straight into a file-backed shared mapping (writer.c), so that what it recorded survives
 * the death of the process. It must never crash, deadlock or change the behaviour of its host:
 * no stdio, no libc malloc and no lock on the recording path; on any write failure it stops
 * recording and says so once on stderr. */
#ifndef MS_AGENT_H
#define MS_AGENT_H

#include "trace/encode.h"
#include "trace/format.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "common/agent_api.h"
#include <sys/syscall.h>
#include <unistd.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define AGENT_API __attribute__((visibility("default")))

/* One stream of records: a thread's own, or the one its signal handlers use while the thread
 * is inside the agent. Each stream has its own chunks and thread serial in the file. */
struct stream {
    uint32_t serial;     /* process-unique stream number, never reused (0: none yet) */
    uint32_t seq;        /* next chunk sequence number */
    uint32_t chunk_size; /* size of the current chunk */
    uint8_t *chunk;      /* current chunk mapping, NULL when none */
    uint8_t *pos, *end;  /* free space of the current chunk */
    uint64_t last_ns;    /* last timestamp encoded in this stream */
    struct ms_enc_state enc;
    int nested;          /* 1: the signal-handler stream (takes locks with trylock only) */
    uint32_t ring_epoch; /* --trace-ring: the epoch of the current chunk (writer.c) */
};

/* A thread's TSC anchor (clock.c): while rdtsc() - tsc < span, CLOCK_MONOTONIC is
 * ns + ((rdtsc() - tsc) * mult >> 32). A per-thread seqlock against this thread's own signal
 * handlers: seq is odd while the anchor is rewritten. All zero (no anchor) in a new thread. */
struct clock_anchor {
    uint32_t seq;
    uint64_t tsc, ns;
    uint64_t mult; /* ns per tick << 32 */
    uint64_t span; /* ticks in about 1 ms; 0: no anchor */
};

/* Sampling mode (--sampling=BYTES, sample.c): a thread's bytes left until its next sample (a
 * countdown drawn from an exponential distribution of mean agent.sample_bytes), its generator,
 * and the exact counts of the heap allocations and frees it made since it last added them to
 * the trace header's (sample.c: flush), sampled or not. The three fields malloc updates are
 * not neighbours, so that the compiler does not pack their updates into vector instructions
 * (six instructions instead of three). */
struct sampler {
    int64_t left;     /* bytes until the next sample; <= 0: the next allocation is looked at */
    uint64_t rng;     /* splitmix64 state; 0: not seeded yet (the thread's first allocation) */
    uint64_t allocs;  /* heap allocations (realloc counts as a free and an allocation) */
    uint64_t frees;   /* heap frees */
    uint64_t bytes;   /* the allocations' requested bytes */
    uint32_t samples; /* allocations sampled: every 16th flushes the counts */
    uint32_t slot;    /* its index in sample.c's registry + 1; 0: not in it */
};

/* Per-thread state. Lives in static TLS (initial-exec), so reading it never allocates. */
struct tstate {
    int guard;       /* depth of agent code running on this thread: 0 none, 1 the
                               thread's own, 2 a signal handler that interrupted it */
    int step_record; /* memscope__step() is writing its STEP record (recorded even in a
                            step --steps leaves out) */
    /* The next three are neighbours, in this order, from an 8-byte boundary: the inline halves
     * of malloc and free test two of them with one comparison (tstate_word()). */
    uint32_t smp_started; /* sampling mode: sample_thread_start() ran (1): generator seeded,
                             thread registered (sample.c) */
    int internal;         /* nonzero while the agent calls libc code that may allocate for
                               itself (pthread_getattr_np, backtrace ...): not recorded */
    int quiet;            /* nonzero while memscope's own Python code runs on this thread
                               (memscope__quiet): its allocations are not the program's and
                               are not recorded; frees still are (a program's block may die
                               there) */
    uint32_t generation;  /* agent generation (bumped in a forked child) this state is for */
    uint32_t tid;
    struct stream s[2];  /* s[guard - 1] is the stream of the current agent call */
    struct pyshadow *py; /* this thread's Python shadow stack (python.c), NULL until used */
    uintptr_t stack_lo, stack_hi; /* this thread's stack, for safe frame-pointer walks */
    struct unwind_memo *memo;     /* the rules of this thread's last DWARF walk (unwind.c) */
    struct clock_anchor clk;      /* agent_now()'s anchor for this thread */
    struct sampler smp;           /* sampling mode's countdown and exact counts (sample.c) */
};

extern __thread struct tstate agent_tls __attribute__((tls_model("initial-exec")));

/* After a dl* call of the agent's own that failed (dlopen of a library that is not loaded, dlsym
 * of a symbol that is not there): the C library keeps the thread's error, a small record and its
 * message both from malloc, until the thread's next dl* call frees them, in the program, as
 * blocks it never allocated (two unmatched frees in every program that called dlopen or dlsym).
 * Two dlerror() calls hand both back at once, as the agent's own: the first marks the message
 * read, the second frees it. The program had no error pending: the failed call replaced it. */
static inline void agent_dl_forget_error(void)
{
    agent_tls.internal++;
    (void)dlerror();
    (void)dlerror();
    agent_tls.internal--;
}

/* A thread's Python call stack as the memscope Python extension reports it (python.c): frame
 * ids and current lines, outermost first. Lives in its own anonymous mapping, not in TLS. */
#define PY_MAX_DEPTH 1024
struct pyshadow {
    uint32_t depth;                   /* calls deep; entries beyond PY_MAX_DEPTH are counted only */
    uint32_t frames[PY_MAX_DEPTH][2]; /* [i][0] frame id, [i][1] current line */
    void *frame[PY_MAX_DEPTH];        /* the frame object, or NULL (memscope__py_call_frame) */
    uint32_t frames_gen;              /* agent.py_line_gen when frame[] was last written */
};

/* What a child made without glibc's fork() must not inherit: a private anonymous page marked
 * MADV_WIPEONFORK, which the kernel gives every new process (fork, vfork-less clone, clone3,
 * whoever issued it) as zeros. Its generation is agent.generation, and 0 there means "this
 * process was cloned and no atfork handler ran": the next event starts the child's own trace
 * instead of writing into the parent's shared chunks (agent_unseen_child). */
struct agent_live {
    volatile uint32_t generation; /* agent.generation; 0 in a child nobody set up yet */
    int busy;                     /* agent_unseen_child() is setting this process up */
};

/* Global configuration and state, set up by agent_init(). */
struct agent_global {
    volatile int recording; /* events are recorded (atomic reads): 0 or agent_recording_on() */
    volatile int paused;    /* --steps: the process's current step is not one to record */
    int clock_tsc;          /* agent_now() reads the TSC (set by clock_init, then constant) */
    int initialized;
    int broken;    /* recording stopped for good after an error */
    int no_follow; /* --no-follow: exec'd programs are not traced, on purpose (exec.c) */
    int injected;  /* loaded by memscope attach (inject.c): config from memscope__inject_start */
    int sandboxed; /* a seccomp filter the agent cannot live with is coming (sandbox.c): no
                      system call of the agent's own from then on */
    int fd;        /* trace file */
    uint64_t err_dev, err_ino; /* memscope's stderr (MEMSCOPE_STDERR): fd 2 gets the agent's
                                  messages only while it is still that file */
    int err_known;             /* MEMSCOPE_STDERR was given: 1; absent (no memscope run): 0 */
    uint64_t fd_dev, fd_ino;   /* what fd must still be: a program that closes every fd and
                                 opens another file under the same number is not written to */
    struct ms_trace_file_header *hdr; /* shared mapping of the file header */
    uint32_t generation;              /* of the trace file; bumped in every child (from 1) */
    struct agent_live *live;          /* never NULL: the wipe-on-fork page, or a static one */
    int live_wipes;                   /* live is that page (MADV_WIPEONFORK took) */
    unsigned depth;                   /* native stack depth, 0 = no stacks */
    unsigned py_depth;                /* Python stack depth (--call-stack=python:N), 0 = none */
    volatile int py_trace;            /* the Python tracer is on: calls and returns are recorded */
    int (*volatile py_line_of)(void *frame, uint32_t *callee); /* a frame's line (_native) */
    volatile uint32_t py_line_gen; /* bumped by each memscope__py_line_source */
    int unwind_dwarf;              /* 1: unwind with .eh_frame (unwind.c), 0: frame pointers */
    unsigned flags;                /* MS_TRACE_F_* */
    uint32_t next_serial;          /* atomic */
    int file_lock;                 /* spinlock for extending the file without fallocate (rare) */
    /* --steps (MEMSCOPE_STEPS): the step numbers whose events are recorded, and the process's
     * current step (from 1: the events before the first memscope_step() are step 1). Every
     * STEP record is written, so that the database numbers the steps as without the filter. */
    unsigned steps[MS_MAX_STEP_FILTER];
    unsigned nsteps; /* 0: every step */
    volatile unsigned step_no;
    uint64_t sample_bytes; /* --sampling: mean bytes between samples; 0: every event (exact) */
    uint64_t max_trace;    /* --max-trace-size: the trace file's cap in bytes; 0: none */
    /* --trace-ring (writer.c): the trace's disk usage cap in bytes (0: no ring); the length of
     * an epoch; the newest epoch begun (atomic); the epoch whose PROCESS record was written */
    uint64_t ring, ring_epoch_len;
    uint32_t ring_epoch, ring_proc_epoch;
    char dir[4096];
};

extern struct agent_global agent;

/* writer.c: writer_reserve()'s path when the stream has no chunk yet or no room left in it
 * (takes a new chunk). */
uint8_t *writer_reserve_slow(struct tstate *t, struct stream *s, size_t n);

/* Returns room for n bytes in stream s of thread t, or NULL (recording stopped, or a nested
 * stream could not take a lock its thread holds: the event is then counted as lost). The
 * common case, room in the current chunk, is inline: every event takes this path. */
static inline uint8_t *writer_reserve(struct tstate *t, struct stream *s, size_t n)
{
    if (likely(s->chunk && t->generation == agent.live->generation &&
               (size_t)(s->end - s->pos) >= n))
        return s->pos;
    return writer_reserve_slow(t, s, n);
}

/* Publishes the bytes written up to end: one release store, after which a reader (or the
 * converter after a crash) sees the record whole. */
static inline void writer_commit(struct stream *s, uint8_t *end)
{
    struct ms_trace_chunk_header *ch = (struct ms_trace_chunk_header *)s->chunk;
    s->pos = end;
    s->last_ns = s->enc.prev_ns;
    __atomic_store_n(&ch->used, (uint32_t)(end - s->chunk - MS_TRACE_CHUNK_HEADER_SIZE),
                     __ATOMIC_RELEASE);
}

void writer_lost(void); /* writer.c: counts an event that could not be recorded */

/* agent.c: writes one EXTENSION record ext (n integers v, string str or NULL; with
 * want_stack, v[n - 1] becomes the caller's stack id) for the calling thread. 0, or -1 when
 * not recording. */
int agent_record_ext(int ext, const uint64_t *v, int n, const char *str, void *fp, int want_stack);

/* inject.c: the configuration value of name: from the block memscope attach passed to
 * memscope__inject_start when there is one, else from the environment (getenv). */
const char *agent_getenv(const char *name);
/* inject.c: in a child forked while memscope attach records: the child is not recorded (its
 * copy of the trace file's mappings and descriptor is let go). */
void inject_after_fork_child(void);
/* inject.c: whether memscope attach, which started this session, has died without ending it;
 * then recording has been stopped and the trace file let go (1). Called when a chunk is taken. */
int inject_orphaned(void);
/* agent.c: starts recording with the configuration agent_getenv() gives; 0, -EINVAL (no trace
 * directory: idle) or -errno (said). agent_restart(): a later memscope attach session's new
 * trace file (a new generation, as in a forked child); 0 or -errno. */
int agent_start(void);
int agent_restart(void);

/* exec.c: looks up the real exec and posix_spawn functions (at start: not in a forked child). */
void agent_exec_init(void);

/* agent.c: removes the agent from the environment (LD_PRELOAD, MEMSCOPE_TRACE_DIR) so that
 * programs this image execs are not traced (--no-follow, or a seccomp filter: sandbox.c). */
void agent_stop_following(void);

/* agent.c: sets up a child that was cloned without glibc's fork() (its first event finds
 * agent.live->generation 0): what the atfork handler does after fork(). */
void agent_unseen_child(void);

/* Enters the agent on this thread and returns the stream to record into, or NULL when the
 * event must not be recorded (recording off). A signal handler that interrupts the agent on
 * its own thread gets the thread's second stream; deeper nesting is counted as lost. */
static inline struct stream *agent_enter(struct tstate **tp)
{
    if (!__atomic_load_n(&agent.recording, __ATOMIC_RELAXED)) {
        if (unlikely(agent.broken) && agent.live->generation)
            writer_lost(); /* counted in the header, which stays mapped */
        return NULL;
    }
    struct tstate *t = &agent_tls;
    int g = t->guard;
    if (unlikely(t->internal))
        return NULL; /* the agent's own allocation */
    if (unlikely(!agent.live->generation)) {
        if (g)
            return NULL;
        agent_unseen_child(); /* before anything of this event is written */
    }
    /* --steps: a step not to record (after a cloned child's set-up, which starts its steps) */
    if (unlikely(__atomic_load_n(&agent.paused, __ATOMIC_RELAXED)) && !t->step_record)
        return NULL;
    if (unlikely(g >= 2)) {
        writer_lost();
        return NULL;
    }
    t->guard = g + 1;
    *tp = t;
    struct stream *s = &t->s[g];
    s->nested = g;
    return s;
}

static inline void agent_leave(struct tstate *t)
{
    t->guard--;
}

/* agent.recording's value when on: AGENT_RECORDING_SAMPLED in sampling mode, so that the
 * inline halves of malloc and free test the mode and the state with one comparison. Every
 * reader of agent.recording takes it as a truth value. */
#define AGENT_RECORDING_ON 1
#define AGENT_RECORDING_SAMPLED 3
static inline int agent_recording_on(void)
{
    return agent.sample_bytes ? AGENT_RECORDING_SAMPLED : AGENT_RECORDING_ON;
}

/* Whether an interposer should go on to record: recording, or stopped after an error (then
 * agent_enter() counts the event as lost). */
static inline int agent_active(void)
{
    return agent.recording | agent.broken;
}

/* agent.c: makes the thread-exit hook run for the calling thread (once it has a chunk). */
void agent_thread_register(void);

/* writer.c */
int writer_open(void);              /* opens this image's trace file; 0 or -errno */
void writer_after_fork_child(void); /* drops the parent's file and mappings, opens a new one */
void writer_thread_exit(struct tstate *t);
/* Counts an event that could not be recorded. */
void writer_lost(void);
void writer_fail(const char *what, int err);
void writer_process_record(void);
/* python.c, --trace-ring: writes again into stream s the PYFRAME records of the frames of
 * py[0..2*npy) (id, line pairs) last written in an older epoch than s's chunk. */
void python_redescribe(struct tstate *t, struct stream *s, const uint32_t *py, unsigned npy);
/* --trace-ring: whether a description made in epoch e must be written again before stream s
 * uses it (the chunk s writes to is in a later epoch: e may be dropped before it). */
static inline int writer_stale(const struct stream *s, uint32_t e)
{
    return agent.ring && e < s->ring_epoch;
}

/* stacks.c */
int stacks_init(void); /* 0 or -errno */
void stacks_reset_after_fork(void);
/* Captures the caller's stack starting at frame pointer fp and returns its id (0: none),
 * writing STACK and MODULE records for what is new. */
uint32_t stacks_capture(struct tstate *t, struct stream *s, void *fp);
void modules_scan(struct tstate *t, struct stream *s);
/* After a dlclose: forgets the modules no longer loaded (and, when stacks went through them,
 * every stack id, so that the same addresses in a library loaded there later are new stacks). */
void modules_after_dlclose(void);
/* How many of pcs[0..n) (return addresses, innermost first), from the first on, lie in the
 * executable code of a known module: the frames of a walk that may have read words that are no
 * return addresses (frame pointers read in code built without them). */
unsigned stacks_code_frames(const uint64_t *pcs, unsigned n);
/* The id of the stack pcs[0..n) (return addresses, innermost first), adding it when new. */
uint32_t stacks_intern(struct tstate *t, struct stream *s, const uint64_t *pcs, unsigned n);

/* sample.c: sampling mode (docs/production.md, "Sampling"). Sampled heap blocks' addresses are
 * kept in a set, so that their frees are recorded and nothing else's is: a table of 2^bits
 * words (from 2^10, 8 KiB: every free looks it up, so it should sit in the nearest caches)
 * inside one of two mappings of SAMPLE_SLOTS words, mapped at the first sample and never
 * unmapped (the agent's memory stays bounded). Lookups take no lock (open addressing, linear
 * probing; a free leaves a tombstone, or empties the end of its cluster); inserts, removals and
 * the rebuilds (into the other mapping: larger when a quarter live, the same size when half
 * used, to drop tombstones) take a spinlock (with the thread's guard raised: a signal handler
 * there only tries it), and a rebuild makes seq odd while it runs, so that a lookup it
 * overlapped looks again under the lock, or, from a signal handler that cannot take it,
 * answers "maybe" and the free is recorded: recording the free of a block that was not sampled
 * is harmless (the converter drops a free it cannot match), missing a sampled one is not. */
#define SAMPLE_SLOTS_LOG2 18
#define SAMPLE_SLOTS (1u << SAMPLE_SLOTS_LOG2)
#define SAMPLE_MIN_LOG2 10
#define SAMPLE_EMPTY 0u
#define SAMPLE_TOMB 1u
struct sample_set {
    uint64_t *tab; /* the table lookups read (atomic); NULL until the first sample */
    uint32_t bits; /* it has 2^bits slots (atomic; read with tab under seq) */
    uint32_t seq;  /* odd while a rebuild moves entries (atomic) */
    int lock;      /* inserts, removals, rebuilds */
    uint32_t live; /* addresses held */
    uint32_t used; /* live + tombstones */
    uint64_t *bufs[2];
    int full_said; /* the set was full once: said on stderr */
};
extern struct sample_set sample_set;

void sample_init(void); /* agent_init: MEMSCOPE_SAMPLING and MEMSCOPE_SAMPLING_SEED */
/* The countdown ran out (or the thread is new): whether the allocation p of n bytes is sampled
 * (then p is in the set and the caller records it). */
int sample_alloc_slow(struct tstate *t, const void *p, size_t n);
/* p may be a sampled block: removes it from the set; 1 when its free must be recorded. */
int sample_free_slow(const void *p);
/* A thread's first allocation or free in sampling mode: seeds its generator, draws its first
 * countdown, and registers it (its counts are added to the header's when it exits, or at
 * process exit while it still runs). */
void sample_thread_start(struct tstate *t);
/* At thread exit: adds its counts to the header's and takes it out of the registry. */
void sample_thread_exit(struct tstate *t);
/* At process exit: adds every registered thread's counts to the header's. */
void sample_flush_all(void);
void sample_after_fork_child(struct tstate *t); /* the child's counts start at zero */

/* The filter of sampled addresses that an unsampled free reads instead of the set
 * (sample.c): SAMPLE_MARKS counters, each the number of live sampled blocks whose address
 * hashes to it (sample_mark()), changed under the set's lock, sticky at 255. A free whose
 * counter is 0 was not sampled: one load from a static array, no lock, no retry (the block was
 * sampled, if at all, before malloc returned it, so before the program could hand it to the
 * thread that frees it). A counter above 0 sends the free to the set's lookup, which is exact.
 * 16 KiB, like the set's first table small enough to stay in the nearest caches; with L live
 * sampled blocks a free goes to the lookup with probability about L / 16384 (more for blocks
 * of pages, whose addresses share their low bits: those are mostly sampled anyway). */
#define SAMPLE_MARKS_LOG2 14
#define SAMPLE_MARKS (1u << SAMPLE_MARKS_LOG2)
extern uint8_t sample_marks[SAMPLE_MARKS];

static inline uint32_t sample_hash(uintptr_t p, uint32_t bits)
{
    return (uint32_t)(((uint64_t)p >> 4) * 0x9e3779b97f4a7c15ull >> (64 - bits));
}

/* The counter of p: bits 4 to 17 of its address (heap blocks are 16-byte aligned and spread
 * over the heap; two instructions, where a multiplicative hash takes five). */
static inline uint8_t *sample_mark(const void *p)
{
    return &sample_marks[((uintptr_t)p >> 4) & (SAMPLE_MARKS - 1)];
}

/* Two neighbouring 4-byte fields of struct tstate read as one 8-byte word (one load, one
 * comparison): &t->internal gives internal and quiet (0: the program's allocation),
 * &t->smp_started gives smp_started and internal (tstate_started_word(): a started thread,
 * not in the agent). */
static inline uint64_t tstate_word(const void *first)
{
    uint64_t w;
    memcpy(&w, first, sizeof w);
    return w;
}

static inline uint64_t tstate_started_word(void)
{
    const struct {
        uint32_t started;
        int internal;
    } k = {1, 0};
    return tstate_word(&k);
}

_Static_assert(offsetof(struct tstate, smp_started) % 8 == 0 &&
                   offsetof(struct tstate, internal) == offsetof(struct tstate, smp_started) + 4 &&
                   offsetof(struct tstate, quiet) == offsetof(struct tstate, internal) + 4,
               "tstate_word(): smp_started, internal and quiet are neighbours");

/* How the inline half of malloc and free (sample_alloc_skip(), sample_free_skip()) left an
 * event for the recording half: */
enum {
    SAMPLE_UNCOUNTED = 0, /* not counted: exact mode, not recording, the agent's own ... */
    SAMPLE_COUNTED = 1,   /* counted: the countdown ran out, or the free's mark is set */
    SAMPLE_SKIP = 2,      /* counted, not sampled: nothing more to do */
};

/* Sampling mode, malloc's inline half: the per-thread byte countdown. Counts an allocation of
 * n bytes and returns SAMPLE_SKIP when it is not sampled; the unsampled case is a test of the
 * mode, of the thread's flags, two additions and a subtraction. */
static inline int sample_alloc_skip(size_t n)
{
    if (__atomic_load_n(&agent.recording, __ATOMIC_RELAXED) != AGENT_RECORDING_SAMPLED)
        return SAMPLE_UNCOUNTED; /* exact mode, not recording, or stopped by an error */
    struct tstate *t = &agent_tls;
    if (unlikely(tstate_word(&t->internal) != 0))
        return SAMPLE_UNCOUNTED; /* internal or quiet: not the program's (the recording path) */
    t->smp.allocs++;
    t->smp.bytes += n;
    t->smp.left -= (int64_t)n;
    return likely(t->smp.left > 0) ? SAMPLE_SKIP : SAMPLE_COUNTED;
}

/* Takes back what sample_alloc_skip() counted for an allocation of n bytes that failed. */
static inline void sample_alloc_uncount(size_t n)
{
    struct tstate *t = &agent_tls;
    t->smp.allocs--;
    t->smp.bytes -= n;
    t->smp.left += (int64_t)n;
}

/* Sampling mode: counts an allocation of n bytes at p and returns whether it is to be recorded
 * (always 1 in exact mode). The interposers other than malloc, whose calls are fewer. */
static inline int sample_alloc(const void *p, size_t n)
{
    if (likely(!agent.sample_bytes))
        return 1;
    struct tstate *t = &agent_tls;
    if (unlikely(t->internal | t->quiet))
        return 1; /* not the program's: the recording path drops it */
    t->smp.allocs++;
    t->smp.bytes += n;
    t->smp.left -= (int64_t)n;
    if (likely(t->smp.left > 0))
        return 0;
    return sample_alloc_slow(t, p, n);
}

/* Sampling mode: whether p, whose free is counted, was sampled (is in the set: then it is
 * taken out, and its free must be recorded), or may have been. */
static inline int sample_free_lookup(const void *p)
{
    uint32_t seq = __atomic_load_n(&sample_set.seq, __ATOMIC_ACQUIRE);
    const uint64_t *tab = __atomic_load_n(&sample_set.tab, __ATOMIC_ACQUIRE);
    if (!tab)
        return 0; /* nothing sampled yet */
    /* (tab and bits may be of two tables while a rebuild runs: every index stays inside the
     * mapping, and seq tells) */
    uint32_t bits = __atomic_load_n(&sample_set.bits, __ATOMIC_RELAXED);
    if (unlikely(bits - 1 >= SAMPLE_SLOTS_LOG2))
        return sample_free_slow(p);
    uint32_t mask = (1u << bits) - 1, i = sample_hash((uintptr_t)p, bits);
    for (uint32_t k = 0; k <= mask; k++, i = (i + 1) & mask) {
        uint64_t v = __atomic_load_n(&tab[i], __ATOMIC_RELAXED);
        if (v == (uintptr_t)p)
            return sample_free_slow(p);
        if (v == SAMPLE_EMPTY)
            break;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (unlikely((seq & 1) || __atomic_load_n(&sample_set.seq, __ATOMIC_RELAXED) != seq))
        return sample_free_slow(p); /* a rebuild moved entries meanwhile: look again */
    return 0;
}

/* Sampling mode, free's inline half: counts the free of p and returns SAMPLE_SKIP when its
 * mark says it was not sampled (most frees: no lookup in the set). */
static inline int sample_free_skip(const void *p)
{
    if (__atomic_load_n(&agent.recording, __ATOMIC_RELAXED) != AGENT_RECORDING_SAMPLED)
        return SAMPLE_UNCOUNTED;
    struct tstate *t = &agent_tls;
    if (unlikely(tstate_word(&t->smp_started) != tstate_started_word()))
        return SAMPLE_UNCOUNTED; /* the agent's own; the thread's first event (sample_free) */
    t->smp.frees++;
    return likely(!__atomic_load_n(sample_mark(p), __ATOMIC_RELAXED)) ? SAMPLE_SKIP
                                                                      : SAMPLE_COUNTED;
}

/* Sampling mode: counts a free of p and returns whether it is to be recorded (p was sampled,
 * or may have been); always 1 in exact mode. */
static inline int sample_free(const void *p)
{
    if (likely(!agent.sample_bytes))
        return 1;
    struct tstate *t = &agent_tls;
    if (unlikely(t->internal))
        return 1;
    t->smp.frees++;
    if (unlikely(!t->smp_started))
        sample_thread_start(t);
    if (likely(!__atomic_load_n(sample_mark(p), __ATOMIC_RELAXED)))
        return 0;
    return sample_free_lookup(p);
}

/* attach.c: makes every loaded object except the agent, the dynamic loader and the object
 * holding address skip call repl[i] where it calls the function names[i] now bound to orig[i]
 * (its GOT slots, as memscope__attach does for malloc & co.). Every name of a set starts with
 * the same letter. Returns the number of slots written. */
struct got_set {
    int n;
    const char *const *names;
    const uintptr_t *orig, *repl;
    uintptr_t skip;
};
int got_redirect(const struct got_set *set);
/* dlopen(file, mode) as glibc would do it for a call from caller (its DT_RPATH / DT_RUNPATH). */
void *agent_dlopen_as_caller(const char *file, int mode, void *caller);

/* agent.c: the annotation API (include/memscope.h), also called by nvtx.c */
int memscope__mark(const char *msg);
int memscope__range_push(const char *name);
int memscope__range_pop(void);
int memscope__pool_alloc(const char *pool, const void *p, size_t n);
int memscope__pool_free(const char *pool, const void *p);
int memscope__pool_reserve(const char *pool, const void *p, size_t n);
int memscope__pool_release(const char *pool, const void *p);

/* cuda.c */
void cuda_init(void); /* at agent start: hooks a CUDA driver already loaded */
void cuda_after_fork_child(void);
void cuda_sample_usage(void); /* NVML's view of the devices, at steps and exit */
extern void *(*ms_real_dlsym)(void *, const char *);

/* Raw syscalls: the agent's own mappings must not show up as traced mmap events (the
 * agent's mmap symbol is its own interposer). They set errno like libc does. */
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    return r == -1 ? MAP_FAILED : (void *)r;
}

static inline void sys_munmap(void *addr, size_t len)
{
    syscall(SYS_munmap, addr, len);
}

/* Spinlocks for the rare shared paths (taking a chunk, scanning modules): held for a few
 * syscalls at most. A signal handler's nested stream only ever tries them. */
static inline void spin_lock(int *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED))
            __builtin_ia32_pause();
}

static inline int spin_trylock(int *l)
{
    return !__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE);
}

static inline void spin_unlock(int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* clock.c */
/* Decides whether agent_now() may read the TSC (no_tsc: MEMSCOPE_NO_TSC=1 says no) and takes
 * the first calibration pair. Called once by agent_init, before anything is recorded. */
void clock_init(int no_tsc);
void clock_after_fork_child(void);
uint64_t clock_mono(void);                       /* clock_gettime(CLOCK_MONOTONIC) in ns */
uint64_t clock_now_slow(struct clock_anchor *a); /* agent_now() past a's span */

/* Returns CLOCK_MONOTONIC in ns, without a syscall: from the TSC and this thread's anchor when
 * it can (clock.c explains the design and its error bound), else from clock_gettime (vDSO).
 * Safe in a signal handler that interrupted agent_now() on the same thread. Timestamps of one
 * thread may step back by a few ns at a re-anchor; the encoder clamps them (ms_put_ts). */
static inline uint64_t agent_now(void)
{
#if defined(__x86_64__)
    if (likely(agent.clock_tsc)) {
        struct clock_anchor *a = &agent_tls.clk;
        uint32_t seq = __atomic_load_n(&a->seq, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        uint64_t d = __builtin_ia32_rdtsc() - __atomic_load_n(&a->tsc, __ATOMIC_RELAXED);
        int ok = d < __atomic_load_n(&a->span, __ATOMIC_RELAXED);
        uint64_t ns = __atomic_load_n(&a->ns, __ATOMIC_RELAXED) +
                      ((d * __atomic_load_n(&a->mult, __ATOMIC_RELAXED)) >> 32);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (likely(ok && !(seq & 1) && __atomic_load_n(&a->seq, __ATOMIC_RELAXED) == seq))
            return ns;
        return clock_now_slow(a);
    }
#endif
    return clock_mono();
}

/* Tells the user "memscope agent: <msg>[: <detail>]": on fd 2 when it is still memscope's own
 * stderr, else appended to <trace dir>/<pid>.msg, which memscope run prints after the program
 * (a program that reopened fd 2 as its own file never finds the agent's words in it). */
void agent_say(const char *msg, const char *detail);

/* Whether descriptor fd is still the file (device, inode) the agent opened or was given. */
int agent_fd_is(int fd, uint64_t dev, uint64_t ino);

/* The stack hash, one return address at a time (hash_stack() is the whole of it). A step is an
 * xor and a multiplication by an odd constant: for a given return address it maps hashes one to
 * one, so two stacks of the same depth that differ in one frame never share a hash, and it is
 * the shortest chain of dependent instructions per frame (the walk's other chain is the frame
 * pointer's loads). Return addresses differ mostly in their low bits, which the multiplications
 * carry upwards; hash_end() mixes the high bits back down, since the table is indexed by the
 * low ones. */
#define HASH_SEED 0x9e3779b97f4a7c15ull
static inline uint64_t hash_step(uint64_t h, uint64_t pc)
{
    return (h ^ pc) * 0xff51afd7ed558ccdull;
}

static inline uint64_t hash_end(uint64_t h, unsigned n)
{
    h = hash_step(h, n);
    h ^= h >> 33; /* the finalizer of MurmurHash3 */
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h ? h : 1;
}

/* unwind.c: the DWARF (.eh_frame) unwinder. unwind_add_module() registers a module's
 * .eh_frame_hdr (stacks.c's module scan); unwind_cfi() walks from the interposer's frame fp0
 * inside the stack [lo, hi), storing up to max return addresses in pcs and their hash_stack()
 * in *hash; memo (NULL in a signal handler's walk) holds the rules the thread used lately. */
struct dl_phdr_info;
int unwind_init(void);
void unwind_add_module(const struct dl_phdr_info *info, uintptr_t lo, uintptr_t hi);
void unwind_forget(void);
/* Forgets the module at [lo, hi) (closed: its .eh_frame is gone). */
void unwind_remove_module(uintptr_t lo, uintptr_t hi);
/* Whether the walk that used memo last ended at last_pc, in no known module, and no module scan
 * was made for that pc yet (then it counts as made: a library loaded since may hold it). */
int unwind_should_rescan(struct unwind_memo *m, uintptr_t last_pc);
unsigned unwind_cfi(void *fp0, uintptr_t lo, uintptr_t hi, uint64_t *pcs, unsigned max,
                    struct unwind_memo *memo, uint64_t *hash);
/* Whether return address ra lies in the executable code (a PT_LOAD segment with PF_X) of a
 * module with an .eh_frame_hdr: a cache probe, memo's (may be NULL) first. 0 before
 * unwind_init(). Sets memo's "ended in no known module" mark for unwind_should_rescan(). */
int unwind_is_code(struct unwind_memo *memo, uintptr_t ra);
/* The calling thread's rule memo (mapped on first use; NULL when it cannot be), and its
 * release at thread exit. */
struct unwind_memo *unwind_memo(struct tstate *t);
void unwind_memo_free(struct tstate *t);
/* stacks.c's per-thread cache of stack ids, in the same mapping: the stacks a thread used
 * lately, found without probing the shared table. gen: stacks.c's generation (a forked
 * child's ids are new). */
#define UNWIND_IDS 4096
struct unwind_ids {
    uint32_t gen;
    uint32_t epoch; /* --trace-ring: the stream epoch the ids were described for */
    uint64_t hash[UNWIND_IDS];
    uint32_t id[UNWIND_IDS];
};
struct unwind_ids *unwind_ids(struct tstate *t);

#endif
