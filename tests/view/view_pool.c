/* view_pool.c: the allocator state's known-answer program. A custom allocator (pool "arena")
 * reserves two regions from a static buffer, A (1 MiB at offset 0) and B (2 MiB at 1 MiB), and
 * hands out blocks: A+0 256 KiB, A+512 KiB 128 KiB, B+0 1 MiB (step 1 ends), then frees A+0
 * (step 2 ends), then hands out B+1 MiB 512 KiB (step 3 ends). At the end: A holds one block
 * of 128 KiB at 512 KiB (free: 512 KiB before it, 384 KiB after: the largest 512 KiB), B holds
 * 1 MiB and 512 KiB (512 KiB free at its end). */
#include "memscope.h"

static char arena[3 << 20];

int main(void)
{
    char *a = arena, *b = arena + (1 << 20);
    int rc = 0;
    rc |= memscope_pool_reserve("arena", a, 1 << 20);
    rc |= memscope_pool_reserve("arena", b, 2 << 20);
    rc |= memscope_pool_alloc("arena", a, 256 << 10);
    rc |= memscope_pool_alloc("arena", a + (512 << 10), 128 << 10);
    rc |= memscope_pool_alloc("arena", b, 1 << 20);
    memscope_step();
    rc |= memscope_pool_free("arena", a);
    memscope_step();
    rc |= memscope_pool_alloc("arena", b + (1 << 20), 512 << 10);
    memscope_step();
    return rc != 0;
}
