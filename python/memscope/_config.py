"""_config: msMemScope-compatible trace configuration (memscope.config) and its validation.

Called by memscope.config(); the in-process mode (memscope.start) reads the result. Each key is
checked like the CLI option of the same name (docs/cli.md, reference §1); a bad key or value
raises ValueError("Set msmemscope trace config failed! <reason>"), a non-str value TypeError.
"""
import re
import warnings

FAILED = "Set msmemscope trace config failed!"

# key -> canonical key (msMemScope's old names are aliases)
KEYS = {
    "device": "device", "level": "level", "events": "events", "call_stack": "call_stack",
    "analysis": "analysis", "watch": "watch", "format": "format", "data_format": "format",
    "output_path": "output_path", "output": "output_path",
}
ONCE = ("format", "output_path", "watch")  # settable once; later attempts warn

DEFAULTS = {
    "device": "cpu", "level": "op", "events": "alloc,free", "call_stack": "c:32",
    "analysis": "none", "watch": None, "format": "db", "output_path": "memscopeDumpResults",
}

_SEP = re.compile(r",|\uff0c")  # ASCII or full-width comma, as the CLI


def _items(v):
    return [x.strip() for x in _SEP.split(v)]


def _check_device(v):
    for it in _items(v):
        m = re.fullmatch(r"npu(?::(\d+))?|cpu", it)
        if not m or (m.group(1) is not None and int(m.group(1)) >= 32):
            return "device: expected npu, npu:<id> (id < 32) or cpu, not %r" % it
    return None


def _check_level(v):
    for it in _items(v):
        if it not in ("op", "kernel", "0", "1"):
            return "level: expected op or kernel, not %r" % it
    return None


def _check_events(v):
    for it in _items(v):
        if it not in ("alloc", "free", "launch", "access", "traceback", "none"):
            return "events: expected a list of alloc, free, launch, access, traceback or none, not %r" % it
    return None


def parse_call_stack(v):
    """Returns (c_depth, py_depth) for a call_stack value, or raises ValueError."""
    c = py = 0
    for it in _items(v):
        m = re.fullmatch(r"(c|python)(?::(\d+))?", it)
        n = int(m.group(2)) if m and m.group(2) is not None else 50
        if not m or n > 1000:
            raise ValueError("call_stack: expected c[:N],python[:N] with N in 0..1000, not %r" % it)
        if m.group(1) == "c":
            c = n
        else:
            py = n
    return c, py


def _check_call_stack(v):
    try:
        parse_call_stack(v)
    except ValueError as e:
        return str(e)
    return None


_ANALYSES = ("leaks", "decompose", "inefficient", "none", "peak", "compare", "temporary",
             "trend", "fragmentation", "all")


def _check_analysis(v):
    for it in _items(v):
        m = re.fullmatch(r"oom(?::(\d+))?", it)
        if m:
            if m.group(1) is not None and not 1 <= int(m.group(1)) <= 1000:
                return "analysis: oom:K needs K in 1..1000, not %r" % it
            continue
        if it not in _ANALYSES:
            return "analysis: expected a list of %s or oom[:K], not %r" % (", ".join(_ANALYSES), it)
    return None


def parse_watch(v):
    """Returns (start, outid or None, end, full_content) for a watch value, or raises ValueError."""
    parts = _items(v)
    if len(parts) < 2 or len(parts) > 3 or not parts[0] or not parts[1]:
        raise ValueError("watch: expected start[:outid],end[,full-content], not %r" % v)
    # op names contain '::' (aten::add): only a final ':<digits>' is an output index
    start, outid = parts[0], ""
    if ":" in start and start.rsplit(":", 1)[1].isdigit():
        start, outid = start.rsplit(":", 1)
    full = False
    if len(parts) == 3:
        if parts[2] != "full-content":
            raise ValueError("watch: the third item can only be full-content, not %r" % parts[2])
        full = True
    return start, int(outid) if outid else None, parts[1], full


def _check_watch(v):
    try:
        parse_watch(v)
    except ValueError as e:
        return str(e)
    return None


def _check_format(v):
    if v not in ("db", "csv", "trace"):
        return "format: expected db, csv or trace, not %r" % v
    return None


def _check_output(v):
    if not v or len(v) > 4096 or "\0" in v:
        return "output_path: expected a non-empty path of at most 4096 characters"
    return None


CHECKS = {
    "device": _check_device, "level": _check_level, "events": _check_events,
    "call_stack": _check_call_stack, "analysis": _check_analysis, "watch": _check_watch,
    "format": _check_format, "output_path": _check_output,
}

current = dict(DEFAULTS)
_set_once = set()  # the ONCE keys the user has set


def config(**kwargs):
    """Validates kwargs and rebuilds the configuration from the defaults, keeping the ONCE keys
    set before (msMemScope's rule: any other key not passed reverts to its default)."""
    global current
    if not kwargs:
        raise ValueError(FAILED + " config() needs at least one keyword argument, one of "
                         + ", ".join(sorted(KEYS)))
    for k, v in kwargs.items():
        if not isinstance(v, str):
            raise TypeError("memscope.config: the value of %r must be a str, not %s"
                            % (k, type(v).__name__))
    canon = {}
    for k, v in kwargs.items():
        ck = KEYS.get(k)
        if ck is None:
            raise ValueError(FAILED + " unknown key %r; expected one of %s"
                             % (k, ", ".join(sorted(KEYS))))
        if ck in canon:
            raise ValueError(FAILED + " %r given twice (as %s)" % (ck, k))
        why = CHECKS[ck](v)
        if why:
            raise ValueError(FAILED + " " + why)
        canon[ck] = v
    new = dict(DEFAULTS)
    for k in ONCE:
        if k in _set_once:
            new[k] = current[k]
    for k, v in canon.items():
        if k in ONCE and k in _set_once:
            if v != current[k]:
                warnings.warn("memscope.config: %s can be set only once; keeping %r"
                              % (k, current[k]), RuntimeWarning, stacklevel=3)
            continue
        new[k] = v
        if k in ONCE:
            _set_once.add(k)
    current = new
    return dict(current)
