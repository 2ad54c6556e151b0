/* deep_stack: one allocation at the bottom of a deep call chain, for checking stack depth limits.
 *
 *   deep_stack [LEVELS=60]
 *
 * Run by tests/integration/test_stacks.sh. ms_progs_deep_recurse calls itself LEVELS times, then
 * ms_progs_deep_leaf allocates 15013 bytes (freed). With --call-stack=c:N the recorded stack of
 * that event holds min(N, LEVELS + 3 or so) frames. Prints "deep_stack ok" and exits 0. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void *ms_progs_deep_leaf(void)
{
    return malloc(15013); /* SITE:deep_leaf */
}

__attribute__((noinline)) void *ms_progs_deep_recurse(int n)
{
    void *p = n > 0 ? ms_progs_deep_recurse(n - 1) : ms_progs_deep_leaf();
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return p;
}

int main(int argc, char **argv)
{
    int levels = argc > 1 ? atoi(argv[1]) : 60;
    void *p = ms_progs_deep_recurse(levels);
    if (!p)
        return 1;
    free(p);
    printf("deep_stack ok\n");
    return 0;
}
