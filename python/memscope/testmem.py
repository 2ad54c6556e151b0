"""memscope.testmem: the memory of each test of a session, from a memscope database
(docs/ci.md, "The pytest plugin"). memscope.pytest_plugin marks each test's call with two MARK
events; the conversion computes each test's figures over the heap and the mmap layer in its
pass (measure_windows reads them), and for tests with a layer= marker this module computes
them from the full database (measure), per test and for the selected layers, from the
allocator's events (not from samples, so asynchronous frees never make it flake):

  * peak: the highest sum of the bytes allocated during the test and still live at a moment of
    it (pytest-memray's limit_memory: the memory the test allocated at its high-water mark);
  * leaked: the bytes allocated during the test and still live when it returned
    (pytest-memray's limit_leaks);
  * allocated: every byte allocated during the test;
  * the allocating lines of the peak's and the leak's blocks: the innermost frame of the
    program's own code (not the standard library, site-packages, pytest or memscope) as
    "file.py:LINE", most bytes first.

Blocks of every process count (a test's forked children with it). Workload: measure_windows
reads two small tables and the Python text of the stacks of the tests whose lines are shown;
measure scans the blocks table once, then per test sorts its blocks' allocations and frees.
It also holds the size rule of the markers (pytest-memray's) and the layer names.
"""
import heapq
import re
import sqlite3

MARK_START = "memscope-pytest start "
MARK_END = "memscope-pytest end "

# pytest-memray's sizes: a number, optional blanks, B or KB/MB/GB/TB/PB (any case), powers of
# 1024 (KB = 1024 B). Stricter than its prefix match: nothing may follow but blanks.
_SIZE = re.compile(r"\s*\+?(\d+(?:\.\d*)?|\.\d+)\s*([KMGTP]?B)\s*\Z", re.IGNORECASE)
_UNIT = {"B": 0, "KB": 10, "MB": 20, "GB": 30, "TB": 40, "PB": 50}

_DEV_FAMILIES = ("cuda", "cuda_pool", "cuda_vmm", "cuda_va", "cuda_map", "pta", "pta_segment")
_PLAIN = ("heap", "mmap", "mmap_reserved", "cuda_pinned", "pool", "host", "mmap_reserve", "hal",
          "vmm_reserve", "vmm_map", "host_pinned")


def parse_size(text):
    """Bytes of a size string ("24 MB", "100 KB", "1.5gb"); ValueError for anything
    pytest-memray rejects."""
    if not isinstance(text, str):
        raise ValueError("a size must be a string such as \"24 MB\", not %r" % (text,))
    m = _SIZE.match(text)
    if not m:
        raise ValueError("invalid size %r (a number and a unit: B, KB, MB, GB, TB or PB, "
                         "powers of 1024, as pytest-memray reads them)" % text)
    return int(float(m.group(1)) * (1 << _UNIT[m.group(2).upper()]))


def known_layer(name):
    """True when name can name layers of a run (the budgets' names: heap, mmap, cuda, cuda:N,
    pool:NAME, ...)."""
    if not isinstance(name, str) or not name or len(name) > 63:
        return False
    low = name.lower()
    if low in _PLAIN or (low.startswith("pool:") and len(low) > 5):
        return True
    fam, _, dev = low.partition(":")
    return fam in _DEV_FAMILIES and (not _ or (dev.isdigit() and len(dev) <= 2))


def human(n):
    """1536 -> "1.5 KiB"."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return "%d B" % n if unit == "B" else "%.1f %s" % (v, unit)
        v /= 1024
    return "%d B" % n


class Measure:
    """One test's figures (bytes) and allocating lines [(line, bytes, blocks)], most first."""

    def __init__(self):
        self.peak = self.leaked = self.allocated = 0
        self.peak_exact = False  # the peak was computed (else 0: see measure())
        self.peak_sites = []
        self.leak_sites = []


_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_LIBRARY = ("/lib/python3", "site-packages/", "dist-packages/", "<frozen", "/_pytest/",
            "/pluggy/", "/memscope/")


