/* attach_lib_late: a plugin that attach_lib_early dlopens (by bare name) after the agent is
 * attached; the agent's dlopen hook must redirect its GOT slots. */
#include <stdlib.h>

__attribute__((visibility("default"), noinline)) void *ms_attach_late_alloc(size_t n)
{
    return malloc(n);
}

__attribute__((visibility("default"), noinline)) void ms_attach_late_free(void *p)
{
    free(p);
}
