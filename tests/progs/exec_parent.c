/* exec_parent: allocates, then replaces itself with another program.
 *
 *   exec_parent PROGRAM [ARGS...]
 *
 * Run by tests/integration/test_exec.sh with PROGRAM = exec_child. Allocates 3 x 50001 bytes
 * (never freed: the exec discards them) and execv()s PROGRAM with ARGS. Exit status: that of
 * PROGRAM, or 127 when the exec fails. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) void *ms_progs_exec_parent_alloc(size_t n)
{
    return malloc(n);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    for (int i = 0; i < 3; i++)
        if (!ms_progs_exec_parent_alloc(50001))
            return 1;
    printf("exec_parent pid %ld\n", (long)getpid());
    fflush(stdout);
    execv(argv[1], argv + 1);
    perror("exec_parent: execv");
    return 127;
}
