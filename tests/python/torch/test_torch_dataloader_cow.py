"""Copy-on-write traced to the objects (docs/usage.md): a PyTorch CPU DataLoader with
num_workers=2 over a dataset holding a Python list of objects. Each worker reads every item of
its batches, which writes the items' reference counts: the pages holding them become the
worker's own copies. `memscope analyze usage` attributes the workers' copies to the line that
made the list (the dataset's `self.samples = [...]`), and says so in a copy_on_write finding.

Each worker, after its last item, waits until the usage sampler has walked its pagemap (a
sample of it with the pages flag, 32, taken after the reading, in usage-<pid>.msu): no timing
in the expectations."""
import subprocess

import pytest

torch = pytest.importorskip("torch")

from mstorch_util import PYTHON, analyze, env, memscope_bin, query  # noqa: E402

MIB = 1 << 20
N = 300_000  # 89-byte string objects, 27 MiB; each worker reads every other 1,000 of them

SCRIPT = r'''
import os, struct, time
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __init__(self, n):
        self.samples = [("item-%d" % i) * 4 for i in range(n)]  # COW LINE

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return len(self.samples[i])


def walked_since(path, since):
    with open(path, "rb") as f:
        data = f.read()
    for at in range(16, len(data) - 95, 96):
        ts, pid, flags = struct.unpack_from("<QII", data, at)
        if ts >= since and pid == os.getpid() and flags & 32:
            return True
    return False


class Waiting(Items):
    """Holds each worker after the last item of its last batch until the sampler has walked it
    (a worker process ends with os._exit: nothing runs at its end)."""

    def __getitem__(self, i):
        v = super().__getitem__(i)
        if (i >= len(self.samples) - 2 * 1000 and i % 1000 == 999 and
                "MEMSCOPE_TRACE_DIR" in os.environ):
            since = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            path = "%s/usage-%d.msu" % (os.environ["MEMSCOPE_TRACE_DIR"], os.getppid())
            for _ in range(60000):
                if walked_since(path, since):
                    break
                time.sleep(0.001)
        return v


if __name__ == "__main__":
    ds = Waiting(N_ITEMS)
    total = 0
    for batch in DataLoader(ds, batch_size=1000, num_workers=2, shuffle=False):
        total += int(batch.sum())
    print("dataloader ok", total)
'''


def test_dataloader_workers_copies_attributed_to_the_dataset_line(tmp_path):
    script = SCRIPT.replace("N_ITEMS", str(N))
    line = [i + 1 for i, l in enumerate(script.splitlines()) if "# COW LINE" in l][0]
    src = tmp_path / "prog.py"
    src.write_text(script)
    db = tmp_path / "run.db"
    # the compact database (the default): importing torch with PYTHONMALLOC=malloc makes 17
    # million events, which a full database would write row by row for minutes
    p = subprocess.run([memscope_bin(), "run", "-q", "-o", str(db), "--call-stack=python:16",
                        "--usage-interval=0.05", "--", PYTHON, str(src)],
                       env=env(), cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "dataloader ok" in p.stdout
    rep = analyze(db, "usage")
    workers = [q for q in rep["processes"] if q["cow_private_bytes"] is not None]
    assert len(workers) == 2, rep["processes"]
    findings = {f["pid"]: f for f in rep["findings"] if f["kind"] == "copy_on_write"}
    for w in workers:
        sites = w["cow_sites"]
        assert sites, w
        top = sites[0]
        # the list's strings: most of what each worker copied, in blocks of the dataset's line
        assert top["site"].endswith("prog.py:%d" % line) or ("prog.py:%d" % line) in top["site"], \
            sites
        assert top["bytes"] >= 8 * MIB, sites
        assert top["bytes"] >= 0.5 * w["cow_private_bytes"], (top, w["cow_private_bytes"])
        assert w["pid"] in findings, rep["findings"]
        assert ("prog.py:%d" % line) in findings[w["pid"]]["message"]
    rows = query(db, "SELECT count(*) FROM usage_cow")
    assert rows[0][0] == 2
