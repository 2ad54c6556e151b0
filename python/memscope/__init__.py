"""memscope: the Python side of the memscope memory profiler (docs/python.md).

Two modes:
  * under the CLI (`memscope run -- python3 train.py`): the agent is preloaded; start()/stop()
    switch recording on and off (memscope__start/stop), and Python stacks are on from the
    moment this package is imported (the CLI's sitecustomize imports it) when
    `--call-stack=...,python:N` is given;
  * standalone (`python3 train.py` with memscope.config(...) / start() / stop()): start()
    loads the agent into this process (memscope__attach), stop() stops recording and writes
    the database (the same schema as `memscope run`).

The API follows msMemScope's (`import memscope as msmemscope`): config, start, stop, step,
tracer, describe.describer, RecordFunction, take_snapshot, TakeSnapshot, watcher.
"""
import atexit
import os
import sys

from . import _native
from . import _env

# memscope's own modules are not the program's memory: under `memscope run` the heap
# allocations of this import are not recorded (memscope__quiet; -1 at the end of this file).
_native.quiet(1)

# The rest of the API is imported when it is first used (__getattr__ below): `memscope run`
# imports this package at the start of every Python program it traces, and the program's RSS
# must not grow by the modules of an API it may never call (re, shutil, tempfile, subprocess,
# csv: about 5 MB).
_LAZY = {
    "_config": ("._config", None),
    "describe": (".describe", None),
    "tracer": (".tracer", None),
    "watcher": (".watcher", None),  # the torch layer: `import memscope` never imports torch
    "torch": (".torch", None),
    "analyzer": (".analyzer", None),  # submodules the eager imports used to bind
    "snapshot": (".snapshot", None),
    "framework": (".framework", None),
    "record_function": (".record_function", None),
    "RecordFunction": (".record_function", "RecordFunction"),
    "take_snapshot": (".snapshot", "take_snapshot"),
    "TakeSnapshot": (".snapshot", "TakeSnapshot"),
    "init_framework_hooks": (".framework", "init_framework_hooks"),
    "cleanup_framework_hooks": (".framework", "cleanup_framework_hooks"),
}
# Tiny-Torch's memory tools and msprof's usage monitor (memscope/monitor.py, docs/python.md)
for _name in ("monitor", "MemoryProfiler", "OOMDetector", "OOMPrediction", "RiskLevel",
              "FragmentationAnalyzer", "MemoryLeakDetector", "MemoryUsageMonitor",
              "MemoryDebugger"):
    _LAZY[_name] = (".monitor", None if _name == "monitor" else _name)
for _name in ("list_analyzers", "get_analyzer_config", "analyze", "check_leaks",
              "check_inefficient", "LeaksAnalyzer", "LeaksConfig", "InefficientAnalyzer",
              "InefficientConfig"):
    _LAZY[_name] = (".analyzer", _name)

__all__ = ["config", "start", "stop", "step", "tracer", "describe", "RecordFunction",
           "take_snapshot", "TakeSnapshot", "watcher", "available", "mode",
           "init_framework_hooks", "cleanup_framework_hooks", "list_analyzers",
           "get_analyzer_config", "analyze", "check_leaks", "check_inefficient", "LeaksAnalyzer",
           "LeaksConfig", "InefficientAnalyzer", "InefficientConfig", "MemoryProfiler",
           "OOMDetector", "OOMPrediction", "RiskLevel", "FragmentationAnalyzer",
           "MemoryLeakDetector", "MemoryUsageMonitor", "MemoryDebugger"]

# Python stacks follow each line (exact lines; PyEval_SetTrace) unless MEMSCOPE_PY_LINES=0,
# which reports only calls and calls into C (PyEval_SetProfile; cheaper, the line of an
# allocation made by bytecode rather than a C function call is then the last call's line).
_LINES = _env.get(_env.PY_LINES, "1") != "0"

_state = {
    "started": False,     # start() was called and stop() not yet
    "pid": os.getpid(),   # the process that owns the in-process session
    "trace_dir": None,    # in-process: where the agent writes
    "tmp_trace": False,   # the trace dir is ours to delete
    "out": None,          # in-process: the database (or csv) path
    "c_depth": 0,
    "py_depth": 0,
    "sampler": None,      # in-process: the usage monitor's helper process (memscope usage --into)
}


def available():
    """True when the agent is loaded in this process and records."""
    return _native.available()


def mode():
    """'run' under `memscope run`, 'inprocess' after an in-process start(), else 'none'."""
    if _native.preloaded() and _native.available():
        return "run"
    if _state["trace_dir"] is not None:
        return "inprocess"
    return "none"