def _site(py_text, rootdir):
    """The innermost frame of the program's own code in py_text ("file(line): function" a line,
    innermost first) as "file.py:LINE" (relative to rootdir when inside it); else "(pytest,
    memscope or a library)"; "(no Python stack)" without one."""
    first = None
    for line in (py_text or "").splitlines():
        m = _FRAME.match(line)
        if not m:
            continue
        path, lineno = m.group(1), m.group(2)
        if rootdir and path.startswith(rootdir.rstrip("/") + "/"):
            shown = path[len(rootdir.rstrip("/")) + 1:]
        else:
            shown = path
        if first is None:
            first = "(pytest, memscope or a library)"
        if not any(lib in path for lib in _LIBRARY):
            return "%s:%s" % (shown, lineno)
    return first or "(no Python stack)"


def _layers(db, layer):
    if not layer:
        return {1, 2}  # heap and mmap
    rows = db.execute(
        "SELECT id FROM layers WHERE id > 0 AND (lower(name) = lower(?1) OR "
        "lower(event_type) = lower(?1) OR (instr(?1, ':') = 0 AND lower(name) LIKE "
        "lower(?1) || ':%' AND name NOT LIKE '%:reserved'))", (layer,)).fetchall()
    return {r[0] for r in rows}


def _ranked(groups):
    return sorted(((k, v[0], v[1]) for k, v in groups.items()), key=lambda t: (-t[1], t[0]))


SUMMARY_TOP = 10  # tests whose peaks the summary lists


def measure(db_path, layers_by_test, rootdir=None, sites_for=None, peak_for=None):
    """{test id: Measure} for the tests whose start and end marks the database at db_path has;
    layers_by_test: {test id: layer name or None (heap and mmap)}. The peak is computed for the
    tests for which peak_for(test id, Measure with allocated and leaked) is true (all when
    None), and for the SUMMARY_TOP largest peaks (a peak is at most the bytes allocated, so the
    tests are taken by allocated bytes until no other can beat the tenth); the others keep
    peak 0 and peak_exact False. The allocating lines are
    computed for the tests for which sites_for(test id, {test id: Measure}) is true, once every
    test's figures are known (all tests when None). The database must be writable (an
    index and temporary tables are added: the session's own, made for this)."""
    db = sqlite3.connect(db_path)
    try:
        return _measure(db, layers_by_test, rootdir, sites_for, peak_for)
    finally:
        db.close()


def measure_windows(db_path, rootdir=None, sites_for=None):
    """{test id: Measure} from a database converted with the test marks as windows (tables
    mark_windows and mark_window_sites: the conversion computed each test's figures over the
    heap and the mmap layer, and the stacks of the blocks live at its peak and leaked; exact,
    peak_exact for every test). The allocating lines are made for the tests for which
    sites_for(test id, {test id: Measure}) is true (all when None)."""
    db = sqlite3.connect(db_path)
    try:
        out = {}
        for tid, alloc, peak, leaked in db.execute(
                "SELECT id, allocated, peak, leaked FROM mark_windows"):
            m = out[tid] = Measure()
            m.allocated, m.peak, m.leaked, m.peak_exact = alloc, peak, leaked, True
        rows = {}
        for tid, kind, stack, size, blocks in db.execute(
                "SELECT window, kind, stack_id, bytes, blocks FROM mark_window_sites"):
            rows.setdefault(tid, []).append((kind, stack, size, blocks))
    finally:
        db.close()
    wanted = [t for t in out if t in rows and (sites_for is None or sites_for(t, out))]
    stacks = {s for t in wanted for _, s, _, _ in rows[t] if s is not None}
    from . import _store
    texts = _store.py_texts(db_path, sorted(stacks)) if stacks else {}
    for tid in wanted:
        groups = ({}, {})
        for kind, stack, size, blocks in rows[tid]:
            e = groups[kind].setdefault(_site(texts.get(stack), rootdir), [0, 0])
            e[0] += size
            e[1] += blocks
        out[tid].peak_sites, out[tid].leak_sites = _ranked(groups[0]), _ranked(groups[1])
    return out


