/* cuda_known.c: a known-answer program for memscope's CUDA hooks, run against the test driver
 * (ms_test_libcuda.c). It makes one fixed sequence of driver calls, reaching the driver the way
 * the mode says:
 *   direct     exported symbols, linked with -lcuda (cuda_known_direct)
 *   dlsym      dlopen("libcuda.so.1") + dlsym of each exported name (static cudart, NCCL)
 *   procaddr   dlsym of cuGetProcAddress_v2 only, then every entry point by base name, version
 *              and flags, as cudart asks (including cuGetProcAddress itself, whose answer is used
 *              for every later look-up); the async and launch calls use the per-thread default
 *              stream variants (flags 2)
 * The expected rows are in test_cuda.sh. Exit 0 with "ok", 3 when there is no driver to load, 1
 * when a driver call did not give the documented answer. */
#include "agent/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef ms_CUresult R;
typedef struct { ms_CUmemLocation_layout location; int flags; } ms_CUmemAccessDesc;

static struct api {
    R (*Init)(unsigned);
    R (*DevicePrimaryCtxRetain)(ms_CUcontext *, ms_CUdevice);
    R (*CtxSetCurrent)(ms_CUcontext);
    R (*CtxCreate)(ms_CUcontext *, unsigned, ms_CUdevice);
    R (*CtxDestroy)(ms_CUcontext);
    ms_fn_cuMemAlloc_v2 *MemAlloc;
    ms_fn_cuMemAllocPitch_v2 *MemAllocPitch;
    ms_fn_cuMemAllocManaged *MemAllocManaged;
    ms_fn_cuMemFree_v2 *MemFree;
    ms_fn_cuMemHostAlloc *MemHostAlloc;
    ms_fn_cuMemAllocHost_v2 *MemAllocHost;
    ms_fn_cuMemFreeHost *MemFreeHost;
    ms_fn_cuMemHostRegister_v2 *MemHostRegister;
    ms_fn_cuMemHostUnregister *MemHostUnregister;
    R (*StreamCreate)(ms_CUstream *, unsigned);
    R (*StreamSynchronize)(ms_CUstream);
    R (*DeviceGetDefaultMemPool)(ms_CUmemoryPool *, ms_CUdevice);
    ms_fn_cuMemAllocAsync *MemAllocAsync;
    ms_fn_cuMemAllocFromPoolAsync *MemAllocFromPoolAsync;
    ms_fn_cuMemFreeAsync *MemFreeAsync;
    ms_fn_cuMemCreate *MemCreate;
    ms_fn_cuMemRelease *MemRelease;
    ms_fn_cuMemAddressReserve *MemAddressReserve;
    ms_fn_cuMemAddressFree *MemAddressFree;
    ms_fn_cuMemMap *MemMap;
    ms_fn_cuMemUnmap *MemUnmap;
    R (*MemSetAccess)(ms_CUdeviceptr, size_t, const ms_CUmemAccessDesc *, size_t);
    R (*DeviceTotalMem)(size_t *, ms_CUdevice);
    R (*ModuleLoadData)(void **, const void *);
    R (*ModuleGetFunction)(ms_CUfunction *, void *, const char *);
    ms_fn_cuLaunchKernel *LaunchKernel;
    ms_fn_cuLaunchKernelEx *LaunchKernelEx;
    ms_fn_cuLaunchCooperativeKernel *LaunchCooperativeKernel;
} A;

static int failures;

static void expect(const char *what, R got, R want)
{
    if (got != want) {
        fprintf(stderr, "cuda_known: %s returned %d, expected %d\n", what, got, want);
        failures++;
    }
}
#define OK(call) expect(#call, call, MS_CUDA_SUCCESS)

