/* test_cuda_decls.c: memscope declares the parts of the CUDA driver API it needs itself
 * (src/agent/cuda_driver.h), so that it builds without any NVIDIA package. Built only where a
 * CUDA toolkit's cuda.h is found, this checks those declarations against it: every signature
 * memscope wraps or calls (the compiler compares the function types), the constants, and each
 * struct layout memscope reads, field by field. A mismatch fails the build or the run. */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>

#define MS_CUDA_DRIVER_TYPES_FROM_CUDA_H
#include "agent/cuda_driver.h"

#define SAME_FN(name) \
    _Static_assert(__builtin_types_compatible_p(ms_fn_##name, __typeof__(name)), #name);
SAME_FN(cuMemAlloc_v2)
SAME_FN(cuMemAllocPitch_v2)
SAME_FN(cuMemAllocManaged)
SAME_FN(cuMemFree_v2)
SAME_FN(cuMemAllocAsync)
SAME_FN(cuMemAllocFromPoolAsync)
SAME_FN(cuMemFreeAsync)
SAME_FN(cuMemCreate)
SAME_FN(cuMemRelease)
SAME_FN(cuMemAddressReserve)
SAME_FN(cuMemAddressFree)
SAME_FN(cuMemMap)
SAME_FN(cuMemUnmap)
SAME_FN(cuMemHostAlloc)
SAME_FN(cuMemAllocHost_v2)
SAME_FN(cuMemFreeHost)
SAME_FN(cuMemHostRegister_v2)
SAME_FN(cuMemHostUnregister)
SAME_FN(cuIpcOpenMemHandle_v2)
SAME_FN(cuIpcCloseMemHandle)
SAME_FN(cuLaunchKernel)
SAME_FN(cuLaunchKernelEx)
SAME_FN(cuLaunchCooperativeKernel)
SAME_FN(cuGetProcAddress_v2)
SAME_FN(cuCtxGetDevice)
SAME_FN(cuMemGetInfo_v2)
SAME_FN(cuFuncGetName)
SAME_FN(cuDeviceGetMemPool)
SAME_FN(cuMemPoolGetAttribute)

/* cuGetProcAddress (CUDA 11.3's ABI) is no longer declared by cuda.h 12+: its type is that of
 * cuGetProcAddress_v2 without the last parameter, which memscope's declaration spells out. */
_Static_assert(__builtin_types_compatible_p(ms_fn_cuGetProcAddress,
                                            CUresult(const char *, void **, int, cuuint64_t)),
               "cuGetProcAddress");

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " == " #b);
SAME(MS_CUDA_SUCCESS, CUDA_SUCCESS)
SAME(MS_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE)
SAME(MS_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY)
SAME(MS_CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED)
SAME(MS_CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE)
SAME(MS_CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT)
SAME(MS_CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE)
SAME(MS_CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND)
SAME(MS_CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED)
SAME(MS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
SAME(MS_CU_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS)
SAME(MS_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
SAME(MS_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
SAME(MS_CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE)
SAME(MS_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
SAME(MS_CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_CURRENT)

#define SAME_FIELD(ours, theirs, f)                                                   \
    SAME(offsetof(ours, f), offsetof(theirs, f))                                      \
    SAME(sizeof(((ours *)0)->f), sizeof(((theirs *)0)->f))
SAME(sizeof(ms_CUmemLocation_layout), sizeof(CUmemLocation))
SAME_FIELD(ms_CUmemLocation_layout, CUmemLocation, type)
SAME_FIELD(ms_CUmemLocation_layout, CUmemLocation, id)
SAME(sizeof(ms_CUmemAllocationProp_layout), sizeof(CUmemAllocationProp))
SAME_FIELD(ms_CUmemAllocationProp_layout, CUmemAllocationProp, type)
SAME_FIELD(ms_CUmemAllocationProp_layout, CUmemAllocationProp, location)
SAME_FIELD(ms_CUmemAllocationProp_layout, CUmemAllocationProp, win32HandleMetaData)
SAME_FIELD(ms_CUmemAllocationProp_layout, CUmemAllocationProp, allocFlags)
SAME(sizeof(ms_CUipcMemHandle_layout), sizeof(CUipcMemHandle))
SAME(sizeof(ms_CUlaunchConfig_layout), sizeof(CUlaunchConfig))
SAME_FIELD(ms_CUlaunchConfig_layout, CUlaunchConfig, gridDimX)
SAME_FIELD(ms_CUlaunchConfig_layout, CUlaunchConfig, blockDimZ)
SAME_FIELD(ms_CUlaunchConfig_layout, CUlaunchConfig, sharedMemBytes)
SAME_FIELD(ms_CUlaunchConfig_layout, CUlaunchConfig, hStream)
SAME_FIELD(ms_CUlaunchConfig_layout, CUlaunchConfig, numAttrs)

int main(void)
{
    printf("memscope's CUDA declarations match cuda.h (CUDA_VERSION %d)\n", CUDA_VERSION);
    return 0;
}
