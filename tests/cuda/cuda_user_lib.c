/* cuda_user_lib.c: libms_cuda_user.so for cuda_dlopen.c: a library linked against the driver
 * (DT_NEEDED libcuda.so.1, direct binding, like PyTorch's libcaffe2_nvrtc.so) that the program
 * dlopens after it started using CUDA, and that dlopens a plugin by bare name through its own
 * DT_RUNPATH ($ORIGIN), which must still work under memscope's dlopen hook. */
#include "agent/cuda_driver.h"

#include <dlfcn.h>
#include <stddef.h>

typedef ms_CUresult R;
R cuDevicePrimaryCtxRetain(ms_CUcontext *, ms_CUdevice);
R cuCtxSetCurrent(ms_CUcontext);
ms_fn_cuMemAlloc_v2 cuMemAlloc_v2;
ms_fn_cuMemFree_v2 cuMemFree_v2;

/* 1, 2 and 3 MiB on device 0, the 2 MiB one freed; returns what the plugin's probe_name says. */
__attribute__((visibility("default"))) const char *user_allocs(void)
{
    ms_CUcontext ctx;
    ms_CUdeviceptr a, b, c;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) || cuMemAlloc_v2(&a, 1 << 20) ||
        cuMemAlloc_v2(&b, 2 << 20) || cuMemAlloc_v2(&c, 3 << 20) || cuMemFree_v2(b))
        return "cuda failed";
    void *plugin = dlopen("libms_next_probe2.so", RTLD_NOW);
    const char *(*name)(void) = plugin ? (const char *(*)(void))dlsym(plugin, "probe_name") : NULL;
    return name ? name() : "no plugin";
}
