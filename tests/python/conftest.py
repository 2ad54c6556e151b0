"""Shared helpers of the Python tests: the memscope binary (env MEMSCOPE, set by ctest) and a
runner for scripts under `memscope run` or plain python3."""
import os
import sqlite3
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")
PYTHON = "/usr/bin/python3"


def memscope_bin():
    b = os.environ.get("MEMSCOPE")
    if not b or not os.access(b, os.X_OK):
        pytest.skip("MEMSCOPE does not name the memscope binary (run through ctest)")
    return b


def env():
    e = dict(os.environ)
    # Every Python object through malloc, so that the agent sees it (pymalloc's arenas hide
    # small objects from any allocator tracer).
    e["PYTHONMALLOC"] = "malloc"
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    return e


def script(name):
    return os.path.join(SCRIPTS, name)


def run_cli(tmp_path, name, *args, call_stack="c:8,python:32", extra=(), db="run.db"):
    """Runs scripts/name under `memscope run` and returns the path of its full database (one
    row per event: the tests read the events)."""
    out = str(tmp_path / db)
    cmd = [memscope_bin(), "run", "-q", "--format=db", "--call-stack=" + call_stack, *extra,
           "-o", out, "--",
           PYTHON, script(name), *args]
    r = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "memscope run failed:\n%s\n%s" % (r.stdout, r.stderr)
    return out


def run_py(name, *args, cwd=None):
    r = subprocess.run([PYTHON, script(name), *args], env=env(), capture_output=True, text=True,
                       timeout=600, cwd=cwd)
    return r


def query(db, sql, *params):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()
