/* monitor_grow.c: known-answer program for the live monitor (tests/integration/test_monitor.sh).
 *
 *   monitor_grow grow MIB_PER_S SECONDS
 *       grows by MIB_PER_S MiB a second (a block of MIB_PER_S/10 MiB every 100 ms, each
 *       written, all from grow_here(), each followed by the end of a step: 10 steps a second)
 *       for SECONDS seconds, then frees them all.
 *   monitor_grow hold GO_FILE
 *       allocates 3 blocks of 1 MiB with owner "PTA@weight" (memscope.h's owner stack),
 *       1 block of 512 KiB with owner "PTA@activation@model", 2 blocks of 256 KiB with no
 *       owner, frees one of those (live: 3.5 MiB + 256 KiB = 3,932,160 bytes; 6 allocations,
 *       1 free), ends 3 steps, then waits until GO_FILE exists and exits without freeing.
 *   monitor_grow holdn N GO_FILE
 *       allocates N blocks of 1 MiB, then waits until GO_FILE exists and exits without freeing.
 *   monitor_grow pool
 *       allocates a region of 4096 bytes (pool_here) and makes it pool "P"'s (memscope_pool_
 *       reserve), hands out blocks of 1024 bytes at +0 and 512 bytes at +2048 (memscope_pool_
 *       alloc: 1536 allocated, 2560 free, the largest free block 1536 bytes) and exits.
 *   monitor_grow shift GO1 GO2
 *       allocates 8 blocks of 1 MiB from hold_here, waits until GO1 exists, then allocates
 *       64 KiB from grow_here every 50 ms (at most 2000 times) until GO2 exists.
 *
 * No stdio: nothing allocates but what is listed. */
#include "memscope.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((noinline)) static void *grow_here(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, 1, n);
    return p;
}

__attribute__((noinline)) static void *hold_here(size_t n)
{
    return malloc(n);
}

__attribute__((noinline)) static char *pool_here(size_t n)
{
    return malloc(n);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "grow") == 0) {
        size_t step = (size_t)atol(argv[2]) * 1048576 / 10;
        long ticks = atol(argv[3]) * 10;
        void **blocks = calloc((size_t)ticks + 1, sizeof *blocks);
        for (long i = 0; i < ticks; i++) {
            blocks[i] = grow_here(step);
            memscope_step();
            nap_ms(100);
        }
        for (long i = 0; i < ticks; i++)
            free(blocks[i]);
        free(blocks);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "hold") == 0) {
        memscope_owner_push("PTA");
        memscope_owner_push("weight");
        for (int i = 0; i < 3; i++)
            hold_here(1048576);
        memscope_owner_pop();
        memscope_owner_push("activation");
        memscope_owner_push("model");
        hold_here(524288);
        memscope_owner_pop();
        memscope_owner_pop();
        memscope_owner_pop();
        hold_here(262144);
        free(hold_here(262144));
        for (int i = 0; i < 3; i++)
            memscope_step();
        while (access(argv[2], F_OK) != 0)
            nap_ms(20);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "holdn") == 0) {
        for (long i = atol(argv[2]); i > 0; i--)
            hold_here(1048576);
        while (access(argv[3], F_OK) != 0)
            nap_ms(20);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "pool") == 0) {
        char *r = pool_here(4096);
        memscope_pool_reserve("P", r, 4096);
        memscope_pool_alloc("P", r, 1024);
        memscope_pool_alloc("P", r + 2048, 512);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "shift") == 0) {
        for (int i = 0; i < 8; i++)
            hold_here(1048576);
        while (access(argv[2], F_OK) != 0)
            nap_ms(20);
        for (int i = 0; i < 2000 && access(argv[3], F_OK) != 0; i++) {
            grow_here(65536);
            nap_ms(50);
        }
        return 0;
    }
    return 2;
}
