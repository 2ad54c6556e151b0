/* sample.c: sampling mode (`memscope run --sampling=BYTES`, docs/production.md "Sampling").
 *
 * Heap allocations are sampled by bytes as a Poisson process of mean B = agent.sample_bytes
 * bytes between samples, as tcmalloc, jemalloc and Go's profiler do: each thread counts down
 * the bytes it allocates from a draw of an exponential distribution of mean B, and the
 * allocation that takes the countdown to zero or below is sampled (then a new countdown is
 * drawn). The distribution has no memory, so an allocation of S bytes is sampled with
 * probability 1 - exp(-S/B) whatever came before it, and the converter weights a sampled one by
 * the inverse (the weight is a function of S and B alone: the trace carries no weights).
 * Blocks much larger than B are sampled almost surely (S = 8B: with probability 0.9997).
 *
 * Every allocation and free is also counted, exactly, per thread (struct sampler, in TLS: two
 * additions and a subtraction on the unsampled path); a thread adds its counts to the trace
 * header's (atomically: the header is a shared mapping of the file, so they survive a crash)
 * with every 16th sample and when it exits; at process exit, the counts of the threads still
 * running are added too (a registry of their counters).
 *
 * Which blocks were sampled: the address set of agent.h (struct sample_set), of bounded size, so
 * that the agent's memory stays constant however long the program runs; it holds at most
 * SAMPLE_SLOTS / 4 live sampled blocks (64 Ki: a heap of 32 GiB of small blocks at 512 KiB),
 * beyond which new samples are dropped and the agent says so once. Beside it, a counting filter
 * of the sampled addresses (sample_marks, agent.h), kept under the same lock, lets a free of an
 * unsampled block skip the set: the unsampled path of malloc and free is the inline halves
 * sample_alloc_skip() and sample_free_skip() (bench/RESULTS.md, "Sampling mode": about 20
 * instructions each, measured with callgrind).
 *
 * The generator is splitmix64, per thread, seeded from the TSC and the thread's address, or
 * from MEMSCOPE_SAMPLING_SEED (tests: the n-th thread to allocate gets seed + n, so a
 * single-threaded program samples the same allocations every run). */
#include "agent.h"

#include <stdlib.h>
#include <string.h>

struct sample_set sample_set;
uint8_t sample_marks[SAMPLE_MARKS];

static uint64_t seed_base;      /* MEMSCOPE_SAMPLING_SEED, or 0 */
static int seed_fixed;          /* it was given */
static uint32_t threads_seeded; /* atomic: threads that drew their first countdown */

/* The threads that sampled or counted, so that the process's exit adds the counts of those
 * still running (their TLS cannot be reached otherwise). A thread takes a slot at its first
 * allocation or free and gives it back when it exits; past SAMPLE_THREADS threads at once, a
 * thread's counts are added at its exit and with every 16th sample only. */
#define SAMPLE_THREADS 4096
static struct sampler *registry[SAMPLE_THREADS]; /* atomic */

