"""memscope.monitor (Tiny-Torch's memory API, msprof's usage monitor) and `python3 -m memscope`:
known answers (an OOM warning against a 300 MiB limit, a leak count, fragmentation of a known
free list) and each class's contract (docs/python.md, docs/cli.md)."""
import json
import mmap
import os
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, env, memscope_bin, script

import memscope
from memscope import _native, monitor

MIB = 1 << 20


def run_traced(tmp_path, name, *args):
    out = str(tmp_path / "run")
    r = subprocess.run([memscope_bin(), "run", "-q", "-o", out, "--", PYTHON, script(name),
                        *args], env=env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def run_plain(name, *args):
    r = subprocess.run([PYTHON, script(name), *args], env=env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr


# ---- the OOM warning's known answer ----

def check_warning(res):
    w = res["warning"]
    assert w is not None, "no warning before 280 MiB of a 300 MiB limit"
    assert w["risk_level"] in ("high", "critical")
    assert w["device_id"] == -1 and w["capacity_source"] == "limit"
    assert w["capacity_bytes"] == 300 * MIB
    true_rate = res["grown_bytes"] / res["seconds"]  # what the script really did (~50 MiB/s)
    assert abs(w["growth_rate_mb_per_sec"] * MIB - true_rate) <= 0.3 * true_rate
    truth = (w["capacity_bytes"] - w["used_bytes"]) / true_rate
    assert abs(w["predicted_oom_time_seconds"] - truth) <= 0.5 * truth
    assert 0 < w["confidence"] <= 1
    assert abs(w["current_usage_percent"] - 100.0 * w["used_bytes"] / (300 * MIB)) < 1e-9


def test_oom_warning_names_the_growing_line(tmp_path):
    out = str(tmp_path / "oom.json")
    run_traced(tmp_path, "oom_grow.py", out)
    res = json.load(open(out))
    assert res["traced"]
    check_warning(res)
    top = res["warning"]["top_sites"][0]
    assert top["site"].endswith(res["line"] + ")"), top  # "<module> (.../oom_grow.py:24)"
    # the growing line holds the live heap: 5 MiB blocks (and the list), at least the 0.8 s of
    # growth the forecast needs before it may warn
    assert top["bytes"] >= 0.8 * res["warning"]["live_heap_bytes"]
    assert top["bytes"] // (5 * MIB) >= 4
    assert res["line"] in res["warning"]["recommendation"]
    assert res["line"] in res["why"]


def test_oom_warning_traced_in_process(tmp_path):
    """memscope.start() instead of `memscope run`: the same warning, from the same trace."""
    out = str(tmp_path / "oom.json")
    run_plain("oom_grow.py", out, str(tmp_path / "out"))
    res = json.load(open(out))
    assert res["traced"]
    check_warning(res)
    assert res["warning"]["holders_note"] is None
    assert res["warning"]["top_sites"][0]["site"].endswith(res["line"] + ")")


def test_oom_warning_untraced_says_what_is_missing():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "oom.json")
        run_plain("oom_grow.py", out)
        res = json.load(open(out))
    assert not res["traced"]
    check_warning(res)
    assert res["warning"]["top_sites"] == []
    assert res["warning"]["holders_note"] == monitor.NOT_TRACED
    assert res["why"] == monitor.NOT_TRACED


# ---- leaks ----

def test_leak_count_known_answer(tmp_path):
    out = str(tmp_path / "leaks.json")
    run = run_traced(tmp_path, "leak_count.py", out)
    res = json.load(open(out))
    assert res["note"] is None
    assert res["leaks"] == 1
    (site,) = res["sites"]
    assert site["site"].endswith(res["line"] + ")")
    assert site["blocks"] in (20000, 20001)  # the kept blocks (+ the last of the loop's)
    # the same verdict from `memscope analyze leaks` on the run's database
    db = [os.path.join(dp, f) for dp, _, fs in os.walk(run) for f in fs if f.endswith(".db")]
    r = subprocess.run([memscope_bin(), "analyze", "leaks", "--json", db[0]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"]["leak"] is True
    assert res["line"] + ")" in r.stdout


def test_leak_count_untraced_is_zero_and_says_why(tmp_path):
    out = str(tmp_path / "leaks.json")
    run_plain("leak_count.py", out)
    res = json.load(open(out))
    assert res["leaks"] == 0 and res["sites"] == []
    assert res["note"] == monitor.NOT_TRACED


def test_leak_detector_capacity():
    with pytest.raises(ValueError):
        memscope.MemoryLeakDetector(capacity=0)
    assert memscope.MemoryLeakDetector(capacity=7).capacity == 7


# ---- fragmentation ----

def test_fragmentation_known_free_lists():
    f = memscope.FragmentationAnalyzer.fragmentation
    assert f([100, 50, 50]) == 0.5          # (200 - 100) / 200
    assert f([4096]) == 0.0                 # one free block: none fragmented
    assert f([]) == 0.0                     # nothing free
    assert f([1, 1, 1, 1]) == 0.75
    r = memscope.FragmentationAnalyzer().analyze(free_blocks=[3 * MIB, MIB, 0])
    assert r == {"fragmentation": 0.25, "free_bytes": 4 * MIB, "largest_free_block": 3 * MIB,
                 "free_blocks": 2, "source": "given"}


def test_fragmentation_absent_on_the_host():
    if monitor._torch_cuda() is not None:
        pytest.skip("CUDA is available: the pool is read")
    r = memscope.FragmentationAnalyzer().analyze()
    assert r["fragmentation"] is None and "CUDA is not available" in r["reason"]


# ---- the C helpers: the size rule and the forecaster ----

def test_sizes_by_memscopes_rule():
    assert monitor.parse_size("300 MiB") == 300 * MIB
    assert monitor.parse_size("1.5GiB") == 3 << 29
    assert monitor.parse_size("24 MB") == 24 * MIB   # MB is MiB, as everywhere in memscope
    assert monitor.parse_size(4096) == 4096
    for bad in ("300 mebibytes", "-1", "", "1e3", 0, -5, True, None):
        with pytest.raises(ValueError):
            monitor.parse_size(bad)
    with pytest.raises(ValueError):
        memscope.OOMDetector(limit="lots")
    with pytest.raises(ValueError):
        memscope.OOMDetector(threshold=150)
    assert memscope.OOMDetector(limit="300 MiB").limit == 300 * MIB


def test_forecast_known_lines():
    xs = [0.1 * i for i in range(20)]
    fc = _native.forecast(xs, [5 + 10 * x for x in xs], 100.0)
    assert fc["points"] == 11 and fc["status"] == "predicted"   # the recent half: 9..19
    assert fc["slope"] == pytest.approx(10.0) and fc["at"] == pytest.approx(9.5)
    flat = _native.forecast(xs, [7.0] * 20, 100.0)
    assert flat["status"] == "not_growing" and flat["at"] is None
    saw = _native.forecast(xs, [0.0, 1.0] * 10, 100.0)           # no significant growth
    assert saw["status"] == "not_growing"
    assert _native.forecast(xs, [200.0] * 20, 100.0)["status"] == "reached"
    far = _native.forecast(xs, [x * 1e-3 for x in xs], 100.0)  # 10x beyond the span fitted
    assert far["status"] == "too_short"


def test_forecast_is_analyze_trends(tmp_path):
    """One forecaster: the fit of `memscope analyze trend` over its samples is the one
    memscope._native.forecast gives on the same samples."""
    out = str(tmp_path / "leaks.json")
    run = run_traced(tmp_path, "leak_count.py", out)
    db = [os.path.join(dp, f) for dp, _, fs in os.walk(run) for f in fs if f.endswith(".db")][0]
    r = subprocess.run([memscope_bin(), "analyze", "trend", "--json", "--limit", "1 GiB", db],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)
    xs = [s["offset_ns"] / 1e9 for s in t["samples"]]
    ys = [float(s["live_bytes"]) for s in t["samples"]]
    fc = _native.forecast(xs, ys, float(1 << 30))
    assert fc["points"] == t["tail_fit"]["points"]
    assert fc["slope"] == pytest.approx(t["tail_fit"]["slope"], rel=1e-6)
    assert fc["r2"] == pytest.approx(t["tail_fit"]["r2"], rel=1e-6, abs=1e-9)
    assert fc["status"] == t["time_to_limit"]["status"]


# ---- the OOM detector's levels ----

def test_risk_levels():
    d = memscope.OOMDetector(threshold=85.0, limit="1 GiB")
    R = memscope.RiskLevel
    assert [lv.value for lv in R] == ["low", "medium", "high", "critical"]
    assert d._level(10.0, None) is R.LOW
    assert d._level(65.0, None) is R.MEDIUM     # threshold - 20
    assert d._level(85.0, None) is R.HIGH
    assert d._level(95.0, None) is R.CRITICAL
    assert d._level(10.0, 100.0) is R.MEDIUM
    assert d._level(10.0, 30.0) is R.HIGH
    assert d._level(10.0, 10.0) is R.CRITICAL


def test_oom_detector_check_without_growth():
    got = []
    d = memscope.OOMDetector(limit="64 GiB", warning_callback=got.append)
    d.add_warning_callback(got.append)
    with pytest.raises(TypeError):
        d.add_warning_callback(42)
    p = d.check()
    assert p.risk_level is memscope.RiskLevel.LOW and got == []
    assert p.capacity_bytes == 64 << 30 and p.device_id == -1
    assert p.predicted_oom_time_seconds is None and p.growth_rate_mb_per_sec == 0.0
    u = _native.usage_read(os.getpid(), False)
    assert p.used_bytes > 0 and u["rss_anon"] <= p.used_bytes * 2
    d2 = memscope.OOMDetector(limit=p.used_bytes // 2)  # already over the limit
    p2 = d2.check()
    assert p2.risk_level is memscope.RiskLevel.CRITICAL
    assert p2.predicted_oom_time_seconds == 0.0
    assert p2.current_usage_percent > 100


# ---- msprof's usage monitor ----

def test_usage_monitor_samples():
    m = memscope.MemoryUsageMonitor(capacity=3)
    first = m.sample_memory_usage()
    assert set(first) == {"timestamp", "heap_usage", "stack_usage", "gpu_usage", "shared_usage"}
    assert first["stack_usage"] > 0 and first["heap_usage"] > 0
    big = bytearray(16 * MIB)          # the heap grows by it (glibc counts mmapped chunks)
    shm = mmap.mmap(-1, 8 * MIB, flags=mmap.MAP_SHARED)
    for off in range(0, 8 * MIB, 4096):  # touch every page: shared memory
        shm[off] = 1
    s = m.sample_memory_usage()
    assert s["heap_usage"] - first["heap_usage"] >= 16 * MIB
    assert 8 * MIB <= s["shared_usage"] - first["shared_usage"] < 9 * MIB
    for _ in range(3):
        m.sample_memory_usage()
    got = m.get_samples()
    assert len(got) == 3 and got[0]["timestamp"] <= got[-1]["timestamp"]
    shm.close()
    del big
    with pytest.raises(ValueError):
        memscope.MemoryUsageMonitor(capacity=0)


# ---- the profiler's report and the debugger ----

REPORT_KEYS = {"timestamp", "interval_s", "duration_s", "processes", "devices", "summary"}
FIGURES = {"rss_bytes", "rss_anon_bytes", "pss_bytes", "uss_bytes", "stack_bytes", "shmem_bytes",
           "swap_bytes", "threads"}


def test_profiler_report_is_memscope_usage_shape(tmp_path):
    p = memscope.MemoryProfiler(sampling_interval=0.05)
    p.start_monitoring()
    time.sleep(0.3)
    p.stop_monitoring()
    n = p.report()["processes"][str(os.getpid())]["samples"]
    time.sleep(0.15)
    path = str(tmp_path / "report.json")
    assert p.generate_report(path) == path
    r = json.load(open(path))
    assert set(r) == REPORT_KEYS and r["interval_s"] == 0.05
    proc = r["processes"][str(os.getpid())]
    assert proc["samples"] == n >= 2   # nothing sampled after stop_monitoring()
    assert set(proc["current"]) == FIGURES and set(proc["peak"]) == FIGURES
    assert proc["peak"]["rss_bytes"] >= proc["current"]["rss_bytes"] > 0
    if monitor._torch_cuda() is None:
        assert r["devices"] == {} and "not sampled" in r["summary"]["devices"]
    assert r["summary"]["processes"] == 1 and r["summary"]["samples"] == n


def test_debugger_status_report():
    d = memscope.MemoryDebugger(limit="64 GiB")
    d.start_monitoring()
    time.sleep(0.2)
    rep = d.get_status_report()
    d.stop_monitoring()
    assert set(rep) == {"timestamp", "usage", "oom", "fragmentation", "leaks", "traced"}
    assert rep["oom"]["risk_level"] == "low" and rep["traced"] is False
    assert rep["leaks"] == {"count": 0, "sites": [], "note": monitor.NOT_TRACED}


# ---- python3 -m memscope ----

def cli(*args, timeout=60):
    return subprocess.run([PYTHON, "-m", "memscope", *args], env=env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args", [(), ("frobnicate",), ("profile", "--bogus"),
                                  ("oom", "--threshold", "150"), ("oom", "--limit", "lots"),
                                  ("monitor", "--interval", "0"), ("profile", "--pid", "x"),
                                  ("profile", "--devices", "-1"), ("leak",)])
def test_cli_usage_errors(args):
    r = cli(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "usage: python3 -m memscope" in r.stderr


def test_cli_profile_and_oom_of_a_process(tmp_path):
    child = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(30)"])
    try:
        out, svg = str(tmp_path / "p.json"), str(tmp_path / "p.svg")
        r = cli("profile", "--pid", str(child.pid), "--duration", "0.4", "--interval", "0.1",
                "--output", out, "--plot", svg)
        assert r.returncode == 0, r.stderr
        rep = json.load(open(out))
        assert set(rep) == REPORT_KEYS and list(rep["processes"]) == [str(child.pid)]
        assert rep["processes"][str(child.pid)]["samples"] >= 3
        assert open(svg).read().startswith("<svg")
        r = cli("oom", "--pid", str(child.pid), "--limit", "64 GiB", "--duration", "0.3")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("low: ") and "(limit)" in r.stdout
    finally:
        child.kill()
        child.wait()
    r = cli("profile", "--pid", str(child.pid), "--duration", "0.2")
    assert r.returncode == 1 and "could not be sampled" in r.stderr
    r = cli("profile")
    assert r.returncode == 2 and "nothing to sample" in r.stderr
    if monitor._torch_cuda() is None:
        r = cli("profile", "--devices", "0", "--duration", "0.1", timeout=120)
        assert r.returncode == 1 and "--devices needs torch with CUDA" in r.stderr


def test_cli_leak_runs_analyze_leaks(tmp_path):
    run = run_traced(tmp_path, "leak_count.py", str(tmp_path / "l.json"))
    db = [os.path.join(dp, f) for dp, _, fs in os.walk(run) for f in fs if f.endswith(".db")][0]
    e = env()
    e["MEMSCOPE"] = memscope_bin()
    r = subprocess.run([PYTHON, "-m", "memscope", "leak", db], env=e, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("leaks: LEAK: 1 call site keeps growing")


# ---- the CUDA paths, on a stand-in for torch.cuda (no GPU needed) ----

class FakeCuda:
    """torch.cuda as the monitor reads it: device 0 of 1000 MiB with 600 MiB used, 500 MiB of it
    allocated by PyTorch's pool, whose free blocks are 100, 50 and 50 MiB."""
    used = 600 * MIB

    def is_available(self):
        return True

    def device_count(self):
        return 1

    def mem_get_info(self, d=0):
        assert d == 0
        return 1000 * MIB - self.used, 1000 * MIB

    def memory_allocated(self, d=0):
        return 500 * MIB

    def memory_snapshot(self):
        blocks = [{"size": s * MIB, "state": st} for s, st in (
            (100, "inactive"), (300, "active_allocated"), (50, "inactive"),
            (200, "active_allocated"), (50, "inactive"))]
        return [{"device": 0, "blocks": blocks[:2]}, {"device": 0, "blocks": blocks[2:]},
                {"device": 1, "blocks": [{"size": 999 * MIB, "state": "inactive"}]}]


@pytest.fixture
def fake_cuda(monkeypatch):
    import types
    fake = types.SimpleNamespace(cuda=FakeCuda())
    monkeypatch.setitem(sys.modules, "torch", fake)
    return fake.cuda


def test_cuda_capacity_pool_and_report(fake_cuda, tmp_path):
    assert monitor._torch_cuda() is fake_cuda
    fr = memscope.FragmentationAnalyzer().analyze(0)
    assert fr == {"fragmentation": 0.5, "free_bytes": 200 * MIB, "largest_free_block": 100 * MIB,
                  "free_blocks": 3, "source": "torch.cuda.memory_snapshot"}
    got = []
    d = memscope.OOMDetector(threshold=50.0, warning_callback=got.append)
    p = d.check()
    assert (p.device_id, p.capacity_source, p.capacity_bytes, p.used_bytes) == \
        (0, "device", 1000 * MIB, 600 * MIB)
    assert p.current_usage_percent == 60.0 and p.risk_level is memscope.RiskLevel.HIGH
    (w,) = got
    assert w.fragmentation == 0.5 and w.largest_free_block == 100 * MIB
    assert "pool fragmentation 50%, largest free block 100.0 MiB" in w.why()
    s = memscope.MemoryUsageMonitor().sample_memory_usage()
    assert s["gpu_usage"] == 500 * MIB
    prof = memscope.MemoryProfiler()
    prof.sample()
    fake_cuda.used = 800 * MIB
    prof.sample()
    dev = prof.report()["devices"]["0"]
    assert dev["current_usage"] == {"allocated": 500 * MIB, "free": 200 * MIB,
                                    "total": 1000 * MIB, "utilization_percent": 80.0}
    assert dev["statistics"] == {"avg_utilization": 70.0, "max_utilization": 80.0,
                                 "samples_count": 2}


def test_detector_of_a_process_that_ends():
    child = subprocess.Popen([PYTHON, "-c", "pass"])
    d = memscope.OOMDetector(limit="1 GiB", pid=child.pid)
    child.wait()
    with pytest.raises(ProcessLookupError):
        d.check()
    d.start_monitoring()  # the thread ends by itself, without a traceback
    d._sampler._thread.join(timeout=60)
    assert d._sampler.ended
    d.stop_monitoring()
