"""memscope.watcher: msMemScope's memory-block watch (reference §2 and §4.4) for PyTorch.

    watcher.watch(tensor, name="w", dump_nums=N)        watch tensor.data_ptr() .. + nbytes
    watcher.watch(addr, length=L, name="w", dump_nums=N) watch [addr, addr+L)
    watcher.remove(tensor) / watcher.remove(addr, length=L)

While something is watched, memscope.torch's dispatch mode (memscope/torch/dispatch.py) calls
this module before and after every ATen op on the thread that started watching: it takes
msMemScope's CRC-64 of each watched block before and after the op, appends both to the
checksum CSV, and when the two differ records that the op changed the block (a MARK
`memscope-watch:...`, the in-process report(), and one line on stderr at exit naming the first
op that changed each block). With full-content the bytes are written to .bin files instead of
being only summed.

The CLI form `--watch=start[:outid],end[,full-content]` arrives as the environment variable
MEMSCOPE_WATCH (or set_cli_watch()): when the op named `start` ends, its outputs (or only
output `outid`) are watched; every following op dumps them before and after; the end of the
op named `end` dumps them one last time and clears the list.

Files (docs/torch.md), in <output dir>/watch_dump/:
  watch_dump_data_check_sum_<device>_<YYYYmmddHHMMSS>.csv   header `Tensor info,Check data sum`,
      rows `<op>_<call>-<name>_<index>_<before|after>.bin,<16 hex digits>`
  <op>_<call>-<name>_<index>_<before|after>.bin           full-content only ('/' -> '.')
<call> counts the calls of that op in the process (from 1); <index> is the output index for
CLI watches and 0 for watch(). The output dir is MEMSCOPE_OUTPUT_DIR, else the directory of
MEMSCOPE_OUTPUT (a .db/.csv path) or MEMSCOPE_OUTPUT itself, else ./memscopeDumpResults;
set_output_dir() overrides them.

Only ops that go through the dispatcher are seen: a write through numpy, ctypes or
Tensor.data_ptr() by other code is not attributed to an op (the next op's checksum shows it).
"""
import atexit
import os
import sys
import threading
import time
import weakref
from . import _env

NAME_MAX = 64

_lock = threading.RLock()
_watches = []          # _Watch, in watch() order
_cli = None            # parsed --watch spec: dict(start, outid, end, full)
_cli_watches = []      # _Watch captured by the CLI spec
_cli_started = False   # the CLI spec's start op ran at least once
_full_content = False  # dump .bin files (from the --watch spec's full-content)
_out_dir = None
_csv = None
_changes = []          # every change seen: dict(name, op, call, before, after)
_enabled = False       # the dispatch feature 'watch' is on
_atexit = False


class _Watch:
    __slots__ = ("name", "ptr", "length", "left", "ref", "index", "before", "first", "cli")

    def __init__(self, name, ptr, length, dump_nums, ref, index=0, cli=False):
        self.name = name
        self.ptr = ptr
        self.length = length
        self.left = dump_nums      # ops still to dump; -1 unlimited
        self.ref = ref             # weakref to the tensor, None for an address
        self.index = index
        self.before = None
        self.first = None          # (op, call) of the first op that changed it
        self.cli = cli


def _backend():
    from .torch import _backend as b
    return b


def _dispatch():
    from .torch import dispatch
    dispatch._watcher = sys.modules[__name__]
    return dispatch


# --- arguments -------------------------------------------------------------------------------
def _check_name(name):
    if name is None:
        raise TypeError("watch(): name= is required (a string of 1 to %d characters)" % NAME_MAX)
    if not isinstance(name, str):
        raise TypeError("watch(): name must be a str, not %s" % type(name).__name__)
    if not name or len(name) > NAME_MAX:
        raise ValueError("watch(): name must have 1 to %d characters, got %d"
                         % (NAME_MAX, len(name)))


def _check_int(what, v, minimum):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("watch(): %s must be an int, not %s" % (what, type(v).__name__))
    if v < minimum:
        raise ValueError("watch(): %s must be >= %d, got %d" % (what, minimum, v))


def _is_tensor(obj):
    t = sys.modules.get("torch")
    return t is not None and isinstance(obj, t.Tensor)


