/* stacks.c: native call stacks for the agent: the walk (DWARF by default, unwind.c; frame
 * pointers with --unwind=fp), a lock-free table that gives each distinct stack a small id, and
 * the module map that makes stacks symbolizable later, outside the process.
 *
 * Both walks read only inside the current thread's stack (between the current stack pointer and
 * the stack's top), so a frame they cannot read cuts a stack short but can never make the agent
 * fault. The frame-pointer walk costs a few ns per frame but gives one frame in code built
 * without frame pointers (most code); the DWARF walk gives the whole stack at about twice its
 * cost on a compiler's allocations (bench/RESULTS.md), where glibc's backtrace() (libgcc)
 * cost microseconds per event.
 *
 * Each distinct stack gets a dense id (1, 2, 3 ... : short varints) from the stack table
 * (stack_table.c), keyed by a 64-bit hash of the stack. The thread that adds a stack writes its
 * STACK record; others use the id as soon as the table has it (the converter reads all STACK
 * records before resolving ids). Hash collisions of two different stacks (probability about
 * n^2 / 2^65) would merge them. Each thread first looks in a small cache of the stacks it used
 * lately (unwind.c's per-thread mapping), which saves the shared table's cache misses on
 * programs with many distinct deep stacks. */
#include "agent.h"
#include "stack_table.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_MODULES 8192

extern void *__libc_stack_end;

static uint32_t stab_gen = 1; /* bumped when the stack table is emptied (threads' caches go) */

/* --trace-ring: room kept after a stack's description for the record of the event that uses
 * it (the largest event record), so that both are in one chunk, of one epoch */
#define RING_EVENT_ROOM MS_EXT_MAX

/* Known modules, for deciding when a new stack points into code we have not described yet.
 * Guarded by mod_lock; touched only when a new stack appears. */
static struct module_range {
    uintptr_t lo, hi;
    int used;       /* a stack has a pc in it (mods[] only) */
    uint32_t epoch; /* --trace-ring: the epoch its MODULE record was last written in */
} mods[MAX_MODULES];
static unsigned nmods;
static int mod_lock;
static unsigned long long mod_adds = ~0ull;
static char exe_path[MS_TRACE_MAX_PATH];
/* Code ranges of runtime libraries built without frame pointers (the C library: strdup,
 * fopen, getline ...; libstdc++: operator new). With --unwind=fp, a walk that starts in one of
 * them would lose the caller, so those events are unwound with DWARF. */
#define MAX_NOFP 4
static struct module_range nofp[MAX_NOFP];
static unsigned nnofp;

static int nofp_library(const char *name, size_t len)
{
    static const char *const libs[] = {"/libc.so.6", "/libstdc++.so.6"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        size_t l = strlen(libs[i]);
        if (len >= l && !memcmp(name + len - l, libs[i], l))
            return 1;
    }
    return 0;
}

static int in_nofp(uintptr_t pc)
{
    for (unsigned i = 0; i < nnofp; i++)
        if (pc >= nofp[i].lo && pc < nofp[i].hi)
            return 1;
    return 0;
}

int stacks_init(void)
{
    int rc = stack_table_init();
    if (rc < 0)
        return rc;
    if (unwind_init() < 0)
        return -errno;
    ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
    exe_path[n > 0 ? n : 0] = 0;
    return 0;
}

void stacks_reset_after_fork(void)
{
    /* The child writes a new file, so every stack and module must be described again. */
    stack_table_after_fork_child();
    stab_gen++;
    nmods = 0;
    nnofp = 0;
    mod_lock = 0;
    mod_adds = ~0ull;
}

/* Parses "lo-hi" (hexadecimal) at the start of a /proc/self/maps line; 0 when malformed. */
static int parse_range(const char *s, const char *end, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t v[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        int digits = 0;
        for (; s < end; s++, digits++) {
            int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
            if (d < 0)
                break;
            v[k] = v[k] << 4 | (uintptr_t)d;
        }
        if (!digits || digits > 16 || s == end || *s != (k ? ' ' : '-'))
            return 0;
        s++;
    }
    *lo = v[0];
    *hi = v[1];
    return 1;
}

/* The mapping that holds address a, from /proc/self/maps read with raw system calls into a
 * buffer on the stack: no allocation and no lock an allocator may hold (glibc's
 * pthread_getattr_np reallocs, and an allocator that maps memory under its own lock, jemalloc,
 * would deadlock when its mmap is recorded). The file is open only while it is read; it takes
 * the lowest free descriptor for that moment (docs/ARCHITECTURE.md). 1 when found. */
