"""The calls memscope.torch makes into memscope: one door, so the rest of the package does not
care whether the C extension is there.

Order of preference:
  1. memscope._native (the package's C extension): start/stop/step/owner_push/owner_pop/mark/
     range_push/range_pop/access/crc64/read_bytes.
  2. The agent's own entry points (memscope__mark, ...) found with ctypes in the process, when
     the program runs under `memscope run` but the extension is not built; crc64 and
     read_bytes are then done in Python (bit-exact, slow).
  3. Nothing: annotation calls are no-ops that return -1; crc64/read_bytes still work.

Every annotation function returns 0 when recorded, -1 when not (as include/memscope.h; the
extension's True/False is turned into that).
"""
import ctypes

_native = None
_lib = None
_kind = None


def _load():
    global _native, _lib, _kind
    if _kind is not None:
        return _kind
    try:
        from .. import _native as nat  # built by the package's CMake
        _native = nat      # its calls return False while nothing records (in-process mode
        _kind = "native"   # before start()), so it is used even when not available() yet
        return _kind
    except ImportError:
        pass
    try:
        lib = ctypes.CDLL(None)
        lib.memscope__mark  # raises AttributeError without the agent
        for fn in ("memscope__mark", "memscope__owner_push", "memscope__range_push"):
            getattr(lib, fn).argtypes = [ctypes.c_char_p]
            getattr(lib, fn).restype = ctypes.c_int
        for fn in ("memscope__owner_pop", "memscope__range_pop", "memscope__step",
                   "memscope__start", "memscope__stop"):
            getattr(lib, fn).argtypes = []
            getattr(lib, fn).restype = ctypes.c_int
        lib.memscope__access.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_char_p]
        lib.memscope__access.restype = ctypes.c_int
        _lib = lib
        _kind = "agent"
    except (OSError, AttributeError):
        _kind = "none"
    return _kind


def kind():
    """'native', 'agent' (ctypes into the preloaded agent) or 'none'."""
    return _load()


def recording():
    """True when annotation calls reach an agent (or the extension says it is available)."""
    return _load() != "none"


def _b(s):
    return s.encode("utf-8", "replace") if isinstance(s, str) else s


def mark(msg):
    k = _load()
    if k == "native":
        return 0 if _native.mark(msg) else -1
    if k == "agent":
        return _lib.memscope__mark(_b(msg))
    return -1


def owner_push(label):
    k = _load()
    if k == "native":
        return 0 if _native.owner_push(label) else -1
    if k == "agent":
        return _lib.memscope__owner_push(_b(label))
    return -1


def owner_pop():
    k = _load()
    if k == "native":
        return 0 if _native.owner_pop() else -1
    if k == "agent":
        return _lib.memscope__owner_pop()
    return -1


def range_push(name):
    k = _load()
    if k == "native":
        return 0 if _native.range_push(name) else -1
    if k == "agent":
        return _lib.memscope__range_push(_b(name))
    return -1


def range_pop():
    k = _load()
    if k == "native":
        return 0 if _native.range_pop() else -1
    if k == "agent":
        return _lib.memscope__range_pop()
    return -1


def access(ptr, size, flags, op):
    k = _load()
    if k == "native":
        return 0 if _native.access(ptr, size, flags, op) else -1
    if k == "agent":
        return _lib.memscope__access(ptr, size, flags, _b(op))
    return -1


def quiet(delta):
    """+1 around memscope's own bookkeeping, -1 after: its heap allocations on this thread are
    not the program's and are not recorded (memscope__quiet)."""
    k = _load()
    if k == "native":
        return 0 if _native.quiet(delta) else -1
    if k == "agent" and hasattr(_lib, "memscope__quiet"):
        return _lib.memscope__quiet(delta)
    return -1


class _Quiet:
    """`with QUIET:` around memscope's own bookkeeping (quiet(1) ... quiet(-1))."""

    def __enter__(self):
        quiet(1)
        return self

    def __exit__(self, *exc):
        quiet(-1)
        return False


QUIET = _Quiet()


def step():
    k = _load()
    if k == "native":
        return 0 if _native.step() else -1
    if k == "agent":
        return _lib.memscope__step()
    return -1


# --- msMemScope's CRC-64 variant (reference §4.4) -------------------------------------------
# Poly 0x42F0E1EBA9EA3693 (the ECMA polynomial, *not* reflected) used with a right-shifting
# table; init and xorout all ones. Not CRC-64/XZ: kept bit-exact with msMemScope.
_POLY = 0x42F0E1EBA9EA3693
_MASK = 0xFFFFFFFFFFFFFFFF
_table = None


def _crc_table():
    global _table
    if _table is None:
        t = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ _POLY if c & 1 else c >> 1
            t.append(c)
        _table = t
    return _table


def crc64_bytes(data):
    """The checksum of a bytes-like object, in Python (the reference for the C version)."""
    t = _crc_table()
    c = _MASK
    for b in bytes(data):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ _MASK


def read_bytes(ptr, size):
    """A copy of size bytes at ptr (the caller guarantees they are readable)."""
    if _load() == "native" and hasattr(_native, "read_bytes"):
        return _native.read_bytes(ptr, size)
    return ctypes.string_at(ptr, size) if size else b""


def crc64(ptr, size):
    """msMemScope's CRC-64 of size bytes at ptr."""
    if _load() == "native" and hasattr(_native, "crc64"):
        return _native.crc64(ptr, size)
    return crc64_bytes(read_bytes(ptr, size))
