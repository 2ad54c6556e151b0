/* an_trend: a known-answer program for `memscope analyze trend` (tests/analyze).
 *
 *   an_trend [STEPS]     (default 20)
 *
 * Each step keeps exactly 100000 more bytes (an_trend_grow) and churns scratch memory that is
 * freed within the step (an_trend_scratch), then calls memscope_step(). Live bytes at the end
 * of step k are therefore base + 100000 * k: a limit of 5000000 bytes is reached at step ~50.
 * Prints "an_trend ok" and exits 0, with or without the agent. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *an_trend_grow(void)
{
    void *p = malloc(100000);
    memset(p, 3, 100000);
    return p;
}

__attribute__((noinline)) static void an_trend_scratch(void)
{
    void *q[16];
    for (int i = 0; i < 16; i++)
        q[i] = malloc(2048);
    for (int i = 0; i < 16; i++)
        free(q[i]);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    if (steps < 1 || steps > 1000)
        return 2;
    void **keep = calloc((size_t)steps, sizeof *keep);
    for (int s = 0; s < steps; s++) {
        an_trend_scratch();
        keep[s] = an_trend_grow();
        memscope_step();
    }
    puts("an_trend ok");
    return 0;
}
