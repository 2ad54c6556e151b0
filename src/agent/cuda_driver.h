/* cuda_driver.h: the few types and signatures of the CUDA driver API (libcuda.so.1) that memscope
 * uses, declared here so that memscope builds on machines without any NVIDIA package.
 *
 * Names carry an ms_ prefix so that this header can be included together with the real cuda.h:
 * tests/cuda/test_cuda_decls.c does that when a CUDA toolkit is installed and checks every
 * signature and struct layout below against it (same tags for the opaque handle structs, so the
 * function types are compatible only when they match exactly). Used by the agent (cuda.c) and by
 * the test driver (tests/cuda/ms_test_libcuda.c). */
#ifndef MS_CUDA_DRIVER_H
#define MS_CUDA_DRIVER_H

#include <stddef.h>

#include <stdint.h>

typedef struct CUctx_st *ms_CUcontext;
typedef struct CUstream_st *ms_CUstream;
typedef struct CUfunc_st *ms_CUfunction;
typedef struct CUmemPoolHandle_st *ms_CUmemoryPool;
enum {
    MS_CUDA_SUCCESS = 0,
    MS_CUDA_ERROR_INVALID_VALUE = 1,
    MS_CUDA_ERROR_OUT_OF_MEMORY = 2,
    MS_CUDA_ERROR_NOT_INITIALIZED = 3,
    MS_CUDA_ERROR_INVALID_DEVICE = 101,
    MS_CUDA_ERROR_INVALID_CONTEXT = 201,
    MS_CUDA_ERROR_INVALID_HANDLE = 400,
    MS_CUDA_ERROR_NOT_FOUND = 500,
    MS_CUDA_ERROR_NOT_SUPPORTED = 801,
};

/* cuGetProcAddress flags and results. */
enum {
    MS_CU_GET_PROC_ADDRESS_DEFAULT = 0,
    MS_CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
    MS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2
};
enum {
    MS_CU_GET_PROC_ADDRESS_SUCCESS = 0,
    MS_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    MS_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
};

enum { MS_CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum { MS_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5, MS_CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7 };

/* The layouts memscope reads, under names of their own (tests/cuda/test_cuda_decls.c compares
 * them with cuda.h's structs field by field). */
typedef struct {
    int type; /* CUmemLocationType */
    int id;
} ms_CUmemLocation_layout;

typedef struct {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
    ms_CUmemLocation_layout location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} ms_CUmemAllocationProp_layout;

typedef struct {
    char reserved[64];
} ms_CUipcMemHandle_layout;

typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    struct CUstream_st *hStream;
    struct CUlaunchAttribute_st *attrs;
    unsigned int numAttrs;
} ms_CUlaunchConfig_layout;

#ifdef MS_CUDA_DRIVER_TYPES_FROM_CUDA_H
/* test_cuda_decls.c: the signatures below are spelled with cuda.h's own types, so that the
 * compiler compares them with cuda.h's declarations exactly. */
typedef CUresult ms_CUresult;
typedef CUdevice ms_CUdevice;
typedef CUdeviceptr ms_CUdeviceptr;
typedef cuuint64_t ms_cuuint64_t;
typedef CUmemGenericAllocationHandle ms_CUmemGenericAllocationHandle;
typedef CUdriverProcAddressQueryResult ms_CUdriverProcAddressQueryResult;
typedef CUmemAllocationProp ms_CUmemAllocationProp;
typedef CUipcMemHandle ms_CUipcMemHandle;
typedef CUlaunchConfig ms_CUlaunchConfig;
typedef CUmemPool_attribute ms_CUmemPool_attribute;
#else
typedef unsigned int ms_CUresult; /* an enum of non-negative values: unsigned int to GCC */
typedef int ms_CUdevice;
typedef unsigned long long ms_CUdeviceptr;
typedef uint64_t ms_cuuint64_t;
typedef unsigned long long ms_CUmemGenericAllocationHandle;
typedef unsigned int ms_CUdriverProcAddressQueryResult;
typedef ms_CUmemAllocationProp_layout ms_CUmemAllocationProp;
typedef ms_CUipcMemHandle_layout ms_CUipcMemHandle;
typedef ms_CUlaunchConfig_layout ms_CUlaunchConfig;
typedef unsigned int ms_CUmemPool_attribute; /* an enum of non-negative values */
#endif

/* The signatures memscope wraps or calls, by the exported name of their current ABI. */
typedef ms_CUresult ms_fn_cuMemAlloc_v2(ms_CUdeviceptr *, size_t);
typedef ms_CUresult ms_fn_cuMemAllocPitch_v2(ms_CUdeviceptr *, size_t *, size_t, size_t,
                                             unsigned int);