static int mapping_path_of(uintptr_t a, uintptr_t *lo, uintptr_t *hi, char *path, size_t len);

static int mapping_of(uintptr_t a, uintptr_t *lo, uintptr_t *hi)
{
    return mapping_path_of(a, lo, hi, NULL, 0);
}

/* Copies the path of the /proc/self/maps line [s, end) (after five fields) into path. */
static void line_path(const char *s, const char *end, char *path, size_t len)
{
    for (int field = 0; field < 5 && s < end; field++) {
        while (s < end && *s != ' ')
            s++;
        while (s < end && *s == ' ')
            s++;
    }
    size_t n = (size_t)(end - s) < len - 1 ? (size_t)(end - s) : len - 1;
    memcpy(path, s, n);
    path[n] = 0;
}

/* mapping_of(), with the mapping's file path into path (len bytes; "" when anonymous) when
 * path is not NULL. */
static int mapping_path_of(uintptr_t a, uintptr_t *lo, uintptr_t *hi, char *path, size_t len)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[2048];
    size_t have = 0;
    int found = 0;
    for (;;) {
        long n = syscall(SYS_read, fd, buf + have, sizeof buf - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t start = 0;
        for (size_t i = 0; i < have && !found; i++) {
            if (buf[i] != '\n')
                continue;
            uintptr_t l, h;
            if (parse_range(buf + start, buf + i, &l, &h) && a >= l && a < h) {
                *lo = l;
                *hi = h;
                found = 1;
                if (path && len)
                    line_path(buf + start, buf + i, path, len);
            }
            start = i + 1;
        }
        if (found)
            break;
        if (start == 0 && have == sizeof buf)
            have = 0; /* a line longer than the buffer: its start was parsed already */
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    syscall(SYS_close, fd);
    return found;
}

/* Finds this thread's stack bounds once: the main thread's from __libc_stack_end and the stack
 * limit, another thread's as the mapping its stack pointer is in (glibc puts the thread's
 * descriptor and TLS at the top of that mapping, above every frame). */
static void stack_bounds(struct tstate *t)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if ((pid_t)syscall(SYS_gettid) == getpid()) {
        struct rlimit rl;
        uintptr_t top = (uintptr_t)__libc_stack_end;
        uintptr_t size = 8u << 20;
        if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur < (1ul << 32))
            size = rl.rlim_cur;
        t->stack_hi = top + 64; /* main's frame sits just below __libc_stack_end */
        t->stack_lo = top > size ? top - size : 0;
    } else if (!mapping_of(sp, &t->stack_lo, &t->stack_hi)) {
        t->stack_hi = 0;
    }
    if (!t->stack_hi || sp < t->stack_lo || sp >= t->stack_hi)
        t->stack_lo = t->stack_hi = 1; /* unknown: record only the first frame */
}

/* Walks frame pointers from fp0; stores the return addresses in pcs, returns their number and
 * sets *hash to hash_stack() of them, computed on the way. In code built without frame
 * pointers rbp holds anything; a word read as a return address ends the walk unless it lies in
 * a module's code (unwind_is_code(), memo's rules first): never a made-up frame. */
static inline __attribute__((always_inline)) unsigned unwind(struct tstate *t, void *fp0,
                                                             uint64_t *pcs, unsigned max,
                                                             struct unwind_memo *memo,
                                                             uint64_t *hash)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t fp = (uintptr_t)fp0;
    if (!t->stack_hi)
        stack_bounds(t);
    uintptr_t hi = t->stack_hi; /* in a local: the stores into pcs could alias t's fields */
    /* fp0 is the interposer's own frame: always readable. */
    uintptr_t ret = ((uintptr_t *)fp)[1];
    uint64_t h = hash_step(HASH_SEED, ret);
    unsigned n = 0;
    pcs[n++] = ret;
    if (sp < t->stack_lo || sp >= hi) { /* alternate signal stack, coroutine, unknown */
        *hash = hash_end(h, n);
        return n;
    }
    /* Each frame must lie above the one before (so the walk ends), and below the top of the
     * stack with room for its two words. fp0 lies above sp, so every frame read is inside
     * [sp, hi). */
    uintptr_t top = hi - 16;
    while (n < max) {
        uintptr_t next = ((uintptr_t *)fp)[0];
        if (next <= fp || next > top || (next & 7))
            break;
        fp = next;
        ret = ((uintptr_t *)fp)[1];
        if (!unwind_is_code(memo, ret))
            break;
        pcs[n++] = ret;
        h = hash_step(h, ret);
    }
    *hash = hash_end(h, n);
    return n;
}

