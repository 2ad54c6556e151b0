"""PyTorch's CUDA caching allocator under `memscope run` with no change to the script (the PTA
layer, memscope.torch.cuda_history, docs/cuda.md).

There is no GPU here, so CUDA is replaced by a TEST STAND-IN inside the script: after
`import torch` (when memscope has armed its hook through torch.cuda._lazy_call), the script
replaces PyTorch's two history functions (_record_memory_history records how it was called;
_snapshot returns a real snapshot of a real training run, from ../shared/data/snapshots) and runs
torch.cuda's queued lazy-init calls, as torch.cuda._lazy_init does when CUDA initializes.
Everything else is real: memscope's hook, the pickle it saves at exit, and the conversion that
merges it into the run. The expected numbers are the snapshot's own (memscope snapshot)."""
import json
import os
import subprocess

import pytest

from mstorch_util import memscope_bin, query, run

SNAP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "shared",
                    "data", "snapshots", "04_cs336_bcrafton_torch2.10plus.pickle")

STAND_IN = r'''
import pickle
import torch
import memscope.torch.cuda_history as h
assert h._armed, "memscope did not arm the allocator history at import torch"
calls = []
# TEST STAND-IN for CUDA (no GPU here): PyTorch's history API, and CUDA's lazy init.
torch.cuda.memory._record_memory_history = lambda *a, **k: calls.append(k)
torch.cuda.memory._snapshot = lambda: pickle.load(open(%r, "rb"))
for fn, _ in list(torch.cuda._queued_calls):
    fn()
print("history:", calls)
'''


