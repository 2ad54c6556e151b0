/* agent.c: the interposers of libmemscope.so and its life cycle (init, fork, thread exit).
 *
 * Loaded with LD_PRELOAD by `memscope run`; configured by the environment the CLI sets:
 *   MEMSCOPE_TRACE_DIR  directory for <pid>.<n>.mst (required; without it the agent is idle)
 *   MEMSCOPE_DEPTH      native stack depth, 0..1000 (0 = no stacks)
 *   MEMSCOPE_PY_DEPTH   Python stack depth, 0..1000 (fed by the memscope Python extension)
 *   MEMSCOPE_UNWIND     dwarf (default) or fp
 *   MEMSCOPE_DEFERRED   1: record nothing until memscope_start()
 *   MEMSCOPE_NO_FOLLOW  1: do not trace programs this image execs
 *   MEMSCOPE_NO_TSC     1: timestamps from clock_gettime, never from the TSC (clock.c)
 *   MEMSCOPE_STACKS_AUTO 1: no --call-stack was given: a Python interpreter image takes no
 *                       native stack (its default is the Python one), anything else keeps it
 * Every interposer calls the real function and records the event afterwards (a free before),
 * unless this thread is already inside the agent (guard) or recording is off. The real
 * functions are found with dlsym(RTLD_NEXT); allocations dlsym itself makes while we look them
 * up are served from a static pool and never freed. */
#include "agent.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

__thread struct tstate agent_tls __attribute__((tls_model("initial-exec")));
static struct agent_live live_static = {1, 0};
struct agent_global agent = {.fd = -1, .generation = 1, .live = &live_static};

/* What real.malloc and real.free point to until the C library's functions are known (the
 * first call resolves them): malloc and free jump through the pointers without testing them. */
static void *malloc_unresolved(size_t n);
static void free_unresolved(void *p);

static struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    void *(*mmap64)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    int (*mprotect)(void *, size_t, int);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    int (*dlclose)(void *);
} real = {.malloc = malloc_unresolved, .free = free_unresolved};
static int resolved; /* resolve() ran: every pointer of real is the C library's (or NULL) */

/* Bootstrap pool for allocations made while dlsym runs. */
static char boot_pool[64 << 10] __attribute__((aligned(64)));
static size_t boot_used;
static int resolving;

static int in_boot_pool(const void *p)
{
    return (uintptr_t)p - (uintptr_t)boot_pool < sizeof boot_pool; /* one comparison */
}

static void *boot_alloc(size_t n)
{
    size_t off = __atomic_fetch_add(&boot_used, (n + 63) & ~(size_t)63, __ATOMIC_RELAXED);
    if (off + n > sizeof boot_pool)
        return NULL;
    return boot_pool + off;
}

static void resolve(void)
{
    if (resolved)
        return;
    resolving = 1;
    /* first: the agent's dlsym (cuda.c) forwards to it, and R() below goes through it */
    if (!ms_real_dlsym)
        ms_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!ms_real_dlsym)
        ms_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#define R(name) real.name = (__typeof__(real.name))dlsym(RTLD_NEXT, #name)
    R(calloc);
    R(malloc);
    R(realloc);
    R(posix_memalign);
    R(aligned_alloc);
    R(memalign);
    R(valloc);
    R(pvalloc);
    R(mmap);
    R(mmap64);
    R(munmap);
    R(mprotect);
    R(mremap);
    R(dlclose);
    R(free);
#undef R
    resolving = 0;
    resolved = 1;
}

static __attribute__((noinline)) void record_alloc(int type, const void *p, size_t n, void *fp,
                                                   uint64_t ns)
{
    if (agent_tls.quiet && type >= MS_REC_HEAP_ALLOC && type < MS_REC_HEAP_ALLOC + MS_FN_HEAP_COUNT)
        return; /* memscope's own Python code allocating (memscope__quiet) */
    struct tstate *t;
    struct stream *s = agent_enter(&t);
    if (!s)
        return;
    uint32_t sid = agent.depth || agent.py_depth ? stacks_capture(t, s, fp) : 0;
    uint8_t *w = writer_reserve(t, s, MS_REC_MAX_EVENT);
    if (w)
        writer_commit(s,
                      ms_enc_alloc(w, &s->enc, type, ns ? ns : agent_now(), (uintptr_t)p, n, sid));
    agent_leave(t);
}

static __attribute__((noinline)) void record_free(int type, const void *p, size_t n, uint64_t ns)
{
    struct tstate *t;
    struct stream *s = agent_enter(&t);
    if (!s)
        return;
    uint8_t *w = writer_reserve(t, s, MS_REC_MAX_EVENT);
    if (w) {
        uint8_t *e = type == MS_REC_MUNMAP ? ms_enc_munmap(w, &s->enc, ns, (uintptr_t)p, n)
                                           : ms_enc_free(w, &s->enc, ns, (uintptr_t)p);
        writer_commit(s, e);
    }
    agent_leave(t);
}

/* ---- before the agent's constructor ---- */

/* Allocations made before the agent's constructor ran (a library constructor initialized
 * before it: libselinux's, libstdc++'s emergency pool, libLLVM's hundreds of option objects)
 * are kept here, with their time and native stack, and written to the trace when the agent
 * starts: recording begins at the first allocation of the process. Nothing here calls into the
 * allocator, takes a lock or touches the agent's state: an allocator may call us from inside
 * its own initialization. Main thread only (constructors run there).
 *
 * Why keep rather than start the agent first: the loader runs the constructors of the
 * program's own libraries (DT_NEEDED) before those of LD_PRELOAD objects, and a constructor's
 * priority orders it only within its own object; so whatever the agent does, a library's
 * constructor may allocate before it. The first EARLY_STATIC events go into static memory,
 * later ones into chunks mapped with raw system calls (no malloc) and unmapped once written;
 * EARLY_CHUNKS chunks are the hard cap (16 Mi events, far above clang's 4,500): an event past
 * it is counted lost and the agent says so. */
