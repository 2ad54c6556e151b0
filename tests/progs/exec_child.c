/* exec_child: the program exec_parent replaces itself with.
 *
 * Run by tests/integration/test_exec.sh through exec_parent. Allocates 4 x 50003 bytes, frees
 * them, prints its pid and exits 7 (so the test sees the exec'd image's status). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) void *ms_progs_exec_child_alloc(size_t n)
{
    return malloc(n);
}

int main(void)
{
    void *p[4];
    for (int i = 0; i < 4; i++)
        if (!(p[i] = ms_progs_exec_child_alloc(50003)))
            return 1;
    for (int i = 0; i < 4; i++)
        free(p[i]);
    printf("exec_child pid %ld\n", (long)getpid());
    return 7;
}
