"""memscope.watcher on real torch: the op that writes a watched tensor is named, ops that
only read it are not; checksum CSV and full-content files as msMemScope; bad arguments."""
import glob
import os
import subprocess

import pytest

from mstorch_util import PYTHON, env, query, run

SCRIPT = r'''
import torch, memscope
from memscope import watcher
torch.set_num_threads(1)
watcher.set_output_dir("out")
w = torch.arange(16, dtype=torch.float32)
other = torch.ones(16)
watcher.watch(w, name="w", dump_nums=-1)
s = w.sum()                 # reads w
m = torch.mul(w, 2)         # reads w
other.add_(1)               # writes another tensor
w.add_(other)               # writes w: the one to name
v = w.view(4, 4)            # a view: no write
watcher.remove(w)
w.mul_(3)                   # not watched any more
for r in watcher.report():
    print("REPORT", r["name"], r["op"], r["call"])
for c in watcher.changes():
    print("CHANGE", c["name"], c["op"])
'''


def test_watch_names_the_writer_only(tmp_path):
    db, p = run(tmp_path, SCRIPT)
    lines = p.stdout.splitlines()
    assert "REPORT w aten::add_ 2" in lines, p.stdout
    assert [l for l in lines if l.startswith("CHANGE")] == ["CHANGE w aten::add_"]
    assert "memscope watch: w first changed by aten::add_ (call 2)" in p.stderr
    marks = [r[0] for r in query(db, "SELECT name FROM events WHERE kind = 5 AND name LIKE "
                                     "'memscope-watch:%'")]
    assert len(marks) == 1 and marks[0].startswith("memscope-watch:name=w;op=aten::add_;call=2;")
    csvs = glob.glob(str(tmp_path / "out" / "watch_dump" /
                         "watch_dump_data_check_sum_cpu_*.csv"))
    assert len(csvs) == 1
    rows = open(csvs[0]).read().splitlines()
    assert rows[0] == "Tensor info,Check data sum"
    names = [r.split(",")[0] for r in rows[1:]]
    # before and after each of the 5 ops while watched: sum, mul, add_ (other), add_ (w), view
    assert names == ["aten::sum_1-w_0_before.bin", "aten::sum_1-w_0_after.bin",
                     "aten::mul_1-w_0_before.bin", "aten::mul_1-w_0_after.bin",
                     "aten::add__1-w_0_before.bin", "aten::add__1-w_0_after.bin",
                     "aten::add__2-w_0_before.bin", "aten::add__2-w_0_after.bin",
                     "aten::view_1-w_0_before.bin", "aten::view_1-w_0_after.bin"]
    sums = [r.split(",")[1] for r in rows[1:]]
    assert all(len(s) == 16 for s in sums)
    assert len(set(sums[:7])) == 1 and sums[7] != sums[6] and len(set(sums[7:])) == 1


CLI_SCRIPT = r'''
import torch
torch.set_num_threads(1)
a = torch.ones(8)
b = torch.mul(a, 2)        # start: its output is watched
c = b.sum()                # reads
b.add_(1)                  # writes
d = torch.neg(b)           # end
b.add_(1)                  # after the end: not dumped
print(float(c), float(d.sum()))
'''


def test_cli_watch_full_content(tmp_path):
    db, p = run(tmp_path, CLI_SCRIPT, args=("-m", "memscope.torch"),
                extra_env={"MEMSCOPE_WATCH": "aten::mul,aten::neg,full-content",
                           "MEMSCOPE_OUTPUT_DIR": str(tmp_path / "out")})
    d = tmp_path / "out" / "watch_dump"
    bins = sorted(os.listdir(d))
    assert "aten::mul_1-aten::mul_0_after.bin" in bins
    assert "aten::add__1-aten::mul_0_before.bin" in bins
    assert "aten::neg_1-aten::mul_0_after.bin" in bins
    assert not any(b.startswith("aten::add__2") for b in bins)
    import struct
    raw = (d / "aten::add__1-aten::mul_0_after.bin").read_bytes()
    assert struct.unpack("8f", raw) == (3.0,) * 8
    assert "memscope watch: aten::mul first changed by aten::add_ (call 1)" in p.stderr


def _py(code):
    return subprocess.run([PYTHON, "-c", code], env=env(), capture_output=True, text=True)