#define EARLY_STATIC 4096
#define EARLY_CHUNK 8192 /* events per mapped chunk (2.25 MiB) */
#define EARLY_CHUNKS 2048
#define EARLY_DEPTH 32
struct early_ev {
    uint64_t ns, addr, size;
    uint32_t type, depth; /* type 0: not written yet */
    uint64_t pcs[EARLY_DEPTH];
};
static struct early_ev early[EARLY_STATIC];
static struct early_ev *early_chunk[EARLY_CHUNKS]; /* atomic: NULL until mapped */
static unsigned nearly;                            /* atomic: slots claimed */
static int early_state; /* 0 undecided, 1 keeping events, 2 not (agent started, or idle) */
static unsigned early_depth;

static unsigned env_uint(const char *name, unsigned def, unsigned max);

/* The slot of early event i, mapping its chunk when it is the first there; NULL past the cap
 * or when the mapping fails. A signal handler on the main thread may race for the chunk: the
 * loser unmaps its own. */
static struct early_ev *early_slot(unsigned i)
{
    if (i < EARLY_STATIC)
        return &early[i];
    unsigned c = (i - EARLY_STATIC) / EARLY_CHUNK;
    if (c >= EARLY_CHUNKS)
        return NULL;
    struct early_ev *ch = __atomic_load_n(&early_chunk[c], __ATOMIC_ACQUIRE);
    if (!ch) {
        void *m = sys_mmap(NULL, EARLY_CHUNK * sizeof *ch, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        struct early_ev *none = NULL;
        if (__atomic_compare_exchange_n(&early_chunk[c], &none, (struct early_ev *)m, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            ch = m;
        } else {
            sys_munmap(m, EARLY_CHUNK * sizeof *ch);
            ch = none;
        }
    }
    return &ch[(i - EARLY_STATIC) % EARLY_CHUNK];
}

/* The slot of early event i when it has one (no mapping made); NULL otherwise. */
static struct early_ev *early_at(unsigned i)
{
    if (i < EARLY_STATIC)
        return &early[i];
    unsigned c = (i - EARLY_STATIC) / EARLY_CHUNK;
    struct early_ev *ch =
        c < EARLY_CHUNKS ? __atomic_load_n(&early_chunk[c], __ATOMIC_ACQUIRE) : NULL;
    return ch ? &ch[(i - EARLY_STATIC) % EARLY_CHUNK] : NULL;
}

static __attribute__((noinline, cold)) void early_record(int type, const void *p, size_t n,
                                                         void *fp)
{
    int st = __atomic_load_n(&early_state, __ATOMIC_ACQUIRE);
    if (st == 2 || agent_tls.internal)
        return;
    if (st == 0) {
        extern char **environ;
        if (!environ)
            return; /* libc not initialized yet: decide at a later allocation */
        const char *d = getenv(MS_ENV_TRACE_DIR);
        early_depth = env_uint(MS_ENV_DEPTH, 0, EARLY_DEPTH);
        st = d && *d && !env_uint(MS_ENV_DEFERRED, 0, 1) ? 1 : 2;
        __atomic_store_n(&early_state, st, __ATOMIC_RELEASE);
        if (st == 2)
            return;
    }
    if ((pid_t)syscall(SYS_gettid) != getpid())
        return; /* threads before the agent: not kept */
    unsigned i = __atomic_fetch_add(&nearly, 1, __ATOMIC_RELAXED);
    struct early_ev *e = early_slot(i);
    if (!e)
        return; /* counted lost at replay: its slot stays empty */
    e->ns = clock_mono();
    e->addr = (uintptr_t)p;
    e->size = n;
    e->depth = 0;
    /* Frame pointers, bounded by the main thread's stack (caller's frames lie above fp). In code
     * without frame pointers this reads words that are no return addresses: the replay keeps
     * only the frames up to the first that is not in a module's code (stacks_code_frames). */
    extern void *__libc_stack_end;
    uintptr_t hi = (uintptr_t)__libc_stack_end + 64, f = (uintptr_t)fp;
    for (unsigned k = 0; fp && k < early_depth && f >= (uintptr_t)&e && f + 16 <= hi && !(f & 7);
         k++) {
        uintptr_t next = ((uintptr_t *)f)[0], ret = ((uintptr_t *)f)[1];
        if (!ret)
            break;
        e->pcs[e->depth++] = ret;
        if (next <= f)
            break;
        f = next;
    }
    __atomic_store_n(&e->type, (uint32_t)type, __ATOMIC_RELEASE);
}

/* Unmaps the chunks of early events (written, or going nowhere): the program keeps nothing
 * of them. */
static void early_release(void)
{
    for (unsigned c = 0; c < EARLY_CHUNKS; c++) {
        struct early_ev *ch = __atomic_exchange_n(&early_chunk[c], NULL, __ATOMIC_ACQ_REL);
        if (ch)
            sys_munmap(ch, EARLY_CHUNK * sizeof *ch);
    }
}

/* Writes the events kept before the agent started into thread t's stream (agent_init), and
 * unmaps the chunks. */
static void early_replay(struct tstate *t)
{
    __atomic_store_n(&early_state, 2, __ATOMIC_RELEASE);
    unsigned n = __atomic_load_n(&nearly, __ATOMIC_ACQUIRE);
    struct stream *s = &t->s[0];
    unsigned long lost = 0;
    for (unsigned i = 0; i < n; i++) {
        struct early_ev *e = early_at(i);
        uint32_t type = e ? __atomic_load_n(&e->type, __ATOMIC_ACQUIRE) : 0;
        if (!type) {
            lost++;
            writer_lost();
            continue;
        }
        if (agent.sample_bytes) { /* sampled as they would have been (replay runs internal) */
            t->internal--;
            int keep = type == MS_REC_HEAP_FREE ? sample_free((void *)(uintptr_t)e->addr)
                                                : sample_alloc((void *)(uintptr_t)e->addr, e->size);
            t->internal++;
            if (!keep)
                continue;
        }
        unsigned depth = agent.depth ? stacks_code_frames(e->pcs, e->depth) : 0;
        uint32_t sid = depth ? stacks_intern(t, s, e->pcs, depth) : 0;
        uint8_t *w = writer_reserve(t, s, MS_REC_MAX_EVENT);
        if (!w)
            break;
        writer_commit(s, type == MS_REC_HEAP_FREE
                             ? ms_enc_free(w, &s->enc, e->ns, e->addr)
                             : ms_enc_alloc(w, &s->enc, (int)type, e->ns, e->addr, e->size, sid));
    }
    early_release();
    if (lost)
        agent_say("events before the agent started were not recorded (over its cap of 16 Mi, or "
                  "out of memory)",
                  NULL);
}

/* Whether to record this allocation, keeping it for later when the agent has not started. */
static inline int active_or_early(int type, const void *p, size_t n, void *fp)
{
    if (likely(agent_active()))
        return 1;
    if (unlikely(!agent.initialized))
        early_record(type, p, n, fp);
    return 0;
}

#define FP_HERE __builtin_frame_address(0)

#define REC_ALLOC(fn, p, n) \
    record_alloc(MS_REC_HEAP_ALLOC + (fn), (p), (n), __builtin_frame_address(0), 0)

static inline void fast_leave(struct tstate *t)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->guard = 0;
}

/* The common case of malloc and free, inline in them: recording, this thread not inside the
 * agent already (its own stream, s[0]), and room in its chunk. It is what enter(),
 * writer_reserve(), the encoder and leave() do there, without a call or the choice of stream.
 * Returns the stream with the guard taken, or NULL (guard not taken) when the general path
 * must record the event. The room is looked at only once the guard is taken, as in enter():
 * a signal handler that records before that uses the same stream. The compiler barriers keep
 * the guard around the stream's use as a signal handler sees it. */
static inline struct stream *fast_enter(struct tstate *t)
{
    struct stream *s = &t->s[0];
    if (unlikely(!__atomic_load_n(&agent.recording, __ATOMIC_RELAXED) || t->guard || t->internal ||
                 __atomic_load_n(&agent.paused, __ATOMIC_RELAXED)))
        return NULL;
    t->guard = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (unlikely(!s->chunk || t->generation != agent.live->generation ||
                 (size_t)(s->end - s->pos) < MS_REC_MAX_EVENT)) {
        fast_leave(t);
        return NULL;
    }
    return s;
}

/* Encodes from a copy of the stream's delta state, so that the compiler keeps it in registers
 * (the record's byte stores could alias the stream's fields). */
static inline void fast_free(struct tstate *t, struct stream *s, uint64_t ns, const void *p)
{
    struct ms_enc_state st = s->enc;
    uint8_t *e = ms_enc_free(s->pos, &st, ns, (uintptr_t)p);
    s->enc = st;
    writer_commit(s, e);
    fast_leave(t);
}

static inline void fast_alloc(struct tstate *t, struct stream *s, int type, const void *p, size_t n,
                              uint32_t sid)
{
    if (unlikely((size_t)(s->end - s->pos) < MS_REC_MAX_EVENT)) { /* STACK records took it */
        uint8_t *w = writer_reserve(t, s, MS_REC_MAX_EVENT);
        if (w)
            writer_commit(s, ms_enc_alloc(w, &s->enc, type, agent_now(), (uintptr_t)p, n, sid));
        fast_leave(t);
        return;
    }
    struct ms_enc_state st = s->enc;
    uint8_t *e = ms_enc_alloc(s->pos, &st, type, agent_now(), (uintptr_t)p, n, sid);
    s->enc = st;
    writer_commit(s, e);
    fast_leave(t);
}

/* malloc's recording half, out of line so that malloc's own frame stays small (the registers
 * the recording path needs are saved here, not on every call). fp: malloc's frame; counted:
 * what sample_alloc_skip() did. */
static __attribute__((noinline)) void malloc_record(void *p, size_t n, void *fp, int counted)
{
    if (!active_or_early(MS_REC_HEAP_ALLOC + MS_FN_MALLOC, p, n, fp))
        return;
    struct tstate *t = &agent_tls;
    if (counted == SAMPLE_COUNTED ? !sample_alloc_slow(t, p, n) : !sample_alloc(p, n))
        return;
    if (unlikely(t->quiet))
        return;
    struct stream *s = fast_enter(t);
    if (likely(s != NULL)) {
        uint32_t sid = agent.depth || agent.py_depth ? stacks_capture(t, s, fp) : 0;
        fast_alloc(t, s, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, p, n, sid);
    } else
        record_alloc(MS_REC_HEAP_ALLOC + MS_FN_MALLOC, p, n, fp, 0);
}

/* real.malloc before the C library's functions are known: dlsym's own allocations while they
 * are looked up come from the static pool. */
static __attribute__((noinline, cold)) void *malloc_unresolved(size_t n)
{
    if (resolving)
        return boot_alloc(n);
    resolve();
    return real.malloc(n);
}

/* malloc's second half, when its inline half did not skip the allocation: calls the C library's
 * malloc and records. A jump from malloc (at -O2, which src/agent/CMakeLists.txt sets), so that
 * malloc needs no frame, and this function's frame is where malloc's would be: FP_HERE here
 * starts the stack at malloc's caller. malloc_uncounted(): sample_alloc_skip() counted nothing
 * (exact mode, not recording, the agent's own); malloc_counted(): it counted the allocation and
 * its countdown ran out (two functions, so that neither keeps more than n and p across its
 * calls). */
static __attribute__((noinline)) void *malloc_uncounted(size_t n)
{
    void *p = real.malloc(n);
    if (likely(p != NULL))
        malloc_record(p, n, FP_HERE, SAMPLE_UNCOUNTED);
    return p;
}

static __attribute__((noinline)) void *malloc_counted(size_t n)
{
    void *p = real.malloc(n);
    if (likely(p != NULL))
        malloc_record(p, n, FP_HERE, SAMPLE_COUNTED);
    else
        sample_alloc_uncount(n); /* no allocation */
    return p;
}

/* The unsampled path counts the allocation before the C library's malloc runs and jumps to it:
 * one that fails (returns NULL) is then counted too, when it asks for fewer bytes than the
 * countdown has left (an out-of-memory small malloc; docs/production.md). */
AGENT_API void *malloc(size_t n)
{
    int counted = sample_alloc_skip(n);
    if (likely(counted == SAMPLE_SKIP))
        return real.malloc(n);
    return counted == SAMPLE_UNCOUNTED ? malloc_uncounted(n) : malloc_counted(n);
}

/* free's recording half (as malloc_record()), which then frees p: the free is recorded before
 * the block can be reused. counted: what sample_free_skip() did. */
static __attribute__((noinline)) void free_record(void *p, int counted)
{
    if (active_or_early(MS_REC_HEAP_FREE, p, 0, NULL) &&
        (counted == SAMPLE_COUNTED ? sample_free_lookup(p) : sample_free(p))) {
        struct tstate *t = &agent_tls;
        struct stream *s = fast_enter(t);
        if (likely(s != NULL))
            fast_free(t, s, agent_now(), p);
        else
            record_free(MS_REC_HEAP_FREE, p, 0, agent_now());
    }
    real.free(p);
}

/* real.free before the C library's functions are known. */
static __attribute__((noinline, cold)) void free_unresolved(void *p)
{
    if (resolving)
        return; /* cannot happen with glibc; leaking is the safe answer */
    resolve();
    real.free(p);
}

AGENT_API void free(void *p)
{
    if (unlikely(!p || in_boot_pool(p)))
        return;
    int counted = sample_free_skip(p);
    if (unlikely(counted != SAMPLE_SKIP))
        free_record(p, counted); /* (frees p: both calls are jumps, free needs no frame) */
    else
        real.free(p);
}

AGENT_API void *calloc(size_t n, size_t m)
{
    if (unlikely(!real.calloc)) {
        if (resolving) {
            if (m && n > SIZE_MAX / m)
                return NULL;
            return boot_alloc(n * m); /* static pool: already zero */
        }
        resolve();
    }
    void *p = real.calloc(n, m);
    if (likely(p != NULL) && active_or_early(MS_REC_HEAP_ALLOC + MS_FN_CALLOC, p, n * m, FP_HERE) &&
        sample_alloc(p, n * m))
        REC_ALLOC(MS_FN_CALLOC, p, n * m);
    return p;
}

/* Records what a realloc-like call did: old block freed (at ns0, before the call) and new
 * block allocated, or nothing when it failed. */
static inline void realloc_done(int fn, void *old, void *p, size_t n, uint64_t ns0, void *fp)
{
    if (old && (p || n == 0) && sample_free(old))
        record_free(MS_REC_HEAP_FREE, old, 0, ns0);
    if (p && sample_alloc(p, n))
        record_alloc(MS_REC_HEAP_ALLOC + fn, p, n, fp, 0);
}

/* realloc_done() before the agent started: kept as early events (a block reallocated there and
 * freed later would be an unmatched free, and its old block live for ever). */
static __attribute__((noinline, cold)) void early_realloc(int fn, void *old, void *p, size_t n,
                                                          void *fp)
{
    if (old && (p || n == 0))
        early_record(MS_REC_HEAP_FREE, old, 0, NULL);
    if (p)
        early_record(MS_REC_HEAP_ALLOC + fn, p, n, fp);
}

AGENT_API void *realloc(void *old, size_t n)
{
    if (unlikely(in_boot_pool(old))) {
        void *p = malloc(n);
        if (p)
            memcpy(p, old,
                   n < (size_t)(boot_pool + sizeof boot_pool - (char *)old)
                       ? n
                       : (size_t)(boot_pool + sizeof boot_pool - (char *)old));
        return p;
    }
    if (unlikely(!real.realloc))
        resolve();
    uint64_t ns0 = agent.recording ? agent_now() : 0;
    void *p = real.realloc(old, n);
    if (agent.recording && ns0)
        realloc_done(MS_FN_REALLOC, old, p, n, ns0, __builtin_frame_address(0));
    else if (unlikely(!agent.initialized))
        early_realloc(MS_FN_REALLOC, old, p, n, __builtin_frame_address(0));
    return p;
}

/* glibc's reallocarray calls realloc through the PLT, which would record the call twice, so
 * this one does the overflow check itself and calls the real realloc. */
AGENT_API void *reallocarray(void *old, size_t n, size_t m)
{
    if (unlikely(!real.realloc))
        resolve();
    if (m && n > SIZE_MAX / m) {
        errno = ENOMEM;
        return NULL;
    }
    uint64_t ns0 = agent.recording ? agent_now() : 0;
    void *p = real.realloc(old, n * m);
    if (agent.recording && ns0)
        realloc_done(MS_FN_REALLOCARRAY, old, p, n * m, ns0, __builtin_frame_address(0));
    else if (unlikely(!agent.initialized))
        early_realloc(MS_FN_REALLOCARRAY, old, p, n * m, __builtin_frame_address(0));
    return p;
}

AGENT_API int posix_memalign(void **out, size_t align, size_t n)
{
    if (unlikely(!real.posix_memalign))
        resolve();
    int rc = real.posix_memalign(out, align, n);
    if (rc == 0 && active_or_early(MS_REC_HEAP_ALLOC + MS_FN_POSIX_MEMALIGN, *out, n, FP_HERE) &&
        sample_alloc(*out, n))
        REC_ALLOC(MS_FN_POSIX_MEMALIGN, *out, n);
    return rc;
}

AGENT_API void *aligned_alloc(size_t align, size_t n)
{
    if (unlikely(!real.aligned_alloc))
        resolve();
    void *p = real.aligned_alloc(align, n);
    if (p && active_or_early(MS_REC_HEAP_ALLOC + MS_FN_ALIGNED_ALLOC, p, n, FP_HERE) &&
        sample_alloc(p, n))
        REC_ALLOC(MS_FN_ALIGNED_ALLOC, p, n);
    return p;
}

AGENT_API void *memalign(size_t align, size_t n)
{
    if (unlikely(!real.memalign))
        resolve();
    void *p = real.memalign(align, n);
    if (p && active_or_early(MS_REC_HEAP_ALLOC + MS_FN_MEMALIGN, p, n, FP_HERE) &&
        sample_alloc(p, n))
        REC_ALLOC(MS_FN_MEMALIGN, p, n);
    return p;
}

AGENT_API void *valloc(size_t n)
{
    if (unlikely(!real.valloc))
        resolve();
    void *p = real.valloc(n);
    if (p && active_or_early(MS_REC_HEAP_ALLOC + MS_FN_VALLOC, p, n, FP_HERE) && sample_alloc(p, n))
        REC_ALLOC(MS_FN_VALLOC, p, n);
    return p;
}

AGENT_API void *pvalloc(size_t n)
{
    if (unlikely(!real.pvalloc))
        resolve();
    void *p = real.pvalloc(n);
    if (p && active_or_early(MS_REC_HEAP_ALLOC + MS_FN_PVALLOC, p, n, FP_HERE) &&
        sample_alloc(p, n))
        REC_ALLOC(MS_FN_PVALLOC, p, n);
    return p;
}

/* The code of the allocator behind malloc when it is not glibc's (jemalloc, tcmalloc, mimalloc,
 * preloaded or linked): [alloc_lo, alloc_hi), or empty. Its mappings hold the heap blocks the
 * heap layer already counts (its arenas), so the mmap interposers leave alone the calls made
 * from that code, as glibc's own mappings are never seen (glibc maps its arenas with internal
 * calls, not through these symbols). Found once by allocator_init(), from the constructor:
 * dl_iterate_phdr takes the loader's lock, which an mmap made under an allocator's lock must
 * not wait for. */
static uintptr_t alloc_lo, alloc_hi;

static int find_allocator(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t lo = UINTPTR_MAX, hi = 0, m = (uintptr_t)real.malloc;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (m < lo || m >= hi)
        return 0;
    uintptr_t libc = (uintptr_t)arg;
    if (libc < lo || libc >= hi) { /* not glibc's malloc */
        alloc_lo = lo;
        alloc_hi = hi;
    }
    return 1;
}

static void allocator_init(void)
{
    if (resolved)
        dl_iterate_phdr(find_allocator, (void *)(uintptr_t)&getpid);
}

/* Whether a call that returns to ra comes from the allocator's own code (its arenas). */
static inline int from_allocator(const void *ra)
{
    return (uintptr_t)ra - alloc_lo < alloc_hi - alloc_lo;
}

int agent_record_ext(int ext, const uint64_t *v, int n, const char *str, void *fp, int want_stack);
#define record_ext agent_record_ext

/* Anonymous mappings are their own layer. File mappings are not memory the program asked the
 * allocator for, so they are not recorded; nor are an allocator's arenas (from_allocator). A
 * mapping without access (PROT_NONE) reserves address space and holds no memory until parts of
 * it get access (mprotect, or an mmap with access over it): it is an MMAP_RESERVE record. */
static inline void *mmap_common(void *(*fn)(void *, size_t, int, int, int, off_t), void *addr,
                                size_t len, int prot, int flags, int fd, off_t off, void *fp,
                                void *ra)
{
    void *p = fn(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && agent.recording && !from_allocator(ra)) {
        if (prot == PROT_NONE) {
            uint64_t v[3] = {(uintptr_t)p, len, 0};
            record_ext(MS_EXT_MMAP_RESERVE, v, 3, NULL, fp, 1);
        } else
            record_alloc(MS_REC_MMAP_ALLOC + MS_FN_MMAP, p, len, fp, 0);
    }
    return p;
}

AGENT_API void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (unlikely(!real.mmap))
        resolve();
    return mmap_common(real.mmap, addr, len, prot, flags, fd, off, __builtin_frame_address(0),
                       __builtin_return_address(0));
}

