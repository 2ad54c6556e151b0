#!/bin/bash
# test_export_perfetto.sh: `memscope export --format=perfetto` on an_export.c, read back with
# Python's json: Chrome's trace event format (traceEvents, ph, ts in us), a counter of live
# bytes per process and layer whose maximum is the process's peak and whose last value is what
# was live at the end, at most 2002 points per counter; slices for the steps (durations exact
# to the ns) and the range; an instant event for the mark; --step as a window.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/ex.db
ms run run -q -o "$DB" -- "$PROGS/an_export"
assert_eq "run exit status" 0 "$RC"
T=$TMP/ex.json
ms pf export "$DB" --format=perfetto -o "$T"
assert_eq "perfetto exit status" 0 "$RC"
parent=$(q "$DB" "SELECT pid FROM processes WHERE id = 1")
child=$(q "$DB" "SELECT pid FROM processes WHERE id = 2")
start=$(q "$DB" "SELECT value FROM meta WHERE key = 'start_time_ns'")

# counters: "pid max last points" per (process, counter name)
assert_eq "counters: max = the heap's peak, last = live at the end" \
"$parent live bytes heap $(q "$DB" "SELECT peak_bytes || ' ' || live_bytes FROM process_stats WHERE process_id = 1 AND layer = 1")
$child live bytes heap 2222 2222" \
    "$(jq_py "$T" 'c = {}
for e in d["traceEvents"]:
    if e["ph"] == "C": c.setdefault((e["pid"], e["name"]), []).append((e["ts"], e["args"]["bytes"]))
[f"{k[0]} {k[1]} {max(v for t, v in p)} {p[-1][1]}" for k, p in sorted(c.items())]')"
assert_eq "counter points in time order, at most 2002 per counter" "True" \
    "$(jq_py "$T" 'c = {}
for e in d["traceEvents"]:
    if e["ph"] == "C": c.setdefault((e["pid"], e["name"]), []).append(e["ts"])
all(p == sorted(p) and len(p) <= 2002 for p in c.values())')"

steps=$(q "$DB" "SELECT 'step ' || step || ' ' || (start_ns - $start) || ' ' || (end_ns - start_ns) FROM steps ORDER BY step")
assert_eq "step slices: start and duration to the ns" "$steps" \
    "$(jq_py "$T" '["%s %d %d" % (e["name"], round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in d["traceEvents"] if e.get("cat") == "step"]')"
range=$(q "$DB" "SELECT name || ' ' || (end_ns - start_ns) || ' ' || t.tid FROM ranges r JOIN threads t ON t.id = r.thread_id")
assert_eq "the range's slice on its thread" "$range" \
    "$(jq_py "$T" '["%s %d %d" % (e["name"], round(e["dur"] * 1000), e["tid"]) for e in d["traceEvents"] if e.get("cat") == "range"]')"
assert_eq "the mark: an instant event" "done i $parent" \
    "$(jq_py "$T" '["%s %s %d" % (e["name"], e["ph"], e["pid"]) for e in d["traceEvents"] if e.get("cat") == "mark"]')"
assert_eq "process names" "an_export an_export" \
    "$(jq_py "$T" '" ".join(e["args"]["name"] for e in d["traceEvents"] if e["name"] == "process_name")')"

ms pf1 export "$DB" --format=perfetto --step=1 -o "$TMP/s1.json"
assert_eq "--step=1: only step 1's slice, and no mark (it came later)" "step 1" \
    "$(jq_py "$TMP/s1.json" '" ".join(e["name"] for e in d["traceEvents"] if e.get("cat") in ("step", "range", "mark"))')"
done_testing
