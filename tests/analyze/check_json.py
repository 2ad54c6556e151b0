#!/usr/bin/python3
"""check_json.py KIND FILE: checks a `memscope analyze KIND --json` document against the keys
documented in docs/analyses.md (every listed key present with the listed type, and the checks
of EXTRA; no check of extra keys), for every analysis. KIND "all" checks an `analyze all --json` document: one key per analysis, each a
document of that kind (or {"skipped"|"error": str}). Prints a one-line summary; exit 1 on the
first mismatch."""
import json
import sys

INT, NUM, STR, BOOL, NONE = int, (int, float), str, bool, type(None)
OPT_STR, OPT_INT = (str, NONE), (int, NONE)
ALLOC_ROW = {"site": STR, "bytes": INT, "blocks": INT}
SCHEMAS = {
    "leaks": {
        "analysis": STR, "warmup": INT,
        "verdict": {"rule": STR, "leak": BOOL, "judged_on": STR, "processes_judged": INT,
                    "processes_too_few_steps": INT, "bytes_per_step": NUM, "small_sites": INT,
                    "sites": [{"process_id": INT, "pid": INT, "layer": STR, "site": STR,
                               "bytes_per_step": NUM, "steps_grown": INT, "steps_judged": INT,
                               "first_step": INT, "last_step": INT, "held_bytes": INT,
                               "live_bytes": INT}]},
        "live_at_exit": [{"process_id": INT, "pid": INT, "exe": OPT_STR, "layer": STR,
                          "bytes": INT, "blocks": INT, "sites_total": INT,
                          "sites": [dict(ALLOC_ROW, owners=[STR])]}],
        "step_check": {"steps_recorded": BOOL, "bytes": INT, "allocations": INT,
                       "leaks": [{"process_id": INT, "pid": INT, "layer": STR,
                                  "allocation_id": INT, "addr": STR, "size": INT, "step": INT,
                                  "flagged_at_step": INT, "site": STR, "owner": OPT_STR}]},
        "growth": [{"process_id": INT, "pid": INT, "exe": OPT_STR, "layer": STR, "steps": [INT],
                    "by_site": [{"site": STR, "bytes_per_step": NUM, "live": [INT]}],
                    "by_owner": [{"owner": OPT_STR, "bytes_per_step": NUM, "live": [INT]}]}],
        "growth_without_steps": [{"process_id": INT, "pid": INT, "exe": OPT_STR, "layer": STR,
                                  "peak_bytes": INT, "peak_ns": INT, "start_ns": INT,
                                  "by_site": [{"site": STR, "bytes_per_tenth": NUM,
                                               "live": [INT]}],
                                  "by_owner": [{"owner": OPT_STR, "bytes_per_tenth": NUM,
                                                "live": [INT]}]}],
    },
    "peak": {
        "analysis": STR,
        "peaks": [{"process_id": INT, "pid": INT, "exe": OPT_STR, "layer": STR,
                   "peak_bytes": INT, "peak_blocks": INT, "peak_ns": INT, "offset_ns": INT,
                   "event_id": INT, "step": OPT_INT, "process_stats_peak_bytes": OPT_INT,
                   "by_site": [ALLOC_ROW],
                   "by_owner": [{"owner": OPT_STR, "bytes": INT, "blocks": INT}]}],
    },
    "temporary": {
        "analysis": STR, "allocations": INT, "temporary": INT, "temporary_bytes": INT,
        "groups": [{"process_id": INT, "pid": INT, "exe": OPT_STR, "layer": STR,
                    "allocations": INT, "temporary": INT,
                    "sites": [{"site": STR, "temporary": INT, "allocations": INT,
                               "temporary_bytes": INT}]}],
    },
    "trend": {
        "analysis": STR, "start_ns": INT, "end_ns": INT, "final_live_bytes": INT,
        "max_live_bytes": INT, "limit": OPT_INT,
        "samples": [{"offset_ns": INT, "live_bytes": INT}],
        "time_fit": {"points": INT, "slope": NUM, "intercept": NUM, "r2": NUM,
                     "slope_stderr": NUM},
        "tail_fit": {"points": INT, "slope": NUM, "intercept": NUM, "r2": NUM,
                     "slope_stderr": NUM},
        "steps": [{"process_id": INT, "pid": INT, "exe": OPT_STR, "fit_from_step": INT,
                   "ends": [{"step": INT, "live_bytes": INT}],
                   "step_fit": {"points": INT, "slope": NUM, "intercept": NUM, "r2": NUM,
                                "slope_stderr": NUM}}],
    },
}


ROW = {"layer": STR, "a_bytes": INT, "a_count": INT, "b_bytes": INT, "b_count": INT,
       "diff_bytes": INT, "diff_count": INT}
