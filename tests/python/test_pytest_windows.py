"""The per-test figures of memscope.pytest_plugin computed by the conversion (mark windows:
src/store/convert_windows.c, docs/ci.md) against known sizes and against the same figures
computed from the full database in SQL (memscope.testmem.measure), on one recording of
scripts/mark_windows.py; and the plugin's Python stacks, on only while a test's call runs, with
each allocation's exact line read from its frame."""
import os
import subprocess

from conftest import PYTHON, env, script

from memscope import _store, testmem

MiB = 1024 * 1024
SLACK = 64 * 1024  # the interpreter's own small allocations in a window


def record(tmp_path):
    trace = str(tmp_path / "trace")
    r = subprocess.run([PYTHON, script("mark_windows.py"), trace], env=env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return trace


def line_of(text):
    src = open(script("mark_windows.py")).read().splitlines()
    return "mark_windows.py:%d" % (next(i for i, l in enumerate(src) if text in l) + 1)


def test_windows_known_and_same_as_sql(tmp_path):
    trace = record(tmp_path)
    wdb, fdb = str(tmp_path / "w.db"), str(tmp_path / "f.db")
    _store.convert(trace, wdb, [], 0, True, True, testmem.MARK_START, testmem.MARK_END)
    _store.convert(trace, fdb, [], 0, True)
    root = os.path.dirname(script("mark_windows.py"))
    c = testmem.measure_windows(wdb, root)
    sql = testmem.measure(fdb, {}, root)
    assert set(c) == {"grow", "sequential", "freed_later", "frees_older"}  # never_ended: none
    assert set(sql) == set(c)
    for tid in c:
        assert (c[tid].allocated, c[tid].peak, c[tid].leaked) == \
            (sql[tid].allocated, sql[tid].peak, sql[tid].leaked), tid
        assert c[tid].peak_sites == sql[tid].peak_sites, tid
        assert c[tid].leak_sites == sql[tid].leak_sites, tid
    g = c["grow"]
    assert 5 * MiB <= g.allocated < 5 * MiB + SLACK
    assert 5 * MiB <= g.peak < 5 * MiB + SLACK
    assert 3 * MiB <= g.leaked < 3 * MiB + SLACK
    # the allocating lines, most bytes first (the list's own small blocks on the first)
    assert g.leak_sites[0][0] == line_of("bytearray(3 * MiB)")
    assert 3 * MiB <= g.leak_sites[0][1] < 3 * MiB + SLACK
    assert [s[0] for s in g.peak_sites[:2]] == [line_of("bytearray(3 * MiB)"),
                                                line_of("bytearray(2 * MiB)")]
    assert 2 * MiB <= g.peak_sites[1][1] < 2 * MiB + SLACK
    s = c["sequential"]
    assert 8 * MiB <= s.allocated < 8 * MiB + SLACK
    assert 2 * MiB <= s.peak < 2 * MiB + SLACK
    assert s.leaked < SLACK
    f = c["freed_later"]
    assert 1 * MiB <= f.leaked < 1 * MiB + SLACK
    o = c["frees_older"]
    assert o.allocated < SLACK and o.peak < SLACK and o.leaked < SLACK


STACKS_SUITE = '''
import pytest
from memscope import _native

@pytest.fixture
def in_setup():
    return _native.python_stacks()

def test_stacks(in_setup):
    assert not in_setup, "the hook was on during the fixture's setup"
    assert _native.python_stacks(), "the hook was off during the test's call"

def test_line_without_a_call():
    n = len("x" * 8)
    b = [n] * (4 * 1024 * 1024)  # no call: BINARY_OP allocates (32 MiB)
    del b

# a thread that runs (and allocates) across tests, while the hook comes and goes
import threading
stop = threading.Event()

def churn():
    while not stop.is_set():
        x = [bytearray(1000) for _ in range(50)]
        del x

def test_thread_starts():
    threading.Thread(target=churn, daemon=True).start()
    for _ in range(200):
        y = [bytearray(1000) for _ in range(50)]

def test_thread_runs():
    for _ in range(200):
        y = [bytearray(1000) for _ in range(50)]

def test_thread_stops():
    stop.set()
'''


def test_python_stacks_only_during_calls(tmp_path):
    (tmp_path / "stacks_suite.py").write_text(STACKS_SUITE)
    r = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "memscope.pytest_plugin", "--memscope", "stacks_suite.py"],
                       env=env(), capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 passed" in r.stdout
    # the line of the allocation, not that of the frame's last call (the hook reports calls
    # only; the agent reads each allocation's line from the frame)
    assert "stacks_suite.py::test_line_without_a_call: stacks_suite.py:15" in r.stdout, r.stdout
