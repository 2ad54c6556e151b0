"""keep_native.py: 5 MiB of native memory (libc malloc through ctypes) that keep_forever()
never frees, for tests/python/test_budget_suppressions.py."""
import ctypes

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p


def keep_forever():
    return libc.malloc(5 << 20)  # never freed


p = keep_forever()
