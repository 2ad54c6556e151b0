/* an_peak: a known-answer program for `memscope analyze peak` (tests/analyze).
 *
 * Phase 1 holds 10 blocks of 100000 bytes (an_peak_big, owner "big") and 50 blocks of 1000
 * bytes (an_peak_small, owner "small") at once: 1050000 bytes, the peak; then frees them.
 * Phase 2 holds 5 blocks of 150000 bytes (an_peak_later: 750000 bytes, less) and frees them.
 * Prints "an_peak ok" and exits 0, with or without the agent. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *an_peak_big(void)
{
    void *p = malloc(100000);
    memset(p, 2, 100000);
    return p;
}

__attribute__((noinline)) static void *an_peak_small(void)
{
    return malloc(1000);
}

__attribute__((noinline)) static void *an_peak_later(void)
{
    return malloc(150000);
}

int main(void)
{
    void *big[10], *small[50], *later[5];
    memscope_owner_push("big");
    for (int i = 0; i < 10; i++)
        big[i] = an_peak_big();
    memscope_owner_pop();
    memscope_owner_push("small");
    for (int i = 0; i < 50; i++)
        small[i] = an_peak_small();
    memscope_owner_pop();
    for (int i = 0; i < 10; i++)
        free(big[i]);
    for (int i = 0; i < 50; i++)
        free(small[i]);
    for (int i = 0; i < 5; i++)
        later[i] = an_peak_later();
    for (int i = 0; i < 5; i++)
        free(later[i]);
    puts("an_peak ok");
    return 0;
}
