"""sitecustomize for programs run by `memscope run`: the CLI puts this directory first on
PYTHONPATH, so Python imports this at startup. Under the agent with Python stacks or the tracer
wanted, it imports memscope (light: no torch), which installs the Python stack hook; it arms
PyTorch's CUDA allocator history for when the program imports torch; then it runs the
sitecustomize this one hides (Debian's, or the user's), if any."""
import os
import sys


def _memscope_boot():
    """memscope's own start-up (its modules, the Python stack hook, the PyTorch layer's import
    hooks) is not the program's memory: its heap allocations are not recorded (quiet)."""
    if not (os.environ.get("MEMSCOPE_TRACE_DIR") or
            os.environ.get("MEMSCOPE_PY_DEPTH", "0") not in ("", "0")):
        return
    try:
        from memscope import _native  # the package quiets its own import
    except Exception:
        _native = None
    if _native is not None:
        _native.quiet(1)
    try:
        _boot()
    finally:
        if _native is not None:
            _native.quiet(-1)


def _boot():
    if os.environ.get("MEMSCOPE_PY_DEPTH", "0") not in ("", "0"):
        try:
            import memscope  # noqa: F401  (installs the hook at import)
        except Exception as e:  # never break the traced program
            print("memscope: Python stacks are off: %s" % e, file=sys.stderr)
    # --events=access / --level=op / --watch: the PyTorch layer starts when the program
    # imports torch (memscope.torch does not import it itself).
    # PyTorch's CUDA caching allocator (the PTA layer): its history, when the program imports
    # torch and initializes CUDA (memscope.torch.cuda_history); not with --device=cpu.
    if os.environ.get("MEMSCOPE_TRACE_DIR") and os.environ.get("MEMSCOPE_DEVICE", "") != "cpu":
        try:
            import memscope.torch
            memscope.torch._arm_cuda_history()
        except Exception as e:
            print("memscope: PyTorch's allocator history is off: %s" % e, file=sys.stderr)
    # Every optimizer's step tags weights, gradients and optimizer state and ends a step
    # (memscope.torch.optim), unless --step-on=none.
    if os.environ.get("MEMSCOPE_TRACE_DIR"):
        try:
            import memscope.torch
            memscope.torch._arm_optimizer()
        except Exception as e:
            print("memscope: owners and steps of optimizers are off: %s" % e, file=sys.stderr)
    # --analysis=decompose: activation owners of every module's forward (memscope.torch.activations)
    if os.environ.get("MEMSCOPE_TRACE_DIR") and os.environ.get("MEMSCOPE_ANALYSIS"):
        try:
            import memscope.torch
            memscope.torch._arm_activations()
        except Exception as e:
            print("memscope: activation owners are off: %s" % e, file=sys.stderr)
    if any(os.environ.get(v) for v in ("MEMSCOPE_EVENTS", "MEMSCOPE_LEVEL", "MEMSCOPE_WATCH")):
        try:
            import memscope.torch
            memscope.torch._autostart()
        except Exception as e:
            print("memscope: the PyTorch layer is off: %s" % e, file=sys.stderr)


def _chain():
    # The import system's own modules, loaded in every interpreter: importlib.util would import
    # contextlib, collections and functools into every traced program (0.6 MB of its RSS).
    import _frozen_importlib
    import _frozen_importlib_external
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = _frozen_importlib_external.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    mod = _frozen_importlib.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


_memscope_boot()
_chain()