static uint64_t hash_stack(const uint64_t *pcs, unsigned n)
{
    uint64_t h = HASH_SEED;
    for (unsigned i = 0; i < n; i++)
        h = hash_step(h, pcs[i]);
    return hash_end(h, n);
}

static int module_known(uintptr_t lo, uintptr_t hi)
{
    for (unsigned i = 0; i < nmods; i++)
        if (mods[i].lo == lo && mods[i].hi == hi)
            return 1;
    return 0;
}

/* The known module pc is in (under mod_lock), which then counts as used by a stack; NULL: none. */
static struct module_range *covered(uintptr_t pc)
{
    for (unsigned i = 0; i < nmods; i++)
        if (pc >= mods[i].lo && pc < mods[i].hi) {
            mods[i].used = 1;
            return &mods[i];
        }
    return NULL;
}

struct scan_ctx {
    struct tstate *t;
    struct stream *s;
};

/* The address range [*lo, *hi) of a loaded object's PT_LOAD segments (*hi <= *lo: none). */
static void load_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < *lo)
            *lo = a;
        if (a + ph->p_memsz > *hi)
            *hi = a + ph->p_memsz;
    }
}

/* Writes the MODULE record of the object of info at [lo, hi) into ctx's stream: 0, or -1 when
 * it could not. */
static int module_record(struct dl_phdr_info *info, uintptr_t lo, uintptr_t hi,
                         struct scan_ctx *ctx, int first)
{
    const char *name = info->dlpi_name;
    if (!name || !*name)
        name = exe_path;
    /* dlopen("./libx.so"), or a relative LD_LIBRARY_PATH entry: the path the loader was given,
     * relative to a directory the converter does not know. The kernel's is absolute. */
    static char abs_path[MS_TRACE_MAX_PATH]; /* under mod_lock */
    uintptr_t ml, mh;
    if (name[0] != '/' && mapping_path_of(lo, &ml, &mh, abs_path, sizeof abs_path) &&
        abs_path[0] == '/')
        name = abs_path;
    size_t len = strnlen(name, MS_TRACE_MAX_PATH);
    if (first && nofp_library(name, len) && nnofp < MAX_NOFP) {
        nofp[nnofp].lo = lo;
        nofp[nnofp].hi = hi;
        __atomic_store_n(&nnofp, nnofp + 1, __ATOMIC_RELEASE);
    }
    uint8_t *w = writer_reserve(ctx->t, ctx->s, ms_module_record_max(len));
    if (!w)
        return -1;
    writer_commit(ctx->s, ms_enc_module(w, info->dlpi_addr, lo, hi, name, len));
    return 0;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct scan_ctx *ctx = arg;
    (void)size;
    uintptr_t lo, hi;
    load_range(info, &lo, &hi);
    if (hi <= lo || module_known(lo, hi) || nmods >= MAX_MODULES)
        return 0;
    unwind_add_module(info, lo, hi);
    if (module_record(info, lo, hi, ctx, 1) < 0)
        return 1;
    mods[nmods].lo = lo;
    mods[nmods].hi = hi;
    mods[nmods].used = 0;
    mods[nmods].epoch = ctx->s->ring_epoch;
    nmods++;
    return 0;
}

/* --trace-ring: writes again the MODULE record of each known object whose last one is in an
 * epoch older than ctx's stream's chunk (it may be dropped while stacks of this one refer to
 * it). */
static int redescribe_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct scan_ctx *ctx = arg;
    (void)size;
    uintptr_t lo, hi;
    load_range(info, &lo, &hi);
    for (unsigned i = 0; i < nmods; i++)
        if (mods[i].lo == lo && mods[i].hi == hi && writer_stale(ctx->s, mods[i].epoch)) {
            if (module_record(info, lo, hi, ctx, 0) < 0)
                return 1;
            mods[i].epoch = ctx->s->ring_epoch;
        }
    return 0;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg);

static unsigned char seen[MAX_MODULES]; /* modules_after_dlclose()'s marks, under mod_lock */

static int mark_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    uintptr_t lo, hi;
    load_range(info, &lo, &hi);
    for (unsigned i = 0; i < nmods; i++)
        if (mods[i].lo == lo && mods[i].hi == hi)
            seen[i] = 1;
    return 0;
}