/* Adds m's counts to the trace header's and zeroes them. */
static void flush(struct sampler *m)
{
    struct ms_trace_file_header *h = agent.hdr;
    if (!agent.sample_bytes || !h || !agent.live->generation)
        return; /* (a cloned child not set up yet: the header is its parent's; later) */
    uint64_t a = m->allocs, b = m->bytes, f = m->frees;
    m->allocs = m->bytes = m->frees = 0;
    __atomic_add_fetch(&h->heap_allocs, a, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->heap_bytes, b, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->heap_frees, f, __ATOMIC_RELAXED);
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ln(x) for x in (0, 1]: no libm in the agent. x = m 2^e with m in [1, 2); ln m from the
 * series of atanh ((m - 1) / (m + 1) <= 1/3: 14 terms reach double precision). */
static double ln01(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    b = (b & ~(0x7ffull << 52)) | (1023ull << 52);
    double m;
    memcpy(&m, &b, sizeof m);
    double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
    for (int k = 1; k < 30; k += 2) {
        sum += term / k;
        term *= s2;
    }
    return e * 0.69314718055994530942 + 2 * sum;
}

/* A countdown: a draw of an exponential distribution of mean agent.sample_bytes. */
static int64_t draw(struct sampler *m)
{
    double u = (double)((splitmix64(&m->rng) >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0,1] */
    double v = -ln01(u) * (double)agent.sample_bytes;
    return v >= 9.0e18 ? INT64_MAX : (int64_t)v + 1;
}

static unsigned long long env_u64(const char *name, int *given)
{
    const char *v = getenv(name);
    unsigned long long n = 0;
    *given = 0;
    if (!v || !*v)
        return 0;
    for (; *v >= '0' && *v <= '9'; v++) {
        if (n > (~0ull - 9) / 10)
            return 0;
        n = n * 10 + (unsigned long long)(*v - '0');
    }
    if (*v)
        return 0; /* memscope run writes plain decimals: anything else is not its */
    *given = 1;
    return n;
}

void sample_init(void)
{
    int given;
    agent.sample_bytes = env_u64(MS_ENV_SAMPLING, &given);
    seed_base = env_u64(MS_ENV_SAMPLING_SEED, &seed_fixed);
    agent.max_trace = env_u64(MS_ENV_MAX_TRACE_SIZE, &given);
}

/* Takes the set's lock for thread t: 0, or -1 when t's guard was up (a signal handler that
 * interrupted its thread in the agent, perhaps inside this lock) and the lock is taken. The
 * guard is raised before the lock is taken and lowered after it is let go, so that a handler
 * that interrupts its thread anywhere in between only ever tries the lock; set_unlock() gets
 * the guard's value from before. */
static int set_lock(struct tstate *t)
{
    int g = t->guard;
    t->guard = g + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (!g)
        spin_lock(&sample_set.lock);
    else if (!spin_trylock(&sample_set.lock)) {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t->guard = g;
        return -1;
    }
    return 0;
}

static void set_unlock(struct tstate *t, int g)
{
    spin_unlock(&sample_set.lock);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->guard = g;
}

/* Maps the two tables (once, at the first sample). Under the lock. */
static int set_map(void)
{
    if (sample_set.bufs[0])
        return 0;
    size_t len = (size_t)SAMPLE_SLOTS * sizeof(uint64_t);
    void *a = sys_mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED)
        return -1;
    sample_set.bufs[0] = a;
    sample_set.bufs[1] = (uint64_t *)((char *)a + len);
    __atomic_store_n(&sample_set.bits, SAMPLE_MIN_LOG2, __ATOMIC_RELAXED);
    __atomic_store_n(&sample_set.tab, sample_set.bufs[0], __ATOMIC_RELEASE);
    return 0;
}

/* Copies the live addresses into a table of 2^bits slots in the other mapping, leaving the
 * tombstones behind. Lookups that overlap it see seq change and look again under the lock. */
static void set_rebuild(uint32_t bits)
{
    uint64_t *from = sample_set.tab;
    uint32_t from_n = 1u << sample_set.bits, mask = (1u << bits) - 1;
    uint64_t *to = from == sample_set.bufs[0] ? sample_set.bufs[1] : sample_set.bufs[0];
    __atomic_store_n(&sample_set.seq, sample_set.seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memset(to, 0, ((size_t)mask + 1) * sizeof *to);
    for (uint32_t i = 0; i < from_n; i++) {
        uint64_t v = from[i];
        if (v == SAMPLE_EMPTY || v == SAMPLE_TOMB)
            continue;
        uint32_t j = sample_hash((uintptr_t)v, bits);
        while (to[j] != SAMPLE_EMPTY)
            j = (j + 1) & mask;
        to[j] = v;
    }
    __atomic_store_n(&sample_set.tab, to, __ATOMIC_RELEASE);
    __atomic_store_n(&sample_set.bits, bits, __ATOMIC_RELEASE);
    sample_set.used = sample_set.live;
    __atomic_store_n(&sample_set.seq, sample_set.seq + 1, __ATOMIC_RELEASE);
}

/* Adds p; 0, or -1 when the set is full (or cannot be mapped). Under the lock. */
static int set_add(uintptr_t p)
{
    if (set_map() < 0 || sample_set.live >= SAMPLE_SLOTS / 4)
        return -1;
    uint32_t n = 1u << sample_set.bits;
    /* Lookups of addresses not in the set (most frees) end at the first empty slot: the table
     * is kept at most half used, a quarter live, so that most end at their first probe. */
    if (sample_set.live + 1 > n / 4 && sample_set.bits < SAMPLE_SLOTS_LOG2)
        set_rebuild(sample_set.bits + 1); /* a quarter live: twice the size */
    else if (sample_set.used + 1 > n / 2)
        set_rebuild(sample_set.bits); /* tombstones: the same size, without them */
    uint64_t *tab = sample_set.tab;
    uint32_t mask = (1u << sample_set.bits) - 1, i = sample_hash(p, sample_set.bits);
    while (tab[i] != SAMPLE_EMPTY && tab[i] != SAMPLE_TOMB)
        i = (i + 1) & mask;
    if (tab[i] == SAMPLE_EMPTY)
        sample_set.used++;
    sample_set.live++;
    __atomic_store_n(&tab[i], (uint64_t)p, __ATOMIC_RELEASE);
    uint8_t *m = sample_mark((void *)p), c = *m;
    if (c != 255) /* (255: sticky, its frees always look in the set) */
        __atomic_store_n(m, (uint8_t)(c + 1), __ATOMIC_RELAXED);
    return 0;
}

int sample_alloc_slow(struct tstate *t, const void *p, size_t n)
{
    struct sampler *m = &t->smp;
    if (!t->smp_started) { /* the thread's first allocation: its first countdown */
        sample_thread_start(t);
        m->left -= (int64_t)n;
        if (m->left > 0)
            return 0;
    }
    m->left = draw(m);
    if (agent.broken)
        return 0; /* recording stopped (the trace's cap, an error): counts only */
    /* (a signal handler that interrupted its thread in the agent may find the set's lock
     * taken: the allocation is then not sampled, a bias of one in millions) */
    int g = t->guard;
    if (set_lock(t) < 0)
        return 0;
    int rc = set_add((uintptr_t)p);
    set_unlock(t, g);
    if (rc < 0) {
        if (!__atomic_exchange_n(&sample_set.full_said, 1, __ATOMIC_RELAXED)) {
            t->internal++;
            agent_say("sampling: too many live sampled blocks (over 65536); later samples are "
                      "dropped and the estimates are low",
                      NULL);
            t->internal--;
        }
        return 0;
    }
    if ((++m->samples & 15) == 0)
        flush(m); /* now and then: a thread that never ends has its counts */
    return 1;
}

int sample_free_slow(const void *p)
{
    struct tstate *t = &agent_tls;
    int g = t->guard;
    if (set_lock(t) < 0)
        return 1; /* recorded whether sampled or not: harmless */
    uint64_t *tab = sample_set.tab;
    uint32_t mask = (1u << sample_set.bits) - 1, i = 0;
    if (tab)
        i = sample_hash((uintptr_t)p, sample_set.bits);
    for (uint32_t k = 0; tab && k <= mask; k++, i = (i + 1) & mask) {
        if (tab[i] == SAMPLE_EMPTY)
            break;
        if (tab[i] == (uintptr_t)p) {
            sample_set.live--;
            uint8_t *m = sample_mark(p), c = *m;
            if (c != 255 && c)
                __atomic_store_n(m, (uint8_t)(c - 1), __ATOMIC_RELAXED);
            if (tab[(i + 1) & mask] != SAMPLE_EMPTY) {
                __atomic_store_n(&tab[i], (uint64_t)SAMPLE_TOMB, __ATOMIC_RELEASE);
                break;
            }
            /* The end of its cluster: no probe goes past it, so this slot and the tombstones
             * just before it become empty again (no lookup's path crosses them: they end the
             * cluster; inserts wait for the lock). */
            do {
                __atomic_store_n(&tab[i], (uint64_t)SAMPLE_EMPTY, __ATOMIC_RELEASE);
                sample_set.used--;
                i = (i - 1) & mask;
            } while (tab[i] == SAMPLE_TOMB);
            break;
        }
    }
    set_unlock(t, g);
    return 1;
}

void sample_thread_start(struct tstate *t)
{
    struct sampler *m = &t->smp;
    t->smp_started = 1;
    uint32_t k = __atomic_fetch_add(&threads_seeded, 1, __ATOMIC_RELAXED);
    m->rng = seed_fixed ? seed_base + k + 1
                        : (__builtin_ia32_rdtsc() ^ (uintptr_t)t) * 0x9e3779b97f4a7c15ull;
    if (!m->rng)
        m->rng = 1;
    m->left = draw(m);
    for (uint32_t i = 0; i < SAMPLE_THREADS && !m->slot; i++) {
        struct sampler *none = NULL;
        if (__atomic_compare_exchange_n(&registry[i], &none, m, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            m->slot = i + 1;
    }
    t->internal++;
    agent_thread_register(); /* sample_thread_exit() when it exits */
    t->internal--;
}

void sample_thread_exit(struct tstate *t)
{
    struct sampler *m = &t->smp;
    flush(m);
    if (m->slot)
        __atomic_store_n(&registry[m->slot - 1], NULL, __ATOMIC_RELEASE);
    m->slot = 0;
}

void sample_flush_all(void)
{
    flush(&agent_tls.smp);
    for (uint32_t i = 0; i < SAMPLE_THREADS; i++) {
        struct sampler *m = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
        if (m)
            flush(m); /* (a thread still running may add a few meanwhile: lost) */
    }
}

void sample_after_fork_child(struct tstate *t)
{
    sample_set.lock = 0;    /* a thread of the parent may have held it: it is not in the child */
    if (sample_set.seq & 1) /* ... in a rebuild, which had not published its table yet */
        sample_set.seq++;
    memset(&t->smp, 0, sizeof t->smp);
    t->smp_started = 0;
    memset(registry, 0, sizeof registry); /* the parent's threads: not in the child */
    __atomic_store_n(&threads_seeded, 0, __ATOMIC_RELAXED);
}
