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


TWICE = r'''
import torch
import memscope.torch as mt
torch.manual_seed(0)
torch.set_num_threads(1)
class Twice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
    def forward(self, x):
        return self.lin(self.lin(x))   # the same module called twice in one forward
model = Twice()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
h = mt.install_hooks(model, opt, auto_step=True, rank=0)
for _ in range(2):
    loss = model(torch.randn(3, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
h.remove()
'''


def test_module_called_twice_pairs_its_backward(tmp_path):
    """Issue 18 item 9: a module called twice in a forward logs two pre_backward lines and two
    post_backward lines (one per call), each post after a pre, in every step."""
    run(tmp_path, TWICE)
    recs = [json.loads(l) for l in (tmp_path / "mem_trace_rank_0.log").read_text().splitlines()]
    for step in (1, 2):
        lin = [r["stage"] for r in recs if r["step"] == step and r["module"] == "lin"]
        assert lin.count("pre_forward") == lin.count("post_forward") == 2, lin
        assert lin.count("pre_backward") == 2 and lin.count("post_backward") == 2, lin
        back = [s for s in lin if s.endswith("_backward")]
        assert back.index("pre_backward") < back.index("post_backward"), back
        assert back[-1] == "post_backward", back
        root = [r["stage"] for r in recs if r["step"] == step and r["module"] == "model"]
        assert root.count("pre_backward") == root.count("post_backward") == 1, root


MEMTRACER = r'''
import torch
import memscope.torch as mt
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
tracer = mt.MemTracer("trace.log")
h = mt.install_hooks(m=model, opt=opt, tracer=tracer, auto_step=True)
def train():
    loss = model(torch.randn(5, 8)).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
train()
h.remove()
train()                                        # not logged: the hooks are gone
h = mt.install_hooks(model, opt, tracer)       # the same tracer, positionally: it goes on
train()
h.remove()
tracer.close()
for bad in (lambda: mt.install_hooks(m=model, opt=opt, tracer=tracer, log_path="x.log"),
            lambda: mt.install_hooks(model, m=model),
            lambda: mt.install_hooks(model, opt, tracer=object())):
    try:
        bad()
        print("accepted")
    except (TypeError, ValueError) as e:
        print("refused:", e)
'''


def test_memtracer_format(tmp_path):
    """Issue 18 item 9: install_hooks(m=, opt=, tracer=MemTracer(path)) logs MemTracer's lines:
    dict literals, steps from 0, class names, stages with a space, MiB under 'mem' with
    max_cached; the figures are the MARKs' (memscope's JSON) in MiB."""
    db, p = run(tmp_path, MEMTRACER)
    refused = [l for l in p.stdout.splitlines() if l.startswith(("refused", "accepted"))]
    assert len(refused) == 3 and all(l.startswith("refused: install_hooks()") for l in refused), \
        p.stdout
    assert not (tmp_path / "mem_trace_rank_0.log").exists()
    lines = (tmp_path / "trace.log").read_text().splitlines()
    recs = [ast.literal_eval(l) for l in lines]
    assert all(l == repr(r) for l, r in zip(lines, recs))
    stages = ("pre forward", "post forward", "pre backward", "post backward")
    for step in (0, 1):
        got = sorted((r["module"], r["stage"]) for r in recs if r["step"] == step)
        want = sorted([(m, s) for m in ("Sequential", "Linear", "ReLU", "Linear")
                       for s in stages] + [("SGD", "pre step"), ("SGD", "post step")])
        assert got == want, step
    assert {r["step"] for r in recs} == {0, 1}
    marks = [json.loads(r[0][len("memscope-module:"):]) for r in query(
        db, "SELECT name FROM events WHERE kind = 5 AND name LIKE 'memscope-module:%' "
            "ORDER BY id")]
    assert len(marks) == len(recs)
    top = 0
    for r, mk in zip(recs, marks):
        assert list(r) == ["step", "module", "stage", "mem"]
        assert list(r["mem"]) == ["allocated", "cached", "max_allocated", "max_cached"]
        assert r["module"] == mk["type"] and r["stage"] == mk["stage"].replace("_", " ")
        assert r["step"] == mk["step"] - 1
        mib = lambda n: round(n / 1048576.0, 4)
        assert r["mem"]["allocated"] == mib(mk["allocated"]) > 0
        assert r["mem"]["cached"] == mib(mk["reserved"])
        assert r["mem"]["max_allocated"] == mib(mk["max_allocated"])
        top = max(top, mk["reserved"])
        assert r["mem"]["max_cached"] == mib(top)
