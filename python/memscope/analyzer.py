"""msMemScope's offline analyzers: list_analyzers(), get_analyzer_config(), analyze(),
check_leaks(), check_inefficient(), and the LeaksAnalyzer/LeaksConfig,
InefficientAnalyzer/InefficientConfig classes. Callers: user code, through the memscope package.

check_leaks reads msMemScope's CSV (`memscope run --format=csv`, `memscope export --format=csv`,
or msMemScope's own) as msMemScope does: device memory (Event Type HAL) per device, between
the MSTX marks of one name. check_inefficient runs `memscope analyze inefficient --write-back`
on a database, which records the findings in it, as msMemScope appends them to its input; on a
CSV it applies the same rules here and writes the findings into the MALLOC rows' Attr.
Inputs are hostile: a regular file, at most 8 GiB, a path of at most 4096 characters; a CSV is
read strictly (the csv module's strict mode, a UTF-8 byte-order mark allowed, numbers in ASCII
digits only), and one it cannot read is refused with ValueError naming the line."""
import csv
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from . import _env

MAX_INPUT = 8 << 30
MAX_PATH = 4096
INEFFICIENT_TYPES = ("early_allocation", "late_deallocation", "temporary_idleness")


class LeaksConfig:
    """check_leaks' parameters."""

    def __init__(self, input_path, mstx_info, start_index=0):
        self.input_path = input_path
        self.mstx_info = mstx_info
        self.start_index = start_index


class InefficientConfig:
    """check_inefficient's parameters."""

    def __init__(self, input_path, mem_size=0, inefficient_type=None, idle_threshold=3000):
        self.input_path = input_path
        self.mem_size = mem_size
        self.inefficient_type = inefficient_type
        self.idle_threshold = idle_threshold


