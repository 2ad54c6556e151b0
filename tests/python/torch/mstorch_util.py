"""Helpers shared by tests/python/torch/test_torch_*.py: find memscope and its Python package,
run a script under `memscope run`, and read the database.

MEMSCOPE (environment) is the path of the memscope binary of a build; its package is
<dir of MEMSCOPE>/python (where the build lays it out and where `memscope run` puts it on
PYTHONPATH). Tests skip, with the reason, when either is missing."""
import os
import re
import sqlite3
import subprocess

import pytest

PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))


def memscope_bin():
    exe = os.environ.get("MEMSCOPE")
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("MEMSCOPE (the memscope binary of a build) is not set or not executable")
    return exe


def pydir():
    d = os.path.join(os.path.dirname(os.path.abspath(memscope_bin())), "python")
    r = subprocess.run([PYTHON, "-c", "import memscope._native, memscope.torch"],
                       env=dict(os.environ, PYTHONPATH=d), capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("memscope._native is not available in %s (build the package): %s"
                    % (d, r.stderr.strip().splitlines()[-1:] or ""))
    return d


def env(**extra):
    e = dict(os.environ)
    e["PYTHONPATH"] = pydir()
    # Every Python object then comes from malloc like the tensors: the recorded heap is the
    # whole picture, the runs are deterministic (no pymalloc arenas recycled in 256 KiB mmaps),
    # and small tensors' storage never shares an arena with Python objects. msMemScope suggests
    # it too (reference §1).
    e["PYTHONMALLOC"] = "malloc"
    e["OMP_NUM_THREADS"] = "1"
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(tmp_path, script, args=(), opts=("--call-stack=c:0",), extra_env=None, check=True):
    """Run `script` (source text) under memscope; returns (db path, completed process).
    No stacks by default: symbolizing libtorch's frames takes about a minute per run and
    these tests do not look at call sites."""
    src = tmp_path / "prog.py"
    src.write_text(script)
    db = tmp_path / "run.db"
    cmd = [memscope_bin(), "run", "-q", "--format=db", "-o", str(db), *opts, "--", PYTHON, *args,
           str(src)]
    p = subprocess.run(cmd, env=env(**(extra_env or {})), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, "memscope run failed (%d):\n%s\n%s" % (p.returncode, p.stdout,
                                                                         p.stderr)
    return db, p


def analyze(db, *args):
    p = subprocess.run([memscope_bin(), "analyze", *args, str(db), "--json"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    import json
    return json.loads(p.stdout)


def query(db, sql, *params):
    con = sqlite3.connect(str(db))
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


TAG = re.compile(r"^memscope-tag:ptr=0x([0-9a-f]+);size=(\d+);owner=(.+)$")


def store_applies_tags(db):
    """True when the converter already turned memscope-tag MARKs into owners."""
    return bool(query(db, "SELECT 1 FROM blocks b JOIN owners o ON o.id = b.owner_id "
                          "WHERE o.label IN ('PTA@weight','PTA@gradient','PTA@optimizer_state')"
                          " LIMIT 1"))


def apply_tags(db):
    """The store rule of docs/torch.md, applied to a database in place (for converters that do
    not implement it yet): each `memscope-tag:` MARK gives its owner to the block of its process
    live at exactly ptr at the MARK (heap first, then mmap, then the rest). Returns the number
    of MARKs that found a block."""
    con = sqlite3.connect(str(db))
    n = 0
    try:
        marks = con.execute("SELECT id, ts_ns, process_id, name FROM events WHERE kind = 5 AND "
                            "name LIKE 'memscope-tag:%' ORDER BY id").fetchall()
        for mid, ts, proc, name in marks:
            m = TAG.match(name)
            if not m:
                continue
            ptr, owner = int(m.group(1), 16), m.group(3)
            row = con.execute(
                "SELECT allocation_id FROM blocks WHERE process_id = ? AND addr = ? AND "
                "alloc_event_id < ? AND (free_event_id > ? OR (free_event_id IS NULL AND "
                "(free_ns IS NULL OR free_ns > ?))) ORDER BY (layer = 1) DESC, (layer = 2) DESC "
                "LIMIT 1", (proc, ptr, mid, mid, ts)).fetchone()
            if row is None:
                continue
            con.execute("INSERT OR IGNORE INTO owners(label) VALUES (?)", (owner,))
            oid = con.execute("SELECT id FROM owners WHERE label = ?", (owner,)).fetchone()[0]
            con.execute("UPDATE blocks SET owner_id = ? WHERE allocation_id = ?", (oid, row[0]))
            n += 1
        con.commit()
    finally:
        con.close()
    return n


def inefficient_tensors(db, idle_threshold=3000):
    """msMemScope's API-count rules (docs/analyses.md, reference §4.6) with msMemScope's scope:
    only the framework's tensor memory, i.e. the blocks that carry at least one ACCESS (the
    storages memscope.torch reported); every other heap event (Python objects, C++ internals)
    is left out, as msMemScope leaves out everything but its PTA/ATB pools. Returns
    {allocation_id: set(kinds)}."""
    con = sqlite3.connect(str(db))
    try:
        accessed = {r[0] for r in con.execute(
            "SELECT DISTINCT allocation_id FROM events WHERE kind = 8 AND allocation_id "
            "IS NOT NULL")}
        rows = con.execute("SELECT kind, process_id, thread_id, allocation_id FROM events "
                           "WHERE kind IN (1, 2, 6, 7, 8) ORDER BY id").fetchall()
    finally:
        con.close()
    NONE = None
    procs = {}
    depth = {}
    blocks = {}
    found = {}

    def proc(p):
        if p not in procs:
            procs[p] = {"api": 0, "malloc": NONE, "free": NONE, "open": 0, "tm": 0, "tf": 0}
        return procs[p]

    def classify(st):
        if st["tm"]:
            st["malloc"] = st["api"]
        if st["tf"]:
            st["free"] = st["api"]
        st["tm"] = st["tf"] = 0

    for kind, p, th, aid in rows:
        st = proc(p)
        if kind == 6:
            d = depth.get(th, 0)
            depth[th] = d + 1
            if d == 0:
                if st["open"] == 0:
                    st["api"] += 1
                st["open"] += 1
            continue
        if kind == 7:
            d = depth.get(th, 0)
            if d > 0:
                depth[th] = d - 1
                if d == 1:
                    st["open"] -= 1
                    if st["open"] == 0:
                        classify(st)
            continue
        if aid is None or aid not in accessed:
            continue
        standalone = st["open"] == 0
        if standalone:
            st["api"] += 1
        api = st["api"]
        if kind == 1:
            blocks[aid] = {"m": api, "fa": NONE, "last": api, "lk": 1}
            st["tm"] = 1
        elif kind == 8:
            b = blocks.get(aid)
            if b is not None:
                if b["fa"] is NONE and api != b["m"]:
                    b["fa"] = api
                    fr = st["free"]
                    if fr is not NONE and fr != b["m"] and b["m"] < fr < api:
                        found.setdefault(aid, set()).add("early_allocation")
                if b["lk"] == 8 and api - b["last"] > idle_threshold:
                    found.setdefault(aid, set()).add("temporary_idleness")
                b["last"], b["lk"] = api, 8
        elif kind == 2:
            st["tf"] = 1
            b = blocks.pop(aid, None)
            ma = st["malloc"]
            if b is not None and b["lk"] == 8 and b["last"] != api and ma is not NONE \
                    and b["last"] < ma < api:
                found.setdefault(aid, set()).add("late_deallocation")
        if standalone:
            classify(st)
    return found
