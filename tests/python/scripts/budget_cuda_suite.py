"""budget_cuda_suite.py: device-memory budgets of memscope.pytest_plugin (layer="cuda"), run by
tests/python/test_pytest_plugin.py under `memscope run` with the CUDA TEST DRIVER
(tests/cuda/ms_test_libcuda.c, a stand-in libcuda.so.1 on LD_LIBRARY_PATH; no GPU): the tests
reach the driver through ctypes (dlopen + dlsym, as static cudart does) and allocate device
memory of known sizes."""
import ctypes

import pytest

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()
assert cuda.cuInit(0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
kept = []


def alloc(n):
    p = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p


@pytest.mark.limit_memory("4 MB", layer="cuda")
def test_device_over():
    p = alloc(8 * MiB)
    assert cuda.cuMemFree_v2(p) == 0


@pytest.mark.limit_memory("16 MB", layer="cuda")
def test_device_under():
    p = alloc(8 * MiB)
    assert cuda.cuMemFree_v2(p) == 0


@pytest.mark.limit_leaks("0 B", layer="cuda:0")
def test_device_leak():
    kept.append(alloc(MiB))


@pytest.mark.limit_leaks("0 B", layer="cuda")
def test_device_freed():
    p = alloc(MiB)
    assert cuda.cuMemFree_v2(p) == 0


@pytest.mark.limit_memory("1 MB")  # host memory: the device's 8 MiB are not heap
def test_host_budget_device_memory():
    p = alloc(8 * MiB)
    assert cuda.cuMemFree_v2(p) == 0