SECTION = {"totals": {k: INT for k in ("a_bytes", "a_count", "b_bytes", "b_count", "diff_bytes",
                                       "diff_count")},
           "by_site": [dict(ROW, site=STR)], "by_owner": [dict(ROW, owner=STR)]}
INEFF_KINDS = ["early_allocation", "late_deallocation", "temporary_idleness", "lazy_used",
               "delayed_free", "long_idle"]
SCHEMAS.update({
    "compare": {"analysis": STR, "mode": STR, "a": STR, "b": STR, "allocated": SECTION},
    "inefficient": {
        "analysis": STR, "idle_threshold": INT, "flagged": INT, "written": BOOL,
        "thresholds": {k: {"ns": INT, "percent": NUM} for k in INEFF_KINDS[3:]},
        "counts": {k: {"blocks": INT, "bytes": INT} for k in INEFF_KINDS},
        "blocks": [{"allocation_id": INT, "size": INT, "layer": STR, "types": [STR],
                    "site": STR, "owner": OPT_STR}],
    },
    "decompose": {
        "analysis": STR, "moment": STR, "tree": list,
        "owners": [{"owner": OPT_STR, "peak_bytes": INT, "live": [INT]}],
        "points": [{"label": STR, "ts_ns": INT}],
    },
    "fragmentation": {
        "analysis": STR,
        "pools": [{"name": STR, "layer": INT, "reserve_layer": INT, "peak_used": INT,
                   "rows": [{"label": STR, "ts_ns": INT, "reserved": INT, "used": INT,
                             "free": INT, "largest_free": INT, "fragmentation": NUM}]}],
    },
})


def compare_extra(doc):
    if doc["mode"] == "steps":
        check(doc, {"step_a": INT, "step_b": INT}, "compare")
    else:
        check(doc, {"live_at_end": SECTION}, "compare")
    if doc.get("ops") is not None:
        check(doc["ops"], {"a_count": INT, "b_count": INT, "matched": INT, "only_a": INT,
                           "only_b": INT, "differ": [{"name": STR, "a_bytes": OPT_INT,
                                                      "b_bytes": OPT_INT, "diff_bytes": INT}]},
              "compare.ops")


def inefficient_extra(doc):
    for b in doc["blocks"]:
        for t in b["types"]:
            if t not in INEFF_KINDS:
                raise ValueError(f"inefficient: unknown type {t!r}")


def decompose_extra(doc):
    def node(n, path):
        check(n, {"name": STR, "bytes": INT, "blocks": INT, "children": list}, path)
        for i, c in enumerate(n["children"]):
            node(c, f"{path}.children[{i}]")
    for i, n in enumerate(doc["tree"]):
        node(n, f"decompose.tree[{i}]")
    for o in doc["owners"]:
        if len(o["live"]) != len(doc["points"]):
            raise ValueError("decompose: owners[].live and points differ in length")


# Checks beyond the keys: keys that depend on a mode, recursive trees, lengths, vocabularies.
EXTRA = {"compare": compare_extra, "inefficient": inefficient_extra, "decompose": decompose_extra}


def check(v, schema, path):
    if isinstance(schema, dict):
        if not isinstance(v, dict):
            raise ValueError(f"{path}: expected an object, got {type(v).__name__}")
        for k, s in schema.items():
            if k not in v:
                raise ValueError(f"{path}: missing key {k!r}")
            check(v[k], s, f"{path}.{k}")
    elif isinstance(schema, list):
        if not isinstance(v, list):
            raise ValueError(f"{path}: expected an array, got {type(v).__name__}")
        for i, e in enumerate(v):
            check(e, schema[0], f"{path}[{i}]")
    else:
        types = schema if isinstance(schema, tuple) else (schema,)
        # bool is an int in Python: keep them apart.
        if isinstance(v, bool) and bool not in types:
            raise ValueError(f"{path}: expected {schema}, got a boolean")
        if not isinstance(v, types):
            raise ValueError(f"{path}: expected {schema}, got {type(v).__name__} {v!r}")


def main():
    kind, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        doc = json.load(f)
    try:
        if kind == "all":
            for name, sub in doc.items():
                if isinstance(sub, dict) and set(sub) & {"skipped", "error"}:
                    continue
                if name in SCHEMAS:
                    check(sub, SCHEMAS[name], name)
                    EXTRA.get(name, lambda d: None)(sub)
            missing = [k for k in SCHEMAS if k not in doc]
            if missing:
                raise ValueError(f"missing analyses {missing}")
            print(f"{len(doc)} analyses")
        else:
            check(doc, SCHEMAS[kind], kind)
            EXTRA.get(kind, lambda d: None)(doc)
            if doc.get("analysis") != kind:
                raise ValueError(f"analysis is {doc.get('analysis')!r}")
            print("ok")
    except ValueError as e:
        print(e)
        sys.exit(1)


main()
