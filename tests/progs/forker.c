/* forker: allocations on both sides of a fork, for checking that each is attributed to its own
 * process.
 *
 *   forker PIDFILE
 *
 * Run by tests/integration/test_fork.sh. Before the fork the parent allocates 5 x 40001 bytes
 * (kept); after it the child allocates 7 x 40003 and frees them, and the parent allocates
 * 3 x 40005 and frees them after waiting for the child. PIDFILE receives "PARENT CHILD\n".
 * Exit status 0 when the child exited 0. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void *ms_progs_fork_alloc(size_t n)
{
    return malloc(n);
}

int main(int argc, char **argv)
{
    void *before[5], *after[7];

    if (argc != 2)
        return 2;
    for (int i = 0; i < 5; i++)
        if (!(before[i] = ms_progs_fork_alloc(40001)))
            return 1;
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        for (int i = 0; i < 7; i++)
            if (!(after[i] = ms_progs_fork_alloc(40003)))
                _exit(1);
        for (int i = 0; i < 7; i++)
            free(after[i]);
        exit(0);
    }
    for (int i = 0; i < 3; i++)
        if (!(after[i] = ms_progs_fork_alloc(40005)))
            return 1;
    int st;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    for (int i = 0; i < 3; i++)
        free(after[i]);
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    fprintf(f, "%ld %ld\n", (long)getpid(), (long)child);
    if (fclose(f) != 0)
        return 1;
    printf("forker ok\n");
    return 0;
}
