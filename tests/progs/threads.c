/* threads: many threads each doing many malloc/free pairs, for checking that a tracer loses and
 * duplicates nothing under contention.
 *
 *   threads [THREADS=8] [PAIRS=100000]
 *
 * Run by tests/integration/test_threads.sh. Thread t (0-based) allocates blocks of 3001 + 2*t
 * bytes and frees each at once, PAIRS times; all threads start together behind a barrier.
 * Prints "threads ok T P" and exits 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long pairs = 100000;
static pthread_barrier_t start;

__attribute__((noinline)) void *ms_progs_thread_alloc(size_t n)
{
    return malloc(n);
}

static void *work(void *arg)
{
    size_t n = 3001 + 2 * (uintptr_t)arg;
    long bad = 0;
    pthread_barrier_wait(&start);
    for (long i = 0; i < pairs; i++) {
        volatile char *p = ms_progs_thread_alloc(n);
        if (!p) {
            bad++;
            continue;
        }
        p[0] = (char)i;
        free((void *)p);
    }
    return (void *)bad;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 8;
    pthread_t t[256];
    long bad = 0;

    if (argc > 2)
        pairs = atol(argv[2]);
    if (nthreads < 1 || nthreads > 256 || pairs < 0)
        return 2;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i) != 0)
            return 1;
    for (int i = 0; i < nthreads; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (long)r;
    }
    if (bad)
        return 1;
    printf("threads ok %d %ld\n", nthreads, pairs);
    return 0;
}
