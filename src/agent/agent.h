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

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
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
    int nested; /* 1: the signal-handler stream (takes locks with trylock only) */
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

/* Per-thread state. Lives in static TLS (initial-exec), so reading it never allocates. */
struct tstate {
    int guard;           /* depth of agent code running on this thread: 0 none, 1 the
                               thread's own, 2 a signal handler that interrupted it */
    int internal;        /* nonzero while the agent calls libc code that may allocate for
                               itself (pthread_getattr_np, backtrace ...): not recorded */
    int quiet;           /* nonzero while memscope's own Python code runs on this thread
                               (memscope__quiet): its allocations are not the program's and
                               are not recorded; frees still are (a program's block may die
                               there) */
    int step_record;     /* memscope__step() is writing its STEP record (recorded even in a
                            step --steps leaves out) */
    uint32_t generation; /* agent generation (bumped in a forked child) this state is for */
    uint32_t tid;
    struct stream s[2];  /* s[guard - 1] is the stream of the current agent call */
    struct pyshadow *py; /* this thread's Python shadow stack (python.c), NULL until used */
    uintptr_t stack_lo, stack_hi; /* this thread's stack, for safe frame-pointer walks */
    struct unwind_memo *memo;     /* the rules of this thread's last DWARF walk (unwind.c) */
    struct clock_anchor clk;      /* agent_now()'s anchor for this thread */
};

extern __thread struct tstate agent_tls __attribute__((tls_model("initial-exec")));

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
    volatile int recording; /* events are recorded (atomic reads) */
    volatile int paused;    /* --steps: the process's current step is not one to record */
    int clock_tsc;          /* agent_now() reads the TSC (set by clock_init, then constant) */
    int initialized;
    int broken;    /* recording stopped for good after an error */
    int no_follow; /* --no-follow: exec'd programs are not traced, on purpose (exec.c) */
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
    int (*volatile py_line_of)(void *frame); /* a frame's current line (_native), or NULL */
    volatile uint32_t py_line_gen;           /* bumped by each memscope__py_line_source */
    int unwind_dwarf;     /* 1: unwind with .eh_frame (unwind.c), 0: frame pointers */
    unsigned flags;       /* MS_TRACE_F_* */
    uint32_t next_serial; /* atomic */
    int file_lock;        /* spinlock for extending the file without fallocate (rare) */
    /* --steps (MEMSCOPE_STEPS): the step numbers whose events are recorded, and the process's
     * current step (from 1: the events before the first memscope_step() are step 1). Every
     * STEP record is written, so that the database numbers the steps as without the filter. */
    unsigned steps[MS_MAX_STEP_FILTER];
    unsigned nsteps; /* 0: every step */
    volatile unsigned step_no;
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
    uint64_t hash[UNWIND_IDS];
    uint32_t id[UNWIND_IDS];
};
struct unwind_ids *unwind_ids(struct tstate *t);

#endif
