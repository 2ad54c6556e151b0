"""describe: msMemScope's owner tags (describe.describer).

    with describer(owner="encoder"): ...        every allocation inside carries the owner
    @describer(owner="encoder")                  the same around each call
    describer(tensor_or_addr, owner="kv")        tag one block after the fact

Owners nest per thread and join with '@', outermost first (msMemScope's string form); at most
MAX_LEVELS user labels per thread are active, deeper ones are dropped with a warning, as
msMemScope does. After-the-fact tags are MARK events whose message is exactly

    describe addr=0x<lower-case hex address> owner=<label>

(the store applies them to the block live at that address; docs/python.md).
"""
import functools
import threading
import warnings

from . import _native

MAX_LEVELS = 3
MAX_LABEL = 128
_tls = threading.local()


def _check_owner(owner):
    if not isinstance(owner, str):
        raise TypeError("describer: owner must be a str, not %s" % type(owner).__name__)
    if not owner or len(owner) > MAX_LABEL:
        raise ValueError("describer: owner must have 1 to %d characters" % MAX_LABEL)
    if "@" in owner:
        raise ValueError("describer: owner must not contain '@' (it joins the levels)")
    return owner


def _address(obj):
    """The start address of the block behind a tensor (its storage), or an int address."""
    if isinstance(obj, bool):
        raise TypeError("describer: expected a tensor or an int address, not bool")
    if isinstance(obj, int):
        if obj <= 0:
            raise ValueError("describer: address must be positive")
        return obj
    for get in ("untyped_storage", "storage"):
        f = getattr(obj, get, None)
        if f is not None:
            try:
                return int(f().data_ptr())
            except Exception:
                pass
    f = getattr(obj, "data_ptr", None)
    if f is not None:
        return int(f())
    raise TypeError("describer: expected a tensor or an int address, not %s" % type(obj).__name__)


class describer:
    """describer(owner=...) as a context manager or decorator; describer(x, owner=...) tags
    the block of tensor or address x at once."""

    def __init__(self, *target, owner=None):
        if len(target) > 1:
            raise TypeError("describer: at most one positional argument (a tensor or address)")
        if owner is None:
            raise TypeError("describer: owner=... is required")
        self.owner = _check_owner(owner)
        self._pushed = []
        self._target = None
        if target:
            self._target = target[0]
            addr = _address(target[0])
            _native.mark("describe addr=0x%x owner=%s" % (addr, self.owner))

    def __enter__(self):
        if self._target is not None:
            raise TypeError("describer(x, owner=...) tags x at once; use describer(owner=...) "
                            "as a context manager")
        depth = getattr(_tls, "depth", 0)
        _tls.depth = depth + 1
        pushed = depth < MAX_LEVELS
        if pushed:
            _native.owner_push(self.owner)
        else:
            warnings.warn("describer: more than %d owner levels on this thread; %r is dropped"
                          % (MAX_LEVELS, self.owner), RuntimeWarning, stacklevel=2)
        self._pushed.append(pushed)
        return self

    def __exit__(self, *exc):
        _tls.depth -= 1
        if self._pushed.pop():
            _native.owner_pop()
        return False

    def __call__(self, func):
        if self._target is not None:
            raise TypeError("describer(x, owner=...) is not a decorator")
        owner = self.owner

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with describer(owner=owner):
                return func(*args, **kwargs)
        return wrapper
