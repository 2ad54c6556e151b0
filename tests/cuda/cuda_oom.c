/* cuda_oom.c: a known-answer program for memscope's OOM report, against the test driver with
 * MEMSCOPE_TEST_CUDA_CAPACITY=67108864 (64 MiB). On device 0 it allocates, under owner labels
 * (memscope.h): weights 1 and 5 MiB, activations 3, 2 and 4 MiB (then frees the 3 MiB one), and
 * an 8 MiB region that a pool "mypool" (memscope.h) reserves and carves two 1 MiB blocks from.
 * Then cuMemAlloc of 100 MiB fails with CUDA_ERROR_OUT_OF_MEMORY: 20 MiB of the device are live
 * in 5 blocks, 6 MiB of the pool are reserved but not allocated. Two memscope steps (after the
 * weights: 6 MiB in use; after the activations: 12 MiB) and the exit (20 MiB) are where memscope
 * asks NVML (the test NVML) what the GPU reports. Exit 0 with "ok". */
#include "agent/cuda_driver.h"
#include "memscope.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef ms_CUresult R;
#define MIB (1u << 20)

int main(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv)
        return 3;
    R (*init)(unsigned) = (R(*)(unsigned))dlsym(drv, "cuInit");
    R (*retain)(ms_CUcontext *, int) = (R(*)(ms_CUcontext *, int))dlsym(drv, "cuDevicePrimaryCtxRetain");
    R (*set)(ms_CUcontext) = (R(*)(ms_CUcontext))dlsym(drv, "cuCtxSetCurrent");
    ms_fn_cuMemAlloc_v2 *alloc = (ms_fn_cuMemAlloc_v2 *)dlsym(drv, "cuMemAlloc_v2");
    ms_fn_cuMemFree_v2 *mfree = (ms_fn_cuMemFree_v2 *)dlsym(drv, "cuMemFree_v2");
    ms_CUcontext ctx;
    ms_CUdeviceptr w1, w2, a1, a2, a3, region, big;
    if (!init || !retain || !set || !alloc || !mfree || init(0) || retain(&ctx, 0) || set(ctx))
        return 1;
    memscope_owner_push("weights");
    if (alloc(&w1, 1 * MIB) || alloc(&w2, 5 * MIB))
        return 1;
    memscope_owner_pop();
    memscope_step(); /* NVML: 6 MiB in use on device 0 */
    memscope_owner_push("activations");
    if (alloc(&a1, 3 * MIB) || alloc(&a2, 2 * MIB) || alloc(&a3, 4 * MIB) || mfree(a1))
        return 1;
    memscope_owner_pop();
    memscope_step(); /* 12 MiB */
    if (alloc(&region, 8 * MIB))
        return 1;
    memscope_pool_reserve("mypool", (void *)(uintptr_t)region, 8 * MIB);
    memscope_pool_alloc("mypool", (void *)(uintptr_t)region, 1 * MIB);
    memscope_pool_alloc("mypool", (void *)(uintptr_t)(region + MIB), 1 * MIB);
    if (alloc(&big, 100 * MIB) != MS_CUDA_ERROR_OUT_OF_MEMORY)
        return 1;
    printf("ok\n");
    return 0;
}
