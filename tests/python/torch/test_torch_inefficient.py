"""Op ranges and tensor accesses from memscope.torch.trace_ops() feed the inefficient analysis:
in a crafted script one tensor is allocated long before its first use (another tensor is freed
in between) and it is the one flagged (issue 4)."""
import subprocess

from mstorch_util import PYTHON, analyze, env, inefficient_tensors, memscope_bin, query, run

SCRIPT = r'''
import torch
import memscope.torch as mt
torch.set_num_threads(1)
with mt.trace_ops():
    early = torch.empty(12345)          # allocated here ...
    tmp = torch.ones(1000)
    tmp.add_(1.0)
    del tmp                             # ... another tensor is freed ...
    early.fill_(1.0)                    # ... and only now is it used
    s = early.sum()
    print(float(s))
'''
EARLY = 12345 * 4


def test_accesses_follow_the_schema(tmp_path):
    db, _ = run(tmp_path, SCRIPT)
    acc = query(db, "SELECT name, flags, size FROM events WHERE kind = 8 ORDER BY id")
    assert acc == [("aten::empty", 2, EARLY), ("aten::ones", 2, 4000), ("aten::add_", 2, 4000),
                   ("aten::fill_", 2, EARLY), ("aten::sum", 1, EARLY), ("aten::sum", 2, 4),
                   ("aten::_local_scalar_dense", 1, 4)]
    # every access names the block that starts at the storage
    assert query(db, "SELECT count(*) FROM events WHERE kind = 8 AND allocation_id IS NULL"
                 ) == [(0,)]
    ops = [r[0] for r in query(db, "SELECT name FROM ranges ORDER BY id")]
    assert ops == ["aten::empty", "aten::ones", "aten::add_", "aten::fill_", "aten::sum",
                   "aten::_local_scalar_dense"]


def test_inefficient_flags_the_early_tensor_only(tmp_path):
    db, _ = run(tmp_path, SCRIPT)
    early = query(db, "SELECT allocation_id FROM blocks WHERE size = ?", EARLY)
    assert len(early) == 1
    early = early[0][0]
    # msMemScope's scope is its tensor pools; here the tensors are the blocks memscope.torch
    # reported accesses for. The rules restricted to them flag exactly `early`.
    assert inefficient_tensors(db) == {early: {"early_allocation"}}
    # `memscope analyze inefficient` applies the rules to the whole heap, where Python's own
    # allocations and frees between ops count as APIs too: it flags `early` as well, and with
    # a tensor-only scope (when the analysis has one) only `early`.
    helptext = subprocess.run([memscope_bin(), "analyze", "--help"], capture_output=True,
                              text=True).stdout + ""
    scope = ["--accessed-only"] if "--accessed-only" in helptext else []
    d = analyze(db, "inefficient", *scope)
    flagged = {b["allocation_id"]: set(b["types"]) for b in d["blocks"]}
    assert "early_allocation" in flagged.get(early, set())
    if scope:
        assert flagged == {early: {"early_allocation"}}


def test_check_inefficient_csv_equals_database(tmp_path):
    """Issue 18 item 8: msMemScope's offline check_inefficient on the run's CSV (memscope export)
    flags the same blocks with the same kinds as on its database (the analysis in C, over the
    whole heap: the early tensor is among them); the flagged MALLOC rows of the CSV carry inefficient_type."""
    db, _ = run(tmp_path, SCRIPT)
    early = query(db, "SELECT allocation_id FROM blocks WHERE size = ?", EARLY)[0][0]
    csv_path = tmp_path / "run.csv"
    subprocess.run([memscope_bin(), "export", str(db), "--format=csv", "-o", str(csv_path)],
                   check=True)
    probe = ("import memscope, sys, contextlib, io\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    r = memscope.check_inefficient(sys.argv[1])\n"
             "print(sorted((b['allocation_id'], b['size'], b['types']) for b in r))\n")
    got = [subprocess.run([PYTHON, "-c", probe, str(p)], env=env(MEMSCOPE=memscope_bin()),
                          capture_output=True, text=True, check=True).stdout
           for p in (db, csv_path)]
    assert got[0] == got[1]
    found = eval(got[1])
    assert any(a == early and n == EARLY and "early_allocation" in t for a, n, t in found)
    text = csv_path.read_text()
    assert text.count("inefficient_type:") == len(found) > 0
