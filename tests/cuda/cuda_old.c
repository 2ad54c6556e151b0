/* cuda_old.c: a known-answer program for a driver of the CUDA 11.3 era (the test driver built
 * with MS_TEST_CUDA_OLD: no cuGetProcAddress_v2, no cuFuncGetName, no pool attributes). Like
 * cudart of that time it finds cuGetProcAddress (the first ABI) with dlsym and asks it for the
 * rest: 1 and 2 MiB on device 0 (the 1 MiB one freed), a 4 KiB stream-ordered block, and two
 * launches of one kernel. Exit 0 with "ok". */
#include "agent/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>

typedef ms_CUresult R;
static ms_fn_cuGetProcAddress *get;

static void *sym(const char *base, int version)
{
    void *f = NULL;
    return get(base, &f, version, 0) == MS_CUDA_SUCCESS ? f : NULL;
}

int main(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv)
        return 3;
    get = (ms_fn_cuGetProcAddress *)dlsym(drv, "cuGetProcAddress");
    if (!get || dlsym(drv, "cuGetProcAddress_v2"))
        return 1; /* not the old driver */
    void *self = sym("cuGetProcAddress", 11030);
    if (!self)
        return 1;
    get = (ms_fn_cuGetProcAddress *)self;
    R (*init)(unsigned) = (R(*)(unsigned))sym("cuInit", 2000);
    R (*retain)(ms_CUcontext *, int) = (R(*)(ms_CUcontext *, int))sym("cuDevicePrimaryCtxRetain", 7000);
    R (*set)(ms_CUcontext) = (R(*)(ms_CUcontext))sym("cuCtxSetCurrent", 4000);
    ms_fn_cuMemAlloc_v2 *alloc = (ms_fn_cuMemAlloc_v2 *)sym("cuMemAlloc", 3020);
    ms_fn_cuMemFree_v2 *mfree = (ms_fn_cuMemFree_v2 *)sym("cuMemFree", 3020);
    ms_fn_cuMemAllocAsync *aalloc = (ms_fn_cuMemAllocAsync *)sym("cuMemAllocAsync", 11020);
    R (*load)(void **, const void *) = (R(*)(void **, const void *))sym("cuModuleLoadData", 2000);
    R (*getf)(ms_CUfunction *, void *, const char *) =
        (R(*)(ms_CUfunction *, void *, const char *))sym("cuModuleGetFunction", 2000);
    ms_fn_cuLaunchKernel *launch = (ms_fn_cuLaunchKernel *)sym("cuLaunchKernel", 4000);
    ms_CUcontext ctx;
    ms_CUdeviceptr a, b, c;
    void *mod;
    ms_CUfunction f;
    if (!init || !retain || !set || !alloc || !mfree || !aalloc || !load || !getf || !launch ||
        init(0) || retain(&ctx, 0) || set(ctx) || alloc(&a, 1 << 20) || alloc(&b, 2 << 20) ||
        mfree(a) || aalloc(&c, 4096, NULL) || load(&mod, "x") || getf(&f, mod, "old_kernel") ||
        launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) ||
        launch(f, 2, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL))
        return 1;
    printf("ok\n");
    return 0;
}
