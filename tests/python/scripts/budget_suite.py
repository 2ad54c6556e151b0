"""budget_suite.py: a pytest suite with known memory (tests/python/test_pytest_plugin.py runs it
under memscope.pytest_plugin and checks exactly which tests pass and fail). Sizes are far
from the limits so that the interpreter's own small allocations never decide an outcome."""
import ctypes
import os

import pytest

MiB = 1024 * 1024
keep = []
cache = []


@pytest.mark.limit_memory("1 MB")
def test_mem_under():
    b = bytearray(MiB // 2)
    del b


@pytest.mark.limit_memory("1 MB")
def test_mem_over():
    b = bytearray(2 * MiB)
    del b


@pytest.mark.limit_memory("3 MB")
def test_mem_sequential():
    for _ in range(4):
        b = bytearray(2 * MiB)  # 8 MiB allocated, never more than 2 MiB at once
        del b


@pytest.mark.limit_memory("1 MB")
def test_native_over():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    p = libc.malloc(3 * MiB)
    libc.free(p)


@pytest.mark.limit_leaks("100 KB")
def test_leak_over():
    keep.append(bytearray(MiB))


@pytest.mark.limit_leaks("100 KB")
def test_leak_under():
    b = bytearray(MiB)
    del b


@pytest.mark.limit_leaks("100 KB", warmups=1)
def test_leak_cache():
    if not cache:
        cache.append(bytearray(MiB))  # filled by the warm-up run only


@pytest.mark.limit_memory("1 MB")
def test_fails_itself():
    assert os.environ.get("BUDGET_SUITE_NEVER") == "set"


def test_unmarked():
    n = 12 if os.environ.get("BUDGET_SUITE_GROW") else 5
    b = bytearray(n * MiB)
    del b


@pytest.mark.limit_memory("1 MB")
def test_fork_over():
    pid = os.fork()
    if pid == 0:  # the child's 3 MiB count with the test
        b = bytearray(3 * MiB)
        del b
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
