/* an_leak_nosteps: a leak that a program without steps frees at shutdown (issue 18 item 5).
 *
 * No memscope_step(), no stdio. At the start 50000 B (an_static, kept to the end). Then 100
 * rounds of equal length (a spin of ROUND_NS): each keeps 1000 B more (an_grow) and allocates
 * and frees 20000 B (an_scratch). At the end every block is freed: nothing is live at exit.
 * The peak (170000 B) is the last round's scratch block: live then are all 100 an_grow blocks
 * (100000 B, allocated evenly over the run: about 10000 B per tenth), the static block (all in
 * the first tenth) and that scratch block (the last tenth). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 100
#define ROUND_NS 1000000L /* 100 ms in all: the first tenth (10 ms) holds the start even on a loaded machine */

__attribute__((noinline)) static void *an_static(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *an_grow(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *an_scratch(size_t n) { return malloc(n); }

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

int main(void)
{
    static void *keep[ROUNDS];
    void *base = an_static(50000);
    memset(base, 1, 50000);
    for (int i = 0; i < ROUNDS; i++) {
        long t0 = now_ns();
        keep[i] = an_grow(1000);
        memset(keep[i], i, 1000);
        char *s = an_scratch(20000);
        memset(s, i, 20000);
        free(s);
        while (now_ns() - t0 < ROUND_NS)
            ;
    }
    for (int i = 0; i < ROUNDS; i++)
        free(keep[i]);
    free(base);
    return 0;
}
