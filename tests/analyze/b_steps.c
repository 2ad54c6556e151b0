/* b_steps: known answers for `analyze compare` and `analyze decompose` (tests/analyze/b_*).
 *
 *   b_steps [extra]
 *
 * No stdio, so the heap holds only what this program allocates. Step 1: owner "model@weight"
 * 4096 B and "model@grad" 2048 B, both kept. Steps 2 and 3: op "forward" allocates 1000 B
 * (owner "act"), op "backward" frees it. Step 3 also allocates 5000 B (owner "act@extra",
 * call site b_alloc_extra, kept) in op "extra_op" nested inside "forward" -- unless argv[1] is
 * "base", which leaves both out (the baseline run for compare --with). Step 4 is the empty
 * last step. Op sequences: step 2 [forward, backward], step 3 [extra_op, forward, backward]. */
#include "memscope.h"

#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *b_alloc_weight(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *b_alloc_grad(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *b_alloc_act(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *b_alloc_extra(size_t n) { return malloc(n); }

static void *keep[3];

int main(int argc, char **argv)
{
    int base = argc > 1 && !strcmp(argv[1], "base");
    memscope_owner_push("model");
    memscope_owner_push("weight");
    keep[0] = b_alloc_weight(4096);
    memscope_owner_pop();
    memscope_owner_push("grad");
    keep[1] = b_alloc_grad(2048);
    memscope_owner_pop();
    memscope_owner_pop();
    memscope_step(); /* end of step 1 */
    for (int s = 2; s <= 3; s++) {
        memscope_range_push("forward");
        memscope_owner_push("act");
        char *act = b_alloc_act(1000);
        if (s == 3 && !base) {
            memscope_range_push("extra_op"); /* nested: counted in "forward" too */
            memscope_owner_push("extra");
            keep[2] = b_alloc_extra(5000);
            memscope_owner_pop();
            memscope_range_pop();
        }
        memscope_owner_pop();
        memscope_range_pop();
        memscope_range_push("backward");
        free(act);
        memscope_range_pop();
        memscope_step(); /* end of step s */
    }
    return keep[0] && keep[1] ? 0 : 1;
}