void modules_after_dlclose(void)
{
    spin_lock(&mod_lock);
    memset(seen, 0, nmods);
    dl_iterate_phdr(mark_loaded, NULL);
    unsigned j = 0;
    int stale = 0;
    for (unsigned i = 0; i < nmods; i++) {
        if (seen[i]) {
            mods[j++] = mods[i];
            continue;
        }
        unwind_remove_module(mods[i].lo, mods[i].hi);
        stale |= mods[i].used;
    }
    nmods = j;
    mod_adds = ~0ull; /* whatever is loaded next at its address is described anew */
    spin_unlock(&mod_lock);
    if (stale) {
        /* Stacks with pcs in the closed library: the same pcs in another one loaded there
         * must get new stack ids (described after its MODULE record), not these. Ids go on
         * from the last one (stack_table.c). */
        stack_table_clear(&agent_tls);
        __atomic_add_fetch(&stab_gen, 1, __ATOMIC_RELEASE);
    }
}

/* After a walk that ended at a pc in no known module: describes what was loaded since the last
 * scan (a library just opened, whose constructor allocates before anything else of it ran).
 * 1 when modules were added. */
static int rescan_new(struct tstate *t, struct stream *s)
{
    struct scan_ctx ctx = {t, s};
    if (!spin_trylock(&mod_lock))
        return 0;
    unsigned before = nmods;
    unsigned long long adds = 0;
    dl_iterate_phdr(read_adds, &adds);
    if (adds != mod_adds) {
        dl_iterate_phdr(scan_one, &ctx);
        mod_adds = adds;
    }
    int added = nmods != before;
    spin_unlock(&mod_lock);
    return added;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

/* Emits MODULE records for every loaded object not described yet. */
void modules_scan(struct tstate *t, struct stream *s)
{
    struct scan_ctx ctx = {t, s};
    spin_lock(&mod_lock);
    dl_iterate_phdr(scan_one, &ctx);
    unsigned long long adds = 0;
    dl_iterate_phdr(read_adds, &adds);
    mod_adds = adds;
    spin_unlock(&mod_lock);
}

/* Rescans the module list when a new stack has a pc outside every known module and objects
 * were loaded since the last scan (dlopen). A nested (signal-handler) stream skips the check
 * when its thread holds the lock. */
static void check_modules(struct tstate *t, struct stream *s, const uint64_t *pcs, unsigned n)
{
    struct scan_ctx ctx = {t, s};
    if (s->nested) {
        if (!spin_trylock(&mod_lock))
            return;
    } else {
        spin_lock(&mod_lock);
    }
    int missing = 0, stale = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct module_range *m = covered(pcs[i]);
        missing |= !m;
        stale |= m && writer_stale(s, m->epoch);
    }
    if (stale)
        dl_iterate_phdr(redescribe_one, &ctx);
    if (missing) {
        unsigned long long adds = 0;
        dl_iterate_phdr(read_adds, &adds);
        if (adds != mod_adds) {
            dl_iterate_phdr(scan_one, &ctx);
            mod_adds = adds;
        }
    }
    spin_unlock(&mod_lock);
}

/* The innermost agent.py_depth entries of the thread's Python stack, innermost first, as
 * (frame id, line) pairs in out; returns how many entries. */
static unsigned py_snapshot(const struct tstate *t, uint32_t *out)
{
    const struct pyshadow *py = t->py;
    if (!py || !agent.py_depth || !py->depth)
        return 0;
    int (*line_of)(void *, uint32_t *) = agent.py_line_of;
    /* Under a hook that hands frames (line_of set), a shadow this thread has not written since
     * the hook was installed holds frames of an earlier hook, which may have returned since: no
     * Python stack rather than a wrong one, until the thread's next call (a thread that was
     * blocked in C code when the hook came). */
    if (line_of && py->frames_gen != agent.py_line_gen)
        return 0;
    unsigned d = py->depth < PY_MAX_DEPTH ? py->depth : PY_MAX_DEPTH;
    /* The innermost frame's line now, read from it (memscope__py_line_source). A line source
     * answers -1 for a frame that is not running (the frame evaluation hook's shadow ends with
     * frames that returned unseen until the next call: one more each time a frame it did not
     * push returns, so all are looked at, one pointer compare each): the stack then starts at
     * the first entry below it that is; when none is, at the innermost, with the lines of the
     * last calls. NEEDSWORK: a frame switched away without a return event
     * (greenlet) stays the innermost under the profile hook, which sees no switch. */
    int line = 0;
    uint32_t callee[2] = {0, 0}; /* a running callee the shadow lacks (memscope__py_line_source) */
    if (line_of && py->depth <= PY_MAX_DEPTH) {
        for (unsigned i = d; i-- > 0 && py->frame[i];) {
            int l = line_of(py->frame[i], callee);
            if (l >= 0) {
                d = i + 1;
                line = l;
                break;
            }
        }
    }
    unsigned n = 0;
    if (callee[0]) {
        out[0] = callee[0];
        out[1] = callee[1];
        n = 1;
    }
    unsigned top = n;
    for (unsigned i = d; i-- > 0 && n < agent.py_depth; n++) {
        out[2 * n] = py->frames[i][0];
        out[2 * n + 1] = py->frames[i][1];
    }
    if (line > 0 && top < n)
        out[2 * top + 1] = (uint32_t)line;
    return n;
}

