"""memscope.testmem: the memory of each test of a session, from a memscope database
(docs/ci.md, "The pytest plugin"). memscope.pytest_plugin marks each test's call with two MARK
events; this module reads the database written after the session and computes, per test and
for the selected layers, from the allocator's events (not from samples, so asynchronous frees
never make it flake):

  * peak: the highest sum of the bytes allocated during the test and still live at a moment of
    it (pytest-memray's limit_memory: the memory the test allocated at its high-water mark);
  * leaked: the bytes allocated during the test and still live when it returned
    (pytest-memray's limit_leaks);
  * allocated: every byte allocated during the test;
  * the allocating lines of the peak's and the leak's blocks: the innermost frame of the
    program's own code (not the standard library, site-packages, pytest or memscope) as
    "file.py:LINE", most bytes first.

Blocks of every process count (a test's forked children with it). Workload: one scan of the
blocks table in allocation order, then per test a sort of its blocks' allocations and frees.
It also holds the size rule of the markers (pytest-memray's) and the layer names.
"""
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


def measure(db_path, layers_by_test, rootdir=None):
    """{test id: Measure} for the tests whose start and end marks the database at db_path has;
    layers_by_test: {test id: layer name or None (heap and mmap)}."""
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    try:
        return _measure(db, layers_by_test, rootdir)
    finally:
        db.close()


def _measure(db, layers_by_test, rootdir):
    windows = {}
    for name, ts in db.execute("SELECT name, ts_ns FROM events WHERE kind = 5 AND name LIKE "
                               "'memscope-pytest %' ORDER BY id"):
        if name.startswith(MARK_START):
            windows.setdefault(name[len(MARK_START):], [ts, None])
        elif name.startswith(MARK_END) and name[len(MARK_END):] in windows:
            windows[name[len(MARK_END):]][1] = ts
    spans = sorted((w[0], w[1], tid) for tid, w in windows.items() if w[1] is not None)
    sel = {tid: _layers(db, layers_by_test.get(tid)) for _, _, tid in spans}
    blocks = {tid: [] for _, _, tid in spans}
    # one scan in allocation order; the windows do not overlap (tests run one at a time)
    k = 0
    for alloc_ns, free_ns, size, stack, layer in db.execute(
            "SELECT alloc_ns, free_ns, size, stack_id, layer FROM blocks "
            "ORDER BY allocation_id"):
        while k < len(spans) and alloc_ns > spans[k][1]:
            k += 1
        if k == len(spans):
            break
        start, end, tid = spans[k]
        if alloc_ns >= start and layer in sel[tid]:
            blocks[tid].append((alloc_ns, free_ns, size, stack))
    texts = {}

    def site(stack):
        if stack not in texts:
            row = db.execute("SELECT py_text FROM stacks WHERE id = ?", (stack,)).fetchone()
            texts[stack] = _site(row[0] if row else None, rootdir)
        return texts[stack]

    out = {}
    for start, end, tid in spans:
        m = Measure()
        bl = blocks[tid]
        moves = []
        for i, (a, f, size, _) in enumerate(bl):
            m.allocated += size
            moves.append((a, 1, size, i))
            if f is not None and f <= end:
                moves.append((f, 0, size, i))  # at the same ns a free comes first
        moves.sort()
        live, best, best_at = 0, 0, -1
        for j, (_, is_alloc, size, _) in enumerate(moves):
            live += size if is_alloc else -size
            if live > best:
                best, best_at = live, j
        m.peak = best
        if best_at >= 0:
            at = moves[best_at][0]
            peak_groups, leak_groups = {}, {}
            for a, f, size, stack in bl:
                if a <= at and (f is None or f > at):
                    g = peak_groups.setdefault(site(stack), [0, 0])
                    g[0] += size
                    g[1] += 1
            m.peak_sites = _ranked(peak_groups)
        leak_groups = {}
        for a, f, size, stack in bl:
            if f is None or f > end:
                m.leaked += size
                g = leak_groups.setdefault(site(stack), [0, 0])
                g[0] += size
                g[1] += 1
        m.leak_sites = _ranked(leak_groups)
        out[tid] = m
    return out
