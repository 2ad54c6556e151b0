"""memscope.monitor: Tiny-Torch's memory tools and msprof's usage monitor, on memscope's figures
(docs/python.md, "Tiny-Torch's API").

  MemoryProfiler(sampling_interval=0.1)   samples this process and the CUDA devices; JSON report
  OOMDetector(threshold=85.0, limit=None, warning_callback=None)
                                          warns before an OOM: risk, growth, predicted time, and
                                          why (the top holders by call site and owner, from
                                          memscope's own recording when the process is traced)
  FragmentationAnalyzer                   msprof's (free - largest free block) / free
  MemoryLeakDetector(capacity=10000)      the default leak rule of `memscope analyze leaks`
  MemoryUsageMonitor(capacity=1000)       msprof's usage samples (heap, stack, GPU, shared)
  MemoryDebugger()                        all of them, with get_status_report()

The numbers come from memscope's C code through its extensions: /proc is read by the usage
monitor's reader (memscope._native.usage_read), sizes by the CLI's size rule (size_parse), the
forecast by the fit of `memscope analyze trend` (forecast), the holders and the leak count from
this process's own trace (memscope._store.live_holders). torch is imported only when it is
already loaded (CUDA figures); nothing here imports it.
"""
import collections
import enum
import json
import os
import re
import threading
import time

from . import _native
from . import _env

__all__ = ["RiskLevel", "OOMPrediction", "MemoryProfiler", "OOMDetector",
           "FragmentationAnalyzer", "MemoryLeakDetector", "MemoryUsageMonitor", "MemoryDebugger",
           "parse_size", "trace_file"]

MIB = 1 << 20

# Risk levels (docs/python.md): usage against the capacity, or the time the forecast gives.
CRITICAL_PERCENT = 95.0
CRITICAL_SECONDS = 10.0
HIGH_SECONDS = 30.0
MEDIUM_SECONDS = 120.0
MEDIUM_MARGIN = 20.0   # medium from threshold - 20 percent
# The forecast counts when the fit has at least this many samples (at 0.1 s: 0.8 s of growth).
MIN_FIT_POINTS = 8
WINDOW = 64            # samples kept by the OOMDetector: the forecaster fits the recent half
WARNING_REPEAT_S = 5.0  # a warning at the same level is repeated at most this often

NOT_TRACED = ("not traced: the holders by call site and owner come from memscope's own "
              "recording; run the program under `memscope run` or call memscope.start()")