@pytest.mark.parametrize("call, exc, text", [
    ("watcher.watch('x', name='n')", "TypeError", "expects a torch.Tensor or an int address"),
    ("watcher.watch(12345, name='n')", "TypeError", "length=<bytes> is required"),
    ("watcher.watch(t)", "TypeError", "name= is required"),
    ("watcher.watch(t, name='n' * 65)", "ValueError", "1 to 64 characters"),
    ("watcher.watch(t, name='n', dump_nums=0)", "ValueError", "dump_nums"),
    ("watcher.watch(t, t, name='n')", "TypeError", "exactly one positional argument"),
    ("watcher.watch(-1, length=4, name='n')", "ValueError", "positive"),
    ("watcher.remove(t)", "ValueError", "nothing is watched"),
])
def test_watch_bad_arguments(call, exc, text):
    r = _py("import torch\nfrom memscope import watcher\nt = torch.zeros(4)\n"
            "try:\n    %s\nexcept %s as e:\n    print('OK', e)\n" % (call, exc))
    assert r.returncode == 0 and r.stdout.startswith("OK") and text in r.stdout, \
        r.stdout + r.stderr


def test_crc64_matches_msmemscope_variant():
    r = _py("from memscope import _native\nfrom memscope.torch import _backend as b\n"
            "import os\nfor n in (0, 1, 7, 64, 1000):\n    d = os.urandom(n)\n"
            "    assert _native.crc64(d) == b.crc64_bytes(d), n\n"
            "print('%016x' % b.crc64_bytes(b'123456789'))\n")
    assert r.returncode == 0, r.stderr
    # Reflected-table update with the non-reflected ECMA polynomial, init/xorout all ones.
    assert r.stdout.strip() == "%016x" % _crc_ref(b"123456789")


def _crc_ref(data):
    c = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ 0x42F0E1EBA9EA3693 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFFFFFFFFFF


CONFIG_SCRIPT = r'''
import memscope
memscope.config(format="csv", output_path="script_out", watch="aten::add,aten::neg")
''' + CLI_SCRIPT


def test_command_line_wins_over_config(tmp_path):
    """issue 18 item 7: the script's config(format=, output_path=, watch=) does not override
    `memscope run --watch` and -o; memscope says so."""
    db, p = run(tmp_path, CONFIG_SCRIPT,
                opts=("--call-stack=c:0", "--watch=aten::mul,aten::neg,full-content"))
    assert db.exists() and not (tmp_path / "script_out").exists()
    bins = sorted(os.listdir(tmp_path / "watch_dump"))   # the CLI's output directory
    assert "aten::mul_1-aten::mul_0_after.bin" in bins
    assert not any("aten::add_0" in b for b in bins)      # not the script's watch
    assert "--watch=aten::mul,aten::neg,full-content` rules; ignored" in p.stderr
    assert "the command line's --format rules; ignored" in p.stderr


LOOP_SCRIPT = r'''
import torch
torch.set_num_threads(1)
a = torch.ones(8)
for _ in range(6):
    b = torch.mul(a, 2)        # start: a new output watched each time
    c = b.sum()                # reads only
    d = torch.neg(c)           # end
'''


def test_unchanged_watch_said_once(tmp_path):
    """issue 18 item 11: a --watch whose start op runs every iteration said `not changed by
    any op` once per iteration; now once, with the count."""
    db, p = run(tmp_path, LOOP_SCRIPT, opts=("--call-stack=c:0", "--watch=aten::mul,aten::neg"))
    lines = [l for l in p.stderr.splitlines() if l.startswith("memscope watch:")]
    assert lines == ["memscope watch: aten::mul not changed by any op (watched 6 times)"]


def test_msmemscope_op_names_and_a_watch_that_matches_nothing(tmp_path):
    """issue 18 item 8: --watch with msMemScope's op names (torch._ops.aten.mul.default) matched
    nothing and said nothing; now they name the same ops, and a start op that never runs is
    said at exit."""
    db, p = run(tmp_path, CLI_SCRIPT, opts=(
        "--call-stack=c:0",
        "--watch=torch._ops.aten.mul.Tensor,torch._ops.aten.neg.default,full-content"))
    bins = sorted(os.listdir(tmp_path / "watch_dump"))
    assert "aten::mul_1-aten::mul_0_after.bin" in bins
    assert "memscope watch: aten::mul first changed by aten::add_ (call 1)" in p.stderr
    sub = tmp_path / "none"
    sub.mkdir()
    db, p = run(sub, CLI_SCRIPT, opts=("--call-stack=c:0", "--watch=aten::conv2d,aten::neg"))
    assert "memscope watch: no op named aten::conv2d ran: nothing was watched" in p.stderr
