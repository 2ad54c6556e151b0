"""check_inefficient and check_leaks on msMemScope CSVs from elsewhere (issue 37 items 3, 4 and
its low items): the rewrite never loses a record (a stray quote), never follows a link planted
at its temporary name nor changes another file's mode, keeps the file's own mode; a CSV the csv
module cannot read exactly is refused with ValueError (naming the line) and left untouched; a
byte-order mark is allowed; numbers are ASCII digits ("1_0" is not 10).

The CSV: allocation 1 (8 bytes) is accessed at API 2 and again at API 7, idle for 5 APIs in
between: temporary idleness with idle_threshold=1, the only finding."""
import csv
import os
import re
import stat

import pytest

import memscope
from memscope import analyzer

HEAD = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr\n"
ROWS = [("MALLOC", "{allocation_id:1,size:8}"), ("ACCESS", "{allocation_id:1}"),
        ("MALLOC", "{allocation_id:2,size:16}"), ("FREE", "{allocation_id:2}"),
        ("MALLOC", "{allocation_id:3,size:16}"), ("FREE", "{allocation_id:3}"),
        ("ACCESS", "{allocation_id:1}"), ("FREE", "{allocation_id:1}")]
FLAGGED = '"{allocation_id:1,size:8,inefficient_type:temporary_idleness}"'


def lines(names=None, ids=None):
    """The CSV's lines: names and ids replace the Name and ID of some rows (1-based)."""
    names, ids = names or {}, ids or {}
    return [HEAD] + ['%s,%s,HOST,%s,%d,1,1,cpu,0x1000,"%s"\n'
                     % (ids.get(i, str(i)), ev, names.get(i, "N/A"), i, attr)
                     for i, (ev, attr) in enumerate(ROWS, 1)]


def write(path, text, mode=0o640):
    with open(path, "w", newline="") as f:
        f.write(text)
    os.chmod(path, mode)
    return str(path)


def read(path):
    with open(path, newline="") as f:
        return f.read()


def test_stray_quote_keeps_every_record(tmp_path):
    # Unquoted Name fields holding one '"' each (rows 1 and 4): the rewrite joined rows 1-4
    # into one record and wrote only the first (3 of 8 rows lost).
    src = lines(names={1: 'a"b', 4: 'c"d'})
    p = write(tmp_path / "t.csv", "".join(src))
    found = memscope.check_inefficient(p, idle_threshold=1)
    assert [(b["allocation_id"], b["types"]) for b in found] == [(1, ["temporary_idleness"])]
    want = list(src)
    want[1] = '1,MALLOC,HOST,"a""b",1,1,1,cpu,0x1000,%s\n' % FLAGGED
    assert read(p) == "".join(want)
    with open(p, newline="") as f:
        assert len(list(csv.reader(f))) == 9


def test_unreadable_quote_refused_untouched(tmp_path):
    # A quoted field with an undoubled quote inside: the csv module would read "a"b as ab.
    src = "".join(lines(names={3: '"a"b"'}))
    p = write(tmp_path / "t.csv", src)
    with pytest.raises(ValueError, match=r"t\.csv: line 4: .*read back exactly"):
        memscope.check_inefficient(p, idle_threshold=1)
    assert read(p) == src
    assert os.listdir(tmp_path) == ["t.csv"]


def test_links_at_temporary_names_not_followed(tmp_path):
    # The rewrite wrote .t.csv.memscope-<pid>.tmp with open("w") and copied t.csv's mode onto
    # it: a link planted there made it overwrite the victim and change its mode.
    victim = write(tmp_path / "victim", "precious\n", 0o600)
    p = write(tmp_path / "t.csv", "".join(lines()), 0o640)
    for name in (".t.csv.memscope-%d.tmp" % os.getpid(), "t.csv.tmp.%d" % os.getpid()):
        os.symlink(victim, tmp_path / name)
    memscope.check_inefficient(p, idle_threshold=1)
    assert read(victim) == "precious\n"
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(p).st_mode) == 0o640   # the CSV keeps its own mode
    assert not os.path.islink(p)
    assert FLAGGED in read(p)
    assert sorted(n for n in os.listdir(tmp_path) if "tmp" in n) == sorted(
        [".t.csv.memscope-%d.tmp" % os.getpid(), "t.csv.tmp.%d" % os.getpid()])


def test_byte_order_mark(tmp_path):
    src = "\ufeff" + "".join(lines())
    p = write(tmp_path / "t.csv", src)
    found = memscope.check_inefficient(p, idle_threshold=1)
    assert [b["allocation_id"] for b in found] == [1]
    assert read(p).startswith("\ufeffID,Event,")   # kept
    assert read(p).count(FLAGGED) == 1


def test_ascii_numbers_only(tmp_path):
    src = "".join(lines(ids={8: "1_0"}))
    p = write(tmp_path / "t.csv", src)
    with pytest.raises(ValueError, match=r"line 9: ID '1_0' is not a number"):
        memscope.check_inefficient(p, idle_threshold=1)
    assert read(p) == src


