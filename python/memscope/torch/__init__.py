"""memscope.torch: PyTorch meaning for the memory memscope records (docs/torch.md).

    import memscope.torch as mt
    with mt.trace_ops():                 # op ranges + tensor accesses (--level=op, access)
        ...
    h = mt.install_hooks(model, opt, auto_step=True)   # owners, module log, steps
    mt.tag(tensor, "PTA@my_cache")       # owner of an existing tensor's block

Importing this package does not import torch; its functions do, on first use. Under
`memscope run`, op/access recording and --watch start by themselves when the program imports
torch, if the package's __init__ (or `python3 -m memscope.torch script.py`) calls _autostart():
  MEMSCOPE_EVENTS  contains `access`           -> op ranges and accesses
                   contains `launch` (and MEMSCOPE_LEVEL, default `op`, contains `op`)
                                                -> op ranges only
  MEMSCOPE_WATCH   start[:outid],end[,full-content] -> the CLI watch (memscope.watcher)
"""
import os
import sys
from .. import _env

__all__ = ["trace_ops", "install_hooks", "MemTracer", "tag", "enable_ops", "disable_ops", "WEIGHT",
           "GRADIENT", "OPTIMIZER_STATE", "ACTIVATION"]

WEIGHT = "PTA@weight"
GRADIENT = "PTA@gradient"
OPTIMIZER_STATE = "PTA@optimizer_state"
ACTIVATION = "PTA@activation"


def trace_ops(access=True, ranges=True):
    """Context manager / decorator: record every ATen op as a range and, with access=True, the
    read/write accesses of its tensors."""
    from .dispatch import trace_ops as t
    return t(access=access, ranges=ranges)


def enable_ops(access=True):
    """Start op (and access) recording on this thread until disable_ops()."""
    from . import dispatch
    dispatch.enable("ops", *(("access",) if access else ()))


def disable_ops(access=True):
    from . import dispatch
    dispatch.disable("ops", *(("access",) if access else ()))


def install_hooks(model=None, optimizer=None, tracer=None, *, m=None, opt=None, name="model",
                  log_path=None, rank=None, auto_step=False, decompose=True, log=True,
                  to_db=True):
    """Hook a model and/or optimizer: owner tags for `memscope analyze decompose`
    (decompose=True), the per-module memory log (log=True; log_path default
    mem_trace_rank_{rank}.log, `{rank}` is substituted; to_db: also as MARKs), and with
    auto_step=True a memscope step after every optimizer.step(). MemTracer's call,
    install_hooks(m=model, opt=optimizer, tracer=MemTracer(path)), logs in its format through
    the given tracer (docs/torch.md). Returns a handle with remove() (also a context
    manager)."""
    if m is not None:
        if model is not None:
            raise TypeError("install_hooks(): give the model once (model or m)")
        model = m
    if opt is not None:
        if optimizer is not None:
            raise TypeError("install_hooks(): give the optimizer once (optimizer or opt)")
        optimizer = opt
    from .hooks import Hooks
    return Hooks(model, optimizer, name=name, log_path=log_path, rank=rank,
                 auto_step=auto_step, decompose_owners=decompose, log=log, to_db=to_db,
                 tracer=tracer)


def MemTracer(log_path=None, rank=None, to_db=True):
    """A module memory log in MemTracer's format for install_hooks(tracer=...): one dict per
    line, {'step': 0, 'module': 'Linear', 'stage': 'pre forward', 'mem': {... MiB}}; log_path
    default mem_trace_rank_{rank}.log. Close it with .close() (or at exit)."""
    from .modlog import MemTracer as T
    return T(log_path, rank, to_db)


def tag(tensor_or_addr, owner, size=0):
    """Tag the memory block under a tensor's storage (or at an address) with an owner string."""
    if not isinstance(owner, str) or not owner:
        raise TypeError("tag(): owner must be a non-empty str")
    from . import decompose as d
    return d.tag(tensor_or_addr, owner, size)