#ifdef CUDA_KNOWN_DIRECT
/* Declared here as the program's own prototypes (linked with -lcuda). */
R cuInit(unsigned);
R cuDevicePrimaryCtxRetain(ms_CUcontext *, ms_CUdevice);
R cuCtxSetCurrent(ms_CUcontext);
R cuCtxCreate_v2(ms_CUcontext *, unsigned, ms_CUdevice);
R cuCtxDestroy_v2(ms_CUcontext);
ms_fn_cuMemAlloc_v2 cuMemAlloc_v2;
ms_fn_cuMemAllocPitch_v2 cuMemAllocPitch_v2;
ms_fn_cuMemAllocManaged cuMemAllocManaged;
ms_fn_cuMemFree_v2 cuMemFree_v2;
ms_fn_cuMemHostAlloc cuMemHostAlloc;
ms_fn_cuMemAllocHost_v2 cuMemAllocHost_v2;
ms_fn_cuMemFreeHost cuMemFreeHost;
ms_fn_cuMemHostRegister_v2 cuMemHostRegister_v2;
ms_fn_cuMemHostUnregister cuMemHostUnregister;
R cuStreamCreate(ms_CUstream *, unsigned);
R cuStreamSynchronize(ms_CUstream);
R cuDeviceGetDefaultMemPool(ms_CUmemoryPool *, ms_CUdevice);
ms_fn_cuMemAllocAsync cuMemAllocAsync;
ms_fn_cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync;
ms_fn_cuMemFreeAsync cuMemFreeAsync;
ms_fn_cuMemCreate cuMemCreate;
ms_fn_cuMemRelease cuMemRelease;
ms_fn_cuMemAddressReserve cuMemAddressReserve;
ms_fn_cuMemAddressFree cuMemAddressFree;
ms_fn_cuMemMap cuMemMap;
ms_fn_cuMemUnmap cuMemUnmap;
R cuMemSetAccess(ms_CUdeviceptr, size_t, const ms_CUmemAccessDesc *, size_t);
R cuDeviceTotalMem_v2(size_t *, ms_CUdevice);
R cuModuleLoadData(void **, const void *);
R cuModuleGetFunction(ms_CUfunction *, void *, const char *);
ms_fn_cuLaunchKernel cuLaunchKernel;
ms_fn_cuLaunchKernelEx cuLaunchKernelEx;
ms_fn_cuLaunchCooperativeKernel cuLaunchCooperativeKernel;

static int load(const char *mode)
{
    (void)mode;
    A.Init = cuInit;
    A.DevicePrimaryCtxRetain = cuDevicePrimaryCtxRetain;
    A.CtxSetCurrent = cuCtxSetCurrent;
    A.CtxCreate = cuCtxCreate_v2;
    A.CtxDestroy = cuCtxDestroy_v2;
    A.MemAlloc = cuMemAlloc_v2;
    A.MemAllocPitch = cuMemAllocPitch_v2;
    A.MemAllocManaged = cuMemAllocManaged;
    A.MemFree = cuMemFree_v2;
    A.MemHostAlloc = cuMemHostAlloc;
    A.MemAllocHost = cuMemAllocHost_v2;
    A.MemFreeHost = cuMemFreeHost;
    A.MemHostRegister = cuMemHostRegister_v2;
    A.MemHostUnregister = cuMemHostUnregister;
    A.StreamCreate = cuStreamCreate;
    A.StreamSynchronize = cuStreamSynchronize;
    A.DeviceGetDefaultMemPool = cuDeviceGetDefaultMemPool;
    A.MemAllocAsync = cuMemAllocAsync;
    A.MemAllocFromPoolAsync = cuMemAllocFromPoolAsync;
    A.MemFreeAsync = cuMemFreeAsync;
    A.MemCreate = cuMemCreate;
    A.MemRelease = cuMemRelease;
    A.MemAddressReserve = cuMemAddressReserve;
    A.MemAddressFree = cuMemAddressFree;
    A.MemMap = cuMemMap;
    A.MemUnmap = cuMemUnmap;
    A.MemSetAccess = cuMemSetAccess;
    A.DeviceTotalMem = cuDeviceTotalMem_v2;
    A.ModuleLoadData = cuModuleLoadData;
    A.ModuleGetFunction = cuModuleGetFunction;
    A.LaunchKernel = cuLaunchKernel;
    A.LaunchKernelEx = cuLaunchKernelEx;
    A.LaunchCooperativeKernel = cuLaunchCooperativeKernel;
    return 0;
}
#else
static void *drv;
static ms_fn_cuGetProcAddress_v2 *get_proc;

