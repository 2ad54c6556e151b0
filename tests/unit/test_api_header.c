/* test_api_header.c: include/memscope.h, the header programs include, against the agent's own
 * prototypes (src/common/agent_api.h) and flag values (src/trace/format.h).
 *
 * Both headers are included in this one file: a prototype of memscope.h that differs from the
 * agent's definition (another parameter type, another return type) is a conflicting
 * redeclaration, and this file does not compile; a flag of a different value fails its static
 * assertion. At run time, without the agent, every wrapper is the documented no-op: -1. */
#include "memscope.h"

#include "common/agent_api.h"
#include "trace/format.h"
#include "test.h"

_Static_assert(MEMSCOPE_READ == MS_ACCESS_READ, "memscope.h's MEMSCOPE_READ is the agent's");
_Static_assert(MEMSCOPE_WRITE == MS_ACCESS_WRITE, "memscope.h's MEMSCOPE_WRITE is the agent's");

int main(void)
{
    /* Not linked with the agent: the weak references are null. */
    int x = 0;
    CHECK_EQ(memscope_step(), -1);
    CHECK_EQ(memscope_owner_push("weight"), -1);
    CHECK_EQ(memscope_owner_pop(), -1);
    CHECK_EQ(memscope_mark("m"), -1);
    CHECK_EQ(memscope_range_push("r"), -1);
    CHECK_EQ(memscope_range_pop(), -1);
    CHECK_EQ(memscope_access(&x, sizeof x, MEMSCOPE_READ | MEMSCOPE_WRITE, "op"), -1);
    CHECK_EQ(memscope_pool_reserve("p", &x, sizeof x), -1);
    CHECK_EQ(memscope_pool_alloc("p", &x, sizeof x), -1);
    CHECK_EQ(memscope_pool_free("p", &x), -1);
    CHECK_EQ(memscope_pool_release("p", &x), -1);
    CHECK_EQ(memscope_start(), -1);
    CHECK_EQ(memscope_stop(), -1);
    return 0;
}
