/* hostile_names: names that would drive a terminal, set through every annotation (issue 37
 * item 10): an owner, a pool, a range, a mark, an op and the thread's name hold ESC sequences
 * (clear screen, window title, OSC 52 clipboard write, colour), BEL, CR and newlines followed
 * by "FORGED" (a line the program would forge in memscope's report).
 *
 *   hostile_names
 *
 * Three steps; in each, 3001 bytes are allocated under the owner and kept (a leak that grows
 * by 3001 bytes a step), 4096 bytes go to the pool, and a 5003-byte temporary is made and
 * freed inside the range. Then it stays 0.2 s, so that the usage monitor samples it under its
 * hostile name. Prints "hostile_names ok" and exits 0. Run by
 * tests/integration/test_term_escape.sh, which also runs it under a file name of its own with
 * the same bytes. */
#include "memscope.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EVIL "\x1b[2J\x1b]0;TITLE\x07\x1b]52;c;SGVsbG8=\x07\x1b[31m\r\nFORGED line\x9b"

__attribute__((noinline)) void *ms_progs_hostile_alloc(size_t n)
{
    return malloc(n);
}

int main(void)
{
    pthread_setname_np(pthread_self(), "t\x1b]0;T\x07\nF");
    static char pool[3][4096];
    for (int step = 0; step < 3; step++) {
        memscope_owner_push("owner" EVIL);
        if (!ms_progs_hostile_alloc(3001))
            return 1;
        memscope_owner_pop();
        memscope_pool_alloc("pool" EVIL, pool[step], sizeof pool[step]);
        memscope_range_push("range" EVIL);
        void *t = ms_progs_hostile_alloc(5003);
        memscope_access(t, 10, 1, "op" EVIL);
        memscope_mark("mark" EVIL);
        free(t);
        memscope_range_pop();
        memscope_step();
    }
    struct timespec hold = {0, 200 * 1000 * 1000};
    nanosleep(&hold, NULL);
    printf("hostile_names ok\n");
    return 0;
}