def _check_input(path, suffixes, writable=False):
    """The input's path, after msMemScope's checks (ValueError otherwise)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("input_path must be a path, not %s" % type(path).__name__)
    path = os.fspath(path)
    if not path or len(path) > MAX_PATH:
        raise ValueError("input_path: empty or longer than %d characters" % MAX_PATH)
    if not path.endswith(suffixes):
        raise ValueError("input_path %r: expected a %s file" % (path, " or ".join(suffixes)))
    if not os.path.isfile(path):
        raise ValueError("input_path %r: not a regular file" % path)
    if os.path.getsize(path) > MAX_INPUT:
        raise ValueError("input_path %r: larger than 8 GiB" % path)
    if writable and not os.access(path, os.W_OK):
        raise ValueError("input_path %r: not writable (the findings are written into it)" % path)
    return path


_SIZE = re.compile(r"(?:^|[{,])size:([0-9]+)")
_INT = re.compile(r"-?[0-9]+")
_DEFUSED = re.compile(r"'+[=+\-@\t\r]")


def _text(field):
    """A name or stack field as the program gave it: memscope's CSV export puts one more single
    quote in front of text a spreadsheet would take for a formula (docs/cli.md); taken off."""
    return field[1:] if _DEFUSED.match(field) else field


def _int(text):
    """text as an int when it is one in ASCII digits (int() also takes "1_0", " 10" and other
    scripts' digits), else None."""
    return int(text) if isinstance(text, str) and _INT.fullmatch(text) else None


def _csv_records(f, path):
    """(text, row, line) for each record of the open CSV file f (opened with newline=""), as the
    csv module reads it in strict mode: text is the record's exact text (its lines, line ends
    included), row its fields, line the number of its last line; the header's byte-order mark
    is left in text and taken off row. ValueError (naming path and the line) for a record the
    csv module cannot read exactly: a quote inside a quoted field not doubled, a NUL, a quoted
    field never closed."""
    csv.field_size_limit(1 << 24)
    raw = []

    def lines():
        for line in f:
            raw.append(line)
            yield line
    reader = csv.reader(lines(), strict=True)
    first = True
    try:
        for row in reader:
            text = "".join(raw)
            raw.clear()
            if first and row and row[0].startswith("\ufeff"):
                row[0] = row[0][1:]
            first = False
            yield text, row, reader.line_num
    except csv.Error as e:
        raise ValueError("%s: line %d: %s (not a CSV memscope can read back exactly)"
                         % (path, reader.line_num, e)) from None


def check_leaks(input_path, mstx_info, start_index=0):
    """Device memory (Event Type HAL) allocated between two MSTX marks named mstx_info and not
    freed by the third: marks start_index, +1, +2 of that name are A, B, C; every HAL MALLOC with
    A <= ID <= B is recorded, every HAL FREE with A <= ID <= C removes the recorded block at its
    Ptr, per device; rows of Device Id N/A are not device memory. Prints
    "Direct Hal memory leak of <MB> Mb(s) at <Ptr> in Index <ID>." for each block left and
    returns them as dicts (device, ptr, id, size). The marks are the program's, whatever device
    was current (memscope records them without one). ValueError when fewer than three marks of
    that name follow start_index, or the file is not msMemScope's CSV."""
    path = _check_input(input_path, (".csv",))
    if not isinstance(start_index, int) or start_index < 0:
        raise ValueError("start_index must be an int >= 0")
    marks, rows = [], []
    csv.field_size_limit(1 << 24)
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        records = _csv_records(f, path)
        head = next(records, (None, None, 0))[1]
        need = {"ID", "Event", "Event Type", "Name", "Device Id", "Ptr", "Attr"}
        if not head or not need <= set(head):
            raise ValueError("%s: not msMemScope's CSV (columns %s)" % (path, sorted(need)))
        for _, row, _ in records:
            r = dict(zip(head, row))
            rid = _int(r.get("ID"))
            if rid is None or len(row) != len(head):
                continue
            if r["Event"] == "MSTX" and r["Event Type"] == "Mark" and \
                    _text(r["Name"]) == mstx_info:
                marks.append(rid)
            elif r["Event Type"] == "HAL" and r["Event"] in ("MALLOC", "FREE") and \
                    r["Device Id"] not in ("N/A", "", None):
                m = _SIZE.search(r["Attr"])
                rows.append((rid, r["Event"], r["Device Id"], r["Ptr"], int(m.group(1)) if m else 0))
    marks.sort()
    if len(marks) < start_index + 3:
        raise ValueError("check_leaks: %d mark(s) named %r, need 3 from index %d"
                         % (len(marks), mstx_info, start_index))
    a, b, c = marks[start_index:start_index + 3]
    live = {}   # (device, ptr) -> (id, size)
    for rid, event, dev, ptr, size in sorted(rows):
        if event == "MALLOC" and a <= rid <= b:
            live[(dev, ptr)] = (rid, size)
        elif event == "FREE" and a <= rid <= c:
            live.pop((dev, ptr), None)
    leaks = [{"device": dev, "ptr": ptr, "id": rid, "size": size}
             for (dev, ptr), (rid, size) in sorted(live.items(), key=lambda kv: kv[1][0])]
    for lk in leaks:
        print("Direct Hal memory leak of %f Mb(s) at %s in Index %d." %
              (lk["size"] / 1048576.0, lk["ptr"], lk["id"]))
    return leaks


def _memscope_bin():
    """The memscope command beside this package (build tree or install tree), else on PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (_env.get(_env.CLI), os.path.join(here, "..", "..", "memscope"),
                 os.path.join(here, "..", "..", "..", "..", "bin", "memscope"),
                 shutil.which("memscope")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    raise RuntimeError("check_inefficient: the memscope command is not found (set MEMSCOPE)")


def check_inefficient(input_path, mem_size=0, inefficient_type=None, idle_threshold=3000):
    """Early allocation, late deallocation and temporary idleness (msMemScope's rules) on a
    memscope database or msMemScope's CSV. On a database, `memscope analyze inefficient
    --write-back` records the findings in it (its `inefficient` table and the MALLOC rows'
    Attr `inefficient_type`); on a CSV the rules run here (_ineff_csv, the same rules as that
    analysis) and the flagged MALLOC rows' Attr gain `inefficient_type:<a>[,<b>]`, the file
    rewritten in place (every other record byte for byte). Returns the flagged blocks of at
    least mem_size bytes of the asked types (all three when None), as dicts (allocation_id,
    size, layer, types[, site, owner])."""
    path = _check_input(input_path, (".db", ".csv"), writable=True)
    types = INEFFICIENT_TYPES if inefficient_type is None else (
        (inefficient_type,) if isinstance(inefficient_type, str) else tuple(inefficient_type))
    bad = [t for t in types if t not in INEFFICIENT_TYPES]
    if bad:
        raise ValueError("inefficient_type: %s (expected %s)" % (bad, ", ".join(INEFFICIENT_TYPES)))
    if not isinstance(idle_threshold, int) or idle_threshold <= 0:
        raise ValueError("idle_threshold must be an int > 0")
    if not isinstance(mem_size, int) or mem_size < 0:
        raise ValueError("mem_size must be an int >= 0")
    if path.endswith(".csv"):
        found = [b for b in _ineff_csv(path, idle_threshold) if b["size"] >= mem_size]
        for b in found:
            b["types"] = [t for t in b["types"] if t in types]
        found = [b for b in found if b["types"]]
        _ineff_csv_write(path, {b["allocation_id"]: b["types"] for b in found})
    else:
        found = _ineff_db(path, mem_size, types, idle_threshold)
    for b in found:
        print("%s: %d bytes, allocation %d (%s)" % (",".join(b.get("types", ())),
                                                    b.get("size", 0), b.get("allocation_id", 0),
                                                    b.get("site") or b.get("layer", "?")))
    return found


def _ineff_db(path, mem_size, types, idle_threshold):
    p = subprocess.run([_memscope_bin(), "analyze", "inefficient", path, "--write-back",
                        "--idle-threshold", str(idle_threshold), "--top", "1000000000",
                        "--json"],
                       capture_output=True, encoding="utf-8", errors="replace")
    if p.returncode != 0:
        raise RuntimeError("check_inefficient: %s" % (p.stderr.strip() or p.returncode))
    import json
    doc = json.loads(p.stdout)
    return [b for b in doc.get("blocks", []) if b.get("size", 0) >= mem_size and
            any(t in b.get("types", ()) for t in types)]


_AID = re.compile(r"(?:^|[{,])\"?allocation_id\"?:\"?([0-9]+)")
_CSV_NEED = ("ID", "Event", "Event Type", "Name", "Process Id", "Thread Id", "Attr")


class _Api:
    """One process's API counter (analyze inefficient's struct proc)."""
    __slots__ = ("api", "malloc_api", "free_api", "open", "tmp_malloc", "tmp_free")

    def __init__(self):
        self.api, self.malloc_api, self.free_api = 0, None, None
        self.open, self.tmp_malloc, self.tmp_free = 0, False, False

    def classify(self):
        if self.tmp_malloc:
            self.malloc_api = self.api
        if self.tmp_free:
            self.free_api = self.api
        self.tmp_malloc = self.tmp_free = False


def _ineff_csv(path, idle_threshold):
    """msMemScope's three API-count rules over a CSV in ID order, as `memscope analyze
    inefficient` applies them to a database (docs/analyses.md): an API is an outermost range
    (OP_LAUNCH ATEN_START..ATEN_END, or memscope's MSTX Range_start..Range_end) of a thread, or
    one MALLOC, FREE or ACCESS outside every range; per process. Every MALLOC/FREE row takes
    part, as every memory layer does there. Memory: the live blocks and the findings."""
    csv.field_size_limit(1 << 24)
    procs, depth, live, found = {}, {}, {}, {}
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        records = _csv_records(f, path)
        head = next(records, (None, None, 0))[1]
        if not head or not all(c in head for c in _CSV_NEED):
            raise ValueError("%s: not msMemScope's CSV (columns %s)" % (path, list(_CSV_NEED)))
        ci = {c: head.index(c) for c in _CSV_NEED}
        last = None
        for _, r, line in records:
            if len(r) != len(head):
                raise ValueError("%s: line %d: %d fields, the header has %d"
                                 % (path, line, len(r), len(head)))
            rid = _int(r[ci["ID"]])
            if rid is None:
                raise ValueError("%s: line %d: ID %r is not a number"
                                 % (path, line, r[ci["ID"]]))
            if last is not None and rid <= last:
                raise ValueError("%s: line %d: ID %d after %d (the rows must be in ID order)"
                                 % (path, line, rid, last))
            last = rid
            _ineff_row(r, ci, idle_threshold, procs, depth, live, found)
    for aid, b in live.items():
        if b[4]:
            found[aid] = b
    # the layer as text (bytes that are not UTF-8, read as surrogates to copy them back
    # unchanged, become U+FFFD here: printable, and what the database's JSON says too)
    return [{"allocation_id": aid, "size": b[5],
             "layer": b[6].encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
             "types": [t for t in INEFFICIENT_TYPES if t in b[4]]}
            for aid, b in sorted(found.items(), key=lambda kv: (-kv[1][5], kv[0]))]


def _ineff_row(r, ci, idle_threshold, procs, depth, live, found):
    """One CSV record of _ineff_csv."""
    event, etype = r[ci["Event"]], r[ci["Event Type"]]
    key = r[ci["Process Id"]]
    p = procs.get(key)
    if p is None:
        p = procs[key] = _Api()
    if etype in ("ATEN_START", "Range_start", "ATEN_END", "Range_end") and \
            event in ("OP_LAUNCH", "MSTX"):
        t = (key, r[ci["Thread Id"]])
        d = depth.get(t, 0)
        if etype.endswith("START") or etype.endswith("start"):
            depth[t] = d + 1
            if d == 0:
                p.open += 1
                p.api += 1
        elif d > 0:
            depth[t] = d - 1
            if d == 1 and p.open > 0:
                p.open -= 1
                if p.open == 0:
                    p.classify()
        return
    if event not in ("MALLOC", "FREE", "ACCESS"):
        return
    if not p.open:
        p.api += 1
        p.tmp_malloc, p.tmp_free = event == "MALLOC", event == "FREE"
        p.classify()
    else:
        p.tmp_malloc |= event == "MALLOC"
        p.tmp_free |= event == "FREE"
    m = _AID.search(r[ci["Attr"]])
    if not m:
        return
    aid, api = int(m.group(1)), p.api
    if event == "MALLOC":
        sm = _SIZE.search(r[ci["Attr"]])
        # [malloc api, first access api other than it, last api, last was an access,
        #  flags, size, layer]
        live[aid] = [api, None, api, False, set(), int(sm.group(1)) if sm else 0, etype]
        return
    b = live.get(aid)
    if b is None:
        return   # allocated before recording, or not a block of this file
    if event == "ACCESS":
        if b[3] and api > b[2] and api - b[2] > idle_threshold:
            b[4].add("temporary_idleness")
        if b[1] is None and api != b[0]:
            b[1] = api
        if p.free_api is not None and b[1] is not None and b[0] != p.free_api and \
                b[1] > p.free_api and b[0] < p.free_api:
            b[4].add("early_allocation")
        b[2], b[3] = api, True
        return
    if p.malloc_api is not None and b[3] and b[2] != api and b[2] < p.malloc_api < api:
        b[4].add("late_deallocation")
    del live[aid]
    if b[4]:
        found[aid] = b


_INEFF_ATTR = re.compile(r",?\"?inefficient_type\"?:\"?[a-z_,]*\"?(?=}$)")


def _ineff_flag(row, ci, flagged):
    """row with its Attr ending in `inefficient_type:<a>[,<b>]` when it is the MALLOC of a
    flagged block (an earlier value replaced); None when it stays as it is."""
    if len(row) <= max(ci.values()) or row[ci["Event"]] != "MALLOC":
        return None
    attr = row[ci["Attr"]]
    aid = _AID.search(attr)
    types = flagged.get(int(aid.group(1))) if aid else None
    if not types or not attr.endswith("}"):
        return None
    a = _INEFF_ATTR.sub("", attr)
    row = list(row)
    row[ci["Attr"]] = a[:-1] + ",inefficient_type:" + ",".join(types) + "}"
    return row


def _ineff_csv_write(path, flagged):
    """Rewrites the CSV with the flagged blocks' MALLOC Attr ending in
    `inefficient_type:<a>[,<b>]` (an earlier value replaced); every other record is copied byte
    for byte. Records are the csv module's (strict: _csv_records), so a record that spans lines
    (stacks) or holds a stray quote stays whole. Written into a new file beside it (a random
    name, O_EXCL, 0600 until it takes the file's mode and owner), which must read back to the
    same records but for the Attr added, then renamed over it: on any failure the file is left
    as it was (ValueError when it cannot be read back exactly)."""
    if not flagged:
        return
    import io
    path = os.path.realpath(path)   # a symbolic link keeps pointing at the rewritten file
    d, base = os.path.split(path)
    st = os.stat(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % base, suffix=".memscope.tmp", dir=d)
    try:
        with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f, \
                os.fdopen(fd, "w", newline="", encoding="utf-8", errors="surrogateescape") as out:
            ci = None
            for text, row, _ in _csv_records(f, path):
                if ci is None:
                    ci = {c: row.index(c) for c in ("ID", "Event", "Attr")}
                else:
                    new = _ineff_flag(row, ci, flagged)
                    if new is not None:
                        buf = io.StringIO()
                        csv.writer(buf, lineterminator=text[len(text.rstrip("\r\n")):] or
                                   "\n").writerow(new)
                        text = buf.getvalue()
                out.write(text)
            out.flush()
            os.fchmod(out.fileno(), stat.S_IMODE(st.st_mode))
            if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                try:   # root rewriting another user's file: it stays theirs
                    os.fchown(out.fileno(), st.st_uid, st.st_gid)
                except OSError:
                    pass
        _ineff_csv_verify(path, tmp, flagged)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            os.unlink(tmp)


def _ineff_csv_verify(path, tmp, flagged):
    """ValueError unless tmp's records are path's with the flagged Attr added."""
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f, \
            open(tmp, newline="", encoding="utf-8", errors="surrogateescape") as g:
        a, b = _csv_records(f, path), _csv_records(g, tmp)
        ci = None
        while True:
            ra, rb = next(a, None), next(b, None)
            if ra is None and rb is None:
                return
            want = None if ra is None else ra[1]
            if ci is None and want is not None:
                ci = {c: want.index(c) for c in ("ID", "Event", "Attr")}
            elif want is not None:
                want = _ineff_flag(want, ci, flagged) or want
            if rb is None or want != rb[1]:
                raise ValueError("%s: line %d: the rewritten CSV does not read back to the same "
                                 "record; the file is left as it was"
                                 % (path, ra[2] if ra else rb[2]))


class LeaksAnalyzer:
    def analyze(self, config):
        return check_leaks(config.input_path, config.mstx_info, config.start_index)


class InefficientAnalyzer:
    def analyze(self, config):
        return check_inefficient(config.input_path, config.mem_size, config.inefficient_type,
                                 config.idle_threshold)


_ANALYZERS = {
    "leaks": (LeaksAnalyzer, LeaksConfig, ["input_path", "mstx_info", "start_index"]),
    "inefficient": (InefficientAnalyzer, InefficientConfig,
                    ["input_path", "mem_size", "inefficient_type", "idle_threshold"]),
}


def list_analyzers():
    return list(_ANALYZERS)


def get_analyzer_config(analyzer_type):
    if analyzer_type not in _ANALYZERS:
        raise ValueError("unknown analyzer %r (list_analyzers(): %s)"
                         % (analyzer_type, list_analyzers()))
    _, cfg, params = _ANALYZERS[analyzer_type]
    return {"config_class": cfg.__name__, "parameters": list(params)}


def analyze(analyzer_type, **kwargs):
    """Runs analyzer `analyzer_type` with its config's parameters as keywords."""
    if analyzer_type not in _ANALYZERS:
        raise ValueError("unknown analyzer %r (list_analyzers(): %s)"
                         % (analyzer_type, list_analyzers()))
    cls, cfg, _ = _ANALYZERS[analyzer_type]
    return cls().analyze(cfg(**kwargs))


if __name__ == "__main__":   # python3 -m memscope.analyzer leaks FILE.csv MARK [START]
    if len(sys.argv) >= 4 and sys.argv[1] == "leaks":
        check_leaks(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