def _target(fn, args, length):
    """(ptr, length, weakref or None) of the one positional argument of watch()/remove()."""
    if len(args) != 1:
        raise TypeError("%s() takes exactly one positional argument (a torch.Tensor or an int "
                        "address), %d given" % (fn, len(args)))
    obj = args[0]
    if _is_tensor(obj):
        if obj.device.type != "cpu":
            raise ValueError("%s(): only CPU tensors can be watched here, not %s"
                             % (fn, obj.device))
        ptr = obj.data_ptr()
        if length is None:
            length = obj.numel() * obj.element_size()
        else:
            _check_int("length", length, 1)
        if not ptr or length <= 0:
            raise ValueError("%s(): the tensor has no memory to watch (empty or no storage)" % fn)
        return ptr, length, weakref.ref(obj)
    if isinstance(obj, int) and not isinstance(obj, bool):
        if obj <= 0:
            raise ValueError("%s(): address must be a positive int, got %d" % (fn, obj))
        if length is None:
            raise TypeError("%s(): length=<bytes> is required with an address (only a "
                            "torch.Tensor carries its own length)" % fn)
        _check_int("length", length, 1)
        return obj, length, None
    raise TypeError("%s() expects a torch.Tensor or an int address, not %s"
                    % (fn, type(obj).__name__))


# --- public API --------------------------------------------------------------------------------
def watch(*args, name=None, dump_nums=-1, length=None):
    """Watch a tensor's memory (or [addr, addr+length)) under `name` for `dump_nums` ops
    (-1: until remove()). Raises TypeError/ValueError on bad arguments."""
    _check_name(name)
    if isinstance(dump_nums, bool) or not isinstance(dump_nums, int):
        raise TypeError("watch(): dump_nums must be an int, not %s" % type(dump_nums).__name__)
    if dump_nums == 0 or dump_nums < -1:
        raise ValueError("watch(): dump_nums must be -1 (unlimited) or >= 1, got %d" % dump_nums)
    ptr, length, ref = _target("watch", args, length)
    w = _Watch(name, ptr, length, dump_nums, ref)
    w.before = _backend().crc64(ptr, length)
    with _lock:
        _watches.append(w)
        _switch()
    return None


def remove(*args, length=None):
    """Stop watching a tensor, or an address (length= narrows it to the watch of that length).
    Raises ValueError when nothing matching is watched."""
    if len(args) != 1:
        raise TypeError("remove() takes exactly one positional argument (a torch.Tensor or an "
                        "int address), %d given" % len(args))
    obj = args[0]
    if _is_tensor(obj):
        ptr = obj.data_ptr()
    elif isinstance(obj, int) and not isinstance(obj, bool):
        ptr = obj
    else:
        raise TypeError("remove() expects a torch.Tensor or an int address, not %s"
                        % type(obj).__name__)
    if length is not None:
        _check_int("length", length, 1)
    with _lock:
        keep = [w for w in _watches
                if not (w.ptr == ptr and (length is None or w.length == length))]
        if len(keep) == len(_watches):
            raise ValueError("remove(): nothing is watched at 0x%x" % ptr)
        _gone.extend(w for w in _watches if w not in keep)
        _watches[:] = keep
        _switch()


def report():
    """Per watched name, the first op that changed it: [{name, op, call, watches}] (op None:
    unchanged; watches: how many blocks were watched under that name, e.g. one per iteration
    by a --watch whose start op runs every step)."""
    out, index = [], {}
    with _lock:
        for w in _watches + _cli_watches + _gone:
            key = w.name
            r = index.get(key)
            if r is None:
                r = index[key] = {"name": w.name, "op": None, "call": None, "watches": 0}
                out.append(r)
            r["watches"] += 1
            if w.first and r["op"] is None:
                r["op"], r["call"] = w.first
    return out


def changes():
    """Every (op, block) change seen so far: [{name, op, call, before, after}]."""
    with _lock:
        return list(_changes)


def set_output_dir(path):
    """Where watch_dump/ goes (default: see the module doc)."""
    global _out_dir
    _out_dir = os.fspath(path)


def parse_cli_watch(spec):
    """'start[:outid],end[,full-content]' -> dict; ValueError when malformed."""
    if not isinstance(spec, str):
        raise TypeError("watch spec must be a str")
    parts = [p.strip() for p in spec.replace("\uff0c", ",").split(",")]
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise ValueError("--watch: expected start[:outid],end[,full-content], got %r" % spec)
    full = False
    if len(parts) == 3:
        if parts[2] != "full-content":
            raise ValueError("--watch: the third item must be full-content, got %r" % parts[2])
        full = True
    start, outid = parts[0], None
    if ":" in start and not start.endswith(":") and start.rsplit(":", 1)[1].isdigit() \
            and not start.endswith("::"):
        start, o = start.rsplit(":", 1)
        outid = int(o)
    return {"start": op_name(start), "outid": outid, "end": op_name(parts[1]), "full": full}


def op_name(spec):
    """An op as the watch compares it: msMemScope's form torch._ops.aten.mse_loss.default (or
    .Tensor, any overload) is aten::mse_loss, the schema name ops are recorded under; other
    forms (aten::mse_loss, mse_loss) are kept."""
    if spec.startswith("torch._ops."):
        parts = spec[len("torch._ops."):].split(".")
        if len(parts) >= 2 and parts[0] and parts[1]:
            return parts[0] + "::" + parts[1]
    return spec


