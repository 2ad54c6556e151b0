"""python3 -m memscope: Tiny-Torch's memory command line on memscope (docs/cli.md,
"python3 -m memscope").

  profile   [--pid PID ...] [--devices N ...] [--duration S] [--interval S] [--output F] [--plot F]
  oom       [--pid PID] [--devices N] [--threshold P] [--limit SIZE] [--monitor] [--duration S]
            [--interval S]
  leak      [--output F] RUN          the default leak rule of `memscope analyze leaks` on a run
  fragment  [--output F] RUN          `memscope analyze fragmentation` on a run or snapshot
  monitor   [--pid PID] [--devices N] [--interval S] [--duration S] [--threshold P] [--limit SIZE]

A bad option is a usage error (exit 2). Distributed master/worker monitoring (Tiny-Torch's) is
the live monitor's Prometheus exporter (issue 39), not this command.
"""
import argparse
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from . import monitor as _m
from . import _env


def _positive(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number of seconds: %r" % text)
    if not v > 0 or v > 365 * 86400:
        raise argparse.ArgumentTypeError("must be a positive number of seconds: %r" % text)
    return v


def _percent(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a percentage: %r" % text)
    if not 0 < v <= 100:
        raise argparse.ArgumentTypeError("a percentage in (0, 100]: %r" % text)
    return v


def _size(text):
    try:
        return _m.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def _pid(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a process id: %r" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("not a process id: %r" % text)
    return v


def _device(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a CUDA device ordinal: %r" % text)
    if v < 0:
        raise argparse.ArgumentTypeError("not a CUDA device ordinal: %r" % text)
    return v


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m memscope",
                                description="memscope's memory tools (Tiny-Torch's command line)")
    sub = p.add_subparsers(dest="command", metavar="profile|oom|leak|fragment|monitor")
    sub.required = True

    def common(q, duration, pid_many=False):
        q.add_argument("--pid", type=_pid, nargs="+" if pid_many else None, metavar="PID",
                       help="the process to sample (a process memscope did not start)")
        q.add_argument("--devices", type=_device, nargs="+", metavar="N",
                       help="CUDA device ordinals (torch.cuda; default all)")
        q.add_argument("--interval", type=_positive, default=0.1, metavar="S",
                       help="seconds between samples (default 0.1)")
        q.add_argument("--duration", type=_positive, default=duration, metavar="S",
                       help="seconds to sample (default %s; Ctrl-C ends it earlier)" % duration)

    q = sub.add_parser("profile", help="sample processes and devices, write a JSON report")
    common(q, 10.0, pid_many=True)
    q.add_argument("--output", "-o", metavar="FILE", help="the JSON report (default stdout)")
    q.add_argument("--plot", metavar="FILE.svg", help="draw RSS over time as SVG")
    for name, dur, help_ in (("oom", 2.0, "judge the risk of running out of memory"),
                             ("monitor", 60.0, "print usage and risk every interval")):
        q = sub.add_parser(name, help=help_)
        common(q, dur)
        q.add_argument("--threshold", type=_percent, default=85.0, metavar="P",
                       help="usage percentage that is a high risk (default 85)")
        q.add_argument("--limit", type=_size, metavar="SIZE",
                       help="the capacity on the host (\"300 MiB\"; default cgroup, MemTotal)")
        if name == "oom":
            q.add_argument("--monitor", action="store_true",
                           help="keep watching for --duration, printing each warning")
    for name, help_ in (("leak", "the default leak rule of `memscope analyze leaks` on a run"),
                        ("fragment", "`memscope analyze fragmentation` on a run")):
        q = sub.add_parser(name, help=help_)
        q.add_argument("run", metavar="RUN", help="a database or trace directory of memscope run")
        q.add_argument("--output", "-o", metavar="FILE", help="write the JSON report here")
    return p


def _memscope_binary():
    env = _env.get(_env.CLI)
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for rel in (("..", "..", "memscope"), ("..", "..", "..", "..", "bin", "memscope")):
        p = os.path.normpath(os.path.join(here, *rel))
        if os.access(p, os.X_OK):
            return p
    return shutil.which("memscope")


class _Interrupted(Exception):
    pass


def _sleep_until(t_end):
    """Sleeps until t_end (monotonic) or Ctrl-C."""
    try:
        while time.monotonic() < t_end:
            time.sleep(min(0.2, t_end - time.monotonic()))
    except KeyboardInterrupt:
        raise _Interrupted()


def _svg(history, path):
    w, h, pad = 640, 240, 40
    if len(history) < 2:
        pts = ""
    else:
        t0, t1 = history[0][0], history[-1][0]
        ymax = max(v for _, v in history) or 1
        pts = " ".join("%.1f,%.1f" % (pad + (w - 2 * pad) * (t - t0) / ((t1 - t0) or 1),
                                      h - pad - (h - 2 * pad) * v / ymax) for t, v in history)
    peak = max((v for _, v in history), default=0)
    with open(path, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">\n' % (w, h))
        f.write('<text x="%d" y="20" font-size="12">RSS over time (peak %.1f MiB)</text>\n'
                % (pad, peak / _m.MIB))
        f.write('<polyline fill="none" stroke="steelblue" points="%s"/>\n</svg>\n' % pts)


def cmd_profile(a):
    pids = a.pid or []
    cuda = _m._torch_cuda()
    if not pids and cuda is None:
        sys.stderr.write("memscope profile: nothing to sample: give --pid PID, or --devices N "
                         "with torch and CUDA\n")
        return 2
    profs = [_m.MemoryProfiler(a.interval, a.devices, pid=p) for p in pids] or \
        [_m.MemoryProfiler(a.interval, a.devices, pid=0)]
    for i, p in enumerate(profs):
        if i:
            p.devices = []  # devices once
        p.start_monitoring()
    try:
        _sleep_until(time.monotonic() + a.duration)
    except _Interrupted:
        pass
    for p in profs:
        p.stop_monitoring()
    rep = profs[0].report()
    for p in profs[1:]:
        r = p.report()
        rep["processes"].update(r["processes"])
        rep["summary"]["processes"] += r["summary"]["processes"]
        rep["summary"]["samples"] += r["summary"]["samples"]
        rep["summary"]["sum_of_peak_rss_bytes"] += r["summary"]["sum_of_peak_rss_bytes"]
    for pid in pids:
        if str(pid) not in rep["processes"]:
            sys.stderr.write("memscope profile: process %d could not be sampled (it does not "
                             "exist or may not be read)\n" % pid)
    text = json.dumps(rep, indent=2) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if a.plot:
        _svg(list(profs[0].history), a.plot)
    return 0 if all(str(p) in rep["processes"] for p in pids) else 1


def _line(pred):
    t = pred.predicted_oom_time_seconds
    return ("%s: %.1f%% of %.1f MiB (%s), growth %.2f MiB/s, predicted OOM %s, confidence "
            "%.2f" % (pred.risk_level.value, pred.current_usage_percent,
                      pred.capacity_bytes / _m.MIB, pred.capacity_source,
                      pred.growth_rate_mb_per_sec, "in %.1f s" % t if t is not None else "none",
                      pred.confidence))


def _detector(a):
    dev = a.devices[0] if a.devices else None
    return _m.OOMDetector(a.threshold, a.limit, None, a.interval, device=dev, pid=a.pid)


def cmd_oom(a):
    det = _detector(a)
    if a.monitor:
        det.add_warning_callback(lambda p: print("WARNING " + _line(p) + "\n  " +
                                                 p.recommendation, flush=True))
    t_end = time.monotonic() + a.duration
    pred = None
    try:
        while True:
            pred = det.check()
            if time.monotonic() >= t_end:
                break
            _sleep_until(min(t_end, time.monotonic() + a.interval))
    except _Interrupted:
        pass
    except ProcessLookupError as e:
        sys.stderr.write("memscope oom: %s\n" % e)
        return 1
    if pred is not None:
        print(_line(pred))
        print("  " + (pred.recommendation or ""))
    return 0


def cmd_monitor(a):
    det = _detector(a)
    t_end = time.monotonic() + a.duration
    try:
        while True:
            print("%.1f  %.1f MiB  %s" % (time.time(), det.check().used_bytes / _m.MIB,
                                          _line(det.last_prediction)), flush=True)
            if time.monotonic() >= t_end:
                break
            _sleep_until(min(t_end, time.monotonic() + a.interval))
    except _Interrupted:
        pass
    except ProcessLookupError as e:
        sys.stderr.write("memscope monitor: %s\n" % e)
        return 1
    return 0


def _analyze(a, which):
    exe = _memscope_binary()
    if not exe:
        sys.stderr.write("memscope %s: the memscope command was not found (set MEMSCOPE)\n"
                         % ("leak" if which == "leaks" else "fragment"))
        return 1
    argv = [exe, "analyze", which, a.run]
    if a.output:
        argv.append("--json")
        with open(a.output, "w") as f:
            return subprocess.call(argv, stdout=f)
    return subprocess.call(argv)


def _load_cuda(a):
    """--devices: torch.cuda's figures; torch is imported only then (it takes seconds)."""
    if not getattr(a, "devices", None):
        return True
    try:
        importlib.import_module("torch")  # the monitor reads torch.cuda once it is imported
    except ImportError:
        pass
    if _m._torch_cuda() is None:
        sys.stderr.write("memscope %s: --devices needs torch with CUDA, which is not available "
                         "here\n" % a.command)
        return False
    return True


def main(argv=None):
    a = _parser().parse_args(argv)
    if not _load_cuda(a):
        return 1
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return {"profile": cmd_profile, "oom": cmd_oom, "monitor": cmd_monitor,
            "leak": lambda a: _analyze(a, "leaks"),
            "fragment": lambda a: _analyze(a, "fragmentation")}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
