"""A PyTorch script without steps that keeps a little every iteration and frees it all before
it exits (issue 18 item 5): nothing is live at exit and no step ever ended, and `analyze leaks`
still names the script's line that grew, ahead of `import torch` (whose memory is set up in
the first tenths of the run and then stays)."""
from mstorch_util import analyze, run

SCRIPT = r'''
import torch
torch.set_num_threads(1)
keep = []
w = torch.randn(64, 64)
for i in range(20000):
    y = (torch.randn(32, 64) @ w).relu()
    keep.append(y.sum(0, keepdim=True).repeat(1, 4) * 1.0)   # LEAK: 1 KiB kept per iteration
del keep
'''
LEAK_LINE = SCRIPT.splitlines().index(
    "    keep.append(y.sum(0, keepdim=True).repeat(1, 4) * 1.0)   # LEAK: 1 KiB kept per iteration") + 1


def test_growth_without_steps_names_the_leaking_line(tmp_path):
    db, _ = run(tmp_path, SCRIPT, opts=("--call-stack=python:32",))
    d = analyze(db, "leaks")
    assert d["step_check"]["steps_recorded"] is False
    heap = [g for g in d["growth_without_steps"] if g["layer"] == "heap"]
    assert len(heap) == 1, d["growth_without_steps"]
    top = heap[0]["by_site"][0]
    assert top["site"].endswith("prog.py:%d)" % LEAK_LINE), heap[0]["by_site"][:3]
    # about 1 KiB per iteration, 20000 iterations: most of it is live at the peak
    assert top["live"][-1] >= 10 * 1024 * 1024, top
    assert all(a <= b for a, b in zip(top["live"], top["live"][1:])), top
