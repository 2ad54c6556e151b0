"""memscope.pytest_plugin: memory budgets for pytest tests (docs/ci.md, "The pytest plugin").

    python3 -m pytest -p memscope.pytest_plugin --memscope
    memscope run -- python3 -m pytest -p memscope.pytest_plugin --memscope

pytest-memray's markers, with the same names and meaning:
  @pytest.mark.limit_memory("24 MB")            the peak of memory allocated during the test
  @pytest.mark.limit_leaks("1 MB", warmups=0)   memory allocated by the test, live after it returns
both with layer= ("heap", "mmap", "cuda", "cuda:0", "pool:NAME"; default heap and mmap), and
--memscope-default-limit=SIZE (every test without limit_memory), --memscope-baseline=FILE with
--memscope-max-growth=PCT (each test's peak and leak against the last stored run).

How: memscope records the session (in this process, or the `memscope run` around it); each
test's call is marked in the recording; after the last test the recording is converted, and
the conversion computes every test's figures from the allocator's events (memscope.testmem
reads them; for tests with a layer= marker it computes them from the full database). So the outcome of
a test with a budget is known only then: those tests are reported after the last test has run
(the others as they finish), with the limit, the measured value and the allocating lines.
"""
import json
import os
import tempfile

import pytest

from . import testmem
from . import _env



def pytest_addoption(parser):
    g = parser.getgroup("memscope", "memory budgets with memscope (docs/ci.md)")
    g.addoption("--memscope", action="store_true", default=False,
                help="record the session with memscope: enables the limit_memory and "
                     "limit_leaks markers and prints a per-test memory summary")
    g.addoption("--memscope-default-limit", metavar="SIZE", default=None,
                help="limit_memory(SIZE) for every test without a limit_memory marker")
    g.addoption("--memscope-baseline", metavar="FILE", default=None,
                help="compare each test's peak and leak with FILE (written when missing)")
    g.addoption("--memscope-max-growth", metavar="PCT", default="10",
                help="with --memscope-baseline: fail a test that grew by more than PCT "
                     "percent (default 10)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_memory(limit, *, layer=None): fail when the peak of memory "
                   "allocated during the test exceeds limit (with --memscope)")
    config.addinivalue_line(
        "markers", "limit_leaks(limit, *, warmups=0, layer=None): fail when the test leaves "
                   "more than limit allocated after it returns (with --memscope)")
    if not config.getoption("memscope"):
        return
    config.pluginmanager.register(_Session(config), "memscope-session")


def _usage(msg):
    return pytest.UsageError("memscope: " + msg)


def _budget(item):
    """The test's budgets from its markers: {"memory": (bytes, text, layer) or None,
    "leaks": (bytes, text, layer, warmups) or None}. UsageError for bad arguments."""
    out = {"memory": None, "leaks": None}
    for name in ("limit_memory", "limit_leaks"):
        mark = item.get_closest_marker(name)
        if mark is None:
            continue
        where = "%s: @pytest.mark.%s" % (item.nodeid, name)
        args, kw = list(mark.args), dict(mark.kwargs)
        if "limit" in kw and not args:
            args.append(kw.pop("limit"))
        if len(args) != 1:
            raise _usage("%s takes one limit, as \"24 MB\"" % where)
        layer = kw.pop("layer", None)
        if kw.pop("current_thread_only", False):  # pytest-memray's; False is what memscope does
            raise _usage("%s: current_thread_only=True is not supported: memscope counts every "
                         "thread and process of the test" % where)
        warmups = kw.pop("warmups", 0) if name == "limit_leaks" else 0
        if kw:
            raise _usage("%s: unknown argument %s" % (where, ", ".join(sorted(kw))))
        try:
            limit = testmem.parse_size(args[0])
        except ValueError as e:
            raise _usage("%s: %s" % (where, e))
        if layer is not None and not testmem.known_layer(layer):
            raise _usage("%s: unknown layer %r (heap, mmap, cuda, cuda:N, pool:NAME, ...)"
                         % (where, layer))
        if not isinstance(warmups, int) or isinstance(warmups, bool) or warmups < 0:
            raise _usage("%s: warmups must be an int >= 0, not %r" % (where, warmups))
        if name == "limit_memory":
            out["memory"] = (limit, args[0], layer)
        else:
            out["leaks"] = (limit, args[0], layer, warmups)
    return out


