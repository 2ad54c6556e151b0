/* b_pool: a pool with known fragmentation for `analyze fragmentation` (tests/analyze/b_*).
 *
 * Pool "arena" reserves a 4096-byte static region. Step 1 allocates eight 256-byte blocks at
 * offsets 0, 256, ..., 1792 (used 2048, one free extent of 2048: fragmentation 0). Step 2 frees
 * the blocks at 0, 512 and 1024 (used 1280, free 2816, largest 2048: 768/2816). Step 3
 * allocates 1024 bytes at 2048 (used 2304 = the peak, free 1792, largest 1024: 768/1792).
 * Then everything is freed and the region released (the end: all zero). */
#include "memscope.h"

static _Alignas(64) char arena[4096];

int main(void)
{
    memscope_pool_reserve("arena", arena, sizeof arena);
    for (int i = 0; i < 8; i++)
        memscope_pool_alloc("arena", arena + 256 * i, 256);
    memscope_step();
    for (int i = 0; i < 6; i += 2)
        memscope_pool_free("arena", arena + 256 * i);
    memscope_step();
    memscope_pool_alloc("arena", arena + 2048, 1024);
    memscope_step();
    for (int i = 1; i < 8; i += (i < 5 ? 2 : 1))
        memscope_pool_free("arena", arena + 256 * i);
    memscope_pool_free("arena", arena + 2048);
    memscope_pool_release("arena", arena);
    return 0;
}
