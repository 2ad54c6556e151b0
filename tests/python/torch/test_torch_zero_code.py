"""Owners and steps with no change to the script (issue 18 items 1 and 2): under `memscope run`,
every optimizer's step tags weights, gradients and optimizer state and ends a memscope step,
without replacing optimizer.step (LR schedulers keep working); install_hooks() no longer
replaces it either; --step-on picks the optimizer that ends steps; a script that calls
memscope.step() itself is not counted twice."""
import json

from mstorch_util import analyze, query, run

# A CNN with SGD + momentum and a StepLR scheduler: nothing of memscope in it.
PLAIN = r'''
import json, warnings, torch
warnings.simplefilter("error")        # a warning (optimizer.step overridden) fails the script
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 6 * 6, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
for _ in range(4):
    x = torch.randn(8, 1, 8, 8)
    loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
nb = lambda t: t.numel() * t.element_size()
print(json.dumps({
    "weight": sum(nb(p) for p in model.parameters()),
    "gradient": sum(nb(p.grad) for p in model.parameters()),
    "optimizer_state": sum(nb(t) for s in opt.state.values() for t in s.values()
                           if torch.is_tensor(t)),
    "lr": opt.param_groups[0]["lr"],
}))
'''


def _steps(db):
    return query(db, "SELECT count(*) FROM steps WHERE end_event_id IS NOT NULL")[0][0]


def _tags(db, owner):
    return query(db, "SELECT count(*) FROM events WHERE kind = 5 AND name LIKE ?",
                 "memscope-tag:%owner=" + owner)[0][0]


def _node(tree, path):
    nodes, node = tree, None
    for name in path:
        node = next((c for c in nodes if c["name"] == name), None)
        if node is None:
            return 0
        nodes = node.get("children", [])
    return node["bytes"]


def test_unmodified_script_gets_steps_and_owners(tmp_path):
    db, p = run(tmp_path, PLAIN)
    want = json.loads(p.stdout.strip().splitlines()[-1])
    assert want["lr"] == 0.1 * 0.5 ** 4           # the scheduler saw every step
    assert _steps(db) == 4
    # 4 parameters: each step tags 4 weights, 4 gradients, 4 momentum buffers
    assert (_tags(db, "PTA@weight"), _tags(db, "PTA@gradient"),
            _tags(db, "PTA@optimizer_state")) == (16, 16, 16)
    tree = analyze(db, "decompose", "--step", "4")["tree"][0]["children"]
    for kind in ("weight", "gradient", "optimizer_state"):
        assert _node(tree, ["heap", "PTA", kind]) == want[kind], kind


def test_install_hooks_before_a_scheduler(tmp_path):
    """install_hooks() before StepLR(opt): the first opt.step() used to raise AttributeError
    ('Hooks' object has no attribute '_step_count'); after it, torch warned that
    optimizer.step() was overridden (the script turns warnings into errors)."""
    script = PLAIN.replace(
        "sched = torch.optim",
        "import memscope.torch as mt\n"
        "h = mt.install_hooks(model, opt, auto_step=True, log_path='mem.log')\n"
        "sched = torch.optim")
    db, p = run(tmp_path, script)
    assert json.loads(p.stdout.strip().splitlines()[-1])["lr"] == 0.1 * 0.5 ** 4
    assert _steps(db) == 4                        # auto_step and the zero-code step: once
    log = (tmp_path / "mem.log").read_text()
    assert log.count("pre_step") == 4 and log.count("post_step") == 4
    assert _tags(db, "PTA@gradient") == 16         # tagged once per step, not twice


TWO = r'''
import torch
torch.manual_seed(0)
g = torch.nn.Linear(4, 4)
d = torch.nn.Linear(4, 1)
og = torch.optim.Adam(g.parameters())
od = torch.optim.SGD(d.parameters(), lr=0.1)
for _ in range(3):
    for _ in range(2):                        # two discriminator steps per generator step
        od.zero_grad()
        d(g(torch.randn(2, 4)).detach()).sum().backward()
        od.step()
    og.zero_grad()
    d(g(torch.randn(2, 4))).sum().backward()
    og.step()
'''


