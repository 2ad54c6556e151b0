/* clock.c: the agent's timestamps: CLOCK_MONOTONIC nanoseconds, read from the TSC when it can
 * be trusted, from clock_gettime otherwise.
 *
 * Every recorded event carries a timestamp (agent_now() in agent.h). clock_gettime costs about
 * 16-25 ns even through the vDSO (lfence, rdtsc, a seqlock, a multiply), a sixth of a traced
 * malloc; an rdtsc that overlaps the work around it, a few ns. Called from agent_init
 * (clock_init), from the forked child's hook, and from agent_now() when its inline fast path
 * cannot answer: at a thread's first event, about once a millisecond per thread after that, and
 * on every event while the rate is unknown (the first 10 ms of the process, when an event costs
 * one clock_gettime, as without the TSC).
 *
 * When the TSC is used: the CPU says its TSC is invariant (constant rate, runs in every C-state:
 * cpuid 0x80000007, EDX bit 8), the kernel's own clocksource is "tsc" (so the kernel found the
 * TSCs of all CPUs synchronized, and CLOCK_MONOTONIC is itself a linear function of the TSC,
 * adjusted by NTP), and MEMSCOPE_NO_TSC=1 is not set. Otherwise agent_now() is clock_gettime,
 * exactly as before.
 *
 * How: each thread keeps an anchor (struct clock_anchor in its TLS): a TSC value, the
 * CLOCK_MONOTONIC ns at that TSC, the process-wide rate (ns per tick, 32-bit fixed point) and a
 * span of about 1 ms of ticks. An event within the span is ns + (tsc - anchor) * rate; the first
 * event past it takes a new anchor: lfence, rdtsc, clock_gettime, lfence, rdtsc, twice, the
 * tighter pair anchored at the middle of its two TSC reads, and returns clock_gettime's value
 * itself. A pair whose reads are more than gap_max ticks apart (an interrupt or preemption came
 * between) is not used: that event returns clock_gettime's value, the anchor stays stale, and
 * the next event tries again. gap_max is 4x the tightest pair seen at init, or 250 ns if that is
 * more (so that a CPU clocked down later still anchors). The rate is measured between such
 * anchors (any thread's) and a process-wide reference pair at least 10 ms older; the reference
 * moves forward every second, so the rate is measured over 1-2 s and follows NTP's frequency
 * corrections within seconds.
 *
 * Error of a timestamp against clock_gettime at the same TSC: the anchor's half gap (about 20 ns
 * on the 2.6 GHz VM this was written on, at most gap_max / 2) plus the rate's error times the
 * 1 ms span (the rate is known to gap_max / 10 ms, a few ppm, at first, then to about 0.1 ppm:
 * well below a ns per span). Two threads' clocks therefore agree to a few tens of ns, less than
 * any hand-off between threads takes: a free on one thread, then a malloc of the same block on
 * another, goes through the allocator's lock, a spin loop or a syscall.
 * NEEDSWORK: the fast path's rdtsc is not ordered (no lfence, unlike the vDSO's): it may run a
 * little before the instructions preceding it, never after later stores become visible. A
 * free's timestamp is taken before the free, so it can only be early; a malloc's comes after the
 * synchronization through which its thread learned of that free (a mispredicted spin-loop exit
 * or a syscall, which order it in practice, though not architecturally). An lfence would make it
 * architectural, but costs most of the gain (churn, user time: 0.46 s plain, 0.53 s with lfence,
 * 0.55 s with clock_gettime).
 *
 * Monotonic per thread: not clamped here. The encoder (ms_put_ts in encode.h) writes a
 * timestamp below the stream's previous one as a zero delta, so every stream in the trace is
 * non-decreasing by construction; a re-anchor can step back by the error above, at most, which
 * the encoder absorbs.
 *
 * Signal safety: a signal handler that allocates calls agent_now() on the thread it
 * interrupted, which may be inside agent_now() itself (the free path takes its timestamp before
 * it enters the agent, so the guard cannot tell). The anchor is therefore a per-thread seqlock.
 * It needs no atomic instruction and no memory fence, only compiler fences
 * (__atomic_signal_fence), because reader and writer are one thread: the code a handler
 * interrupted sees the handler's stores in program order. The writer makes seq odd, writes the
 * four fields, and makes seq even again; a reader takes the anchor only when seq was even
 * before and is unchanged after its reads, else it goes to the slow path. So:
 *  - a handler that interrupts a reader and re-anchors makes the reader's check fail;
 *  - a handler that interrupts a writer after it made seq odd uses clock_gettime and leaves the
 *    anchor alone;
 *  - a handler that interrupts a writer before that may re-anchor; the writer then overwrites
 *    the anchor with its own, just as valid.
 * Every writer ends at (the seq it read) + 2, so seq never comes back to the value an
 * interrupted reader started with. The process-wide rate is taken under a try-lock: a thread
 * (or handler) that finds it taken keeps the rate it has.
 *
 * fork: the child keeps the parent's TSC, clock, rate and anchors, all still right; only the
 * rate lock is reset (another thread may have held it). exec: a new agent, a new init. */
