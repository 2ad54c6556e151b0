/* view_known.c: the viewer's known-answer program. Without stdio or any other allocation of
 * its own, it allocates three 1 MiB "weights" (never freed), then an 8 MiB "activations" block
 * (freed), so the run's peak is exactly 11 MiB, reached when activations() allocates, and
 * 3 MiB in 3 blocks are never freed, all from weights(); four steps are marked between. The
 * weights have the owner "model@weight", the activations "model@activation". First
 * deep() recurses 40 calls down and allocates and frees 4 KiB there: a stack as deep as the
 * recorded depth allows. A mark "weights loaded" follows the weights (with three of memscope's
 * bookkeeping marks, which the viewer does not show); the activations are
 * allocated inside the range "layer1", inside the range "forward". */
#include "memscope.h"

#include <stdlib.h>
#include <string.h>

static void *keep[3];

__attribute__((noinline)) static void weights(void)
{
    for (int i = 0; i < 3; i++) {
        keep[i] = malloc(1 << 20);
        memset(keep[i], 1, 1 << 20);
    }
}

__attribute__((noinline)) static void *activations(void)
{
    void *p = malloc(8 << 20);
    memset(p, 2, 8 << 20);
    return p;
}

__attribute__((noinline)) static int deep(int n)
{
    if (n == 0) {
        void *p = malloc(4096);
        memset(p, 3, 4096);
        free(p);
        return 0;
    }
    return deep(n - 1) + 1; /* not a tail call: every level keeps its frame */
}

int main(void)
{
    if (deep(40) != 40)
        return 1;
    memscope_step();
    memscope_owner_push("model");
    memscope_owner_push("weight");
    weights();
    memscope_mark("weights loaded");
    /* memscope's own bookkeeping marks (tags of no live block: they change nothing), which the
     * viewer never draws (issue 47) */
    memscope_mark("memscope-tag:ptr=0x10;size=1;owner=nobody");
    memscope_mark("describe addr=0x10 owner=nobody");
    memscope_mark("memscope-module:forward");
    memscope_owner_pop();
    memscope_step();
    memscope_owner_push("activation");
    memscope_range_push("forward");
    memscope_range_push("layer1");
    void *a = activations();
    memscope_range_pop();
    memscope_range_pop();
    memscope_owner_pop();
    memscope_owner_pop();
    memscope_step();
    free(a);
    memscope_step();
    return keep[0] == keep[1]; /* 0: keeps the blocks reachable to the end */
}