AGENT_API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (unlikely(!real.mmap64))
        resolve();
    return mmap_common(real.mmap64, addr, len, prot, flags, fd, off, __builtin_frame_address(0),
                       __builtin_return_address(0));
}

AGENT_API int munmap(void *addr, size_t len)
{
    if (unlikely(!real.munmap))
        resolve();
    if (agent_active() && !from_allocator(__builtin_return_address(0)))
        record_free(MS_REC_MUNMAP, addr, len, agent_now());
    return real.munmap(addr, len);
}

/* Access given to a range (MMAP_COMMIT) or taken away (MMAP_DECOMMIT): the converter counts
 * the parts of reservations that have access as memory (docs/database.md). Recorded for every
 * successful call; the converter ignores those outside reservations. */
AGENT_API int mprotect(void *addr, size_t len, int prot)
{
    if (unlikely(!real.mprotect))
        resolve();
    int rc = real.mprotect(addr, len, prot);
    if (rc == 0 && agent.recording && !from_allocator(__builtin_return_address(0))) {
        uint64_t v[3] = {(uintptr_t)addr, len, 0};
        if (prot & (PROT_READ | PROT_WRITE | PROT_EXEC))
            record_ext(MS_EXT_MMAP_COMMIT, v, 3, NULL, __builtin_frame_address(0), 1);
        else
            record_ext(MS_EXT_MMAP_DECOMMIT, v, 2, NULL, NULL, 0);
    }
    return rc;
}

