/* an_leak_loop: a training-like loop for the growth rule of `memscope analyze leaks`.
 *
 *   an_leak_loop healthy|leak|sparse
 *
 * 30 steps (memscope_step() is called 30 times: steps 1..30 end; the unfinished step 31 only
 * frees). In every mode each step:
 *   - allocates and frees scratch memory (an_scratch, 4 x 256 B);
 *   - pushes a 4096-byte batch on a prefetch queue that holds at most 3 (an_prefetch): the
 *     oldest is freed when a fourth comes, as a DataLoader's prefetched batches;
 *   - makes 1000 bytes of garbage (an_garbage) that a collector frees every 7 steps (at the
 *     start of steps 8, 15, 22 and 29), as Python's cyclic garbage;
 *   - at step 3 only, a 2000-byte block (an_late_free) freed at step 25: live across 22 steps
 *     but returned;
 *   - in steps 2..9 only, 500 bytes kept to the end (an_fill): a cache that fills and stops.
 * Step 1 keeps 30000 bytes (an_warmup_keep) to the end: warm-up.
 * "leak": each step also keeps 3000 bytes (an_leak_here), never freed: 90000 bytes at the end,
 * +3000 bytes per step. "sparse": an_leak_here keeps 6000 bytes every second step (even steps):
 * +3000 bytes per step as well. "healthy": no an_leak_here.
 * Everything else is freed before exit. Prints "an_leak_loop MODE ok" and exits 0 (2 for a bad
 * argument), with or without the agent. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 30
#define QUEUE 3
#define GC_EVERY 7

__attribute__((noinline)) static void an_scratch(int step)
{
    for (int i = 0; i < 4; i++) {
        char *p = malloc(256);
        memset(p, step, 256);
        free(p);
    }
}

__attribute__((noinline)) static void *an_prefetch(void)
{
    return malloc(4096);
}

__attribute__((noinline)) static void *an_garbage(void)
{
    return malloc(1000);
}

__attribute__((noinline)) static void *an_late_free(void)
{
    return malloc(2000);
}

__attribute__((noinline)) static void *an_fill(void)
{
    return malloc(500);
}

__attribute__((noinline)) static void *an_warmup_keep(void)
{
    return malloc(30000);
}

__attribute__((noinline)) static void *an_leak_here(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int leak = !strcmp(mode, "leak"), sparse = !strcmp(mode, "sparse");
    if (!leak && !sparse && strcmp(mode, "healthy")) {
        fprintf(stderr, "usage: an_leak_loop healthy|leak|sparse\n");
        return 2;
    }
    static void *queue[QUEUE], *garbage[STEPS], *fill[STEPS], *kept[STEPS];
    int nq = 0, ngarbage = 0, nfill = 0, nkept = 0;
    void *warm = NULL, *late = NULL;
    for (int step = 1; step <= STEPS; step++) {
        if (step % GC_EVERY == 1 && step > 1) { /* the collector */
            for (int i = 0; i < ngarbage; i++)
                free(garbage[i]);
            ngarbage = 0;
        }
        an_scratch(step);
        if (nq == QUEUE) { /* the consumer takes the oldest batch */
            free(queue[0]);
            memmove(queue, queue + 1, (QUEUE - 1) * sizeof *queue);
            nq--;
        }
        queue[nq++] = an_prefetch();
        garbage[ngarbage++] = an_garbage();
        if (step == 1)
            warm = an_warmup_keep();
        if (step == 3)
            late = an_late_free();
        if (step == 25)
            free(late);
        if (step >= 2 && step <= 9)
            fill[nfill++] = an_fill();
        if (leak)
            kept[nkept++] = an_leak_here(3000);
        if (sparse && step % 2 == 0)
            kept[nkept++] = an_leak_here(6000);
        memscope_step();
    }
    for (int i = 0; i < nq; i++)
        free(queue[i]);
    for (int i = 0; i < ngarbage; i++)
        free(garbage[i]);
    for (int i = 0; i < nfill; i++)
        free(fill[i]);
    for (int i = 0; i < nkept; i++)
        free(kept[i]);
    free(warm);
    printf("an_leak_loop %s ok\n", mode);
    return 0;
}
