/* attach_lib_early: a library attach_host links against, so it is loaded before the agent is
 * attached; its GOT slots must be redirected by memscope__attach.
 *
 * Built with DT_RUNPATH=$ORIGIN: ms_attach_early_load() dlopens the late library by its bare
 * name, which only that RUNPATH finds, so it checks that the agent's dlopen hook searches the
 * caller's path. ms_attach_early_alloc is called once before attach (its malloc slot is then
 * resolved) while ms_attach_early_free is not (its free slot is still a lazy PLT stub). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((visibility("default"), noinline)) void *ms_attach_early_alloc(size_t n)
{
    return malloc(n);
}

__attribute__((visibility("default"), noinline)) void ms_attach_early_free(void *p)
{
    free(p);
}

/* Returns the handle of libms_attach_late.so, or NULL (the reason on stderr). */
__attribute__((visibility("default"), noinline)) void *ms_attach_early_load(void)
{
    void *h = dlopen("libms_attach_late.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "attach_lib_early: %s\n", dlerror());
    return h;
}