def config(**kwargs):
    """msMemScope's config(**kw): keyword-only, str values. Keys: device, level, events,
    call_stack, analysis, watch, format (data_format), output_path (output). Returns the
    resulting configuration as a dict. Under `memscope run` the CLI's options rule recording;
    config() is validated and kept (call_stack, format and output_path apply to in-process
    mode only)."""
    import warnings
    from . import _config
    before = dict(_config.current)
    cfg = _config.config(**kwargs)
    run = _native.preloaded()
    for key, opt in (("format", "--format"), ("output_path", "-o")):
        if run and key in kwargs or (key == "format" and run and "data_format" in kwargs):
            warnings.warn("memscope.config(%s=...): under `memscope run` the command line's "
                          "%s rules; ignored" % (key, opt), RuntimeWarning, stacklevel=2)
            break
    if cfg["watch"] and cfg["watch"] != before["watch"]:
        cli = _env.get(_env.WATCH) if run else None
        if cli:   # the command line wins (docs/python.md)
            warnings.warn("memscope.config(watch=%r): `memscope run --watch=%s` rules; ignored"
                          % (cfg["watch"], cli), RuntimeWarning, stacklevel=2)
            return cfg
        try:  # the torch layer's watcher runs the CLI-style watch
            from . import watcher
            out = (_env.get(_env.OUTPUT_DIR) if run else None) or cfg["output_path"]
            if out.endswith((".db", ".csv")):
                out = os.path.dirname(out) or "."
            watcher.set_output_dir(out)
            watcher.set_cli_watch(cfg["watch"])
        except ImportError:
            warnings.warn("memscope.config: watch needs memscope.watcher (the torch layer)",
                          RuntimeWarning, stacklevel=2)
    return cfg


def _agent_path():
    here = os.path.dirname(os.path.abspath(_native.__file__))
    p = os.path.normpath(os.path.join(here, "..", "..", "libmemscope.so"))
    return _env.get(_env.AGENT) or p


def _out_path(cfg):
    fmt, out = cfg["format"], cfg["output_path"]
    suffix = ".csv" if fmt == "csv" else ".db"
    if fmt != "trace" and out.endswith(suffix):
        d = os.path.dirname(out) or "."
        os.makedirs(d, exist_ok=True)
        return os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    if fmt == "trace":
        return os.path.abspath(out)
    # msMemScope's layout, as `memscope run` writes it (docs/cli.md): a folder of the run
    import time
    stamp = time.strftime("%Y%m%d%H%M%S")
    run_dir = os.path.join(out, "memscope_%d_%s" % (os.getpid(), stamp))
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    return os.path.abspath(os.path.join(run_dir, "memscope_dump_%s%s" % (stamp, suffix)))


def _memscope_bin():
    """The memscope command beside the agent (the build tree, an install's prefix), else on
    PATH; MEMSCOPE_BIN overrides. None when there is none."""
    b = _env.get(_env.BIN)
    if b:
        return b if os.access(b, os.X_OK) else None
    agent = os.path.dirname(_agent_path())
    for c in (os.path.join(agent, "memscope"), os.path.join(agent, "..", "bin", "memscope")):
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    import shutil
    return shutil.which("memscope")


