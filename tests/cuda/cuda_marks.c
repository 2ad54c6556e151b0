/* cuda_marks.c: a known-answer program for msMemScope's offline check_leaks (memscope.analyzer)
 * against the TEST DRIVER: device memory between MSTX marks named "iter" (memscope_mark).
 *
 *   mark iter (A)   alloc x 1 MiB, y 2 MiB, z 3 MiB, q 5 MiB
 *   mark iter (B)   free x, alloc w 4 MiB, free z
 *   mark iter (C)   free q
 *   mark other      (a mark of another name: not a boundary)
 *   free w
 * With start_index 0 the window is A..B for allocations and A..C for frees: x and z were freed
 * in it; y (never freed) and q (freed after C) were not: two leaks, y then q; w is allocated
 * after B. With start_index 1 there are too few marks. Exit 0 with "ok", 3 when there is no
 * driver to load, 1 when a driver call failed. */
#include "agent/cuda_driver.h"
#include "memscope.h"

#include <dlfcn.h>
#include <stdio.h>

typedef ms_CUresult R;
#define MIB (1u << 20)

int main(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv)
        return 3;
    R (*init)(unsigned) = (R(*)(unsigned))dlsym(drv, "cuInit");
    R(*retain)
    (ms_CUcontext *, int) = (R(*)(ms_CUcontext *, int))dlsym(drv, "cuDevicePrimaryCtxRetain");
    R (*set)(ms_CUcontext) = (R(*)(ms_CUcontext))dlsym(drv, "cuCtxSetCurrent");
    ms_fn_cuMemAlloc_v2 *alloc = (ms_fn_cuMemAlloc_v2 *)dlsym(drv, "cuMemAlloc_v2");
    ms_fn_cuMemFree_v2 *mfree = (ms_fn_cuMemFree_v2 *)dlsym(drv, "cuMemFree_v2");
    ms_CUcontext ctx;
    ms_CUdeviceptr x, y, z, q, w;
    if (!init || !retain || !set || !alloc || !mfree || init(0) || retain(&ctx, 0) || set(ctx))
        return 1;
    memscope_mark("iter");
    if (alloc(&x, 1 * MIB) || alloc(&y, 2 * MIB) || alloc(&z, 3 * MIB) || alloc(&q, 5 * MIB))
        return 1;
    memscope_mark("iter");
    if (mfree(x) || alloc(&w, 4 * MIB) || mfree(z))
        return 1;
    memscope_mark("iter");
    if (mfree(q))
        return 1;
    memscope_mark("other");
    if (mfree(w))
        return 1;
    (void)y; /* never freed */
    puts("ok");
    return 0;
}
