/* cuda_fork.c: a known-answer program for memscope's CUDA hooks across fork and IPC, against the
 * test driver. The parent allocates 1 MiB on device 0 and exports it; the forked child (its own
 * trace) opens the handle (an imported HAL block of 1 MiB), allocates and frees 2 MiB, closes
 * the handle and exits; then the parent frees its block. Exit 0 with "ok". */
#include "agent/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
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
    ms_fn_cuMemFree_v2 *mfree = (ms_fn_cuMemFree_v2 *)dlsym(drv, "cuMemFree_v2");
    R (*get)(ms_CUipcMemHandle *, ms_CUdeviceptr) =
        (R(*)(ms_CUipcMemHandle *, ms_CUdeviceptr))dlsym(drv, "cuIpcGetMemHandle");
    ms_fn_cuIpcOpenMemHandle_v2 *open_h = (ms_fn_cuIpcOpenMemHandle_v2 *)dlsym(drv, "cuIpcOpenMemHandle_v2");
    ms_fn_cuIpcCloseMemHandle *close_h = (ms_fn_cuIpcCloseMemHandle *)dlsym(drv, "cuIpcCloseMemHandle");
    if (!init || !retain || !set || !alloc || !mfree || !get || !open_h || !close_h)
        return 1;
    ms_CUcontext ctx;
    ms_CUdeviceptr x;
    ms_CUipcMemHandle h;
    if (init(0) || retain(&ctx, 0) || set(ctx) || alloc(&x, 1 << 20) || get(&h, x))
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        ms_CUdeviceptr y, z;
        if (set(ctx) || open_h(&y, h, 1) || alloc(&z, 2 << 20) || mfree(z) || close_h(y))
            _exit(1);
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    if (mfree(x))
        return 1;
    printf("ok\n");
    return 0;
}
