/* cuda_bench.c: the cost of memscope's CUDA hooks, against the test driver (bench/cuda.sh):
 * `cuda_bench launch N` makes N kernel launches, `cuda_bench alloc N` N cuMemAlloc/cuMemFree
 * pairs of 4 KiB, through dlsym'ed entry points as cudart's are. Prints the wall time in ns per
 * call (or pair). */
#include "agent/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef ms_CUresult R;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long n = atol(argv[2]);
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv)
        return 3;
    R (*init)(unsigned) = (R(*)(unsigned))dlsym(drv, "cuInit");
    R (*retain)(ms_CUcontext *, int) = (R(*)(ms_CUcontext *, int))dlsym(drv, "cuDevicePrimaryCtxRetain");
    R (*set)(ms_CUcontext) = (R(*)(ms_CUcontext))dlsym(drv, "cuCtxSetCurrent");
    R (*load)(void **, const void *) = (R(*)(void **, const void *))dlsym(drv, "cuModuleLoadData");
    R (*getf)(ms_CUfunction *, void *, const char *) =
        (R(*)(ms_CUfunction *, void *, const char *))dlsym(drv, "cuModuleGetFunction");
    ms_fn_cuLaunchKernel *launch = (ms_fn_cuLaunchKernel *)dlsym(drv, "cuLaunchKernel");
    ms_fn_cuMemAlloc_v2 *alloc = (ms_fn_cuMemAlloc_v2 *)dlsym(drv, "cuMemAlloc_v2");
    ms_fn_cuMemFree_v2 *mfree = (ms_fn_cuMemFree_v2 *)dlsym(drv, "cuMemFree_v2");
    ms_CUcontext ctx;
    void *mod;
    ms_CUfunction f;
    if (init(0) || retain(&ctx, 0) || set(ctx) || load(&mod, "x") || getf(&f, mod, "bench_kernel"))
        return 1;
    double t0 = now();
    if (!strcmp(argv[1], "launch")) {
        for (long i = 0; i < n; i++)
            if (launch(f, 256, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL))
                return 1;
    } else {
        for (long i = 0; i < n; i++) {
            ms_CUdeviceptr p;
            if (alloc(&p, 4096) || mfree(p))
                return 1;
        }
    }
    printf("%.1f\n", (now() - t0) / (double)n);
    return 0;
}