class _Session:
    def __init__(self, config):
        self.config = config
        self.rootdir = str(config.rootpath) if hasattr(config, "rootpath") else str(
            config.rootdir)
        self.default = None
        d = config.getoption("memscope_default_limit")
        if d is not None:
            try:
                self.default = (testmem.parse_size(d), d, None)
            except ValueError as e:
                raise _usage("--memscope-default-limit: %s" % e)
        try:
            self.max_growth = float(config.getoption("memscope_max_growth"))
            if self.max_growth < 0:
                raise ValueError
        except ValueError:
            raise _usage("--memscope-max-growth: expected a percentage >= 0, not %r"
                         % config.getoption("memscope_max_growth"))
        self.baseline_path = config.getoption("memscope_baseline")
        self.baseline = self._load_baseline() if self.baseline_path else None
        self.budgets = {}    # nodeid -> _budget()
        self.ids = {}        # nodeid -> the short id of its marks
        self.deferred = []   # (item, nextitem) whose reports wait for the measurement
        self.reports = {}    # nodeid -> [reports]
        self.results = {}    # nodeid -> testmem.Measure
        self.tmpdir = None
        self.recording = False
        self.stacks_per_test = None  # in this process: the Python stack hook's line mode
        self.error = None

    def _load_baseline(self):
        p = self.baseline_path
        if not os.path.exists(p):
            return None  # written at the end of this session
        try:
            with open(p) as f:
                data = json.load(f)
            ok = (isinstance(data, dict) and data.get("memscope_pytest_baseline") == 1 and
                  isinstance(data.get("tests"), dict) and
                  all(isinstance(v, dict) and isinstance(v.get("peak"), int) and
                      isinstance(v.get("leaked"), int) for v in data["tests"].values()))
        except (OSError, ValueError) as e:
            raise _usage("--memscope-baseline: cannot read %s: %s" % (p, e))
        if not ok:
            raise _usage("--memscope-baseline: %s is not a memscope baseline (a JSON object "
                         "with \"memscope_pytest_baseline\": 1 and \"tests\")" % p)
        return data["tests"]

    # ---- collection: every marker is checked before anything runs ----

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for it in items:
            b = _budget(it)
            if b["memory"] is None and self.default is not None:
                b["memory"] = self.default
            self.budgets[it.nodeid] = b
            self.ids[it.nodeid] = str(len(self.ids))

    # ---- recording ----

    def _start(self):
        import memscope
        if memscope.mode() == "run":
            self.recording = True
            return
        self.tmpdir = tempfile.mkdtemp(prefix="memscope-pytest-")
        memscope.config(output_path=os.path.join(self.tmpdir, "session.db"),
                        call_stack="python:32")
        memscope.start()
        # Python stacks only while a test's call runs (the figures count only the blocks
        # allocated then): the hook that follows each call costs the rest of the session
        # (pytest's own code between the tests) nothing. Lines mode 3: the frame evaluation
        # hook, under which the test's code runs specialized as without memscope (a profile
        # hook makes CPython 3.11 run every instruction through its tracing path), each
        # allocation's line read from its frame (exact); mode 2 (the profile hook, same lines)
        # on other Pythons. With MEMSCOPE_PY_LINES=0, the line of the frame's last call.
        from . import _native
        if _native.python_stacks():
            self.stacks_per_test = 3 if memscope._LINES else 0
            _native.set_python_stacks(False)
        self.recording = True

    def _finish_recording(self, windows):
        """Stops recording and returns the path of a database of the session: with windows, a
        compact one with each test's figures (mark_windows: testmem.measure_windows), else a
        full one (testmem.measure)."""
        import memscope
        from . import _native, _store
        self.recording = False
        _native.stop()
        if memscope.mode() == "run":
            trace_dir = os.environ[_env.TRACE_DIR]  # the CLI converts it again at its end
        else:
            trace_dir = memscope._state["trace_dir"]  # removed at exit (memscope._at_exit)
            memscope._state["started"] = False
        db = os.path.join(self.tmpdir or tempfile.mkdtemp(prefix="memscope-pytest-"),
                          "session.db")
        self.tmpdir = os.path.dirname(db)
        if windows:
            _store.convert(trace_dir, db, [], 0, True, True, testmem.MARK_START, testmem.MARK_END,
                           True)  # its tables only: no packed traces
        else:
            _store.convert(trace_dir, db, [], 0, True)  # no memscope_dump: not read here
        return db

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        if not session.config.option.collectonly and session.items:
            try:
                self._start()
            except Exception as e:  # the tests run; those with a budget fail, saying why
                self.error = "cannot record: %s: %s" % (type(e).__name__, e)
        try:
            yield
        finally:
            if self.recording or self.error:
                self._measure_and_report(session)

    def _needs_defer(self, item):
        b = self.budgets.get(item.nodeid, {})
        return bool(b.get("memory") or b.get("leaks") or self.baseline)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if not (self.recording or self.error) or not self._needs_defer(item):
            return None
        from _pytest.runner import runtestprotocol
        self.reports[item.nodeid] = runtestprotocol(item, nextitem=nextitem, log=False)
        self.deferred.append(item)
        return True

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        if not self.recording:
            yield
            return
        from . import _native
        b = self.budgets.get(pyfuncitem.nodeid, {})
        warmups = b["leaks"][3] if b.get("leaks") else 0
        if warmups:
            args = {a: pyfuncitem.funcargs[a] for a in pyfuncitem._fixtureinfo.argnames}
            for _ in range(warmups):
                pyfuncitem.obj(**args)
        tid = self.ids.get(pyfuncitem.nodeid, pyfuncitem.nodeid)
        if self.stacks_per_test is not None:
            _native.set_python_stacks(True, self.stacks_per_test)
        _native.mark(testmem.MARK_START + tid)
        try:
            yield
        finally:
            _native.mark(testmem.MARK_END + tid)
            if self.stacks_per_test is not None:
                _native.set_python_stacks(False)

    # ---- after the last test ----

    def _measure_and_report(self, session):
        try:
            if not self.error:
                layers = {}
                for nodeid, tid in self.ids.items():
                    b = self.budgets.get(nodeid, {})
                    layers[tid] = (b.get("memory") or b.get("leaks") or (None, None, None))[2]
                # every test on the heap and mmap layers (no layer= marker): the conversion
                # computes each test's figures and sites in its pass; else the full database
                windows = not any(layers.values())
                db = self._finish_recording(windows)
                nodeids = {t: n for n, t in self.ids.items()}
                top = []

                def wants_sites(tid, figures):  # a budget may fail, or in the summary's 10
                    if not top:
                        top.extend(sorted(figures, key=lambda t: -figures[t].peak)
                                   [:testmem.SUMMARY_TOP])
                    return tid in top or self._over(nodeids.get(tid), figures[tid])
                def wants_peak(tid, m):  # a memory budget it may exceed, or a baseline
                    b = self.budgets.get(nodeids.get(tid), {})
                    return bool(self.baseline_path or
                                (b.get("memory") and m.allocated > b["memory"][0]))
                if windows:
                    by_tid = testmem.measure_windows(db, self.rootdir, wants_sites)
                else:
                    by_tid = testmem.measure(db, layers, self.rootdir, wants_sites, wants_peak)
                self.results = {n: by_tid[t] for n, t in self.ids.items() if t in by_tid}
        except Exception as e:  # said in the summary; budgets then fail as not measured
            self.error = "%s: %s" % (type(e).__name__, e)
        finally:
            if self.tmpdir:
                import shutil
                shutil.rmtree(self.tmpdir, ignore_errors=True)
        for item in self.deferred:
            reps = self.reports.pop(item.nodeid, [])
            failure = self._verdict(item)
            ihook = item.ihook
            ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
            for rep in reps:
                if rep.when == "call" and failure and rep.passed:
                    rep.outcome = "failed"
                    rep.longrepr = failure
                ihook.pytest_runtest_logreport(report=rep)
            ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if self.baseline_path and self.baseline is None and not self.error:
            self._write_baseline()

    def _over(self, nodeid, m):
        """Whether a budget of the test may fail on figures m (a cheap test before the lines
        are looked up)."""
        b = self.budgets.get(nodeid, {})
        old = (self.baseline or {}).get(nodeid)
        return bool((b.get("memory") and m.peak > b["memory"][0]) or
                    (b.get("leaks") and m.leaked > b["leaks"][0]) or
                    (old and (m.peak > old["peak"] * (1 + self.max_growth / 100.0) or
                              m.leaked > old["leaked"] * (1 + self.max_growth / 100.0))))

    def _verdict(self, item):
        """The failure text of a test over its budgets, or None."""
        b = self.budgets.get(item.nodeid, {})
        m = self.results.get(item.nodeid)
        if m is None:
            if b.get("memory") or b.get("leaks") or self.baseline:
                return ("memscope: the test's memory could not be measured%s"
                        % (": " + self.error if self.error else ""))
            return None
        msgs = []
        if b.get("memory") and m.peak > b["memory"][0]:
            limit, text, layer = b["memory"]
            msgs.append(_failure("limit_memory(%r)" % text, "peak of memory allocated during "
                                 "the test", m.peak, limit, layer, m.peak_sites))
        if b.get("leaks") and m.leaked > b["leaks"][0]:
            limit, text, layer, _ = b["leaks"]
            msgs.append(_failure("limit_leaks(%r)" % text, "memory allocated by the test and "
                                 "still live after it returned", m.leaked, limit, layer,
                                 m.leak_sites))
        old = (self.baseline or {}).get(item.nodeid)
        if old:
            for key, sites in (("peak", m.peak_sites), ("leaked", m.leak_sites)):
                was, now = old[key], getattr(m, key)
                if now > was * (1 + self.max_growth / 100.0):
                    msgs.append(_failure(
                        "--memscope-max-growth=%g%% against %s" % (self.max_growth,
                                                                   self.baseline_path),
                        "%s grew from %d bytes (%s) to" % (key, was, testmem.human(was)), now,
                        int(was * (1 + self.max_growth / 100.0)), None, sites))
        return "\n\n".join(msgs) or None

    def _write_baseline(self):
        data = {"memscope_pytest_baseline": 1, "layer": "heap+mmap unless marked",
                "tests": {n: {"peak": m.peak, "leaked": m.leaked}
                          for n, m in sorted(self.results.items())}}
        tmp = self.baseline_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.baseline_path)

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if not self.results and not self.error:
            return  # nothing ran (a usage error, --collect-only)
        tr.section("memscope")
        if self.error:
            tr.write_line("memscope: no measurement: %s" % self.error)
            return
        tr.write_line("per test, largest peak first (bytes allocated during the test, heap "
                      "and mmap unless marked):")
        tr.write_line("%12s %12s %12s  %s" % ("peak", "allocated", "leaked", "test: top line"))
        rows = sorted(self.results.items(), key=lambda kv: (-kv[1].peak, kv[0]))
        for nodeid, m in rows[:testmem.SUMMARY_TOP]:
            top = m.peak_sites[0][0] if m.peak_sites else "-"
            tr.write_line("%12s %12s %12s  %s: %s" % (testmem.human(m.peak),
                                                      testmem.human(m.allocated),
                                                      testmem.human(m.leaked), nodeid, top))
        if len(rows) > testmem.SUMMARY_TOP:
            tr.write_line("... %d more tests" % (len(rows) - testmem.SUMMARY_TOP))
        if self.baseline_path and self.baseline is None:
            tr.write_line("memscope: baseline written to %s" % self.baseline_path)


def _failure(what, measured_as, value, limit, layer, sites, top=5):
    lines = ["memscope: %s exceeded: %s %d bytes (%s), limit %d bytes (%s)%s"
             % (what, measured_as, value, testmem.human(value), limit, testmem.human(limit),
                ", layer %s" % layer if layer else "")]
    if sites:
        lines.append("allocating lines (innermost user frame first):")
        for line, size, blocks in sites[:top]:
            lines.append("  %s: %d bytes in %d block%s" % (line, size, blocks,
                                                           "" if blocks == 1 else "s"))
        if len(sites) > top:
            lines.append("  ... %d more lines" % (len(sites) - top))
    return "\n".join(lines)
