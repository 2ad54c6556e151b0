"""record_function: msMemScope's RecordFunction(name), a named range (RANGE_START/RANGE_END
events, the ranges table) as a context manager or a decorator."""
import functools

from . import _native


class RecordFunction:
    """with RecordFunction("name"): ...   or   @RecordFunction("name")"""

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError("RecordFunction: name must be a str, not %s" % type(name).__name__)
        if not name:
            raise ValueError("RecordFunction: name must not be empty")
        self.name = name

    def __enter__(self):
        _native.range_push(self.name)
        return self

    def __exit__(self, *exc):
        _native.range_pop()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with RecordFunction(self.name):
                return func(*args, **kwargs)
        return wrapper