# --- automatic start from the environment ---------------------------------------------------
_auto_done = False


def _features_for(events, level):
    ev = [e.strip() for e in (events or "").replace("\uff0c", ",").split(",") if e.strip()]
    feats = []
    if "access" in ev:
        feats = ["ops", "access"]
    elif "launch" in ev and "op" in [x.strip() for x in (level or "op").split(",")]:
        feats = ["ops"]
    return feats


def _wanted():
    feats = _features_for(_env.get(_env.EVENTS, ""),
                          _env.get(_env.LEVEL, "op"))
    return feats, bool(_env.get(_env.WATCH))


_applied = []   # the features apply_config() switched on


def apply_config(events, level="op"):
    """For memscope.config(events=..., level=...): switch op ranges (and accesses) on or off on
    this thread as the values ask (same rule as MEMSCOPE_EVENTS); imports torch only when
    something is switched on. Returns the features now on by this call's rule."""
    feats = _features_for(events, level)
    if feats == _applied:
        return list(feats)
    from . import dispatch
    if _applied:
        dispatch.disable(*_applied)
    if feats:
        dispatch.enable(*feats)
    _applied[:] = feats
    return list(feats)


def _start_now():
    feats, watch = _wanted()
    if feats:
        from . import dispatch
        dispatch.enable(*feats)
    if watch:
        from .. import watcher
        watcher.from_env()


class _TorchFinder:
    """A meta-path finder that runs its callbacks right after `import torch` finishes. One for
    all of them (after_torch): the first finder that answers for torch is the only one asked."""

    def __init__(self):
        self.then = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        global _finder
        _finder = None
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        orig = spec.loader.exec_module
        then = self.then

        def exec_module(module):
            orig(module)
            for fn in then:
                try:
                    fn()
                except Exception as e:   # never break the program's `import torch`
                    print("memscope: %s is off: %s" % (getattr(fn, "__doc__", None) or
                                                       "a PyTorch hook", e), file=sys.stderr)
        spec.loader.exec_module = exec_module
        return spec


_finder = None


def after_torch(fn):
    """Runs fn() now if torch is imported, else right after the program imports it."""
    global _finder
    if "torch" in sys.modules:
        fn()
        return
    if _finder is None:
        _finder = _TorchFinder()
        sys.meta_path.insert(0, _finder)
    _finder.then.append(fn)


def _arm_optimizer():
    """Under `memscope run`: every optimizer's steps tag owners and end memscope steps
    (memscope.torch.optim), from when the program imports torch."""
    def go():
        """owners and steps of optimizers"""
        from . import optim
        optim.install(auto=True)
    after_torch(go)


def _arm_activations():
    """Under `memscope run --analysis=decompose` (MEMSCOPE_ANALYSIS): every module's forward
    labels its allocations as an activation owner (memscope.torch.activations), from when the
    program imports torch."""
    items = [a.strip().split(":")[0] for a in _env.get(_env.ANALYSIS, "").split(",")]
    if "decompose" not in items and "all" not in items:
        return False

    def go():
        """activation owners"""
        from . import activations
        activations.install()
    after_torch(go)
    return True


def _arm_cuda_history():
    """Under `memscope run` (CUDA devices recorded): PyTorch's allocator history starts when the
    program initializes CUDA (memscope.torch.cuda_history)."""
    from . import cuda_history
    after_torch(cuda_history.arm)


def _autostart():
    """Start what MEMSCOPE_EVENTS / MEMSCOPE_LEVEL / MEMSCOPE_WATCH ask for: now if torch is
    imported, else right after it is. Idempotent; returns True when something was asked."""
    global _auto_done
    feats, watch = _wanted()
    if _auto_done or not (feats or watch):
        return bool(feats or watch)
    _auto_done = True
    after_torch(_start_now)
    return True
