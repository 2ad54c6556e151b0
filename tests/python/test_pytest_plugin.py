"""memscope.pytest_plugin (docs/ci.md) on scripts/budget_suite.py, a suite with known memory:
the exact sets of tests that pass and fail (read from pytest's own JUnit XML) with the plugin
in this process and under `memscope run`, without --memscope (markers inert), with
--memscope-default-limit, with a baseline written and then compared, the failure message
(limit, measured value, the allocating line), and bad input as pytest usage errors before any
test runs."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import PYTHON, env, memscope_bin, script

SUITE = script("budget_suite.py")
ALL = {"test_mem_under", "test_mem_over", "test_mem_sequential", "test_native_over",
       "test_leak_over", "test_leak_under", "test_leak_cache", "test_fails_itself",
       "test_unmarked", "test_fork_over"}
FAIL_WITH_BUDGETS = {"test_mem_over", "test_native_over", "test_leak_over", "test_fails_itself",
                     "test_fork_over"}


def pytest_run(tmp_path, *args, under_run=False, extra_env=None, suite=SUITE):
    """Runs pytest on suite; returns (status, {test: passed}, stdout)."""
    xml = str(tmp_path / "junit.xml")
    if os.path.exists(xml):
        os.unlink(xml)
    # rootdir: the suite's directory wherever the checkout and the temporary directory are
    # (pytest takes the common ancestor of both when it is not /), so that test ids and the
    # messages' file names are the suite's own
    cmd = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml=" + xml,
           "--rootdir=" + os.path.dirname(suite), *args, suite]
    if under_run:
        cmd = [memscope_bin(), "run", "-q", "-o", str(tmp_path / "run.db"), "--"] + cmd
    e = env()
    e.update(extra_env or {})
    r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    outcomes = {}
    if os.path.exists(xml):
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcomes[case.get("name")] = case.find("failure") is None and \
                case.find("error") is None
    return r.returncode, outcomes, r.stdout + r.stderr


def failed(outcomes):
    return {t for t, ok in outcomes.items() if not ok}


def test_inprocess(tmp_path):
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope")
    assert set(out) == ALL, text
    assert failed(out) == FAIL_WITH_BUDGETS, text
    assert rc == 1
    # the message: the marker, the measured peak, the limit, the allocating line
    assert "memscope: limit_memory('1 MB') exceeded: peak of memory allocated during the " \
           "test 2097" in text
    assert "limit 1048576 bytes (1.0 MiB)" in text
    assert "  budget_suite.py:22: 2097" in text  # bytearray(2 * MiB)
    assert "  budget_suite.py:38: 3145" in text  # libc.malloc(3 * MiB): native memory
    assert "  budget_suite.py:44: 1048" in text  # the leak's line
    # the per-test summary
    assert "=== memscope ===" in text.replace("=" * 10, "===")
    assert "budget_suite.py::test_unmarked: budget_suite.py:66" in text


def test_under_memscope_run(tmp_path):
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               under_run=True)
    assert failed(out) == FAIL_WITH_BUDGETS, text
    assert rc == 1
    assert os.path.exists(tmp_path / "run.db")  # memscope run's own database is still written


def test_cuda_layer(tmp_path):
    # device memory through the CUDA TEST DRIVER (tests/cuda; no GPU), under memscope run
    drv = os.path.join(os.path.dirname(memscope_bin()), "tests", "cuda", "cuda-test-driver")
    if not os.path.exists(os.path.join(drv, "libcuda.so.1")):
        pytest.skip("the CUDA test driver is not built")
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               under_run=True, extra_env={"LD_LIBRARY_PATH": drv},
                               suite=script("budget_cuda_suite.py"))
    assert set(out) == {"test_device_over", "test_device_under", "test_device_leak",
                        "test_device_freed", "test_host_budget_device_memory"}, text
    assert failed(out) == {"test_device_over", "test_device_leak"}, text
    assert "limit_memory('4 MB') exceeded: peak of memory allocated during the test 8388608 " \
           "bytes (8.0 MiB), limit 4194304 bytes (4.0 MiB), layer cuda" in text
    assert "still live after it returned 1048576 bytes (1.0 MiB), limit 0 bytes (0 B), " \
           "layer cuda:0" in text


def test_markers_inert_without_memscope(tmp_path):
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin")
    assert set(out) == ALL, text
    assert failed(out) == {"test_fails_itself"}, text
    assert rc == 1


def test_cannot_record(tmp_path):
    # no agent to load: the tests still run; those with a budget fail, saying why
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               extra_env={"MEMSCOPE_AGENT": str(tmp_path / "none.so")})
    assert set(failed(out)) == ALL - {"test_unmarked"}, text
    assert "the test's memory could not be measured: cannot record: OSError" in text


def test_default_limit(tmp_path):
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               "--memscope-default-limit=4 MB")
    assert failed(out) == FAIL_WITH_BUDGETS | {"test_unmarked"}, text


def test_baseline(tmp_path):
    base = str(tmp_path / "base.json")
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               "--memscope-baseline=" + base)
    assert failed(out) == FAIL_WITH_BUDGETS, text
    data = json.load(open(base))
    peak = data["tests"]["budget_suite.py::test_unmarked"]["peak"]
    assert 5 * 2**20 <= peak < 5 * 2**20 + 65536
    # the same run holds against it; a test that grows from 5 to 12 MiB fails it
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               "--memscope-baseline=" + base)
    assert failed(out) == FAIL_WITH_BUDGETS, text
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               "--memscope-baseline=" + base, "--memscope-max-growth=50",
                               extra_env={"BUDGET_SUITE_GROW": "1"})
    assert failed(out) == FAIL_WITH_BUDGETS | {"test_unmarked"}, text
    assert "--memscope-max-growth=50% against" in text and "peak grew from" in text


BAD_SUITE = '''
import pytest
open("ran", "w").close()

@pytest.mark.limit_memory(%s)
def test_x():
    pass
'''


@pytest.mark.parametrize("marker,why", [
    ('"12 parsecs"', "invalid size '12 parsecs'"),
    ('"1.5 MiB"', "invalid size '1.5 MiB'"),   # pytest-memray rejects MiB too
    ("1024", "a size must be a string"),        # not a string
    ('"1 MB", layer="gpu"', "unknown layer 'gpu'"),
    ('"1 MB", "2 MB"', "takes one limit"),
    ('"1 MB", current_thread_only=True', "current_thread_only=True is not supported"),
    ('"1 MB", filter_fn=len', "unknown argument filter_fn"),
])
def test_bad_marker(tmp_path, marker, why):
    suite = tmp_path / "bad_suite.py"
    suite.write_text(BAD_SUITE.replace("open(\"ran\"", "pass  # open(\"ran\"") % marker)
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope",
                               suite=str(suite))
    assert rc == 4, text  # pytest's usage error
    assert why in text, text
    assert out == {}, "no test ran"


@pytest.mark.parametrize("args,why", [
    (["--memscope-default-limit=lots"], "--memscope-default-limit: invalid size"),
    (["--memscope-max-growth=-3"], "--memscope-max-growth: expected a percentage"),
    (["--memscope-baseline=BASE"], "is not a memscope baseline"),
    (["--memscope-baseline=NOTJSON"], "--memscope-baseline: cannot read"),
])
def test_bad_options(tmp_path, args, why):
    (tmp_path / "base.json").write_text('{"tests": {}}')
    (tmp_path / "notjson").write_text("peak=12")
    args = [a.replace("BASE", str(tmp_path / "base.json")).replace(
        "NOTJSON", str(tmp_path / "notjson")) for a in args]
    rc, out, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope", *args)
    assert rc == 4, text
    assert why in text, text
    assert out == {}