class RiskLevel(enum.Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


_ORDER = {RiskLevel.LOW: 0, RiskLevel.MEDIUM: 1, RiskLevel.HIGH: 2, RiskLevel.CRITICAL: 3}


def parse_size(value):
    """Bytes from an int or a size text ("300 MiB", "1.5GiB", "4096"): memscope's one size
    rule (src/common/size.c; every unit a power of 1024). ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError("not a size: %r" % (value,))
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("a size must be positive: %r" % (value,))
        return value
    if isinstance(value, float) and value > 0:
        return int(value)
    if isinstance(value, str):
        return _native.size_parse(value)
    raise ValueError("not a size: %r" % (value,))


def trace_file(pid=None):
    """The trace file this process writes (its newest image's `<pid>.<n>.mst`) when it is
    traced: under `memscope run` (MEMSCOPE_TRACE_DIR) or after memscope.start(); else None."""
    pid = os.getpid() if pid is None else pid
    d = None
    try:
        import memscope
        d = memscope._state.get("trace_dir") if memscope._state.get("started") else None
    except (ImportError, AttributeError):
        pass
    if d is None and _native.preloaded() and _native.available():
        d = _env.get(_env.TRACE_DIR)
    if not d:
        return None
    best, best_n = None, -1
    try:
        names = os.listdir(d)
    except OSError:
        return None
    for name in names:
        m = re.fullmatch(r"(\d+)\.(\d+)\.mst", name)
        if m and int(m.group(1)) == pid and int(m.group(2)) > best_n:
            best, best_n = os.path.join(d, name), int(m.group(2))
    return best


def _holders(top=5):
    """This process's live heap by call site and owner from its own trace, or None (with the
    reason) when it is not traced or the trace cannot be read."""
    path = trace_file()
    if path is None:
        return None, NOT_TRACED
    try:
        from . import _store
        return _store.live_holders(path, top), None
    except (ImportError, OSError) as e:
        return None, "the trace could not be read: %s" % e


def _torch_cuda():
    """torch.cuda when torch is already imported and CUDA is available, else None."""
    import sys
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return torch.cuda
    except Exception:  # a broken CUDA set-up: no device figures
        pass
    return None


def _meminfo():
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return out


# ---- fragmentation ----

class FragmentationAnalyzer:
    """msprof's fragmentation: (free - largest free block) / free, 0 when nothing is free.

    fragmentation(free_blocks) computes it for a list of free block sizes; analyze(device)
    reads a caching allocator's free blocks: PyTorch's CUDA pool (torch.cuda.memory_snapshot:
    the inactive blocks of its segments) when CUDA is there. On the host there is no caching
    allocator in play: analyze() says so (fragmentation None)."""

    @staticmethod
    def fragmentation(free_blocks):
        sizes = [int(s) for s in free_blocks if int(s) > 0]
        free = sum(sizes)
        if free == 0:
            return 0.0
        return (free - max(sizes)) / free

    def analyze(self, device=None, free_blocks=None):
        """A dict: fragmentation, free_bytes, largest_free_block, free_blocks (count), source;
        fragmentation None with a reason when no free list is known."""
        source = "given"
        if free_blocks is None:
            cuda = _torch_cuda()
            if cuda is None:
                return {"fragmentation": None, "free_bytes": None, "largest_free_block": None,
                        "free_blocks": None, "source": None,
                        "reason": "no caching allocator in play: CUDA is not available"}
            dev = 0 if device is None else int(device)
            free_blocks = []
            for seg in cuda.memory_snapshot():
                if seg.get("device", dev) != dev:
                    continue
                for b in seg.get("blocks", ()):
                    if b.get("state") == "inactive":
                        free_blocks.append(b.get("size", 0))
            source = "torch.cuda.memory_snapshot"
        sizes = [int(s) for s in free_blocks if int(s) > 0]
        return {"fragmentation": self.fragmentation(sizes), "free_bytes": sum(sizes),
                "largest_free_block": max(sizes) if sizes else 0, "free_blocks": len(sizes),
                "source": source}


# ---- leaks ----

class MemoryLeakDetector:
    """msprof's leak detector on memscope's rule: detect_memory_leaks() returns the number of
    call sites that the default rule of `memscope analyze leaks` (the growth rule, on tenths of
    the allocations, "now" standing for the peak) calls leaks, among this process's live heap
    blocks read from its own trace. capacity: the most call sites listed in the report
    (get_leaks()); the count covers all. Not traced: 0, and last_error says why."""

    def __init__(self, capacity=10000):
        if int(capacity) <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = int(capacity)
        self.last_error = None
        self._sites = []

    def detect_memory_leaks(self):
        h, why = _holders(self.capacity)
        self.last_error = why
        if h is None:
            self._sites = []
            return 0
        self._sites = [s for s in h["sites"] if s["leak"]]
        return int(h["leaks"])

    def get_leaks(self):
        """The leaking sites of the last detect_memory_leaks(): [{site, bytes, blocks}]."""
        return [{"site": s["site"], "bytes": s["bytes"], "blocks": s["blocks"]}
                for s in self._sites]


# ---- msprof's usage monitor ----

class MemoryUsageMonitor:
    """msprof's usage monitor: sample_memory_usage() appends one sample of this process to a
    ring of `capacity`; get_samples() returns them, oldest first. Each sample (bytes):
    heap_usage (what glibc's heap holds in use, mallinfo2), stack_usage (VmStk), gpu_usage
    (torch.cuda.memory_allocated when CUDA is there, else 0), shared_usage (RssShmem), and
    timestamp (time.time())."""

    def __init__(self, capacity=1000):
        if int(capacity) <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = int(capacity)
        self._samples = collections.deque(maxlen=self.capacity)

    def sample_memory_usage(self):
        u = _native.usage_read(os.getpid(), False) or {}
        cuda = _torch_cuda()
        s = {"timestamp": time.time(), "heap_usage": int(_native.heap_stats()["allocated"]),
             "stack_usage": int(u.get("stack", 0)),
             "gpu_usage": int(cuda.memory_allocated()) if cuda else 0,
             "shared_usage": int(u.get("rss_shmem", 0))}
        self._samples.append(s)
        return s

    def get_samples(self):
        return list(self._samples)


# ---- the sampler behind the profiler and the detector ----

class _Sampler:
    """A daemon thread that calls fn every interval seconds until stopped. Its allocations are
    memscope's, not the program's: the thread is quiet for the agent (not recorded)."""

    def __init__(self, interval, fn, name):
        if not interval > 0:
            raise ValueError("sampling_interval must be positive")
        self.interval, self.fn, self.name = float(interval), fn, name
        self._stop = threading.Event()
        self._thread = None
        self.ended = False

    def start(self):
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self):
        t, self._thread = self._thread, None
        if t is not None:
            self._stop.set()
            t.join()

    def running(self):
        return self._thread is not None

    def _run(self):
        _native.quiet(1)
        nxt = time.monotonic()
        while not self._stop.is_set():
            try:
                self.fn()
            except ProcessLookupError:  # the process watched has ended: nothing more to see
                self.ended = True
                return
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))


# ---- the profiler ----

def _figures(u):
    if u is None:
        return None
    return {"rss_bytes": u["rss_anon"] + u["rss_file"] + u["rss_shmem"],
            "rss_anon_bytes": u["rss_anon"], "pss_bytes": u["pss"], "uss_bytes": u["uss"],
            "stack_bytes": u["stack"], "shmem_bytes": u["rss_shmem"], "swap_bytes": u["swap"],
            "threads": u["threads"]}


class MemoryProfiler:
    """Tiny-Torch's MemoryProfiler: samples this process (from /proc) and each CUDA device
    (torch.cuda, when CUDA is there) every sampling_interval seconds between
    start_monitoring() and stop_monitoring(); generate_report(path) writes the JSON report of
    `memscope usage` (docs/usage.md): {timestamp, interval_s, duration_s, processes: {pid:
    {command, samples, ended, current, peak}}, devices: {ordinal: {current_usage: {allocated,
    free, total, utilization_percent}, statistics: {avg_utilization, max_utilization,
    samples_count}}}, summary}."""

    def __init__(self, sampling_interval=0.1, devices=None, pid=None):
        self.sampling_interval = float(sampling_interval)
        self.pid = os.getpid() if pid is None else int(pid)
        self.sample_process = pid is None or int(pid) > 0
        self.devices = None if devices is None else [int(d) for d in devices]
        self._sampler = _Sampler(self.sampling_interval, self.sample, "memscope-profiler")
        self._lock = threading.Lock()
        self._start = None
        self._end = None
        self._proc = {"samples": 0, "current": None, "peak": None, "ended": False}
        self._next_smaps = 0
        self._dev = {}
        self.history = collections.deque(maxlen=100000)  # (monotonic s, rss bytes)

    def start_monitoring(self):
        if self._start is None:
            self._start = (time.time(), time.monotonic())
        self._end = None
        self.sample()
        self._sampler.start()

    def stop_monitoring(self):
        self._sampler.stop()
        self._end = time.monotonic()

    def sample(self):
        """Takes one sample now (the thread calls this every sampling_interval)."""
        f = None
        if self.sample_process:  # PSS and USS at the sampler's pace (docs/usage.md)
            u = _native.usage_read(self.pid, True, self._next_smaps)
            if u is not None:
                self._next_smaps = u["next_smaps_ns"]
            f = _figures(u)
        if f is None and self.sample_process and self._proc["samples"]:
            self._proc["ended"] = True
        dev = self._device_sample()
        with self._lock:
            if f is not None:
                p = self._proc
                if p["current"] is not None and f["pss_bytes"] is None:
                    f["pss_bytes"] = p["current"]["pss_bytes"]
                    f["uss_bytes"] = p["current"]["uss_bytes"]
                p["samples"] += 1
                p["current"] = f
                p["peak"] = {k: max(v or 0, (p["peak"] or {}).get(k) or 0) for k, v in f.items()}
                self.history.append((time.monotonic(), f["rss_bytes"]))
            for d, (alloc, free, total) in dev.items():
                s = self._dev.setdefault(d, {"n": 0, "sum": 0.0, "max": 0.0, "cur": None})
                util = 100.0 * (total - free) / total if total else 0.0
                s["n"] += 1
                s["sum"] += util
                s["max"] = max(s["max"], util)
                s["cur"] = {"allocated": alloc, "free": free, "total": total,
                            "utilization_percent": util}

    def _device_sample(self):
        cuda = _torch_cuda()
        if cuda is None:
            return {}
        out = {}
        for d in (self.devices if self.devices is not None else range(cuda.device_count())):
            free, total = cuda.mem_get_info(d)
            out[d] = (int(cuda.memory_allocated(d)), int(free), int(total))
        return out

    def report(self):
        """The report as a dict (generate_report writes it)."""
        with self._lock:
            p = dict(self._proc)
            devs = {str(d): {"current_usage": s["cur"],
                             "statistics": {"avg_utilization": s["sum"] / s["n"],
                                            "max_utilization": s["max"],
                                            "samples_count": s["n"]}}
                    for d, s in sorted(self._dev.items())}
        t0 = self._start or (time.time(), time.monotonic())
        end = self._end if self._end is not None else time.monotonic()
        try:
            with open("/proc/%d/cmdline" % self.pid, "rb") as f:
                command = f.read().replace(b"\0", b" ").strip().decode("utf-8", "replace")
        except OSError:
            command = ""
        procs = {}
        if p["current"] is not None:
            procs[str(self.pid)] = {"command": command, "samples": p["samples"],
                                    "ended": p["ended"], "current": p["current"],
                                       "peak": p["peak"]}
        summary = {"processes": len(procs), "samples": p["samples"],
                   "sum_of_peak_rss_bytes": p["peak"]["rss_bytes"] if p["peak"] else 0}
        if not devs:
            summary["devices"] = "not sampled: CUDA is not available (torch.cuda)"
        return {"timestamp": t0[0], "interval_s": self.sampling_interval,
                "duration_s": end - t0[1], "processes": procs, "devices": devs,
                "summary": summary}

    def generate_report(self, path):
        """Writes report() as JSON to path (through a temporary file renamed over it)."""
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump(self.report(), f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
        return path


# ---- the OOM detector ----

class OOMPrediction:
    """What OOMDetector says at one sample. Tiny-Torch's fields: device_id (the CUDA ordinal;
    -1 for the host), risk_level (RiskLevel), current_usage_percent, growth_rate_mb_per_sec
    (MiB/s), predicted_oom_time_seconds (None when the forecast does not reach the capacity,
    0 when it is reached), confidence (0..1: the fit's R^2 when it grows, else 0),
    recommendation. And why: used_bytes, capacity_bytes, capacity_source ("limit", "cgroup",
    "MemTotal", "device"), traced, top_sites [{site, bytes, blocks}], top_owners [{owner,
    bytes, blocks}], live_heap_bytes, holders_note (what is not available and why),
    fragmentation and largest_free_block (a caching allocator's pool; None on the host), and
    the forecast's status ("reached", "predicted", "not_growing", "too_short")."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def as_dict(self):
        d = dict(self.__dict__)
        d["risk_level"] = self.risk_level.value
        return d

    def why(self):
        """The why as text: the top holders (or what is not available) and the pool."""
        lines = []
        if self.top_sites:
            lines.append("top holders by call site (live heap, memscope's recording):")
            lines += ["  %8.1f MiB in %d blocks: %s" % (s["bytes"] / MIB, s["blocks"], s["site"])
                      for s in self.top_sites]
            named = [o for o in self.top_owners if o["owner"] != "(no owner)"]
            if named:
                lines.append("by owner: " + ", ".join(
                    "%s %.1f MiB" % (o["owner"], o["bytes"] / MIB) for o in named))
        else:
            lines.append(self.holders_note or "no live heap blocks recorded")
        if self.fragmentation is not None:
            lines.append("pool fragmentation %.0f%%, largest free block %.1f MiB"
                         % (100 * self.fragmentation, self.largest_free_block / MIB))
        return "\n".join(lines)

    def __repr__(self):
        return ("OOMPrediction(device_id=%r, risk_level=%s, usage=%.1f%%, growth=%.1f MiB/s, "
                "predicted_oom_time_seconds=%r)" % (
                    self.device_id, self.risk_level.value, self.current_usage_percent,
                    self.growth_rate_mb_per_sec, self.predicted_oom_time_seconds))


class OOMDetector:
    """Tiny-Torch's OOMDetector: samples usage against capacity every sampling_interval and
    calls the warning callbacks with an OOMPrediction when the risk is high or critical (when
    the level rises, and at most every WARNING_REPEAT_S seconds while it stays).

    Capacity and usage: on CUDA (torch.cuda available and device given or default), the
    device's total and used (mem_get_info); on the host, `limit` (bytes or a size text such as
    "300 MiB") against this process's RSS, else the cgroup's memory.max against its
    memory.current, else MemTotal against MemTotal - MemAvailable. The forecast is memscope's
    (the fit of `memscope analyze trend`, memscope._native.forecast) over the last WINDOW
    samples."""

    def __init__(self, threshold=85.0, limit=None, warning_callback=None,
                 sampling_interval=0.1, device=None, pid=None):
        self.threshold = float(threshold)
        if not 0 < self.threshold <= 100:
            raise ValueError("threshold is a percentage in (0, 100]")
        self.limit = None if limit is None else parse_size(limit)
        self.device = device
        self.pid = os.getpid() if pid is None else int(pid)
        self.sampling_interval = float(sampling_interval)
        self._callbacks = []
        if warning_callback is not None:
            self.add_warning_callback(warning_callback)
        self._samples = collections.deque(maxlen=WINDOW)
        self._t0 = None
        self._sampler = _Sampler(self.sampling_interval, self.check, "memscope-oom")
        self._last_level, self._last_warn = RiskLevel.LOW, 0.0
        self.last_prediction = None
        self.warnings = []
        self._traced_at, self._traced_now = float("-inf"), False

    def add_warning_callback(self, fn):
        if not callable(fn):
            raise TypeError("a warning callback must be callable")
        self._callbacks.append(fn)

    def start_monitoring(self):
        self._sampler.start()

    def stop_monitoring(self):
        self._sampler.stop()

    def _capacity(self):
        """(device_id, used, capacity, source)."""
        cuda = _torch_cuda()
        if cuda is not None and self.limit is None:
            d = 0 if self.device is None else int(self.device)
            free, total = cuda.mem_get_info(d)
            return d, total - free, total, "device"
        u = _native.usage_read(self.pid, False)
        if u is None:
            raise ProcessLookupError("process %d has ended" % self.pid)
        rss = u.get("rss_anon", 0) + u.get("rss_file", 0) + u.get("rss_shmem", 0)
        if self.limit is not None:
            return -1, rss, self.limit, "limit"
        if u.get("cg_max"):
            return -1, u.get("cg_current") or rss, u["cg_max"], "cgroup"
        mi = _meminfo()
        total = mi.get("MemTotal", 0)
        return -1, total - mi.get("MemAvailable", total), total, "MemTotal"

    def check(self):
        """Takes one sample, judges it and calls the callbacks if it warns; returns the
        OOMPrediction (the thread calls this every sampling_interval)."""
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        device_id, used, cap, source = self._capacity()
        self._samples.append((now - self._t0, float(used)))
        xs = [s[0] for s in self._samples]
        ys = [s[1] for s in self._samples]
        fc = _native.forecast(xs, ys, float(cap))
        growing = fc["points"] >= MIN_FIT_POINTS and fc["status"] in ("predicted", "reached") \
            and fc["slope"] > 0
        t_oom = None
        if used >= cap:
            t_oom = 0.0
        elif growing and fc["at"] is not None:
            t_oom = max(0.0, fc["at"] - xs[-1])
        pct = 100.0 * used / cap if cap else 0.0
        level = self._level(pct, t_oom)
        rate = fc["slope"] / MIB if growing else 0.0
        pred = OOMPrediction(
            device_id=device_id, risk_level=level, current_usage_percent=pct,
            growth_rate_mb_per_sec=rate, predicted_oom_time_seconds=t_oom,
            confidence=max(0.0, min(1.0, fc["r2"])) if growing else 0.0,
            recommendation=None, timestamp=time.time(), used_bytes=int(used),
            capacity_bytes=int(cap), capacity_source=source, forecast_status=fc["status"],
            traced=self._traced(now), top_sites=[], top_owners=[], live_heap_bytes=None,
            holders_note=None, fragmentation=None, largest_free_block=None)
        self.last_prediction = pred
        if _ORDER[level] >= _ORDER[RiskLevel.HIGH] and (
                _ORDER[level] > _ORDER[self._last_level] or now - self._last_warn
                >= WARNING_REPEAT_S):
            self._explain(pred)
            self._last_warn = now
            self.warnings.append(pred)
            for fn in list(self._callbacks):
                fn(pred)
        self._last_level = level
        if pred.recommendation is None:
            pred.recommendation = self._recommend(pred)
        return pred

    def _traced(self, now):
        """Whether this detector's process is traced: its trace directory is listed at most once
        a second (not at every sample)."""
        if self.pid != os.getpid():
            return False
        if now - self._traced_at >= 1.0:
            self._traced_at, self._traced_now = now, trace_file() is not None
        return self._traced_now

    def _level(self, pct, t_oom):
        if pct >= CRITICAL_PERCENT or (t_oom is not None and t_oom <= CRITICAL_SECONDS):
            return RiskLevel.CRITICAL
        if pct >= self.threshold or (t_oom is not None and t_oom <= HIGH_SECONDS):
            return RiskLevel.HIGH
        if pct >= self.threshold - MEDIUM_MARGIN or (t_oom is not None
                                                     and t_oom <= MEDIUM_SECONDS):
            return RiskLevel.MEDIUM
        return RiskLevel.LOW

    def _explain(self, pred):
        """Fills the why: the holders from memscope's recording, the pool on CUDA."""
        h, note = _holders(5) if self.pid == os.getpid() else (None, (
            "holders by call site are read inside the traced program only: use "
            "memscope.OOMDetector in it, under `memscope run` or after memscope.start()"))
        pred.holders_note = note
        if h is not None:
            pred.top_sites = [{"site": s["site"], "bytes": s["bytes"], "blocks": s["blocks"]}
                              for s in h["sites"]]
            pred.top_owners = h["owners"]
            pred.live_heap_bytes = h["live_bytes"]
            if not h["python"]:
                pred.holders_note = ("native call sites only: the trace has no Python stacks "
                                     "(`memscope run --call-stack=python:N`, or "
                                     "memscope.config(call_stack=\"python:N\") before start())")
        if pred.device_id >= 0:
            fr = FragmentationAnalyzer().analyze(pred.device_id)
            pred.fragmentation = fr["fragmentation"]
            pred.largest_free_block = fr["largest_free_block"]
        pred.recommendation = self._recommend(pred)

    @staticmethod
    def _recommend(pred):
        lvl = pred.risk_level
        if lvl == RiskLevel.LOW:
            return "no action needed"
        parts = []
        if pred.predicted_oom_time_seconds is not None:
            parts.append("memory grows by %.1f MiB/s and reaches the capacity in about %.1f s"
                         % (pred.growth_rate_mb_per_sec, pred.predicted_oom_time_seconds))
        if pred.top_sites:
            parts.append("the largest holder is %s (%.1f MiB live): free or bound what it keeps"
                         % (pred.top_sites[0]["site"], pred.top_sites[0]["bytes"] / MIB))
        if pred.fragmentation is not None and pred.fragmentation > 0.5:
            parts.append("the pool is fragmented: torch.cuda.empty_cache() or "
                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        if pred.device_id >= 0:
            parts.append("reduce the batch size or use activation checkpointing")
        if not parts:
            parts.append("usage is close to the capacity: reduce the working set")
        return "; ".join(parts)


# ---- all of them ----

class MemoryDebugger:
    """Tiny-Torch's MemoryDebugger: a MemoryProfiler, an OOMDetector, a FragmentationAnalyzer
    and a MemoryLeakDetector together; get_status_report() says what each sees now."""

    def __init__(self, sampling_interval=0.1, threshold=85.0, limit=None,
                 warning_callback=None):
        self.profiler = MemoryProfiler(sampling_interval)
        self.oom_detector = OOMDetector(threshold, limit, warning_callback, sampling_interval)
        self.fragmentation_analyzer = FragmentationAnalyzer()
        self.leak_detector = MemoryLeakDetector()

    def start_monitoring(self):
        self.profiler.start_monitoring()
        self.oom_detector.start_monitoring()

    def stop_monitoring(self):
        self.profiler.stop_monitoring()
        self.oom_detector.stop_monitoring()

    def get_status_report(self):
        pred = self.oom_detector.last_prediction or self.oom_detector.check()
        leaks = self.leak_detector.detect_memory_leaks()
        return {"timestamp": time.time(),
                "usage": self.profiler.report(),
                "oom": pred.as_dict(),
                "fragmentation": self.fragmentation_analyzer.analyze(),
                "leaks": {"count": leaks, "sites": self.leak_detector.get_leaks(),
                          "note": self.leak_detector.last_error},
                "traced": trace_file() is not None}