#include "agent.h"

#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define NS_SPAN 1000000ull        /* an anchor serves this long (1 ms) */
#define NS_CAL_MIN 10000000ull    /* the rate is measured over at least 10 ms */
#define NS_CAL_STEP 1000000000ull /* the reference pair moves forward every second */
#define NS_GAP_FLOOR 250ull       /* gap_max is never below this */

/* Process-wide calibration: gap_init is set at init; the rest is written under lock (a
 * try-lock) and read with relaxed atomics. */
static struct {
    uint64_t gap_init; /* 4x the tightest rdtsc/clock_gettime/rdtsc pair at init */
    uint64_t gap_max;  /* widest such pair used as an anchor, in ticks */
    int lock;
    uint64_t ref_tsc, ref_ns;   /* the rate is measured from here ... */
    uint64_t next_tsc, next_ns; /* ... and from here once this is NS_CAL_STEP old */
    uint64_t mult;              /* ns per tick << 32, 0 until known (relaxed atomic) */
} clk;

uint64_t clock_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)

__extension__ typedef unsigned __int128 u128; /* GCC and Clang on x86-64 */

/* One anchor measurement: *tsc gets the middle of two TSC reads around clock_gettime, *ns its
 * value; returns the ticks between the two reads. The lfences keep both reads in place (the
 * vDSO orders its own read after the first). */
static uint64_t measure(uint64_t *tsc, uint64_t *ns)
{
    __builtin_ia32_lfence();
    uint64_t t0 = __builtin_ia32_rdtsc();
    *ns = clock_mono();
    __builtin_ia32_lfence();
    uint64_t t1 = __builtin_ia32_rdtsc();
    *tsc = t0 + (t1 - t0) / 2;
    return t1 - t0;
}

/* Takes (tsc, ns), an anchor just measured, into the rate; returns the rate to use (0: none
 * yet). The rate is recomputed from the reference pair at each anchor, which costs one
 * division per thread per millisecond. */
static uint64_t rate_update(uint64_t tsc, uint64_t ns)
{
    uint64_t mult = __atomic_load_n(&clk.mult, __ATOMIC_RELAXED);
    if (ns - __atomic_load_n(&clk.ref_ns, __ATOMIC_RELAXED) < NS_CAL_MIN ||
        !spin_trylock(&clk.lock))
        return mult;
    if (ns > clk.ref_ns + NS_CAL_MIN && tsc > clk.ref_tsc) {
        u128 m = ((u128)(ns - clk.ref_ns) << 32) / (tsc - clk.ref_tsc);
        /* A plausible TSC runs at 16 MHz to 16 GHz. */
        if (m >= (1ull << 28) && m <= (64ull << 32)) {
            mult = (uint64_t)m;
            uint64_t floor = (NS_GAP_FLOOR << 32) / mult;
            __atomic_store_n(&clk.gap_max, floor > clk.gap_init ? floor : clk.gap_init,
                             __ATOMIC_RELAXED);
            __atomic_store_n(&clk.mult, mult, __ATOMIC_RELAXED);
        }
        if (ns - clk.next_ns >= NS_CAL_STEP) {
            __atomic_store_n(&clk.ref_ns, clk.next_ns, __ATOMIC_RELAXED);
            clk.ref_tsc = clk.next_tsc;
            clk.next_tsc = tsc;
            clk.next_ns = ns;
        }
    }
    spin_unlock(&clk.lock);
    return mult;
}

