"""snapshot: msMemScope's take_snapshot / TakeSnapshot for CPU processes.

On CPU a snapshot is a MARK event whose message is exactly

    snapshot rss=<bytes> allocated=<bytes> reserved=<bytes> name=<name>

rss: the process's resident set (/proc/self/statm); allocated: bytes in use in the C heap
(glibc mallinfo2 uordblks + hblkhd, i.e. what malloc has handed out and not got back);
reserved: bytes the heap holds from the system (arena + hblkhd). With torch and CUDA, the
name carries on as msMemScope's (torch.cuda counters are not read: NEEDSWORK).
"""
import functools

from . import _native


def _check(device_mask, name):
    if not isinstance(name, str):
        raise TypeError("take_snapshot: name must be a str, not %s" % type(name).__name__)
    if device_mask is None:
        return
    masks = device_mask if isinstance(device_mask, (list, tuple)) else [device_mask]
    for m in masks:
        if isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise TypeError("take_snapshot: device_mask must be None, a non-negative int, or a "
                            "list or tuple of them")


def take_snapshot(device_mask=None, name="Memory Snapshot"):
    """Records a snapshot MARK (see the module doc). On CPU the device mask is checked but the
    host is always snapshotted. Returns the figures as a dict."""
    _check(device_mask, name)
    st = _native.heap_stats()
    _native.mark("snapshot rss=%d allocated=%d reserved=%d name=%s"
                 % (st["rss"], st["allocated"], st["reserved"], name))
    st["name"] = name
    return st


class TakeSnapshot:
    """Context manager / decorator: snapshots "<name> Start" and "<name> End"."""

    def __init__(self, device_mask=None, name="Memory Snapshot"):
        _check(device_mask, name)
        self.device_mask, self.name = device_mask, name

    def __enter__(self):
        take_snapshot(self.device_mask, self.name + " Start")
        return self

    def __exit__(self, *exc):
        take_snapshot(self.device_mask, self.name + " End")
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with TakeSnapshot(self.device_mask, self.name):
                return func(*args, **kwargs)
        return wrapper
