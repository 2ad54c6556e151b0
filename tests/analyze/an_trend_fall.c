/* an_trend_fall: a short run whose live bytes rise at the start and then fall, for
 * `memscope analyze trend --limit` (issue 47 item 7).
 *
 * No steps, no stdio. A start-up ramp: 100 blocks of 10000 bytes (an_trend_setup), one every
 * 100 us (about 10 ms); then 10 of them freed, one every 2 ms (about 20 ms): live bytes fall
 * from 1000000 to 900000 over the last two thirds of the run. A fit over the whole run grows
 * (the ramp); over its last half it falls. The other 90 blocks are left to the exit (900000
 * bytes live at exit); exits 0. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCKS 100
#define FREED 10

__attribute__((noinline)) static void *an_trend_setup(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

static void spin_ns(long ns)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

int main(void)
{
    static void *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = an_trend_setup(10000);
        spin_ns(100000);
    }
    for (int i = 0; i < FREED; i++) {
        spin_ns(2000000);
        free(blocks[i]);
    }
    return 0;
}
