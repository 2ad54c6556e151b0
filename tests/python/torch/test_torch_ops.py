"""memscope.torch op recording switched on from the environment (what `memscope run
--events=...` hands the program), and bad arguments to install_hooks()/tag()."""
import subprocess

import pytest

from mstorch_util import PYTHON, env, query, run

SCRIPT = r'''
import torch
torch.set_num_threads(1)
a = torch.ones(64)
b = torch.mul(a, 2)
b.add_(a)
print(float(b.sum()))
'''
OPS = ["aten::ones", "aten::mul", "aten::add_", "aten::sum", "aten::_local_scalar_dense"]


@pytest.mark.parametrize("events, want_access", [("alloc,free,access", True),
                                                 ("alloc,free,launch", False)])
def test_autostart_from_environment(tmp_path, events, want_access):
    db, _ = run(tmp_path, SCRIPT, args=("-m", "memscope.torch"),
                extra_env={"MEMSCOPE_EVENTS": events})
    assert [r[0] for r in query(db, "SELECT name FROM ranges ORDER BY id")] == OPS
    acc = query(db, "SELECT name, flags FROM events WHERE kind = 8 ORDER BY id")
    if want_access:
        # add_ writes b (self, Tensor(a!)) and reads a: two storages, one access each
        assert ("aten::add_", 2) in acc and ("aten::add_", 1) in acc
        assert ("aten::mul", 1) in acc and ("aten::mul", 2) in acc
        # msMemScope's ACCESS Attr: the tensor's dtype, shape, format, the block's pool
        got = query(db, "SELECT DISTINCT json_extract(Attr, '$.type'), json_extract(Attr, "
                        "'$.dtype'), json_extract(Attr, '$.shape'), json_extract(Attr, "
                        "'$.format') FROM memscope_dump WHERE Event = 'ACCESS' AND Name = "
                        "'aten::mul'")
        assert got == [("HOST", "torch.float32", "[64]", "contiguous")]
    else:
        assert acc == []


def test_nothing_without_environment(tmp_path):
    db, _ = run(tmp_path, SCRIPT, args=("-m", "memscope.torch"))
    assert query(db, "SELECT count(*) FROM ranges") == [(0,)]


@pytest.mark.parametrize("call, exc", [
    ("mt.install_hooks('model')", "TypeError"),
    ("mt.install_hooks(m, 'opt')", "TypeError"),
    ("mt.install_hooks(m, name='a@b')", "ValueError"),
    ("mt.install_hooks()", "ValueError"),
    ("mt.tag(torch.ones(2), 3)", "TypeError"),
])
def test_bad_arguments(call, exc):
    code = ("import torch\nimport memscope.torch as mt\nm = torch.nn.Linear(2, 2)\n"
            "try:\n    %s\nexcept %s as e:\n    print('OK', e)\n" % (call, exc))
    r = subprocess.run([PYTHON, "-c", code], env=env(), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("OK"), r.stdout + r.stderr