static inline __attribute__((always_inline)) uint32_t intern(struct tstate *t, struct stream *s,
                                                             uint64_t h, const uint64_t *pcs,
                                                             unsigned n, const uint32_t *py,
                                                             unsigned npy);

unsigned stacks_code_frames(const uint64_t *pcs, unsigned n)
{
    unsigned k = 0;
    while (k < n && unwind_is_code(NULL, pcs[k]))
        k++;
    return k;
}

uint32_t stacks_intern(struct tstate *t, struct stream *s, const uint64_t *pcs, unsigned n)
{
    return n ? intern(t, s, hash_stack(pcs, n), pcs, n, NULL, 0) : 0;
}

/* stacks_capture() with room for agent.depth return addresses in pcs and agent.py_depth
 * Python entries in py. */
static inline __attribute__((always_inline)) uint32_t capture(struct tstate *t, struct stream *s,
                                                              void *fp, uint64_t *pcs, uint32_t *py)
{
    unsigned n = 0, npy = py_snapshot(t, py);
    uintptr_t ret0 = ((uintptr_t *)fp)[1];
    uint64_t h;
    if (!agent.depth) {
        h = hash_stack(pcs, 0);
    } else if (agent.unwind_dwarf || in_nofp(ret0)) {
        if (!t->stack_hi)
            stack_bounds(t);
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
        struct unwind_memo *memo = s->nested ? NULL : unwind_memo(t);
        uintptr_t lo = sp > t->stack_lo ? sp : t->stack_lo;
        n = unwind_cfi(fp, lo, t->stack_hi, pcs, agent.depth, memo, &h);
        if (n < agent.depth && unwind_should_rescan(memo, pcs[n - 1]) && rescan_new(t, s))
            n = unwind_cfi(fp, lo, t->stack_hi, pcs, agent.depth, memo, &h);
    } else {
        struct unwind_memo *memo = s->nested ? NULL : unwind_memo(t);
        n = unwind(t, fp, pcs, agent.depth, memo, &h);
        /* ended at a word in no known module's code: a library loaded since the last scan? */
        /* once per caller while it stays the one: in code without frame pointers every walk
         * ends at such a word, mostly a different one */
        if (n < agent.depth && unwind_should_rescan(memo, ret0) && rescan_new(t, s))
            n = unwind(t, fp, pcs, agent.depth, memo, &h);
    }
    if (n == 0 && npy == 0)
        return 0;
    return intern(t, s, h, pcs, n, py, npy);
}

/* --trace-ring, before a lookup: room in the chunk for the event that will use the id, so that
 * its epoch is the one the stack's description is checked against; a thread's recent ids are
 * forgotten when that epoch is not theirs (they may be described in an older one). 0: no
 * room (the event goes without a stack). */
static __attribute__((noinline)) int ring_prepare(struct tstate *t, struct stream *s,
                                                  struct unwind_ids *ids)
{
    if (!writer_reserve(t, s, RING_EVENT_ROOM))
        return 0;
    if (ids && ids->epoch != s->ring_epoch) {
        ids->gen = 0;
        memset(ids->hash, 0, sizeof ids->hash);
        ids->epoch = s->ring_epoch;
    }
    return 1;
}

static inline __attribute__((always_inline)) uint32_t
intern_shared(struct tstate *t, struct stream *s, uint64_t h, const uint64_t *pcs, unsigned n,
              const uint32_t *py, unsigned npy);

