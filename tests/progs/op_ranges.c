/* op_ranges: a known-answer program for ranges that are PyTorch ops (named as memscope.torch
 * names them, by schema: "aten::addmm") inside a user's range.
 *
 *   op_ranges
 *
 * Range "forward" holds range "aten::addmm" (a 4096-byte malloc and a write access to it, with
 * the tensor's dtype, shape and format) and
 * range "aten::add.Tensor" (a read access); then the block is freed. Run by
 * tests/integration/test_insight.sh (msMemScope's OP_LAUNCH ATEN_START / ATEN_END rows) and
 * plainly (progs_op_ranges: every API call returns -1 without the agent, 8 calls). Prints
 * "op_ranges ok RC", RC the sum of the API's return values. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    int rc = memscope_range_push("forward");
    rc += memscope_range_push("aten::addmm");
    char *p = malloc(4096);
    if (!p)
        return 1;
    memset(p, 1, 4096);
    /* the op's name, then the tensor's attributes after \x1f (as memscope.torch writes them) */
    rc += memscope_access(p, 4096, MEMSCOPE_WRITE,
                          "aten::addmm\x1f" "dtype=torch.float32;shape=[32, 32];format=contiguous");
    rc += memscope_range_pop();
    rc += memscope_range_push("aten::add.Tensor");
    rc += memscope_access(p, 4096, MEMSCOPE_READ, "aten::add.Tensor");
    rc += memscope_range_pop();
    rc += memscope_range_pop();
    free(p);
    printf("op_ranges ok %d\n", rc);
    return 0;
}
