"""mark_windows.py TRACE_DIR: records itself in-process (the raw trace into TRACE_DIR) with
windows marked as memscope.pytest_plugin marks each test's call, around allocations of known
sizes (tests/python/test_pytest_windows.py converts the trace both ways and compares)."""
import sys

import memscope
from memscope import _native, testmem

MiB = 1024 * 1024
memscope.config(call_stack="python:32", format="trace", output_path=sys.argv[1])
memscope.start()
kept = []


def window(tid, body):
    _native.mark(testmem.MARK_START + tid)
    body()
    _native.mark(testmem.MARK_END + tid)


def grow():
    kept.append(bytearray(3 * MiB))  # live after the window: leaked, and live at its peak
    b = bytearray(2 * MiB)           # freed in the window: at the peak only
    del b


def sequential():
    for _ in range(4):
        b = bytearray(2 * MiB)       # 8 MiB allocated, 2 MiB at most at once
        del b


def freed_later():
    kept.append(bytearray(1 * MiB))  # freed after the window ends: leaked all the same


before = bytearray(4 * MiB)


def frees_older():
    global before
    before = None                    # allocated before the window: not the test's


window("grow", grow)
window("sequential", sequential)
window("freed_later", freed_later)
kept.pop()
window("frees_older", frees_older)
_native.mark(testmem.MARK_START + "never_ended")
memscope.stop()