def test_which_optimizer_ends_steps(tmp_path):
    counts = {}
    for on in ("auto", "Adam", "none"):
        sub = tmp_path / on
        sub.mkdir()
        db, _ = run(sub, TWO, opts=("--call-stack=c:0", "--step-on=" + on))
        counts[on] = _steps(db)
    # auto: the first optimizer that steps (SGD here, 6 steps)
    assert counts == {"auto": 6, "Adam": 3, "none": 0}


def test_script_that_steps_itself_is_not_counted_twice(tmp_path):
    script = PLAIN.replace("    sched.step()\n", "    sched.step()\n    memscope.step()\n")
    script = script.replace("import json, warnings, torch", "import json, warnings, torch\n"
                            "import memscope")
    db, _ = run(tmp_path, script)
    assert _steps(db) == 4


BOOM = r'''
import torch
import memscope.torch as mt

class Boom(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        raise ValueError("boom")

model = torch.nn.Sequential(torch.nn.Linear(8, 8), Boom())
h = mt.install_hooks(model, log=False)
try:
    model(torch.randn(4, 8))
except ValueError:
    pass
after = torch.empty(12345, dtype=torch.uint8)   # outside any forward
print(after.data_ptr())
'''


def test_forward_that_raises_leaves_no_owner(tmp_path):
    """issue 18 item 6: after a forward raised, the next allocation outside any forward had the
    owner PTA@activation@model@1 (the module that raised)."""
    db, p = run(tmp_path, BOOM)
    ptr = int(p.stdout.strip().splitlines()[-1])
    rows = query(db, "SELECT COALESCE(o.label, '') FROM blocks b LEFT JOIN owners o "
                     "ON o.id = b.owner_id WHERE b.addr = ? AND b.size = 12345", ptr)
    assert rows == [("",)]
    # while the forward ran, its allocations had the owners
    assert query(db, "SELECT count(*) FROM owners WHERE label = 'PTA@activation@model@1'")[0][0]


def test_zero_code_forward_that_raises_leaves_no_owner(tmp_path):
    """The same with the activation owners of --analysis=decompose (no install_hooks): the
    allocation after the raise has no owner, and the next forward is labelled again."""
    script = BOOM.replace("h = mt.install_hooks(model, log=False)\n", "").replace(
        "print(after.data_ptr())", "model[0](torch.randn(4, 8))\nprint(after.data_ptr())")
    db, p = run(tmp_path, script, opts=("--call-stack=c:0", "--analysis=decompose"))
    ptr = int(p.stdout.strip().splitlines()[-1])
    rows = query(db, "SELECT COALESCE(o.label, '') FROM blocks b LEFT JOIN owners o "
                     "ON o.id = b.owner_id WHERE b.addr = ? AND b.size = 12345", ptr)
    assert rows == [("",)]
    assert query(db, "SELECT count(*) FROM owners WHERE label = 'PTA@activation@model@1'")[0][0]
    assert "activation owners are off" not in p.stderr


