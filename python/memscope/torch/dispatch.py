"""Op events and tensor accesses for PyTorch, at the dispatcher.

One TorchDispatchMode (torch.utils._python_dispatch, torch >= 1.13) sees every ATen op the
thread that entered it runs, forward and backward (CPU autograd runs backward on the calling
thread). For each op it can:
  - record the op as a range named after the op's schema (`aten::addmm`): RANGE_START before
    the op runs, RANGE_END after (docs/database.md: ranges; `memscope analyze` calls one
    outermost range an "API");
  - record one ACCESS per distinct tensor storage among the op's tensor arguments and outputs,
    inside the range: flags 2 (write) for arguments whose schema alias annotation is a write
    (`Tensor(a!)`) and for fresh outputs, 1 (read) for the other arguments; outputs that
    alias an input without writing it (views) add nothing. addr = the storage's data pointer
    (for a CPU tensor the start of the malloc'ed block), size = the storage's bytes;
  - keep the live-bytes accounting of memscope.torch.modlog (storages of tensors it has seen);
  - call the watcher (memscope.watcher) before and after the op.

Features are switched on and off independently (enable()/disable() with counts); the mode is
pushed on the first thread-local dispatch stack when one is on and popped when all are off.
Callers: memscope.torch.trace_ops(), install_hooks(), memscope.watcher, the automatic start.
Workload: every op of a training loop; the per-op cost is a dict lookup for the op's schema
information, a few attribute reads per tensor, and one call into the agent per record.
"""
import threading
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

from . import _backend

READ = 1
WRITE = 2

# Output kinds of a schema return.
_FRESH = 0   # a new tensor: a write of its storage
_ALIAS_W = 1  # aliases an argument and writes it (in-place / out=): a write
_VIEW = 2    # aliases an argument without writing it: no access

_features = {"ops": 0, "access": 0, "live": 0, "watch": 0}
_mode = None
_lock = threading.Lock()
_infos = {}      # OpOverload -> (name, argflags list, kwflags dict, return kinds)
_call_counts = {}  # op name -> calls so far (watch file names)
_watcher = None    # memscope.watcher, set when it is imported (it imports this module)


def storage_of(t):
    """(data pointer, bytes) of the storage under tensor t, or (0, 0) when it has none."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t._storage()
        return s.data_ptr(), s.nbytes()
    except Exception:  # sparse, meta, mkldnn, functional wrappers: no plain storage
        return 0, 0


def _schema_info(func):
    info = _infos.get(func)
    if info is not None:
        return info
    try:
        schema = func._schema
        name = schema.name
        argflags = []
        kwflags = {}
        for a in schema.arguments:
            ai = a.alias_info
            f = WRITE if (ai is not None and ai.is_write) else READ
            argflags.append(f)
            kwflags[a.name] = f
        rets = []
        for r in schema.returns:
            ai = r.alias_info
            rets.append(_FRESH if ai is None else (_ALIAS_W if ai.is_write else _VIEW))
    except Exception:
        name = str(func)
        argflags, kwflags, rets = [], {}, []
    info = (name, argflags, kwflags, rets)
    _infos[func] = info
    return info


def _describe(t):
    """msMemScope's ACCESS Attr members of a tensor, as the record's name carries them after
    \x1f (docs/database.md): dtype, shape and format (contiguous or strided)."""
    try:
        return "\x1fdtype=%s;shape=%s;format=%s" % (
            t.dtype, list(t.shape), "contiguous" if t.is_contiguous() else "strided")
    except Exception:  # a tensor subclass without these: the op's name alone
        return ""


def _add(acc, t, flags):
    if isinstance(t, torch.Tensor):
        ptr, n = storage_of(t)
        if ptr:
            old = acc.get(ptr)
            # the first tensor seen on the storage describes it
            acc[ptr] = (n, flags | old[1], old[2]) if old else (n, flags, _describe(t))
    elif isinstance(t, (list, tuple)):
        for x in t:
            if isinstance(x, torch.Tensor):
                _add(acc, x, flags)


def tensors_of(out):
    """The tensors in an op's result (a tensor, or a tuple/list of tensors and others)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        r = []
        for x in out:
            if isinstance(x, torch.Tensor):
                r.append(x)
            elif isinstance(x, (list, tuple)):
                r.extend(y for y in x if isinstance(y, torch.Tensor))
        return r
    return []