def _peak(db, tid):
    """(peak, its time) of one test: the running sum of its allocations and frees, in time
    order (a free before an allocation at the same ns), sorted by SQLite."""
    live, best, at = 0, 0, None
    for t, d in db.execute(
            "SELECT t, d FROM (SELECT a AS t, 1 AS k, z AS d FROM wb WHERE tid = ?1 UNION ALL "
            "SELECT f, 0, -z FROM wb WHERE tid = ?1 AND f <= e) ORDER BY t, k", (tid,)):
        live += d
        if live > best:
            best, at = live, t
    return best, at


def _measure(db, layers_by_test, rootdir, sites_for, peak_for):
    windows = {}
    for name, ts in db.execute("SELECT name, ts_ns FROM events WHERE kind = 5 AND name LIKE "
                               "'memscope-pytest %' ORDER BY id"):
        if name.startswith(MARK_START):
            windows.setdefault(name[len(MARK_START):], [ts, None])
        elif name.startswith(MARK_END) and name[len(MARK_END):] in windows:
            windows[name[len(MARK_END):]][1] = ts
    spans = [(tid, w[0], w[1]) for tid, w in windows.items() if w[1] is not None]
    # SQLite finds the blocks of each test's window by an index on alloc_ns and sorts their
    # allocations and frees by time (a free before an allocation at the same ns); the running
    # sum over them gives the peak.
    db.execute("CREATE INDEX IF NOT EXISTS temp_blocks_alloc_ns ON blocks(alloc_ns)")
    db.execute("CREATE TEMP TABLE w (tid TEXT PRIMARY KEY, s INTEGER, e INTEGER, "
               "layers TEXT)")
    db.executemany("INSERT INTO w VALUES (?, ?, ?, ?)",
                   [(tid, s, e, "," + ",".join(str(x) for x in
                                               sorted(_layers(db, layers_by_test.get(tid))))
                     + ",") for tid, s, e in spans])
    db.execute("CREATE TEMP TABLE wb AS SELECT w.tid AS tid, b.alloc_ns AS a, b.free_ns AS f, "
               "b.size AS z, b.stack_id AS stack, w.e AS e FROM w JOIN blocks b "
               "ON b.alloc_ns BETWEEN w.s AND w.e "
               "WHERE instr(w.layers, ',' || b.layer || ',') > 0")
    out = {tid: Measure() for tid, _, _ in spans}
    for tid, alloc, leaked in db.execute(
            "SELECT tid, sum(z), sum(CASE WHEN f IS NULL OR f > e THEN z ELSE 0 END) "
            "FROM wb GROUP BY tid"):
        out[tid].allocated, out[tid].leaked = alloc, leaked
    db.execute("CREATE INDEX temp.wb_tid ON wb(tid)")
    peak_at = {}

    def compute(tid):
        out[tid].peak, at = _peak(db, tid)
        out[tid].peak_exact = True
        if at is not None:
            peak_at[tid] = at

    for tid in out:
        if peak_for is None or peak_for(tid, out[tid]):
            compute(tid)
    for tid in sorted(out, key=lambda t: -out[t].allocated):
        top = heapq.nlargest(SUMMARY_TOP, (m.peak for m in out.values() if m.peak_exact))
        if len(top) >= SUMMARY_TOP and top[-1] >= out[tid].allocated:
            break  # no test left can enter the summary
        if not out[tid].peak_exact:
            compute(tid)
    texts = {}

    def site(stack):
        if stack not in texts:
            row = db.execute("SELECT py_text FROM stacks WHERE id = ?", (stack,)).fetchone()
            texts[stack] = _site(row[0] if row else None, rootdir)
        return texts[stack]

    def groups(rows):
        g = {}
        for stack, size in rows:
            e = g.setdefault(site(stack), [0, 0])
            e[0] += size
            e[1] += 1
        return _ranked(g)

    for tid, _, _ in spans:
        if sites_for is not None and not sites_for(tid, out):
            continue
        m = out[tid]
        if tid in peak_at:
            at = peak_at[tid]
            m.peak_sites = groups(db.execute(
                "SELECT stack, z FROM wb WHERE tid = ? AND a <= ?2 AND (f IS NULL OR f > ?2)",
                (tid, at)))
        if m.leaked:
            m.leak_sites = groups(db.execute(
                "SELECT stack, z FROM wb WHERE tid = ? AND (f IS NULL OR f > e)", (tid,)))
    return out