/* A closed library's code is gone: its unwind tables, and the stacks through it, must not be
 * taken for those of a library loaded at its address later (stacks.c). dlclose, unlike
 * dlopen, does not depend on who calls it, so interposing it changes nothing for the program. */
AGENT_API int dlclose(void *handle)
{
    if (!real.dlclose)
        resolve();
    int rc = real.dlclose ? real.dlclose(handle) : -1;
    if (rc == 0 && agent.initialized && !agent.broken) {
        struct tstate *t = &agent_tls;
        t->internal++;
        modules_after_dlclose();
        t->internal--;
    }
    return rc;
}

AGENT_API void *mremap(void *old, size_t oldlen, size_t len, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    if (unlikely(!real.mremap))
        resolve();
    uint64_t ns0 = agent.recording ? agent_now() : 0;
    void *p = real.mremap(old, oldlen, len, flags, want);
    if (p != MAP_FAILED && agent.recording && ns0 && !from_allocator(__builtin_return_address(0))) {
        /* NEEDSWORK: file-backed mappings moved by mremap show up as anonymous blocks. */
        record_free(MS_REC_MUNMAP, old, oldlen, ns0);
        record_alloc(MS_REC_MMAP_ALLOC + MS_FN_MREMAP, p, len, __builtin_frame_address(0), 0);
    }
    return p;
}