def leaks_csv(tmp_path, mark_ids, extra=""):
    """Marks named m with these IDs, a 1 MiB HAL MALLOC at ID 4 on device 0, and extra."""
    rows = [HEAD] + ["%s,MSTX,Mark,m,1,1,1,N/A,0x0,{}\n" % rid for rid in mark_ids]
    rows.append('4,MALLOC,HAL,N/A,1,1,1,0,0x10,"{allocation_id:1,size:1048576}"\n' + extra)
    return write(tmp_path / "l.csv", "".join(rows))


def test_check_leaks_hostile(tmp_path, capsys):
    # marks 1, 5, 9 around the MALLOC at 4: one leak
    p = leaks_csv(tmp_path, ["1", "5", "9"])
    assert [lk["id"] for lk in memscope.check_leaks(p, "m")] == [4]
    # "9_0" is no ID (it was read as 90): two marks, refused
    p = leaks_csv(tmp_path, ["1", "5", "9_0"])
    with pytest.raises(ValueError, match="2 mark"):
        memscope.check_leaks(p, "m")
    # a field over the csv module's limit (16 MiB): ValueError naming the line (was _csv.Error)
    p = leaks_csv(tmp_path, ["1", "5", "9"],
                  extra='10,FREE,HAL,"%s",1,1,1,0,0x10,{}\n' % ("x" * ((16 << 20) + 1)))
    with pytest.raises(ValueError, match=r"l\.csv: line 6: field larger than field limit"):
        memscope.check_leaks(p, "m")
    # an undoubled quote inside a quoted field: refused, not read as something else
    p = leaks_csv(tmp_path, ["1", "5", "9"], extra='10,FREE,HAL,"a"b",1,1,1,0,0x10,{}\n')
    with pytest.raises(ValueError, match=r"l\.csv: line 6: .*read back exactly"):
        memscope.check_leaks(p, "m")
    # a byte-order mark before the header
    p = leaks_csv(tmp_path, ["1", "5", "9"])
    write(p, "\ufeff" + read(p))
    assert [lk["id"] for lk in memscope.check_leaks(p, "m")] == [4]
    # marks named "=m": the export writes "'=m" (a spreadsheet shows text); read back as "=m"
    p = write(tmp_path / "l.csv", read(leaks_csv(tmp_path, ["1", "5", "9"])).replace(",m,", ",'=m,"))
    assert [lk["id"] for lk in memscope.check_leaks(p, "=m")] == [4]
    capsys.readouterr()


def test_verify_refuses_a_lost_record(tmp_path):
    p = write(tmp_path / "t.csv", "".join(lines()))
    q = write(tmp_path / "u.csv", "".join(lines()[:-1]))
    with pytest.raises(ValueError, match="does not read back"):
        analyzer._ineff_csv_verify(p, q, {})


def test_mutated_csvs_never_lose_a_record(tmp_path, capsys):
    """A fuzz of the rewrite with a fixed seed: 300 CSVs with quotes, commas, line ends, NULs,
    a BOM and non-UTF-8 bytes put at random places. Each either raises ValueError and is left
    byte for byte, or reads back to its records before the rewrite, but for the flagged MALLOC's
    Attr."""
    import random
    rnd = random.Random(37)
    base = "".join(lines()).encode()
    bits = [b'"', b",", b"\n", b"\r\n", b"\r", b"\0", b"\xef\xbb\xbf", b"\xff", b"'", b'""', b"x"]
    outcomes = {"refused": 0, "rewritten": 0}
    for i in range(300):
        data = bytearray(base)
        for _ in range(rnd.randint(1, 4)):
            pos = rnd.randrange(len(HEAD) + 1, len(data))   # the header stays whole
            data[pos:pos] = rnd.choice(bits)
        p = tmp_path / ("m%d.csv" % i)
        p.write_bytes(bytes(data))
        try:
            before = list(analyzer._csv_records(open(p, newline="", encoding="utf-8",
                                                     errors="surrogateescape"), str(p)))
        except ValueError:
            before = None
        try:
            memscope.check_inefficient(str(p), idle_threshold=1)
        except ValueError:
            assert p.read_bytes() == bytes(data), "refused, yet changed: case %d" % i
            outcomes["refused"] += 1
            continue
        assert before is not None, "case %d: accepted a CSV the reader refuses" % i
        with open(p, newline="", encoding="utf-8", errors="surrogateescape") as f:
            after = [r for _, r, _ in analyzer._csv_records(f, str(p))]
        assert len(after) == len(before), "case %d: %d records, was %d" % (i, len(after),
                                                                          len(before))
        for (_, old, _), new in zip(before, after):
            if old != new:   # only the flagged MALLOC's Attr, with the finding added
                assert old[:9] == new[:9] and old[1] == "MALLOC", "case %d: %r -> %r" % (
                    i, old, new)
                want = re.escape(analyzer._INEFF_ATTR.sub("", old[9])[:-1])
                assert re.fullmatch(want + r",inefficient_type:[a-z_,]+\}", new[9]), (i, new)
        outcomes["rewritten"] += 1
    capsys.readouterr()
    assert outcomes["refused"] >= 30 and outcomes["rewritten"] >= 30, outcomes