def snapshot_summary():
    if not os.path.exists(SNAP):
        pytest.skip("no shared snapshot at %s" % SNAP)
    p = subprocess.run([memscope_bin(), "snapshot", SNAP, "--json"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_history_is_merged_into_the_run(tmp_path):
    summary = snapshot_summary()
    db, p = run(tmp_path, STAND_IN % os.path.abspath(SNAP))
    assert "history: [{'enabled': 'all', 'context': 'alloc', 'stacks': 'python', " \
           "'max_entries': 1000000}]" in p.stdout
    dev = summary["devices"][0]
    # blocks live at the end and reserved segments, as the snapshot says
    (live_blocks, live_bytes), = query(db, "SELECT s.live_blocks, s.live_bytes FROM process_stats s "
                                           "JOIN layers l ON l.id = s.layer WHERE l.name = 'pta:0'")
    assert live_blocks == dev["blocks_by_state"]["active_allocated"]["count"]
    assert live_bytes == dev["allocated_bytes"]  # what torch.cuda.memory_allocated() says
    (segs, reserved), = query(db, "SELECT s.live_blocks, s.live_bytes FROM process_stats s "
                                  "JOIN layers l ON l.id = s.layer WHERE l.name = 'pta_segment:0'")
    assert (segs, reserved) == (dev["segments"], dev["reserved_bytes"])  # memory_reserved()
    # every alloc of the trace is a MALLOC row of Event Type PTA on device 0, with its frames
    allocs = dev["actions"]["alloc"]
    assert query(db, "SELECT count(*) FROM memscope_dump WHERE Event = 'MALLOC' AND "
                     "\"Event Type\" = 'PTA' AND \"Device Id\" = '0' AND "
                     "json_extract(Attr, '$.func') = 'alloc'") == [(allocs,)]
    assert query(db, "SELECT count(*) FROM memscope_dump WHERE \"Event Type\" = 'PTA' AND "
                     "Event = 'MALLOC' AND \"Call Stack(Python)\" LIKE '%optimizer.py(75): step%'"
                     )[0][0] > 0
    # the allocator is a pool: fragmentation reads it
    assert query(db, "SELECT name FROM pools") == [("PTA:0",)]
    p = subprocess.run([memscope_bin(), "analyze", "fragmentation", str(db), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    end = [r for r in json.loads(p.stdout)["pools"][0]["rows"] if r["label"] == "end"][0]
    assert end["reserved"] == dev["reserved_bytes"] and end["used"] == dev["allocated_bytes"]
    # the size the program asked for is kept beside the rounded one
    assert query(db, "SELECT count(*) FROM memscope_dump WHERE \"Event Type\" = 'PTA' AND "
                     "Event = 'MALLOC' AND json_extract(Attr, '$.requested') IS NOT NULL") \
        == [(allocs,)]
    # msMemScope's pool Attr: used (the pool's allocated bytes with the block) and total (its
    # reserved bytes), checked against running sums of the rows of pta:0 and pta_segment:0
    (checked, wrong), = query(db, """
        WITH e AS (SELECT ev.id, l.name AS layer, ev.kind, ev.size, ev.attr FROM events ev
                   JOIN layers l ON l.id = ev.layer
                   WHERE l.name IN ('pta:0', 'pta_segment:0') AND ev.kind IN (1, 2)
                     AND (ev.kind = 1 OR ev.allocation_id IS NOT NULL)),
             r AS (SELECT layer, kind, attr,
                   sum(CASE WHEN layer = 'pta:0' THEN (CASE kind WHEN 1 THEN size ELSE -size END)
                       ELSE 0 END) OVER (ORDER BY id) AS used,
                   sum(CASE WHEN layer = 'pta_segment:0' THEN
                       (CASE kind WHEN 1 THEN size ELSE -size END) ELSE 0 END)
                       OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                       AS total FROM e)
        SELECT count(*), count(*) FILTER (WHERE CAST(json_extract(attr, '$.used') AS INTEGER)
               != used OR CAST(json_extract(attr, '$.total') AS INTEGER) != COALESCE(total, 0))
        FROM r WHERE layer = 'pta:0' AND kind = 1""")
    assert checked >= allocs and wrong == 0
    # the run's allocator, written back as a PyTorch snapshot (memscope export
    # --format=torch-snapshot), has the segments and blocks of the snapshot PyTorch gave
    out = tmp_path / "run.pickle"
    p = subprocess.run([memscope_bin(), "export", str(db), "--format=torch-snapshot", "-o",
                        str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    import pickle
    from torch.cuda import _memory_viz
    mine, theirs = pickle.load(open(out, "rb")), pickle.load(open(SNAP, "rb"))
    key = lambda s: (s["address"], s["total_size"], [(b["size"], b["state"]) for b in s["blocks"]])
    assert sorted(map(key, mine["segments"])) == sorted(map(key, theirs["segments"]))
    stats = lambda segs: {k: getattr(v, "value", v) for k, v in _memory_viz.stats(segs).items()}
    assert stats(mine["segments"]) == stats(theirs["segments"])


def test_a_cpu_program_is_untouched(tmp_path):
    db, p = run(tmp_path, "import torch\nx = torch.ones(1000)\nprint(float(x.sum()))\n")
    assert p.stdout == "1000.0\n" and p.stderr == ""
    assert query(db, "SELECT count(*) FROM layers WHERE name LIKE 'pta%'") == [(0,)]


OWNER = r'''
import pickle
import time
import torch
from memscope.describe import describer
snap = pickle.load(open(%r, "rb"))
# The snapshot's times moved into this run: its events happen while the owner is pushed.
times = [e["time_us"] for t in snap["device_traces"] for e in t if "time_us" in e]
t0, now = min(times), time.time_ns() // 1000 + 50000
for t in snap["device_traces"]:
    for e in t:
        if "time_us" in e:
            e["time_us"] += now - t0
# TEST STAND-IN for CUDA, as above
torch.cuda.memory._record_memory_history = lambda *a, **k: None
torch.cuda.memory._snapshot = lambda: snap
with describer(owner="encoder"):
    for fn, _ in list(torch.cuda._queued_calls):
        fn()
    time.sleep((max(times) - t0) / 1e6 + 0.25)
# a tag after the fact, as the PyTorch layer tags weights: on a block live at the end
live = [b["address"] for seg in snap["segments"] for b in seg["blocks"]
        if b["state"] == "active_allocated"]
describer(live[-1], owner="kv")
print("done", live[-1])
'''


def test_blocks_take_the_main_threads_owner(tmp_path):
    snapshot_summary()
    db, p = run(tmp_path, OWNER % os.path.abspath(SNAP))
    assert p.stdout.startswith("done ")
    tagged = int(p.stdout.split()[1])
    # the tag reaches the PyTorch block at that address: its owner at allocation, then @kv
    assert query(db, "SELECT o.label FROM blocks b JOIN owners o ON o.id = b.owner_id JOIN layers l "
                     "ON l.id = b.layer WHERE l.name = 'pta:0' AND b.addr = ? AND b.free_ns IS NULL",
                 tagged) == [("encoder@kv",)]
    # every block PyTorch allocated while the main thread's owner was "encoder" carries it
    rows = query(db, "SELECT json_extract(Attr, '$.owner'), count(*) FROM memscope_dump WHERE "
                     "\"Event Type\" = 'PTA' AND Event = 'MALLOC' GROUP BY 1")
    blocks = query(db, "SELECT count(*) FROM blocks b JOIN layers l ON l.id = b.layer "
                       "WHERE l.name = 'pta:0'")[0][0]
    assert rows == [("encoder", blocks - 1), ("encoder@kv", 1)]


def test_history_in_the_compact_database(tmp_path):
    """memscope run's default output: the pickle is stored beside the trace, the tables say
    what the snapshot says, and its full database and every analysis agree with it."""
    summary = snapshot_summary()
    dev = summary["devices"][0]
    db, p = run(tmp_path, STAND_IN % os.path.abspath(SNAP),
                opts=("--call-stack=c:0", "--format=compact"))
    assert query(db, "SELECT value FROM meta WHERE key = 'store'") == [("compact",)]
    names = [n for (n,) in query(db, "SELECT DISTINCT name FROM trace_files")]
    assert any(n.endswith(".pta.pickle") for n in names), names
    (live_blocks, live_bytes), = query(db, "SELECT s.live_blocks, s.live_bytes FROM process_stats s "
                                           "JOIN layers l ON l.id = s.layer WHERE l.name = 'pta:0'")
    assert (live_blocks, live_bytes) == (dev["blocks_by_state"]["active_allocated"]["count"],
                                         dev["allocated_bytes"])
    full = tmp_path / "full.db"
    e = subprocess.run([memscope_bin(), "export", str(db), "--format=db", "-o", str(full)],
                       capture_output=True, text=True, timeout=600)
    assert e.returncode == 0, e.stderr
    assert query(full, "SELECT count(*) FROM memscope_dump WHERE Event = 'MALLOC' AND "
                       "\"Event Type\" = 'PTA' AND json_extract(Attr, '$.func') = 'alloc'") \
        == [(dev["actions"]["alloc"],)]
    out = []
    for d in (db, full):
        a = subprocess.run([memscope_bin(), "analyze", "all", str(d), "--json"],
                           capture_output=True, text=True, timeout=600)
        assert a.returncode == 0, a.stderr
        out.append(a.stdout)
    assert out[0] == out[1]
    assert json.loads(out[0])["fragmentation"]["pools"][0]["name"] == "PTA:0"