/* The id of the stack of hash h (native pcs[0..n), Python py[0..2*npy)), adding it (and its
 * STACK, PYSTACK and MODULE records) when new. */
static inline __attribute__((always_inline)) uint32_t intern(struct tstate *t, struct stream *s,
                                                             uint64_t h, const uint64_t *pcs,
                                                             unsigned n, const uint32_t *py,
                                                             unsigned npy)
{
    for (unsigned i = 0; i < 2 * npy; i++) { /* the Python part is part of the key */
        h ^= py[i] + 0x9e3779b97f4a7c15ull;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    h = h ? h : 1;
    /* this thread's recent stacks first (not in a signal handler: it would share them) */
    struct unwind_ids *ids = s->nested ? NULL : unwind_ids(t);
    unsigned k = (unsigned)(h >> 32) & (UNWIND_IDS - 1);
    if (unlikely(agent.ring) && !ring_prepare(t, s, ids))
        return 0;
    if (ids && ids->gen != stab_gen) {
        if (ids->gen) /* 0: a new mapping, all zero: not touching it saves the program 32 KiB */
            memset(ids->hash, 0, sizeof ids->hash);
        ids->gen = stab_gen;
    }
    if (ids && ids->hash[k] == h)
        return ids->id[k];
    uint32_t id = intern_shared(t, s, h, pcs, n, py, npy);
    if (ids && id) {
        ids->hash[k] = h;
        ids->id[k] = id;
    }
    return id;
}

/* intern()'s shared part: the table of every stack of the process. */
static inline __attribute__((always_inline)) uint32_t
intern_shared(struct tstate *t, struct stream *s, uint64_t h, const uint64_t *pcs, unsigned n,
              const uint32_t *py, unsigned npy)
{
    uint32_t *epoch;
    uint32_t id = stack_table_find(h, &epoch);
    if (likely(id != 0)) {
        if (likely(!writer_stale(s, __atomic_load_n(epoch, __ATOMIC_RELAXED))))
            return id;
        /* --trace-ring: its STACK record is in an epoch that may be dropped before this one */
        __atomic_store_n(epoch, s->ring_epoch, __ATOMIC_RELAXED);
    } else {
        int added;
        id = stack_table_add(t, h, s->ring_epoch, &added);
        if (!added) { /* added meanwhile by another thread; or 0: the event goes without one */
            if (!id || stack_table_find(h, &epoch) != id ||
                !writer_stale(s, __atomic_load_n(epoch, __ATOMIC_RELAXED)))
                return id;
            __atomic_store_n(epoch, s->ring_epoch, __ATOMIC_RELAXED);
        }
    }
    /* New stack: describe it (and any module it needs) before the event that uses it (in the
     * same chunk, with --trace-ring: room for it and the event at once). */
    check_modules(t, s, pcs, n);
    if (npy && agent.ring)
        python_redescribe(t, s, py, npy);
    size_t room = ms_stack_record_max(n) + (npy ? ms_pystack_record_max(npy) : 0);
    uint8_t *w = writer_reserve(t, s, room + (agent.ring ? RING_EVENT_ROOM : 0));
    if (!w)
        return 0;
    writer_commit(s, ms_enc_stack(w, id, pcs, n));
    if (npy) {
        w = writer_reserve(t, s, ms_pystack_record_max(npy));
        if (w)
            writer_commit(s, ms_enc_pystack(w, &s->enc, agent_now(), id, py, npy));
    }
    return id;
}

/* Depths up to SMALL_DEPTH take fixed arrays; deeper ones (memscope run's default, 256, among
 * them) arrays sized to the depth (small threads have small stacks), which cost a few
 * instructions more to set up. */
#define SMALL_DEPTH 64

static __attribute__((noinline)) uint32_t capture_deep(struct tstate *t, struct stream *s, void *fp)
{
    uint64_t pcs[agent.depth ? agent.depth : 1];
    uint32_t py[agent.py_depth ? 2 * agent.py_depth : 2];
    return capture(t, s, fp, pcs, py);
}

uint32_t stacks_capture(struct tstate *t, struct stream *s, void *fp)
{
    if (agent.depth > SMALL_DEPTH || agent.py_depth > SMALL_DEPTH)
        return capture_deep(t, s, fp);
    uint64_t pcs[SMALL_DEPTH];
    uint32_t py[2 * SMALL_DEPTH];
    return capture(t, s, fp, pcs, py);
}
