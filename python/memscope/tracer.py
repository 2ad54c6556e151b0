"""tracer: msMemScope's Python call tracer (tracer.start()/tracer.stop()).

Every Python call and return of every traced thread is recorded while the tracer is on and
recording is on; the store turns them into the python_trace table (one row per call with start
and end times, thread, depth), ready for a flame graph. Uses the same hook as Python stacks.
"""
from . import _native

_installed_hook = False


def start():
    """Starts the Python call tracer. Without the agent it warns and does nothing."""
    global _installed_hook
    if not _native.available():
        import warnings
        warnings.warn("memscope.tracer.start(): the memscope agent is not loaded "
                      "(run under `memscope run` or call memscope.start() first)",
                      RuntimeWarning, stacklevel=2)
        return
    had = _native.python_stacks()
    _native.tracer(True)
    _installed_hook = _installed_hook or not had


def stop():
    """Stops the tracer (calls still open get their end time at the end of the process)."""
    global _installed_hook
    _native.tracer(False)
    if _installed_hook:
        from . import _run_stacks, _state
        if not _run_stacks() and not (_state["started"] and _state["py_depth"]):
            _native.set_python_stacks(False)
        _installed_hook = False
