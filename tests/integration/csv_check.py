"""csv_check.py: reads a memscope CSV (msMemScope's memscope_dump format) and prints facts the
integration tests compare exactly: the header line, the row count, and MALLOC rows of the given
sizes. Used by test_csv.sh.

    csv_check.py FILE SIZE...   ->  header / rows N / per size: "SIZE EVENT TYPE FUNC COUNT"
Exits 1 when a row is malformed (wrong column count, bad Ptr, Attr not in {k:v,...} form)."""
import csv
import re
import sys

HEADER = ("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,"
          "Call Stack(Python),Call Stack(C)")


def parse_attr(text):
    # msMemScope's Attr: "{k:v,k:v}", values unquoted; keys are known words, so split on
    # ",key:" boundaries.
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError("Attr not in braces: %r" % text)
    out = {}
    for m in re.finditer(r"(?:^|,)([A-Za-z_]+):([^,]*)", text[1:-1]):
        out[m.group(1)] = m.group(2)
    return out


def main():
    path, sizes = sys.argv[1], sys.argv[2:]
    with open(path, newline="") as f:
        first = f.readline().rstrip("\r\n")
        print("header " + ("exact" if first == HEADER else "WRONG: " + first))
        counts = {}
        rows = 0
        bad = 0
        ids = []
        for row in csv.reader(f):
            rows += 1
            if len(row) != 12:
                print("bad row (%d columns): %r" % (len(row), row), file=sys.stderr)
                bad += 1
                continue
            ids.append(int(row[0]))
            attr = parse_attr(row[9])
            if row[1] in ("MALLOC", "FREE"):
                if not re.fullmatch(r"0x[0-9a-f]{16}", row[8]):
                    print("bad Ptr %r" % row[8], file=sys.stderr)
                    bad += 1
                if int(row[8], 16) != int(attr.get("addr", "0"), 16):
                    print("Ptr %s != Attr addr %s" % (row[8], attr.get("addr")), file=sys.stderr)
                    bad += 1
            for k in ("allocation_id", "addr", "size"):
                if row[1] == "MALLOC" and k not in attr:
                    print("Attr lacks %s: %r" % (k, row[9]), file=sys.stderr)
                    bad += 1
            if row[1] == "MALLOC" and attr.get("size") in sizes:
                key = (int(attr["size"]), row[1], row[2], attr.get("func", "?"))
                counts[key] = counts.get(key, 0) + 1
        print("rows %d" % rows)
        print("ids ascending %s" % (ids == sorted(ids)))
        for key in sorted(counts):
            print("%d %s %s %s %d" % (key + (counts[key],)))
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