/* ---- life cycle ---- */

static pthread_key_t exit_key;
static int have_exit_key;

void agent_thread_register(void)
{
    if (have_exit_key)
        pthread_setspecific(exit_key, &agent);
}

static void on_thread_exit(void *arg)
{
    (void)arg;
    struct tstate *t = &agent_tls;
    if (agent.sandboxed)
        return; /* its mappings stay: no system call under the program's seccomp filter */
    sample_thread_exit(t);
    t->internal++;
    writer_thread_exit(t);
    if (t->py) {
        struct pyshadow *py = t->py;
        t->py = NULL;
        sys_munmap(py, sizeof *py);
    }
    unwind_memo_free(t);
    t->internal--;
}

/* --steps: whether step n is one to record. */
static int step_listed(unsigned n)
{
    for (unsigned i = 0; i < agent.nsteps; i++)
        if (agent.steps[i] == n)
            return 1;
    return 0;
}

/* --steps: the process is in step n now. */
static void steps_at(unsigned n)
{
    __atomic_store_n(&agent.step_no, n, __ATOMIC_RELAXED);
    __atomic_store_n(&agent.paused, agent.nsteps && !step_listed(n), __ATOMIC_RELAXED);
}

/* MEMSCOPE_STEPS: up to MS_MAX_STEP_FILTER step numbers >= 1, comma-separated (memscope run
 * checked them; anything else turns the filter off). */
