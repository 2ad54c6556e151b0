"""In-process (standalone) mode: memscope.config/start/stop in a plain python3, no CLI. It must
record the same events as `memscope run` for the same script, into the same schema."""
import collections
import os

import pytest

from conftest import PYTHON, query, run_cli, run_py, script


def work_mallocs(db):
    """MALLOCs of >= 1000 bytes made in same_events.work(), counted by (line, size)."""
    f = script("same_events.py")
    rows = query(db, "SELECT s.py_text, e.size FROM events e JOIN stacks s ON s.id = e.stack_id "
                     "WHERE e.kind = 1 AND e.size >= 1000")
    c = collections.Counter()
    for text, size in rows:
        top = (text or "").split("\n")[0]
        if top.startswith(f + "(") and (top.endswith("): work") or
                                         top.endswith("): work.<locals>.<listcomp>")):
            c[(int(top[len(f) + 1:].split(")")[0]), size)] += 1
    return c


def expected():
    c = collections.Counter()
    for i in range(20):
        c[(19, 4097 + i)] += 1      # keep.append(bytearray(4096 + i))
        c[(20, 100_001)] += 1       # tmp = bytearray(100_000)
    c[(22, 2033)] = 10              # bytes(2000) in the list comprehension
    return c


def test_inprocess_matches_run(tmp_path):
    run_db = run_cli(tmp_path, "same_events.py", "run")
    assert work_mallocs(run_db) == expected()

    ip_db = str(tmp_path / "inprocess.db")
    r = run_py("same_events.py", "inprocess", ip_db, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "same_events ok inprocess" in r.stdout
    assert work_mallocs(ip_db) == expected()
    # Same schema: the tables the CLI's database has.
    tables = lambda db: {t for (t,) in query(db, "SELECT name FROM sqlite_master WHERE type IN "
                                                 "('table', 'view')") if not t.startswith("python_trace_")}
    assert tables(ip_db) == tables(run_db)
    assert query(ip_db, "SELECT count(*) FROM steps")[0][0] == 2


def test_inprocess_without_agent_file(tmp_path):
    env_agent = os.environ.get("MEMSCOPE_AGENT")
    os.environ["MEMSCOPE_AGENT"] = str(tmp_path / "nope.so")
    try:
        r = run_py("same_events.py", "inprocess", str(tmp_path / "x.db"))
    finally:
        if env_agent is None:
            del os.environ["MEMSCOPE_AGENT"]
        else:
            os.environ["MEMSCOPE_AGENT"] = env_agent
    assert r.returncode != 0
    assert "cannot load the agent" in r.stderr