/* One entry point: by exported name (dlsym), or by base name and version (procaddr). */
static void *sym(const char *exported, const char *base, int version, int ptsz)
{
    void *f = NULL;
    if (!get_proc) {
        f = dlsym(drv, exported);
    } else {
        ms_CUdriverProcAddressQueryResult st = -1;
        R r = get_proc(base, &f, version, ptsz ? MS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                               : MS_CU_GET_PROC_ADDRESS_DEFAULT, &st);
        if (r != MS_CUDA_SUCCESS || st != MS_CU_GET_PROC_ADDRESS_SUCCESS)
            f = NULL;
    }
    if (!f) {
        fprintf(stderr, "cuda_known: no entry point %s\n", exported);
        exit(1);
    }
    return f;
}

static int load(const char *mode)
{
    drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        printf("no CUDA driver\n");
        return 3;
    }
    if (!strcmp(mode, "procaddr")) {
        get_proc = (ms_fn_cuGetProcAddress_v2 *)dlsym(drv, "cuGetProcAddress_v2");
        if (!get_proc)
            return 1;
        /* cudart asks the driver for cuGetProcAddress itself and uses that from then on */
        void *self = NULL;
        ms_CUdriverProcAddressQueryResult st;
        if (get_proc("cuGetProcAddress", &self, 12000, 0, &st) != MS_CUDA_SUCCESS || !self)
            return 1;
        get_proc = (ms_fn_cuGetProcAddress_v2 *)self;
        /* answers memscope must not change: an ABI older than the driver has, a name it lacks */
        void *f = (void *)1;
        expect("cuGetProcAddress(cuMemAlloc, 2000)", get_proc("cuMemAlloc", &f, 2000, 0, &st),
               MS_CUDA_ERROR_NOT_FOUND);
        expect("its status", st, MS_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
        expect("its pointer", f != NULL, 0);
        expect("cuGetProcAddress(cuNoSuchCall)", get_proc("cuNoSuchCall", &f, 13000, 0, &st),
               MS_CUDA_ERROR_NOT_FOUND);
        expect("its status", st, MS_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    }
    int pt = get_proc != NULL; /* the per-thread default stream variants in procaddr mode */
#define S(field, exported, base, ver, ptsz) \
    A.field = (__typeof__(A.field))sym(exported, base, ver, ptsz)
    S(Init, "cuInit", "cuInit", 2000, 0);
    S(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, 0);
    S(CtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent", 4000, 0);
    S(CtxCreate, "cuCtxCreate_v2", "cuCtxCreate", 3020, 0);
    S(CtxDestroy, "cuCtxDestroy_v2", "cuCtxDestroy", 4000, 0);
    S(MemAlloc, "cuMemAlloc_v2", "cuMemAlloc", 3020, 0);
    S(MemAllocPitch, "cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, 0);
    S(MemAllocManaged, "cuMemAllocManaged", "cuMemAllocManaged", 6000, 0);
    S(MemFree, "cuMemFree_v2", "cuMemFree", 3020, 0);
    S(MemHostAlloc, "cuMemHostAlloc", "cuMemHostAlloc", 2020, 0);
    S(MemAllocHost, "cuMemAllocHost_v2", "cuMemAllocHost", 3020, 0);
    S(MemFreeHost, "cuMemFreeHost", "cuMemFreeHost", 2000, 0);
    S(MemHostRegister, "cuMemHostRegister_v2", "cuMemHostRegister", 6050, 0);
    S(MemHostUnregister, "cuMemHostUnregister", "cuMemHostUnregister", 4000, 0);
    S(StreamCreate, "cuStreamCreate", "cuStreamCreate", 2000, 0);
    S(StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize", 2000, 0);
    S(DeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020, 0);
    S(MemAllocAsync, pt ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync", "cuMemAllocAsync", 11020, pt);
    S(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, 0);
    S(MemFreeAsync, pt ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync", "cuMemFreeAsync", 11020, pt);
    S(MemCreate, "cuMemCreate", "cuMemCreate", 10020, 0);
    S(MemRelease, "cuMemRelease", "cuMemRelease", 10020, 0);
    S(MemAddressReserve, "cuMemAddressReserve", "cuMemAddressReserve", 10020, 0);
    S(MemAddressFree, "cuMemAddressFree", "cuMemAddressFree", 10020, 0);
    S(MemMap, "cuMemMap", "cuMemMap", 10020, 0);
    S(MemUnmap, "cuMemUnmap", "cuMemUnmap", 10020, 0);
    S(MemSetAccess, "cuMemSetAccess", "cuMemSetAccess", 10020, 0);
    S(DeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem", 3020, 0);
    S(ModuleLoadData, "cuModuleLoadData", "cuModuleLoadData", 2000, 0);
    S(ModuleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction", 2000, 0);
    S(LaunchKernel, pt ? "cuLaunchKernel_ptsz" : "cuLaunchKernel", "cuLaunchKernel", 7000, pt);
    S(LaunchKernelEx, "cuLaunchKernelEx", "cuLaunchKernelEx", 11060, 0);
    S(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 9000, 0);
#undef S
    return 0;
}
#endif

static ms_CUcontext ctx[2];

/* Each thread: 100 alloc/free pairs of 4 KiB on device (i % 2), then one 8 KiB block kept. */
static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    OK(A.CtxSetCurrent(ctx[i % 2]));
    for (int k = 0; k < 100; k++) {
        ms_CUdeviceptr p;
        OK(A.MemAlloc(&p, 4096));
        OK(A.MemFree(p));
    }
    ms_CUdeviceptr keep;
    OK(A.MemAlloc(&keep, 8192));
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = load(argc > 1 ? argv[1] : "dlsym");
    if (rc)
        return rc;
    OK(A.Init(0));
    OK(A.DevicePrimaryCtxRetain(&ctx[0], 0));
    OK(A.DevicePrimaryCtxRetain(&ctx[1], 1));
    OK(A.CtxSetCurrent(ctx[0]));

    /* device 0: plain, pitched and managed allocations */
    ms_CUdeviceptr a, b, c, d, e;
    size_t pitch = 0;
    OK(A.MemAlloc(&a, 1 << 20));
    OK(A.MemAlloc(&b, 2 << 20));
    OK(A.MemAlloc(&c, 3 << 20));
    OK(A.MemFree(b));
    OK(A.MemAllocPitch(&d, &pitch, 1000, 10, 4)); /* pitch 1024: 10240 bytes */
    expect("pitch", (R)pitch, 1024);
    OK(A.MemAllocManaged(&e, 65536, 1));
    memset((void *)(uintptr_t)e, 1, 65536); /* managed memory is host-accessible */
    OK(A.MemFree(e));

    /* pinned host memory */
    void *f, *g;
    OK(A.MemHostAlloc(&f, 8192, 0));
    OK(A.MemAllocHost(&g, 4096));
    OK(A.MemFreeHost(f));
    char *h = malloc(16384);
    OK(A.MemHostRegister(h, 16384, 0));
    OK(A.MemHostUnregister(h));
    free(h);

    /* stream-ordered allocations */
    ms_CUstream s;
    ms_CUmemoryPool pool;
    ms_CUdeviceptr i1, i2, i3, j;
    OK(A.StreamCreate(&s, 0));
    OK(A.DeviceGetDefaultMemPool(&pool, 0));
    OK(A.MemAllocAsync(&i1, 4096, s));
    OK(A.MemAllocAsync(&i2, 4096, s));
    OK(A.MemAllocAsync(&i3, 4096, s));
    OK(A.MemAllocFromPoolAsync(&j, 8192, pool, s));
    OK(A.MemFreeAsync(i1, s));
    OK(A.MemFreeAsync(i2, s));
    OK(A.StreamSynchronize(s));
    OK(A.MemFreeAsync(j, NULL));

    /* VMM: two 2 MiB physical allocations on device 1, mapped into one 4 MiB reservation */
    ms_CUmemAllocationProp prop = {0};
    prop.type = 1;
    prop.location.type = MS_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    ms_CUmemGenericAllocationHandle p1, p2;
    ms_CUdeviceptr v;
    OK(A.MemCreate(&p1, 2 << 20, &prop, 0));
    OK(A.MemCreate(&p2, 2 << 20, &prop, 0));
    OK(A.MemAddressReserve(&v, 4 << 20, 0, 0, 0));
    OK(A.MemMap(v, 2 << 20, 0, p1, 0));
    OK(A.MemMap(v + (2 << 20), 2 << 20, 0, p2, 0));
    ms_CUmemAccessDesc acc = {{MS_CU_MEM_LOCATION_TYPE_DEVICE, 1}, 3};
    OK(A.MemSetAccess(v, 4 << 20, &acc, 1));
    memset((void *)(uintptr_t)v, 7, 4 << 20); /* the test driver backs VMM with real memory */
    if (((unsigned char *)(uintptr_t)v)[(4 << 20) - 1] != 7)
        failures++;
    OK(A.MemUnmap(v, 2 << 20));
    OK(A.MemUnmap(v + (2 << 20), 2 << 20));
    OK(A.MemRelease(p1));
    OK(A.MemRelease(p2));
    OK(A.MemAddressFree(v, 4 << 20));

    /* device 1: a block live at exit, then an allocation that cannot fit */
    OK(A.CtxSetCurrent(ctx[1]));
    ms_CUdeviceptr k, too_big;
    size_t total = 0;
    OK(A.MemAlloc(&k, 4 << 20));
    OK(A.DeviceTotalMem(&total, 1));
    expect("cuMemAlloc(total)", A.MemAlloc(&too_big, total), MS_CUDA_ERROR_OUT_OF_MEMORY);
    /* a free of an address the driver never gave: its error comes back unchanged */
    expect("cuMemFree(unknown)", A.MemFree((ms_CUdeviceptr)0xdead000), MS_CUDA_ERROR_INVALID_VALUE);

    /* kernel launches on device 1 */
    void *mod;
    ms_CUfunction add, sum;
    OK(A.ModuleLoadData(&mod, "fatbin"));
    OK(A.ModuleGetFunction(&add, mod, "vector_add"));
    OK(A.ModuleGetFunction(&sum, mod, "reduce_sum"));
    for (int n = 0; n < 3; n++)
        OK(A.LaunchKernel(add, 128, 1, 1, 256, 1, 1, 0, s, NULL, NULL));
    OK(A.LaunchKernel(sum, 64, 2, 1, 512, 1, 1, 4096, s, NULL, NULL));
    OK(A.LaunchKernel(sum, 64, 2, 1, 512, 1, 1, 4096, s, NULL, NULL));
    ms_CUlaunchConfig cfg = {32, 1, 1, 128, 1, 1, 0, s, NULL, 0};
    OK(A.LaunchKernelEx(&cfg, sum, NULL, NULL));
    OK(A.LaunchCooperativeKernel(sum, 16, 1, 1, 64, 1, 1, 0, s, NULL));

    /* a context destroyed with a block live: the driver frees it, without a call to see */
    ms_CUcontext own;
    ms_CUdeviceptr orphan;
    OK(A.CtxCreate(&own, 0, 0));
    OK(A.MemAlloc(&orphan, 65536));
    OK(A.CtxDestroy(own));
    OK(A.CtxSetCurrent(ctx[1]));

    /* four threads, two per device */
    pthread_t t[4];
    for (int n = 0; n < 4; n++)
        pthread_create(&t[n], NULL, worker, (void *)(intptr_t)n);
    for (int n = 0; n < 4; n++)
        pthread_join(t[n], NULL);

    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
