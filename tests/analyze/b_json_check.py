#!/usr/bin/python3
"""b_json_check.py KIND FILE: checks that a `memscope analyze KIND --json` document has the keys
docs/analyses.md documents for compare, inefficient, decompose and fragmentation, with the
documented types. Prints one line per problem; exit status 1 when there is any."""
import json
import sys

INT = int
NUM = (int, float)
STR = str
OPT_STR = (str, type(None))
OPT_INT = (int, type(None))

ROW = {"layer": STR, "a_bytes": INT, "a_count": INT, "b_bytes": INT, "b_count": INT,
       "diff_bytes": INT, "diff_count": INT}
TOTALS = {"a_bytes": INT, "a_count": INT, "b_bytes": INT, "b_count": INT, "diff_bytes": INT,
          "diff_count": INT}
problems = []


def check(obj, spec, where):
    if not isinstance(obj, dict):
        problems.append(f"{where}: not an object")
        return
    for key, typ in spec.items():
        if key not in obj:
            problems.append(f"{where}: missing key '{key}'")
        elif isinstance(typ, dict):
            check(obj[key], typ, f"{where}.{key}")
        elif isinstance(typ, list):
            if not isinstance(obj[key], list):
                problems.append(f"{where}.{key}: not an array")
            else:
                for i, item in enumerate(obj[key]):
                    if isinstance(typ[0], dict):
                        check(item, typ[0], f"{where}.{key}[{i}]")
                    elif not isinstance(item, typ[0]) or isinstance(item, bool):
                        problems.append(f"{where}.{key}[{i}]: wrong type")
        elif not isinstance(obj[key], typ) or (isinstance(obj[key], bool) and typ is not bool):
            problems.append(f"{where}.{key}: wrong type {type(obj[key]).__name__}")


def section():
    return {"totals": TOTALS, "by_site": [dict(ROW, site=STR)],
            "by_owner": [dict(ROW, owner=STR)]}


def main():
    kind, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        doc = json.load(f)
    if doc.get("analysis") != kind:
        problems.append(f"analysis is {doc.get('analysis')!r}, not {kind!r}")
    if kind == "compare":
        check(doc, {"mode": STR, "a": STR, "b": STR, "allocated": section()}, "$")
        if doc.get("mode") == "steps":
            check(doc, {"step_a": INT, "step_b": INT}, "$")
        else:
            check(doc, {"live_at_end": section()}, "$")
        if doc.get("ops") is not None:
            check(doc["ops"], {"a_count": INT, "b_count": INT, "matched": INT, "only_a": INT,
                               "only_b": INT,
                               "differ": [{"name": STR, "a_bytes": OPT_INT,
                                           "b_bytes": OPT_INT, "diff_bytes": INT}]}, "$.ops")
    elif kind == "inefficient":
        kinds = ["early_allocation", "late_deallocation", "temporary_idleness", "lazy_used",
                 "delayed_free", "long_idle"]
        check(doc, {"idle_threshold": INT, "flagged": INT, "written": bool,
                    "thresholds": {k: {"ns": INT, "percent": NUM} for k in kinds[3:]},
                    "counts": {k: {"blocks": INT, "bytes": INT} for k in kinds},
                    "blocks": [{"allocation_id": INT, "size": INT, "layer": STR,
                                "types": [STR], "site": STR, "owner": OPT_STR}]}, "$")
        for b in doc.get("blocks", []):
            for t in b.get("types", []):
                if t not in kinds:
                    problems.append(f"unknown type {t!r}")
    elif kind == "decompose":
        check(doc, {"moment": STR, "tree": [dict], "owners": [{"owner": OPT_STR,
                                                               "peak_bytes": INT,
                                                               "live": [INT]}],
                    "points": [{"label": STR, "ts_ns": INT}]}, "$")

        def node(n, where):
            check(n, {"name": STR, "bytes": INT, "blocks": INT, "children": list}, where)
            for i, c in enumerate(n.get("children", [])):
                node(c, f"{where}.children[{i}]")
        for i, n in enumerate(doc.get("tree", [])):
            node(n, f"$.tree[{i}]")
        for o in doc.get("owners", []):
            if len(o.get("live", [])) != len(doc.get("points", [])):
                problems.append("owners[].live and points differ in length")
    elif kind == "fragmentation":
        check(doc, {"pools": [{"name": STR, "layer": INT, "reserve_layer": INT,
                               "peak_used": INT,
                               "rows": [{"label": STR, "ts_ns": INT, "reserved": INT,
                                         "used": INT, "free": INT, "largest_free": INT,
                                         "fragmentation": NUM}]}]}, "$")
    else:
        problems.append(f"unknown kind {kind}")
    for p in problems:
        print(f"{path}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
