"""Per-module memory log (the tdynamics MemTracer idea) for memscope.torch.install_hooks().

One JSON object per line, in `mem_trace_rank_{rank}.log` (default, in the current directory)
and, as the same text after `memscope-module:`, as a MARK in the database:

  {"rank": 0, "step": 1, "module": "layers.0", "type": "Conv2d", "stage": "pre_forward",
   "allocated": 123, "reserved": 456, "max_allocated": 789, "ts_ns": 1700000000000000000}

  rank           install_hooks(rank=...), else $RANK, else torch.distributed's rank, else 0
  step           1 + the optimizer steps completed (memscope's step numbering)
  module         the name from model.named_modules() ("" is printed as the root name given to
                 install_hooks, default "model"); "optimizer" for pre_step/post_step
  type           the module's class name (the optimizer's for the step stages)
  stage          pre_forward, post_forward, pre_backward, post_backward, pre_step, post_step
  allocated      bytes of the live tensor storages memscope.torch knows: the model's parameters
                 and every tensor an ATen op returned since install_hooks() (one count per
                 storage, while at least one tensor seen on it is alive). On CUDA tensors this
                 would be torch.cuda.memory_allocated(); on CPU it is our accounting.
  reserved       bytes the C allocator holds from the system (glibc mallinfo2: arena + mmapped
                 chunks), the CPU analogue of the caching allocator's reserved memory; it
                 covers everything on the heap, not only tensors. allocated when unavailable.
  max_allocated  the largest `allocated` since install_hooks() (updated at every op)
  ts_ns          time.time_ns() at the hook

Values are ints and strings only, so a line reads with json.loads and ast.literal_eval.

MemTracer's own format (install_hooks(m=model, opt=optimizer, tracer=MemTracer(...))): one
Python dict literal per line, steps from 0, the module's class name, stages with a space, the
figures in MiB (4 decimals) under "mem", `max_cached` the largest `cached` seen by the tracer:

  {'step': 0, 'module': 'Linear', 'stage': 'pre forward',
   'mem': {'allocated': 0.0012, 'cached': 0.1328, 'max_allocated': 0.0024, 'max_cached': 0.1328}}

The database gets the same MARKs as with the default log (memscope's JSON line, its step from 1).
"""
import ctypes
import json
import os
import time

from . import _backend
from .dispatch import live

MARK_PREFIX = "memscope-module:"
STAGES = ("pre_forward", "post_forward", "pre_backward", "post_backward", "pre_step",
          "post_step")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]


_mallinfo2 = None


def reserved_bytes():
    """Bytes glibc's malloc holds from the system, or None when unknown."""
    global _mallinfo2
    if _mallinfo2 is None:
        try:
            f = ctypes.CDLL(None).mallinfo2
            f.restype = _Mallinfo2
            f.argtypes = []
            _mallinfo2 = f
        except (OSError, AttributeError):
            _mallinfo2 = False
    if not _mallinfo2:
        return None
    mi = _mallinfo2()
    return int(mi.arena + mi.hblkhd)


def default_rank():
    r = os.environ.get("RANK")
    if r is not None and r.lstrip("-").isdigit():
        return int(r)
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:
        pass
    return 0


class ModuleLog:
    """Writes the log lines. Owns its file (closed by close())."""

    def __init__(self, path=None, rank=None, to_db=True):
        self.rank = default_rank() if rank is None else int(rank)
        if path is None:
            path = "mem_trace_rank_{rank}.log"
        self.path = os.fspath(path).format(rank=self.rank)
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        self.f = open(self.path, "w", buffering=1)
        self.to_db = to_db
        self.step = 1

    def log(self, stage, module, mtype):
        a = live.allocated
        r = reserved_bytes()
        rec = {"rank": self.rank, "step": self.step, "module": module, "type": mtype,
               "stage": stage, "allocated": a, "reserved": a if r is None else r,
               "max_allocated": live.max_allocated, "ts_ns": time.time_ns()}
        line = json.dumps(rec, separators=(", ", ": "))
        if self.f is not None:
            self.f.write(self.format(rec, line) + "\n")
        if self.to_db:
            _backend.mark(MARK_PREFIX + line)

    def format(self, rec, line):
        """The file's line for one record (line: the record as JSON)."""
        return line

    def close(self):
        if self.f is not None:
            self.f.close()
            self.f = None


def _mib(n):
    return round(n / 1048576.0, 4)


class MemTracer(ModuleLog):
    """A module log in MemTracer's format, for install_hooks(m=, opt=, tracer=). The caller
    owns it: removing the hooks leaves it open (one tracer may serve several installs);
    close() ends the file. The file is line-buffered: a line is on disk once logged."""

    def __init__(self, log_path=None, rank=None, to_db=True):
        super().__init__(log_path, rank, to_db)
        self.max_cached = 0

    def format(self, rec, line):
        self.max_cached = max(self.max_cached, rec["reserved"])
        mem = {"allocated": _mib(rec["allocated"]), "cached": _mib(rec["reserved"]),
               "max_allocated": _mib(rec["max_allocated"]), "max_cached": _mib(self.max_cached)}
        return repr({"step": rec["step"] - 1, "module": rec["type"],
                     "stage": rec["stage"].replace("_", " "), "mem": mem})
