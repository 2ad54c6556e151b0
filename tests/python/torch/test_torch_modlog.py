"""memscope.torch.install_hooks(): the per-module memory log has one line per module and stage
with the documented fields, in mem_trace_rank_{rank}.log and as MARKs (issue 4)."""
import ast
import json

from mstorch_util import query, run

SCRIPT = r'''
import torch
import memscope.torch as mt
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
h = mt.install_hooks(model, opt, auto_step=True, rank=3)
for _ in range(2):
    loss = model(torch.randn(5, 8)).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
h.remove()
'''
FIELDS = ["rank", "step", "module", "type", "stage", "allocated", "reserved", "max_allocated",
          "ts_ns"]
MODULES = {"model": "Sequential", "0": "Linear", "1": "ReLU", "2": "Linear"}


def test_module_log_lines(tmp_path):
    db, _ = run(tmp_path, SCRIPT)
    lines = (tmp_path / "mem_trace_rank_3.log").read_text().splitlines()
    recs = [json.loads(l) for l in lines]
    assert all(ast.literal_eval(l) == r for l, r in zip(lines, recs))
    for r in recs:
        assert list(r) == FIELDS
        assert r["rank"] == 3
        assert all(isinstance(r[k], int) for k in ("allocated", "reserved", "max_allocated"))
        assert 0 < r["allocated"] <= r["max_allocated"]
    for step in (1, 2):
        got = sorted((r["module"], r["stage"]) for r in recs if r["step"] == step)
        want = sorted([(m, s) for m in MODULES for s in ("pre_forward", "post_forward",
                                                          "pre_backward", "post_backward")]
                      + [("optimizer", "pre_step"), ("optimizer", "post_step")])
        assert got == want, step
    for r in recs:
        assert r["type"] == (MODULES.get(r["module"]) or "SGD")
    # order within a step: forward nests, backward runs in reverse, then the step
    order = [(r["module"], r["stage"]) for r in recs if r["step"] == 1]
    assert order[:2] == [("model", "pre_forward"), ("0", "pre_forward")]
    assert order.index(("model", "pre_backward")) < order.index(("2", "pre_backward")) \
        < order.index(("0", "pre_backward"))
    assert order.index(("0", "post_backward")) < order.index(("model", "post_backward"))
    assert order[-2:] == [("optimizer", "pre_step"), ("optimizer", "post_step")]
    # the same lines as MARKs, and the two automatic steps
    marks = [r[0] for r in query(db, "SELECT name FROM events WHERE kind = 5 AND name LIKE "
                                     "'memscope-module:%' ORDER BY id")]
    assert marks == ["memscope-module:" + l for l in lines]
    assert query(db, "SELECT count(*) FROM events WHERE kind = 4") == [(2,)]