def set_cli_watch(spec):
    """Apply a --watch spec (config(watch=...) or MEMSCOPE_WATCH)."""
    global _cli, _full_content
    c = parse_cli_watch(spec)
    with _lock:
        _cli = c
        _full_content = c["full"]
        _switch()


def from_env():
    """Read MEMSCOPE_WATCH; returns True when a spec was applied."""
    spec = _env.get(_env.WATCH)
    if spec:
        set_cli_watch(spec)
        return True
    return False


# --- called by the dispatch mode -------------------------------------------------------------
_gone = []   # watches that ended (dump_nums used up, tensor freed), kept for report()


def _switch():
    global _enabled, _atexit
    want = bool(_watches or _cli_watches or _cli)
    if want and not _enabled:
        _dispatch().enable("watch")
        _enabled = True
        if not _atexit:
            atexit.register(_at_exit)
            _atexit = True
    elif not want and _enabled:
        _dispatch().disable("watch")
        _enabled = False


def _active():
    return bool(_watches or _cli_watches or _cli)


def _dir():
    d = _out_dir
    if d is None:
        d = _env.get(_env.OUTPUT_DIR)
    if d is None:
        o = _env.get(_env.OUTPUT)
        if o:
            d = os.path.dirname(o) or "." if o.endswith((".db", ".csv")) else o
    if d is None:
        d = "memscopeDumpResults"
    return os.path.join(d, "watch_dump")


def _row(fname, crc):
    global _csv
    if _csv is None:
        d = _dir()
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "watch_dump_data_check_sum_cpu_%s.csv"
                            % time.strftime("%Y%m%d%H%M%S"))
        new = not os.path.exists(path)
        _csv = open(path, "a", buffering=1)
        if new:
            _csv.write("Tensor info,Check data sum\n")
    _csv.write("%s,%016x\n" % (fname, crc))


def _fname(op, call, w, when):
    return ("%s_%d-%s_%d_%s.bin" % (op, call, w.name, w.index, when)).replace("/", ".")


def _dump(op, call, w, when):
    b = _backend()
    if w.ref is not None and w.ref() is None:
        return None   # the tensor is gone: its memory may be too
    fname = _fname(op, call, w, when)
    if _full_content:
        data = b.read_bytes(w.ptr, w.length)
        crc = b.crc64_bytes(data) if b.kind() != "native" else b.crc64(w.ptr, w.length)
        d = _dir()
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)
    else:
        crc = b.crc64(w.ptr, w.length)
    _row(fname, crc)
    return crc


def _before_op(op, call):
    with _lock:
        for w in _watches + _cli_watches:
            w.before = _dump(op, call, w, "before")


def _changed(op, call, w, after):
    rec = {"name": w.name, "op": op, "call": call, "before": w.before, "after": after}
    _changes.append(rec)
    if w.first is None:
        w.first = (op, call)
    _backend().mark("memscope-watch:name=%s;op=%s;call=%d;before=%016x;after=%016x"
                    % (w.name, op, call, w.before, after))


def _matches(spec, op):
    return spec == op or spec == op.split("::", 1)[-1]


def _after_op(op, call, outs):
    global _cli_watches, _cli_started
    with _lock:
        for lst in (_watches, _cli_watches):
            for w in list(lst):
                after = _dump(op, call, w, "after")
                if after is None:
                    lst.remove(w)
                    _gone.append(w)
                    continue
                if w.before is not None and after != w.before:
                    _changed(op, call, w, after)
                w.before = after
                if w.left > 0:
                    w.left -= 1
                    if w.left == 0:
                        lst.remove(w)
                        _gone.append(w)
        c = _cli
        if c is None:
            _switch()
            return
        if _cli_watches and _matches(c["end"], op):
            _gone.extend(_cli_watches)
            _cli_watches = []
        elif not _cli_watches and _matches(c["start"], op):
            _cli_started = True
            import weakref as _w
            for i, t in enumerate(outs):
                if c["outid"] is not None and i != c["outid"]:
                    continue
                n = t.numel() * t.element_size()
                if not t.data_ptr() or n <= 0:
                    continue
                w = _Watch(op, t.data_ptr(), n, -1, _w.ref(t), index=i, cli=True)
                w.before = _dump(op, call, w, "after")
                _cli_watches.append(w)
        _switch()


def _at_exit():
    if _csv is not None:
        _csv.flush()
    if _cli is not None and not _cli_started:
        sys.stderr.write("memscope watch: no op named %s ran: nothing was watched\n"
                         % _cli["start"])
    for r in report():
        if r["op"]:
            sys.stderr.write("memscope watch: %s first changed by %s (call %d)\n"
                             % (r["name"], r["op"], r["call"]))
        else:
            sys.stderr.write("memscope watch: %s not changed by any op%s\n"
                             % (r["name"], " (watched %d times)" % r["watches"]
                                if r["watches"] > 1 else ""))
