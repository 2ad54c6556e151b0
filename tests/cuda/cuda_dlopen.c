/* cuda_dlopen.c: a known-answer program for direct binding in an object loaded after start.
 * It reaches the driver by dlopen + dlsym (as cudart) and allocates 4 MiB, then dlopens
 * libms_cuda_user.so, which binds the driver directly and allocates 1, 2 and 3 MiB (frees 2).
 * Prints "plugin: two" (the library's bare-name dlopen through its RUNPATH) and "ok". */
#include "agent/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef ms_CUresult R;

int main(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv)
        return 3;
    R (*init)(unsigned) = (R(*)(unsigned))dlsym(drv, "cuInit");
    R (*retain)(ms_CUcontext *, int) = (R(*)(ms_CUcontext *, int))dlsym(drv, "cuDevicePrimaryCtxRetain");
    R (*set)(ms_CUcontext) = (R(*)(ms_CUcontext))dlsym(drv, "cuCtxSetCurrent");
    ms_fn_cuMemAlloc_v2 *alloc = (ms_fn_cuMemAlloc_v2 *)dlsym(drv, "cuMemAlloc_v2");
    ms_CUcontext ctx;
    ms_CUdeviceptr p;
    if (!init || !retain || !set || !alloc || init(0) || retain(&ctx, 0) || set(ctx) ||
        alloc(&p, 4 << 20))
        return 1;
    /* by path (beside this program): the plugin it loads must come from its own RUNPATH */
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    char *slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
    if (!slash)
        return 1;
    strcpy(slash + 1, "libms_cuda_user.so");
    void *lib = dlopen(path, RTLD_NOW);
    const char *(*user)(void) = lib ? (const char *(*)(void))dlsym(lib, "user_allocs") : NULL;
    if (!user) {
        fprintf(stderr, "cuda_dlopen: %s\n", dlerror());
        return 1;
    }
    printf("plugin: %s\nok\n", user());
    return 0;
}