def _start_sampler(trace_dir):
    """The usage monitor of the in-process mode (docs/usage.md): `memscope usage --into`, a
    helper process that samples this process (and its traced children) from /proc into the
    trace directory as `memscope run` does, so that the program runs nothing for it. Started
    before the agent is loaded, so that its fork and exec are not recorded. Without the memscope
    command: a warning, no samples."""
    b = _memscope_bin()
    if b is None:
        import warnings
        warnings.warn("memscope.start(): no memscope command found (MEMSCOPE_BIN, beside the "
                      "agent, PATH): no usage samples", RuntimeWarning, stacklevel=3)
        return None
    import subprocess
    try:
        return subprocess.Popen([b, "usage", "--pid", str(os.getpid()), "--into", trace_dir,
                                 "--interval", "0.1"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, close_fds=True)
    except OSError:
        return None


def _stop_sampler():
    """Ends the helper (its last samples written) and waits for it."""
    p = _state.get("sampler")
    _state["sampler"] = None
    if p is None:
        return
    try:
        p.terminate()
        p.wait(timeout=30)
    except Exception:  # never hurt the program's exit
        pass


def _attach():
    import shutil
    import tempfile
    from . import _config
    cfg = _config.current
    c_depth, py_depth = _config.parse_call_stack(cfg["call_stack"])
    out = _out_path(cfg)
    if cfg["format"] == "trace":
        trace_dir, tmp = out, False
    else:
        trace_dir, tmp = tempfile.mkdtemp(prefix="memscope-trace-"), True
    sampler = _start_sampler(trace_dir)
    try:
        _native.attach(trace_dir, c_depth, py_depth, _agent_path())
    except OSError:
        _state["sampler"] = sampler
        _stop_sampler()
        if tmp:
            shutil.rmtree(trace_dir, ignore_errors=True)
        raise
    _state.update(trace_dir=trace_dir, tmp_trace=tmp, out=out, c_depth=c_depth,
                  py_depth=py_depth, pid=os.getpid(), sampler=sampler)


def start():
    """Starts recording. Under `memscope run` it switches the agent on (useful with
    --collect-mode=deferred); otherwise the first start() loads the agent into this process
    with the configuration of config(). Several start()/stop() ranges are allowed."""
    if _state["started"]:
        import warnings
        warnings.warn("memscope.start(): already started", RuntimeWarning, stacklevel=2)
        return
    if not _native.preloaded():
        if _state["trace_dir"] is None:
            _attach()
        if _state["py_depth"] and not _native.python_stacks():
            _native.set_python_stacks(True, _LINES)
            _watch_threading()
    if not _native.start():
        raise RuntimeError("memscope.start(): the agent cannot record (see its message on stderr)")
    _state["started"] = True


def stop():
    """Stops recording. In-process mode: writes the database (or CSV) of everything recorded
    so far and returns its path; under `memscope run` the CLI writes it when the program ends
    (returns None). Raises RuntimeError when start() was not called."""
    if not _state["started"]:
        raise RuntimeError("memscope.stop() called before memscope.start(): nothing is being "
                           "recorded")
    _native.stop()
    _state["started"] = False
    if _native.preloaded() or _state["trace_dir"] is None:
        return None
    if _native.python_stacks() and not _run_stacks():
        _native.set_python_stacks(False)
    return _write()


def _write():
    if _state["pid"] != os.getpid():
        return None  # a forked child: the parent writes the database
    from . import _config
    fmt = _config.current["format"]
    if fmt == "trace":
        return _state["trace_dir"]
    out = _state["out"]
    from . import _store  # the converter: SQLite and libdw, loaded only here
    if fmt != "csv":
        _store.convert(_state["trace_dir"], out, list(sys.argv), _state["c_depth"])
        return out
    # the CSV's database: a new file beside it with a name no one can guess (mkstemp: O_EXCL,
    # 0600), which the conversion replaces and which is removed once the CSV is written
    import tempfile
    fd, db = tempfile.mkstemp(prefix=os.path.basename(out) + ".", suffix=".tmp.db",
                              dir=os.path.dirname(out) or ".")
    os.close(fd)
    try:
        _store.convert(_state["trace_dir"], db, list(sys.argv), _state["c_depth"])
        _store.export_csv(db, out)
    finally:
        os.unlink(db)
    return out


def _at_exit():
    if _state["pid"] != os.getpid():
        return
    if _state["started"]:
        try:
            stop()
        except Exception as e:  # never mask the program's own exit
            print("memscope: cannot write the database at exit: %s" % e, file=sys.stderr)
    _stop_sampler()
    if _state["tmp_trace"] and _state["trace_dir"]:
        import shutil
        shutil.rmtree(_state["trace_dir"], ignore_errors=True)
        _state["tmp_trace"] = False


def step():
    """Ends step n and begins step n+1 (steps count from 1), like msmemscope.step(). Under
    `memscope run` an optimizer ends steps by itself (memscope.torch.optim) until the program
    calls this; a call right after such a step is that step, not another."""
    optim = sys.modules.get("memscope.torch.optim")
    if optim is not None and optim.user_step():
        return
    _native.step()


def _run_stacks():
    """Under `memscope run --call-stack=...,python:N`: Python stacks are wanted."""
    return _native.preloaded() and _native.py_depth() > 0


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError("module 'memscope' has no attribute %r" % name)
    import importlib
    mod = importlib.import_module(where[0], __name__)
    value = mod if where[1] is None else getattr(mod, where[1])
    globals()[name] = value
    return value


class _ThreadingWatch:
    """Python stacks on the threads that the threading module starts need its per-thread hook
    (threading.settrace/setprofile, set by _native). A program that has not imported threading
    yet is not made to (the module and its imports: about 0.5 MB of its RSS): this finder, first
    on sys.meta_path, sees the program's own import of it, lets the usual finder find it, and
    once the module has run tells _native (threading_loaded), then leaves sys.meta_path and the
    module's loader as they were."""

    def find_spec(self, name, path=None, target=None):
        if name != "threading":
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is not self and find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        _unwatch_threading()
        loader = spec.loader if spec is not None else None
        if loader is None or isinstance(loader, type):
            return spec  # not found, or a class's loader (frozen): threads go without stacks
        run = loader.exec_module

        def exec_module(module):
            try:
                run(module)
            finally:
                loader.__dict__.pop("exec_module", None)
            _native.threading_loaded()
        loader.exec_module = exec_module
        return spec


def _watch_threading():
    if "threading" in sys.modules:
        return
    if not any(isinstance(f, _ThreadingWatch) for f in sys.meta_path):
        sys.meta_path.insert(0, _ThreadingWatch())


def _unwatch_threading():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ThreadingWatch)]


try:
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_native._after_fork_child)
    if _run_stacks() and _native.available():
        _native.set_python_stacks(True, _LINES)
        _watch_threading()
finally:
    _native.quiet(-1)
