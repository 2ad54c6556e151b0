/* an_export: a known-answer program for `memscope export` (tests/analyze/test_export.sh).
 *
 * Exact figures per call site (heap layer):
 *   child process (fork)   an_export_child      1 x malloc(2222), kept        (its own process)
 *   step 1                 an_export_churn      5 x malloc(4096), all live, then freed:
 *                                               alloc 20480 B, 5 objects; inuse 0; the heap's
 *                                               peak is reached at its fifth malloc
 *   step 2, range "phase two"
 *                          an_export_keep       3 x malloc(1000), kept to exit: alloc = inuse
 *                                               = leaked = 3000 B
 *                          an_export_inl        1 x malloc(777), kept, inlined (always_inline)
 *                                               into an_export_outer: one location, two lines
 *   then a mark "done".
 * Prints "an_export ok" and exits 0, with or without the agent. */
#include <memscope.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;
static void *kept[4];

__attribute__((noinline)) static void an_export_child(void)
{
    sink = malloc(2222);
    memset(sink, 1, 2222);
}

__attribute__((noinline)) static void an_export_churn(void)
{
    void *p[5];
    for (int i = 0; i < 5; i++) {
        p[i] = malloc(4096);
        memset(p[i], 2, 4096);
    }
    for (int i = 0; i < 5; i++)
        free(p[i]);
}

__attribute__((noinline)) static void an_export_keep(void)
{
    for (int i = 0; i < 3; i++) {
        kept[i] = malloc(1000);
        memset(kept[i], 3, 1000);
    }
}

static inline __attribute__((always_inline)) void an_export_inl(void)
{
    kept[3] = malloc(777);
}

__attribute__((noinline)) static void an_export_outer(void)
{
    an_export_inl();
    memset(kept[3], 4, 777);
}

int main(void)
{
    pid_t c = fork();
    if (c == 0) {
        an_export_child();
        _exit(0);
    }
    int st = 0;
    if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    an_export_churn();
    memscope_step();
    memscope_range_push("phase two");
    an_export_keep();
    an_export_outer();
    memscope_range_pop();
    memscope_mark("done");
    printf("an_export ok\n");
    return 0;
}
