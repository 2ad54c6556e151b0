/* annotate: a known-answer program for the annotation API (include/memscope.h).
 *
 *   annotate
 *
 * Run by tests/integration/test_annotations.sh under memscope, and plainly (progs_annotate)
 * to show that without the agent every call is a no-op returning -1 and the program runs the
 * same. Three steps; in each: an owner-tagged allocation (owners "model" then "model@weight"),
 * a range "op_matmul" holding one write access to it, a read access outside any range, a
 * mark, a pool sub-allocation from a reserved region, and the free; step 2 also leaves one
 * "model"-owned block of 1000 bytes live. Prints "annotate ok RC" where RC is the sum of the
 * API's return values (0 under the agent, -34 without: 34 calls return -1). */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char arena[4096];

__attribute__((noinline)) static void *ms_progs_annot_alloc(size_t n)
{
    return malloc(n);
}

int main(void)
{
    int rc = memscope_pool_reserve("arena", arena, sizeof arena);
    void *keep = NULL;
    for (int s = 1; s <= 3; s++) {
        rc += memscope_owner_push("model");
        rc += memscope_owner_push("weight");
        char *p = ms_progs_annot_alloc(100 * (size_t)s);
        rc += memscope_owner_pop();
        if (s == 2)
            keep = ms_progs_annot_alloc(1000); /* owner "model" */
        rc += memscope_owner_pop();
        memset(p, s, 100);
        rc += memscope_range_push("op_matmul");
        rc += memscope_access(p, 100, MEMSCOPE_WRITE, "matmul");
        rc += memscope_range_pop();
        rc += memscope_access(p, 50, MEMSCOPE_READ, "reader");
        rc += memscope_pool_alloc("arena", arena + 64 * s, 64);
        rc += memscope_mark("hello");
        free(p);
        if (s < 3)
            rc += memscope_step();
    }
    rc += memscope_pool_free("arena", arena + 64);
    printf("annotate ok %d\n", rc);
    return keep ? 0 : 1;
}
