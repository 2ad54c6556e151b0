/* swap_lib: two plugins from one source (-DSWAP_B picks the second), loaded one after the other
 * at the same address by swap_main, for checking that a library loaded where a closed one was
 * gets its own names and stacks, not the closed one's. Built -O2 without frame pointers (the
 * default unwinder reads their .eh_frame). The second has its allocating function further in,
 * behind a padding function, so that the first one's addresses mean something else there. */
#include <stdlib.h>

#ifdef SWAP_B
__attribute__((visibility("default"), noinline)) int ms_swap_pad(int n)
{
    volatile int s = 0;
    for (int i = 0; i < n; i++)
        s += i * 7 + (s >> 3);
    return s;
}

__attribute__((visibility("default"), noinline)) void *ms_swap_b_alloc(size_t n)
{
    void *p = malloc(n + 2); /* SITE:swap_b */
    __asm__ volatile("" ::: "memory");
    return p;
}
#else
__attribute__((visibility("default"), noinline)) void *ms_swap_a_alloc(size_t n)
{
    void *p = malloc(n + 1); /* SITE:swap_a */
    __asm__ volatile("" ::: "memory");
    return p;
}
#endif
