"""The usage monitor in the in-process mode (memscope.config/start/stop in a plain python3, no
CLI): a helper process samples the program from /proc, and `memscope analyze usage` of the
database reports it, as for `memscope run` (docs/usage.md)."""
import json
import subprocess

from conftest import memscope_bin, query, run_py

MIB = 1 << 20


def test_inprocess_usage_samples(tmp_path):
    db = str(tmp_path / "ip.db")
    r = run_py("usage_inprocess.py", db, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "usage_inprocess ok" in r.stdout
    n, peak = query(db, "SELECT count(*), max(rss_anon) FROM usage_samples WHERE exited = 0")[0]
    assert n >= 2
    assert peak >= 64 * MIB
    a = subprocess.run([memscope_bin(), "analyze", "usage", "--json", db], capture_output=True,
                       text=True, timeout=120)
    assert a.returncode == 0, a.stderr
    rep = json.loads(a.stdout)
    assert len(rep["processes"]) == 1
    p = rep["processes"][0]
    assert p["samples"] >= 2 and p["peak_rss_anon_bytes"] >= 64 * MIB
    # the 64 MiB bytearray is live: not retained by the allocator
    assert p["peak_live_bytes"] >= 64 * MIB
    # the helper's own fork and exec are not recorded: one process
    assert query(db, "SELECT count(*) FROM processes")[0][0] == 1