CNN_TRACED = r'''
import torch
import memscope.torch as mt
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 6 * 6, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
h = mt.install_hooks(model, opt, log_path="mem.log")
for _ in range(8):
    x = torch.randn(8, 1, 8, 8)
    loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_memscope_own_allocations_are_not_the_programs(tmp_path):
    """issue 18 items 3 and 4: with ops, accesses and the module log, memscope's own Python
    bookkeeping (weakref finalizers of its live-tensor count, the hooks' lists, the tags'
    strings) was reported as the program's leaks, from dispatch.py's _Live.track; and the call
    site of an op's allocation was memscope's dispatch frame or torch's, not the user's line."""
    db, p = run(tmp_path, CNN_TRACED, opts=("--call-stack=python:32",
                                            "--events=alloc,free,access"))
    own = "substr(s.py_text, 1, instr(s.py_text || char(10), char(10)) - 1) LIKE '%/memscope/%'"
    # nothing memscope allocated after the warm-up step is still live at the end
    grown = query(db, "SELECT count(*), COALESCE(sum(b.size), 0) FROM blocks b JOIN stacks s "
                      "ON s.id = b.stack_id WHERE b.step >= 2 AND b.free_event_id IS NULL "
                      "AND " + own)[0]
    assert grown == (0, 0)
    rep = analyze(db, "leaks")
    sites = [l["site"] for l in rep["step_check"]["leaks"]]
    sites += [r["site"] for proc in rep["live_at_exit"] for r in proc.get("sites", [])]
    assert sites and not [s for s in sites if "/memscope/" in s]
    # an op's allocation is the user's line (prog.py), not torch's nor memscope's frame
    user = [s for s in sites if "/prog.py:" in s]
    assert user and all(s.startswith("<module> (") for s in user)
    step_sites = {l["site"] for l in rep["step_check"]["leaks"]}
    assert not [s for s in step_sites if "/torch/" in s]


def _activation_owners(db):
    return sorted(r[0] for r in query(db, "SELECT label FROM owners WHERE label LIKE "
                                          "'PTA@activation@%'"))


def test_activation_owners_without_code(tmp_path):
    """Under --analysis=decompose every module's forward labels its allocations (global module
    hooks), as install_hooks() does, on the unmodified script; without it, no hook runs."""
    db, p = run(tmp_path, PLAIN, opts=("--call-stack=c:0", "--analysis=decompose"))
    owners = _activation_owners(db)
    # the root and its four children, by their named_modules() paths
    for want in ("PTA@activation@model", "PTA@activation@model@0", "PTA@activation@model@1",
                 "PTA@activation@model@2", "PTA@activation@model@3"):
        assert want in owners, owners
    assert "activation owners are off" not in p.stderr
    # the forward's allocations land under the activations in the owner tree
    d = analyze(db, "decompose", "--step", "2")
    assert _node(d["tree"][0]["children"], ["heap", "PTA", "activation"]) > 0, d["tree"]
    # the same script without --analysis=decompose: no activation owner
    (tmp_path / "plain").mkdir()
    db2, _ = run(tmp_path / "plain", PLAIN)
    assert _activation_owners(db2) == []


FRAMEWORK = r'''
import sys, torch, memscope
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
try:
    memscope.init_framework_hooks("vllm_ascend", "11.0", "worker", "decompose")
except ValueError as e:
    print("refused:", e, file=sys.stderr)
assert memscope.init_framework_hooks("pytorch", "99.0+", "fsdp2", "decompose") is False
assert memscope.init_framework_hooks("pytorch", "1.0+", "module", "decompose") is True
memscope._native.mark("with")
model(torch.randn(4, 8)).sum().backward()
memscope.cleanup_framework_hooks()
memscope._native.mark("without")
model(torch.randn(4, 8)).sum().backward()
'''


def test_init_framework_hooks(tmp_path):
    """msMemScope's init_framework_hooks("pytorch", version, component, "decompose"): activation
    owners from then on, none after cleanup_framework_hooks(); a preset memscope lacks raises
    ValueError; a version key the running torch does not match installs nothing."""
    db, p = run(tmp_path, FRAMEWORK)
    assert "refused: init_framework_hooks(): memscope has presets for pytorch" in p.stderr
    assert "does not match version 99.0+" in p.stderr
    owners = _activation_owners(db)
    assert "PTA@activation@model@0" in owners and "PTA@activation@model@2" in owners, owners
    # the owner tags (MARKs of the owner stack) all fall between the two marks
    ids = dict(query(db, "SELECT name, id FROM events WHERE kind = 5 AND name IN "
                         "('with', 'without')"))
    assert query(db, "SELECT count(*) FROM blocks b JOIN owners o ON o.id = b.owner_id WHERE "
                     "o.label LIKE 'PTA@activation@%' AND b.alloc_event_id > ?",
                 ids["without"])[0][0] == 0
    assert query(db, "SELECT count(*) FROM blocks b JOIN owners o ON o.id = b.owner_id WHERE "
                     "o.label LIKE 'PTA@activation@%' AND b.alloc_event_id BETWEEN ? AND ?",
                 ids["with"], ids["without"])[0][0] > 0
