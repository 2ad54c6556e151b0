/* view_known.c: the viewer's known-answer program. Without stdio or any other allocation of
 * its own, it allocates three 1 MiB "weights" (never freed), then an 8 MiB "activations" block
 * (freed), so the run's peak is exactly 11 MiB, reached when activations() allocates, and
 * 3 MiB in 3 blocks are never freed, all from weights(); four steps are marked between. */
#include "memscope.h"

#include <stdlib.h>
#include <string.h>

static void *keep[3];

__attribute__((noinline)) static void weights(void)
{
    for (int i = 0; i < 3; i++) {
        keep[i] = malloc(1 << 20);
        memset(keep[i], 1, 1 << 20);
    }
}

__attribute__((noinline)) static void *activations(void)
{
    void *p = malloc(8 << 20);
    memset(p, 2, 8 << 20);
    return p;
}

int main(void)
{
    memscope_step();
    weights();
    memscope_step();
    void *a = activations();
    memscope_step();
    free(a);
    memscope_step();
    return keep[0] == keep[1]; /* 0: keeps the blocks reachable to the end */
}
