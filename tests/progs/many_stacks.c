/* many_stacks.c: T threads (argv[1], default 4) each make one allocation from each of 2^K
 * distinct call paths (argv[2] = K, default 14): path i is a chain of K calls, each to left()
 * or right() as bit j of i says, ending in malloc(100000 + i). Every thread walks the same paths
 * at the same time, so the agent's stack table grows (16,384 stacks: it starts at 1,024 slots)
 * while threads race to add the same new stacks. Known answer: 2^K distinct stacks, each size
 * allocated T times from one stack, K + 2 frames of ours (left/right x K, walk, worker) above
 * malloc. Prints "many_stacks ok T K". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int k_bits = 14;
static pthread_barrier_t ready;

static void *left(int level, unsigned path);
static void *right(int level, unsigned path);

/* The next call of path at level, or the allocation at the end; the empty asm after the call
 * keeps it from becoming a jump (which would drop this frame). */
static __attribute__((noinline)) void *step(int level, unsigned path, unsigned i)
{
    void *p;
    if (level == k_bits)
        p = malloc(100000 + (size_t)i);
    else if (path >> level & 1)
        p = right(level + 1, path);
    else
        p = left(level + 1, path);
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) void *left(int level, unsigned path)
{
    void *p = step(level, path, path);
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) void *right(int level, unsigned path)
{
    void *p = step(level, path, path);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *worker(void *arg)
{
    (void)arg;
    unsigned n = 1u << k_bits;
    void **keep = malloc(n * sizeof *keep);
    if (!keep)
        return NULL;
    pthread_barrier_wait(&ready);
    for (unsigned i = 0; i < n; i++)
        keep[i] = step(0, i, i);
    for (unsigned i = 0; i < n; i++)
        free(keep[i]);
    free(keep);
    return (void *)1;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2)
        k_bits = atoi(argv[2]);
    if (threads < 1 || threads > 64 || k_bits < 1 || k_bits > 20)
        return 2;
    pthread_t tid[64];
    pthread_barrier_init(&ready, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++)
        if (pthread_create(&tid[t], NULL, worker, NULL) != 0)
            return 1;
    int ok = 1;
    for (int t = 0; t < threads; t++) {
        void *r;
        pthread_join(tid[t], &r);
        ok &= r != NULL;
    }
    if (!ok)
        return 1;
    printf("many_stacks ok %d %d\n", threads, k_bits);
    return 0;
}