static void steps_init(void)
{
    const char *v = agent_getenv(MS_ENV_STEPS);
    agent.nsteps = 0;
    while (v && *v && agent.nsteps < MS_MAX_STEP_FILTER) {
        unsigned long n = 0;
        const char *p = v;
        while (*p >= '0' && *p <= '9' && n < 1000000000ul)
            n = n * 10 + (unsigned long)(*p++ - '0');
        if (p == v || n == 0 || n >= 1000000000ul || (*p && *p != ',')) {
            agent.nsteps = 0; /* not what memscope run writes: record every step */
            break;
        }
        agent.steps[agent.nsteps++] = (unsigned)n;
        v = *p ? p + 1 : p;
    }
    steps_at(1);
}

/* A new process's own trace: the parent's file, mappings and tables are let go. */
static void child_setup(void)
{
    struct tstate *t = &agent_tls;
    if (agent.sandboxed) { /* no system call under the program's seccomp filter */
        __atomic_store_n(&agent.live->generation, agent.generation, __ATOMIC_RELEASE);
        return;
    }
    if (agent.injected) { /* memscope attach records its process only (inject.c) */
        inject_after_fork_child();
        __atomic_store_n(&agent.live->generation, agent.generation, __ATOMIC_RELEASE);
        return;
    }
    t->internal++;
    steps_at(1); /* a new process: the database counts its steps from 1 */
    sample_after_fork_child(t);
    clock_after_fork_child();
    stacks_reset_after_fork();
    cuda_after_fork_child();
    writer_after_fork_child();
    if (!agent.broken && agent.hdr)
        modules_scan(t, &t->s[0]);
    __atomic_store_n(&agent.live->generation, agent.generation, __ATOMIC_RELEASE);
    t->internal--;
}

/* After fork(): unless an event of this child already found it cloned and set it up (a signal
 * handler between the clone and this handler), or the child of a child being set up. */
static void on_fork_child(void)
{
    if (agent.live_wipes && __atomic_load_n(&agent.live->generation, __ATOMIC_ACQUIRE))
        return;
    child_setup();
}