# --- live-bytes accounting (modlog) -----------------------------------------------------------
# A storage counts as live while at least one tensor we have seen on it is alive: tensors are
# followed with weakref.finalize. Storages made outside the dispatcher and never registered
# (e.g. a tensor from numpy) are not counted.
class _Live:
    def __init__(self):
        self.by_ptr = {}     # storage ptr -> [bytes, tensors alive]
        self.allocated = 0
        self.max_allocated = 0

    def track(self, t):
        ptr, n = storage_of(t)
        if not ptr:
            return
        e = self.by_ptr.get(ptr)
        if e is None:
            e = self.by_ptr[ptr] = [n, 0]
            self.allocated += n
            if self.allocated > self.max_allocated:
                self.max_allocated = self.allocated
        e[1] += 1
        try:
            weakref.finalize(t, self._drop, ptr, e)
        except TypeError:
            e[1] -= 1

    def _drop(self, ptr, e):
        with _backend.QUIET:   # a finalizer of memscope's: its allocations are not the program's
            self._drop_q(ptr, e)

    def _drop_q(self, ptr, e):
        e[1] -= 1
        if e[1] <= 0 and self.by_ptr.get(ptr) is e:
            del self.by_ptr[ptr]
            self.allocated -= e[0]

    def reset_max(self):
        self.max_allocated = self.allocated


live = _Live()


_complained = False


def _complain(e):
    global _complained
    if not _complained:
        _complained = True
        import sys
        sys.stderr.write("memscope.torch: op recording failed (%s: %s); the program goes on\n"
                         % (type(e).__name__, e))


class _Mode(TorchDispatchMode):
    """The one mode memscope.torch pushes; its behaviour follows _features."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        f = _features
        if not (f["ops"] or f["access"] or f["live"] or f["watch"]):
            return func(*args, **kwargs)
        # memscope's own work before and after the op: its allocations are not the program's
        # (quiet); the op itself, whose tensors are, runs recorded.
        quiet = _backend.quiet
        quiet(1)
        try:
            name, argflags, kwflags, rets = _schema_info(func)
            watcher = _watcher
            watching = f["watch"] and watcher is not None and watcher._active()
            if watching:
                n = _call_counts.get(name, 0) + 1
                _call_counts[name] = n
                try:
                    watcher._before_op(name, n)
                except Exception as e:
                    _complain(e)
            ops = f["ops"]
            if ops:
                _backend.range_push(name)
        finally:
            quiet(-1)
        try:
            out = func(*args, **kwargs)
        except BaseException:
            if ops:
                _backend.range_pop()
            raise
        quiet(1)
        outs = ()
        try:   # whatever happens here, quiet(-1) follows (else the thread stayed unrecorded)
            outs = tensors_of(out)
            if f["access"]:
                acc = {}
                na = len(argflags)
                for i, a in enumerate(args):
                    _add(acc, a, argflags[i] if i < na else READ)
                for k, a in kwargs.items():
                    _add(acc, a, kwflags.get(k, READ))
                nr = len(rets)
                for i, t in enumerate(outs):
                    kind = rets[i] if i < nr else _FRESH
                    if kind != _VIEW:
                        _add(acc, t, WRITE)
                for ptr, (size, flags, desc) in acc.items():
                    _backend.access(ptr, size, flags, name + desc)
            if f["live"]:
                for t in outs:
                    live.track(t)
        except Exception as e:  # never break the program's op for a recording problem
            _complain(e)
        finally:
            if ops:
                _backend.range_pop()
            quiet(-1)
        if watching:
            quiet(1)
            try:
                watcher._after_op(name, _call_counts[name], outs)
            except Exception as e:
                _complain(e)
            finally:
                quiet(-1)
        return out


def _push():
    global _mode
    if _mode is None:
        _mode = _Mode()
        _mode.__enter__()


def _pop():
    global _mode
    if _mode is not None and _get_current_dispatch_mode() is _mode:
        _mode.__exit__(None, None, None)
        _mode = None
    # Another mode was pushed over ours: ours stays on the stack and, with every feature off,
    # only forwards each op (popping it would pop the other one).


def enable(*names):
    """Switch features on (counted): 'ops', 'access', 'live', 'watch'."""
    with _lock:
        for n in names:
            _features[n] += 1
        _push()


def disable(*names):
    """Undo one enable() of each feature; the mode leaves the stack when all are off."""
    with _lock:
        for n in names:
            if _features[n] > 0:
                _features[n] -= 1
        if not any(_features.values()):
            _pop()


def enabled(name):
    return _features[name] > 0


class trace_ops:
    """Context manager (and decorator): record op ranges and, with access=True (default),
    tensor accesses while inside.

        with memscope.torch.trace_ops():
            loss = model(x).sum(); loss.backward()
    """

    def __init__(self, access=True, ranges=True):
        self._names = tuple(n for n, on in (("ops", ranges), ("access", access)) if on)

    def __enter__(self):
        enable(*self._names)
        return self

    def __exit__(self, *exc):
        disable(*self._names)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*a, **kw):
            with self:
                return fn(*a, **kw)
        return wrapped
