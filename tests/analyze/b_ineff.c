/* b_ineff: each inefficient-memory rule fires exactly once (`analyze inefficient`,
 * tests/analyze/b_*). Run with --idle-threshold 5 and Insight thresholds of 100 ms.
 *
 * msMemScope's rules count APIs: each memscope_range_push .. pop is one (opN below), each
 * memory event outside ops one more. No stdio: the heap holds only these blocks.
 *   op0 {malloc X}  op1 {malloc E; access X}  op2 {free X}  op3 {access E; free E}
 *       -> E (200 B): early_allocation (malloc 1 < free 2 < first access 3)
 *   op4 {malloc L; access L}  op5 {malloc Y}  op6 {free L; free Y}
 *       -> L (300 B): late_deallocation (last access 4 < malloc 5 < free 6)
 *   op7 {malloc T; access T}  op8..op13 {}  op14 {access T; free T}
 *       -> T (500 B): temporary_idleness (14 - 7 > 5)
 * Insight's time rules, outside ops, one block at a time:
 *   Z (600 B): malloc, 300 ms, access, free            -> lazy_used
 *   D (700 B): malloc, access, 300 ms, free            -> delayed_free
 *   G (800 B): malloc, access, 300 ms, access, free    -> long_idle */
#include "memscope.h"

#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) static void *b_alloc(size_t n) { return malloc(n); }

static void nap(void)
{
    struct timespec ts = {0, 300 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void touch(void *p, size_t n) { memscope_access(p, n, MEMSCOPE_READ | MEMSCOPE_WRITE, "use"); }

int main(void)
{
    memscope_range_push("op0");
    void *x = b_alloc(100);
    memscope_range_pop();
    memscope_range_push("op1");
    void *e = b_alloc(200);
    touch(x, 100);
    memscope_range_pop();
    memscope_range_push("op2");
    free(x);
    memscope_range_pop();
    memscope_range_push("op3");
    touch(e, 200);
    free(e);
    memscope_range_pop();

    memscope_range_push("op4");
    void *l = b_alloc(300);
    touch(l, 300);
    memscope_range_pop();
    memscope_range_push("op5");
    void *y = b_alloc(400);
    memscope_range_pop();
    memscope_range_push("op6");
    free(l);
    free(y);
    memscope_range_pop();

    memscope_range_push("op7");
    void *t = b_alloc(500);
    touch(t, 500);
    memscope_range_pop();
    for (int i = 8; i <= 13; i++) {
        memscope_range_push("idle");
        memscope_range_pop();
    }
    memscope_range_push("op14");
    touch(t, 500);
    free(t);
    memscope_range_pop();

    void *z = b_alloc(600);
    nap();
    touch(z, 600);
    free(z);
    void *d = b_alloc(700);
    touch(d, 700);
    nap();
    free(d);
    void *g = b_alloc(800);
    touch(g, 800);
    nap();
    touch(g, 800);
    free(g);
    return 0;
}
