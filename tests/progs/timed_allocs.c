/* timed_allocs: allocations at known times, for checking the tracer's timestamps.
 *
 *   timed_allocs BOUNDS.csv
 *
 * Run by tests/integration/test_timed_allocs.sh. Each event the test checks is bracketed by two
 * clock_gettime(CLOCK_MONOTONIC) reads, written to BOUNDS.csv as
 * "KIND,SIZE,NTH,BEFORE_NS,AFTER_NS" (KIND MALLOC or FREE; NTH counts events of that kind and
 * size from 1, in this program's order), so the test can check that every recorded timestamp
 * lies within its bracket (up to one constant offset: the database has epoch times).
 *   1. Sleeps: 40 malloc/free pairs of sizes 20000..20039 on the main thread; before each even
 *      pair but the first it sleeps 3 ms, or 30 ms before pairs 10, 20 and 30 (long enough for
 *      any cached clock state to go stale, and past the first 10 ms of the process).
 *   2. Hand-off: thread B mallocs 5000 bytes and hands the block to thread A, which frees it
 *      and hands the turn back (mutex and condition variable), HANDOFFS = 2000 times. With one
 *      malloc arena and a size above glibc's tcache, B mostly gets the block A just freed: the
 *      free on A must come before B's next malloc of that address in the trace.
 *   3. Signals: for 40 ms the main thread mallocs and frees 333 bytes in bursts, while SIGALRM
 *      arrives every 100 us and its handler mallocs and frees 777 bytes (both sizes warmed up
 *      into their tcache bins first, so a handler's malloc takes no lock), bracketed too.
 * Prints "timed_allocs ok HANDOFFS SIGNALS" and exits 0. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#define HANDOFFS 2000
#define MAX_SIGNALS 4096

static FILE *out;

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void bound(const char *kind, size_t size, long nth, uint64_t before, uint64_t after)
{
    fprintf(out, "%s,%zu,%ld,%llu,%llu\n", kind, size, nth, (unsigned long long)before,
            (unsigned long long)after);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- 1. sleeps ---- */
static int sleeps(void)
{
    for (int i = 0; i < 40; i++) {
        if (i > 0 && i % 2 == 0)
            sleep_ms(i % 10 == 0 ? 30 : 3);
        size_t n = 20000 + (size_t)i;
        uint64_t b = mono();
        volatile char *p = malloc(n);
        uint64_t a = mono();
        if (!p)
            return -1;
        p[0] = 1;
        bound("MALLOC", n, 1, b, a);
        b = mono();
        free((void *)p);
        a = mono();
        bound("FREE", n, 1, b, a);
    }
    return 0;
}

/* ---- 2. hand-off ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;   /* 0: B mallocs, 1: A frees */
static void *block;
static uint64_t b_before[HANDOFFS], b_after[HANDOFFS], a_before[HANDOFFS], a_after[HANDOFFS];

static void *thread_b(void *arg)
{
    (void)arg;
    for (int k = 0; k < HANDOFFS; k++) {
        pthread_mutex_lock(&mu);
        while (turn != 0)
            pthread_cond_wait(&cv, &mu);
        b_before[k] = mono();
        block = malloc(5000);
        b_after[k] = mono();
        turn = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void *thread_a(void *arg)
{
    (void)arg;
    for (int k = 0; k < HANDOFFS; k++) {
        pthread_mutex_lock(&mu);
        while (turn != 1)
            pthread_cond_wait(&cv, &mu);
        a_before[k] = mono();
        free(block);
        a_after[k] = mono();
        turn = 0;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static int handoff(void)
{
    pthread_t a, b;
    if (pthread_create(&a, NULL, thread_a, NULL) || pthread_create(&b, NULL, thread_b, NULL))
        return -1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    for (int k = 0; k < HANDOFFS; k++) {
        bound("MALLOC", 5000, k + 1, b_before[k], b_after[k]);
        bound("FREE", 5000, k + 1, a_before[k], a_after[k]);
    }
    return 0;
}

/* ---- 3. signals ---- */
static volatile sig_atomic_t handled;
static uint64_t h_bounds[MAX_SIGNALS][4];

static void on_alarm(int sig)
{
    (void)sig;
    if (handled >= MAX_SIGNALS)
        return;
    uint64_t *h = h_bounds[handled];
    h[0] = mono();
    volatile char *p = malloc(777);
    h[1] = mono();
    if (p)
        p[0] = 3;
    h[2] = mono();
    free((void *)p);
    h[3] = mono();
    handled = handled + 1;
}

static int signals(void)
{
    free(malloc(333)); /* warm up both tcache bins */
    free(malloc(777));
    handled = 0;
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return -1;
    struct itimerval it = {{0, 100}, {0, 100}};
    if (setitimer(ITIMER_REAL, &it, NULL) != 0)
        return -1;
    uint64_t end = mono() + 40000000u;
    while (mono() < end) {
        for (int i = 0; i < 4; i++) {
            volatile char *p = malloc(333);
            if (!p)
                return -1;
            p[0] = 2;
            free((void *)p);
        }
        uint64_t spin = mono() + 5000;
        while (mono() < spin)
            ;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    int n = handled;
    for (int k = 0; k < n; k++) {
        /* +1: the warm-up allocation of 777 bytes is the first. */
        bound("MALLOC", 777, k + 2, h_bounds[k][0], h_bounds[k][1]);
        bound("FREE", 777, k + 2, h_bounds[k][2], h_bounds[k][3]);
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    mallopt(M_ARENA_MAX, 1); /* one arena: what thread A frees, thread B can get back */
    out = fopen(argv[1], "w");
    if (!out)
        return 1;
    if (sleeps() < 0 || handoff() < 0)
        return 1;
    int n = signals();
    if (n < 0 || fclose(out) != 0)
        return 1;
    printf("timed_allocs ok %d %d\n", HANDOFFS, n);
    return 0;
}