void agent_unseen_child(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (!__atomic_exchange_n(&agent.live->busy, 1, __ATOMIC_ACQ_REL)) {
        if (!__atomic_load_n(&agent.live->generation, __ATOMIC_ACQUIRE))
            child_setup();
        __atomic_store_n(&agent.live->busy, 0, __ATOMIC_RELEASE);
    } else {
        /* another thread of this child (made before its first event) is setting it up */
        while (!__atomic_load_n(&agent.live->generation, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* agent.live: a page the kernel wipes in every new process, so that a child cloned without
 * glibc's fork() is found by its first event (agent_unseen_child). Without MADV_WIPEONFORK
 * (Linux before 4.14) it stays the static one: such a child then writes into its parent's
 * trace, as before. */
static void live_init(void)
{
    void *p = sys_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    if (madvise(p, 4096, MADV_WIPEONFORK) != 0) {
        sys_munmap(p, 4096);
        return;
    }
    struct agent_live *l = p;
    l->generation = agent.generation;
    agent.live = l;
    agent.live_wipes = 1;
}

/* Whether this process image is a Python interpreter (python, python3, python3.11 ...), as
 * memscope run tells a Python program by its name. */
static int python_image(void)
{
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *base = strrchr(exe, '/');
    return ms_python_name(base ? base + 1 : exe);
}

/* Parses a small unsigned decimal; returns def when absent or malformed. */
static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
    const char *s = agent_getenv(name);
    if (!s || !*s)
        return def;
    unsigned long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return def;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max)
            return max;
    }
    return (unsigned)v;
}

/* Removes this library from LD_PRELOAD (and from NVTX_INJECTION64_PATH) so that exec'd programs
 * are not traced. */
void agent_stop_following(void)
{
    unsetenv(MS_ENV_TRACE_DIR);
    const char *nvtx = getenv("NVTX_INJECTION64_PATH"); /* set by memscope run (nvtx.c) */
    size_t nl = nvtx ? strlen(nvtx) : 0;
    if (nl >= 14 && !memcmp(nvtx + nl - 14, "libmemscope.so", 14))
        unsetenv("NVTX_INJECTION64_PATH");
    const char *pre = getenv("LD_PRELOAD");
    if (!pre)
        return;
    char buf[4096];
    size_t n = 0;
    const char *s = pre;
    while (*s) {
        while (*s == ' ' || *s == ':')
            s++;
        const char *e = s;
        while (*e && *e != ' ' && *e != ':')
            e++;
        size_t len = (size_t)(e - s);
        int ours = len >= 14 && !memcmp(e - 14, "libmemscope.so", 14);
        if (len && !ours && n + len + 1 < sizeof buf) {
            if (n)
                buf[n++] = ':';
            memcpy(buf + n, s, len);
            n += len;
        }
        s = e;
    }
    buf[n] = 0;
    if (n)
        setenv("LD_PRELOAD", buf, 1);
    else
        unsetenv("LD_PRELOAD");
}

static void agent_at_exit(void);

/* Reads the configuration (agent_getenv: the environment, or the block memscope attach gave)
 * into agent's fields; returns the trace directory, or NULL when there is none (idle). */
static const char *agent_configure(void)
{
    const char *dir = agent_getenv(MS_ENV_TRACE_DIR);
    if (!dir || !*dir || strlen(dir) >= sizeof agent.dir)
        return NULL;
    strcpy(agent.dir, dir);
    const char *err = agent_getenv(MS_ENV_STDERR); /* "<dev>:<ino>" of memscope's stderr */
    if (err && *err) {
        unsigned long long dev = 0, ino = 0;
        const char *s = err;
        for (; *s >= '0' && *s <= '9'; s++)
            dev = dev * 10 + (unsigned long long)(*s - '0');
        if (*s == ':')
            for (s++; *s >= '0' && *s <= '9'; s++)
                ino = ino * 10 + (unsigned long long)(*s - '0');
        agent.err_dev = dev;
        agent.err_ino = ino;
        agent.err_known = 1;
    }
    agent.depth = env_uint(MS_ENV_DEPTH, 0, MS_TRACE_MAX_DEPTH);
    agent.py_depth = env_uint(MS_ENV_PY_DEPTH, 0, MS_TRACE_MAX_DEPTH);
    if (env_uint(MS_ENV_STACKS_AUTO, 0, 1) && python_image())
        agent.depth = 0; /* memscope run's default for a Python program: its Python stack */
    agent.flags = agent.depth ? MS_TRACE_F_STACKS : 0;
    const char *unw = agent_getenv(MS_ENV_UNWIND);
    agent.unwind_dwarf = !(unw && !strcmp(unw, "fp")); /* DWARF (unwind.c) unless fp */
    return agent.dir;
}

/* Starts recording with the configuration agent_getenv() gives (the constructor's, or memscope
 * attach's first memscope__inject_start). Returns 0, -EINVAL when there is no trace directory
 * (idle), or -errno when the trace file cannot be created (said; the agent is then broken). */
int agent_start(void)
{
    struct tstate *t = &agent_tls;
    if (!agent_configure()) {
        /* idle: events kept so far (the variable was there then) go nowhere, and no more are
         * kept (early_record() is called until agent.initialized) */
        __atomic_store_n(&early_state, 2, __ATOMIC_RELEASE);
        early_release();
        return -EINVAL;
    }
    int deferred = env_uint(MS_ENV_DEFERRED, 0, 1);
    if (deferred)
        agent.flags |= MS_TRACE_F_DEFERRED;
    if ((agent.no_follow = env_uint(MS_ENV_NO_FOLLOW, 0, 1)))
        agent_stop_following();
    steps_init(); /* before the early events are replayed: they are step 1's */
    sample_init();
    clock_init(env_uint(MS_ENV_NO_TSC, 0, 1));
    live_init();
    allocator_init();
    int rc = stacks_init();
    if (rc == 0)
        rc = writer_open();
    if (rc < 0) {
        agent.broken = 1;
        __atomic_store_n(&early_state, 2, __ATOMIC_RELEASE); /* kept events go nowhere */
        early_release();
        agent_say("cannot record: cannot create the trace file in", agent.dir);
        return rc;
    }
    have_exit_key = pthread_key_create(&exit_key, on_thread_exit) == 0;
    pthread_atfork(NULL, NULL, on_fork_child);
    agent.initialized = 1;
    atexit(agent_at_exit);
    writer_process_record();
    modules_scan(t, &t->s[0]);
    early_replay(t);
    if (!agent.injected)
        cuda_init(); /* memscope attach records the heap only: nothing of CUDA is hooked */
    if (!deferred && !agent.broken)
        __atomic_store_n(&agent.recording, agent_recording_on(), __ATOMIC_RELEASE);
    return 0;
}

/* memscope attach's later sessions (inject.c): a new trace file in the directory the new
 * configuration names, as a forked child starts its own (new generation: every thread takes
 * new chunks, every stack and module is described again). The previous session's file was let
 * go (inject_release). Returns 0 or -errno (said). */
int agent_restart(void)
{
    struct tstate *t = &agent_tls;
    if (!agent_configure())
        return -EINVAL;
    agent.broken = 0;
    agent.fd = -1;
    agent.hdr = NULL;
    agent.file_lock = 0;
    agent.next_serial = 0;
    agent.generation++;
    __atomic_store_n(&agent.live->generation, agent.generation, __ATOMIC_RELEASE);
    steps_init();
    modules_after_dlclose(); /* libraries closed since the last session: their unwind tables go */
    stacks_reset_after_fork();
    int rc = writer_open();
    if (rc < 0) {
        agent.broken = 1;
        agent_say("cannot record: cannot create the trace file in", agent.dir);
        return rc;
    }
    writer_process_record();
    modules_scan(t, &t->s[0]);
    __atomic_store_n(&agent.recording, agent_recording_on(), __ATOMIC_RELEASE);
    return 0;
}

__attribute__((constructor)) static void agent_init(void)
{
    struct tstate *t = &agent_tls;
    resolve();
    t->internal = 1;
    agent_exec_init();
    agent_start();
    t->internal = 0;
}

/* ---- the annotation API (include/memscope.h calls these through weak references) ---- */

/* Writes one extension record for the calling thread. Returns 0, or -1 when not recording. */
int agent_record_ext(int ext, const uint64_t *v, int n, const char *str, void *fp, int want_stack)
{
    struct tstate *t;
    struct stream *s = agent_enter(&t);
    if (!s)
        return -1;
    uint64_t vv[3];
    for (int i = 0; i < n; i++)
        vv[i] = v[i];
    if (want_stack)
        vv[n - 1] = agent.depth || agent.py_depth ? stacks_capture(t, s, fp) : 0;
    size_t slen = str ? strnlen(str, MS_TRACE_MAX_LABEL) : 0;
    uint8_t *w = writer_reserve(t, s, MS_EXT_MAX);
    if (w)
        writer_commit(s, ms_enc_ext(w, &s->enc, ext, agent_now(), vv, n, str ? str : NULL, slen));
    agent_leave(t);
    return w ? 0 : -1;
}

AGENT_API int memscope__step(void)
{
    struct tstate *t = &agent_tls;
    t->step_record = 1; /* written in a step --steps leaves out too */
    int rc = record_ext(MS_EXT_STEP, NULL, 0, NULL, NULL, 0);
    t->step_record = 0;
    if (agent.nsteps)
        steps_at(__atomic_load_n(&agent.step_no, __ATOMIC_RELAXED) + 1);
    cuda_sample_usage();
    return rc;
}

/* At exit: what the GPU reports, for the last step. An atexit handler, not a destructor: it
 * runs before the libraries' destructors, while the CUDA driver and NVML still work. */
/* At exit (the agent's atexit handler: after the handlers registered later, the program's
 * static destructors among them): libstdc++'s emergency exception pool (about 72 KiB, allocated
 * by its constructor) is handed back with __gnu_cxx::__freeres, as valgrind and heaptrack do,
 * so that it is not reported live at exit in every C++ program. Only while recording and when
 * the loaded libstdc++ has it (GCC 5 and later); looked up in the global scope (RTLD_DEFAULT),
 * so a program without libstdc++ loads nothing. */
static void agent_at_exit(void)
{
    if (!agent.initialized || agent.sandboxed)
        return;
    cuda_sample_usage();
    if (__atomic_load_n(&agent.recording, __ATOMIC_ACQUIRE)) {
        agent_tls.internal++; /* a failed dlsym allocates its error message: memscope's own */
        void (*freeres)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv");
        agent_tls.internal--;
        if (!freeres)
            agent_dl_forget_error();
        if (freeres) /* its free is the program's: recorded */
            freeres();
    }
    sample_flush_all(); /* sampling mode: every thread's exact counts */
}

AGENT_API int memscope__owner_push(const char *label)
{
    return label ? record_ext(MS_EXT_OWNER_PUSH, NULL, 0, label, NULL, 0) : -1;
}

AGENT_API int memscope__owner_pop(void)
{
    return record_ext(MS_EXT_OWNER_POP, NULL, 0, NULL, NULL, 0);
}

AGENT_API int memscope__mark(const char *msg)
{
    return msg ? record_ext(MS_EXT_MARK, NULL, 0, msg, NULL, 0) : -1;
}

AGENT_API int memscope__range_push(const char *name)
{
    return name ? record_ext(MS_EXT_RANGE_PUSH, NULL, 0, name, NULL, 0) : -1;
}

AGENT_API int memscope__range_pop(void)
{
    return record_ext(MS_EXT_RANGE_POP, NULL, 0, NULL, NULL, 0);
}

AGENT_API int memscope__access(const void *p, size_t n, int flags, const char *op)
{
    uint64_t v[3] = {(uintptr_t)p, n, (uint64_t)flags & 3};
    return record_ext(MS_EXT_ACCESS, v, 3, op ? op : "", NULL, 0);
}

AGENT_API int memscope__pool_alloc(const char *pool, const void *p, size_t n)
{
    uint64_t v[3] = {(uintptr_t)p, n, 0};
    if (!pool || !p)
        return -1;
    return record_ext(MS_EXT_POOL_ALLOC, v, 3, pool, __builtin_frame_address(0), 1);
}

AGENT_API int memscope__pool_free(const char *pool, const void *p)
{
    uint64_t v[1] = {(uintptr_t)p};
    if (!pool || !p)
        return -1;
    return record_ext(MS_EXT_POOL_FREE, v, 1, pool, NULL, 0);
}

AGENT_API int memscope__pool_reserve(const char *pool, const void *p, size_t n)
{
    uint64_t v[3] = {(uintptr_t)p, n, 0};
    if (!pool || !p)
        return -1;
    return record_ext(MS_EXT_POOL_RESERVE, v, 3, pool, __builtin_frame_address(0), 1);
}

AGENT_API int memscope__pool_release(const char *pool, const void *p)
{
    uint64_t v[1] = {(uintptr_t)p};
    if (!pool || !p)
        return -1;
    return record_ext(MS_EXT_POOL_RELEASE, v, 1, pool, NULL, 0);
}

/* memscope's Python layer around its own bookkeeping (delta +1 on entry, -1 on exit): heap
 * allocations made meanwhile on this thread are not recorded (they are not the program's). */
AGENT_API int memscope__quiet(int delta)
{
    struct tstate *t = &agent_tls;
    t->quiet += delta;
    if (t->quiet < 0)
        t->quiet = 0;
    return 0;
}

AGENT_API int memscope__start(void)
{
    if (!agent.initialized || agent.broken)
        return -1;
    __atomic_store_n(&agent.recording, agent_recording_on(), __ATOMIC_RELEASE);
    return 0;
}

AGENT_API int memscope__stop(void)
{
    if (!agent.initialized)
        return -1;
    __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
    return 0;
}