typedef ms_CUresult ms_fn_cuMemAllocManaged(ms_CUdeviceptr *, size_t, unsigned int);
typedef ms_CUresult ms_fn_cuMemFree_v2(ms_CUdeviceptr);
typedef ms_CUresult ms_fn_cuMemAllocAsync(ms_CUdeviceptr *, size_t, ms_CUstream);
typedef ms_CUresult ms_fn_cuMemAllocFromPoolAsync(ms_CUdeviceptr *, size_t, ms_CUmemoryPool,
                                                  ms_CUstream);
typedef ms_CUresult ms_fn_cuMemFreeAsync(ms_CUdeviceptr, ms_CUstream);
typedef ms_CUresult ms_fn_cuMemCreate(ms_CUmemGenericAllocationHandle *, size_t,
                                      const ms_CUmemAllocationProp *, unsigned long long);
typedef ms_CUresult ms_fn_cuMemRelease(ms_CUmemGenericAllocationHandle);
typedef ms_CUresult ms_fn_cuMemAddressReserve(ms_CUdeviceptr *, size_t, size_t, ms_CUdeviceptr,
                                              unsigned long long);
typedef ms_CUresult ms_fn_cuMemAddressFree(ms_CUdeviceptr, size_t);
typedef ms_CUresult ms_fn_cuMemMap(ms_CUdeviceptr, size_t, size_t, ms_CUmemGenericAllocationHandle,
                                   unsigned long long);
typedef ms_CUresult ms_fn_cuMemUnmap(ms_CUdeviceptr, size_t);
typedef ms_CUresult ms_fn_cuMemHostAlloc(void **, size_t, unsigned int);
typedef ms_CUresult ms_fn_cuMemAllocHost_v2(void **, size_t);
typedef ms_CUresult ms_fn_cuMemFreeHost(void *);
typedef ms_CUresult ms_fn_cuMemHostRegister_v2(void *, size_t, unsigned int);
typedef ms_CUresult ms_fn_cuMemHostUnregister(void *);
typedef ms_CUresult ms_fn_cuIpcOpenMemHandle_v2(ms_CUdeviceptr *, ms_CUipcMemHandle, unsigned int);
typedef ms_CUresult ms_fn_cuIpcCloseMemHandle(ms_CUdeviceptr);
typedef ms_CUresult ms_fn_cuLaunchKernel(ms_CUfunction, unsigned int, unsigned int, unsigned int,
                                         unsigned int, unsigned int, unsigned int, unsigned int,
                                         ms_CUstream, void **, void **);
typedef ms_CUresult ms_fn_cuLaunchKernelEx(const ms_CUlaunchConfig *, ms_CUfunction, void **,
                                           void **);
typedef ms_CUresult ms_fn_cuLaunchCooperativeKernel(ms_CUfunction, unsigned int, unsigned int,
                                                    unsigned int, unsigned int, unsigned int,
                                                    unsigned int, unsigned int, ms_CUstream,
                                                    void **);
typedef ms_CUresult ms_fn_cuGetProcAddress(const char *, void **, int, ms_cuuint64_t);
typedef ms_CUresult ms_fn_cuGetProcAddress_v2(const char *, void **, int, ms_cuuint64_t,
                                              ms_CUdriverProcAddressQueryResult *);
/* The per-thread default stream variants have the same signatures. */
typedef ms_fn_cuMemAllocAsync ms_fn_cuMemAllocAsync_ptsz;
typedef ms_fn_cuMemAllocFromPoolAsync ms_fn_cuMemAllocFromPoolAsync_ptsz;
typedef ms_fn_cuMemFreeAsync ms_fn_cuMemFreeAsync_ptsz;
typedef ms_fn_cuLaunchKernel ms_fn_cuLaunchKernel_ptsz;
typedef ms_fn_cuLaunchKernelEx ms_fn_cuLaunchKernelEx_ptsz;
typedef ms_fn_cuLaunchCooperativeKernel ms_fn_cuLaunchCooperativeKernel_ptsz;
/* Called, not wrapped. */
typedef ms_CUresult ms_fn_cuCtxGetDevice(ms_CUdevice *);
typedef ms_CUresult ms_fn_cuMemGetInfo_v2(size_t *, size_t *);
typedef ms_CUresult ms_fn_cuFuncGetName(const char **, ms_CUfunction);
typedef ms_CUresult ms_fn_cuDeviceGetMemPool(ms_CUmemoryPool *, ms_CUdevice);
typedef ms_CUresult ms_fn_cuMemPoolGetAttribute(ms_CUmemoryPool, ms_CUmemPool_attribute, void *);

#endif