uint64_t clock_now_slow(struct clock_anchor *a)
{
    if (!agent.clock_tsc)
        return clock_mono();
    if (!__atomic_load_n(&clk.mult, __ATOMIC_RELAXED)) {
        /* The rate is not known before NS_CAL_MIN: until then an event costs one clock_gettime,
         * as without the TSC (a short-lived process never pays for calibration pairs). */
        uint64_t now = clock_mono();
        if (now - __atomic_load_n(&clk.ref_ns, __ATOMIC_RELAXED) < NS_CAL_MIN)
            return now;
    }
    uint32_t seq = __atomic_load_n(&a->seq, __ATOMIC_RELAXED);
    if (seq & 1)
        return clock_mono(); /* we interrupted this thread's own re-anchoring: hands off */
    /* Two pairs, the tighter one: the first one often pays for cache misses on the vDSO's
     * data and code (the thread's last anchor was a millisecond ago), before the vDSO reads
     * the TSC, which would put the middle of the pair early. */
    uint64_t tsc, ns, tsc2, ns2;
    uint64_t gap = measure(&tsc, &ns), gap2 = measure(&tsc2, &ns2);
    if (gap2 <= gap) {
        gap = gap2;
        tsc = tsc2;
        ns = ns2;
    }
    if (gap > __atomic_load_n(&clk.gap_max, __ATOMIC_RELAXED))
        return ns; /* interrupted or preempted in between: no anchor from this pair */
    uint64_t mult = rate_update(tsc, ns);
    if (!mult)
        return ns;
    /* d < span keeps d * mult below NS_SPAN << 32, about 2^52: no overflow on the fast path. */
    uint64_t span = (NS_SPAN << 32) / mult;
    __atomic_store_n(&a->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&a->tsc, tsc, __ATOMIC_RELAXED);
    __atomic_store_n(&a->ns, ns, __ATOMIC_RELAXED);
    __atomic_store_n(&a->mult, mult, __ATOMIC_RELAXED);
    __atomic_store_n(&a->span, span, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&a->seq, seq + 2, __ATOMIC_RELAXED);
    return ns;
}

/* Whether the kernel keeps time with the TSC: reads the clocksource name (no stdio, no malloc). */
static int kernel_uses_tsc(void)
{
    char buf[16];
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n == 4 && !memcmp(buf, "tsc\n", 4);
}

void clock_init(int no_tsc)
{
    unsigned a, b, c, d;
    if (no_tsc || (unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
        return;
    __cpuid(0x80000007u, a, b, c, d);
    if (!(d & (1u << 8)) || !kernel_uses_tsc())
        return;
    /* The reference pair and gap_init from the tightest of a few measurements. */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 16; i++) {
        uint64_t tsc, ns, gap = measure(&tsc, &ns);
        if (gap < best) {
            best = gap;
            clk.ref_tsc = clk.next_tsc = tsc;
            clk.ref_ns = clk.next_ns = ns;
        }
    }
    clk.gap_init = clk.gap_max = 4 * best;
    (void)a, (void)b, (void)c;
    agent.clock_tsc = 1;
}

#else /* no TSC: agent_now() is clock_gettime */

uint64_t clock_now_slow(struct clock_anchor *a)
{
    (void)a;
    return clock_mono();
}

void clock_init(int no_tsc)
{
    (void)no_tsc;
}

#endif

void clock_after_fork_child(void)
{
    clk.lock = 0;
}
