"""PyTorch's CUDA caching allocator under `memscope run`, without touching the script (the PTA
layer, docs/cuda.md).

The driver hooks see the segments the caching allocator gets with cudaMalloc (HAL rows); the
blocks it hands out inside them are invisible to any hook below PyTorch. PyTorch records them
itself: `torch.cuda.memory._record_memory_history` keeps every alloc, free and segment event
with its time and Python frames. Under `memscope run`, sitecustomize arms this module when the
program imports torch; it asks for the history when the program initializes CUDA
(`torch.cuda._lazy_call`: a program that never uses CUDA is not made to), and at exit saves
`torch.cuda.memory._snapshot()` as `<pid>.pta.pickle` beside the process's trace. The conversion
reads it with memscope's safe unpickler and merges its events by time into the process's rows
(layers pta:N and pta_segment:N, pool PTA:N).

Why this mechanism: it is PyTorch's own, public enough to be stable across 2.x, works with the
native and expandable-segments allocators, and needs no C++ build against the user's PyTorch;
the allocator trace tracker (C++) would, and CUPTI allows one subscriber per process. Limits:
the history is a ring of MEMSCOPE_PTA_MAX_ENTRIES events (default 1000000; older ones are
dropped and their blocks show as allocated before the trace), and a process killed before its
atexit handlers run saves none. PyTorch 1.13 has no event history: nothing is recorded there.
"""
import atexit
import os
import sys
from .. import _env

_armed = False
_started = False


def arm():
    """Call once torch is imported: the history starts when CUDA initializes."""
    global _armed
    if _armed:
        return
    _armed = True
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not hasattr(cuda, "_lazy_call"):
        return
    if cuda.is_initialized():
        _start()
    else:
        cuda._lazy_call(_start)


def _start():
    global _started
    import torch
    if _started:
        return
    mem = torch.cuda.memory
    n = int(_env.get(_env.PTA_MAX_ENTRIES) or 1000000)
    try:  # PyTorch 2.1 and later
        mem._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=n)
    except TypeError:
        try:  # PyTorch 2.0
            mem._record_memory_history(True, record_context=True, trace_alloc_max_entries=n,
                                       trace_alloc_record_context=True)
        except TypeError:
            return  # 1.13: blocks and segments without history; nothing to merge
    _started = True
    atexit.register(save)


def save(path=None):
    """Write PyTorch's allocator history where the conversion reads it. Returns the path, or
    None when there is nothing to write (not under memscope run, history not started)."""
    import pickle
    d = _env.get(_env.TRACE_DIR)
    if not _started or (path is None and not d):
        return None
    import torch
    try:
        snap = torch.cuda.memory._snapshot()
    except Exception as e:  # never break the program's exit
        print("memscope: cannot read PyTorch's allocator history: %s" % e, file=sys.stderr)
        return None
    path = path or os.path.join(d, "%d.pta.pickle" % os.getpid())
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        os.rename(tmp, path)
    except OSError as e:
        print("memscope: cannot save PyTorch's allocator history: %s" % e, file=sys.stderr)
        return None
    return path
