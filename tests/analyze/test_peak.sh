#!/bin/bash
# test_peak.sh: `memscope analyze peak` on an_peak.c: the peak is exactly 1050000 bytes in 60
# blocks, an_peak_big holds 1000000 of them (owner "big"), it agrees with process_stats;
# golden text; JSON keys; the program behaves the same without the agent.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/peak.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_peak"
assert_eq "run exit status" 0 "$RC"
require_db "an_peak" "$DB"

ms peak analyze peak "$DB"
assert_eq "analyze peak exit status" 0 "$RC"
golden peak "$TMP/peak.out"
assert_match "text: peak bytes and blocks" "heap: peak 1050000 bytes \(1025.4 KiB\) in 60 blocks" \
    "$(cat "$TMP/peak.out")"

ms peakj analyze peak "$DB" --json
J=$TMP/peakj.out
json_check peak "$J"
assert_eq "JSON: heap peak bytes, blocks" "1050000 60" \
    "$(jq_py "$J" 'p = [p for p in d["peaks"] if p["layer"] == "heap"][0]; "%s %s" % (p["peak_bytes"], p["peak_blocks"],)')"
assert_eq "JSON: peak = process_stats.peak_bytes" \
    "$(q "$DB" 'SELECT peak_bytes FROM process_stats WHERE layer = 1')" \
    "$(jq_py "$J" '[p for p in d["peaks"] if p["layer"] == "heap"][0]["process_stats_peak_bytes"]')"
assert_eq "JSON: peak_ns = process_stats.peak_ns" \
    "$(q "$DB" 'SELECT peak_ns FROM process_stats WHERE layer = 1')" \
    "$(jq_py "$J" '[p for p in d["peaks"] if p["layer"] == "heap"][0]["peak_ns"]')"
assert_eq "JSON: by call site" "an_peak_big 1000000 10
an_peak_small 50000 50" \
    "$(jq_py "$J" '["%s %s %s" % (s["site"].split()[0], s["bytes"], s["blocks"],) for s in [p for p in d["peaks"] if p["layer"] == "heap"][0]["by_site"]]')"
assert_eq "JSON: by owner" "big 1000000 10
small 50000 50" \
    "$(jq_py "$J" '["%s %s %s" % (s["owner"], s["bytes"], s["blocks"],) for s in [p for p in d["peaks"] if p["layer"] == "heap"][0]["by_owner"]]')"
# The peak event is the MALLOC of the 50th small block.
assert_eq "JSON: the peak event is the last small allocation" \
    "$(q "$DB" "SELECT max(e.id) FROM events e JOIN stacks s ON s.id = e.stack_id WHERE e.size = 1000 AND e.kind = 1 AND s.c_text LIKE 'an_peak_small%'")" \
    "$(jq_py "$J" '[p for p in d["peaks"] if p["layer"] == "heap"][0]["event_id"]')"

# --top 1 keeps one row per ranking; --layer mmap has no peak here.
ms top1 analyze peak "$DB" --top 1 --json
assert_eq "--top 1" 1 "$(jq_py "$TMP/top1.out" 'len(d["peaks"][0]["by_site"])')"
ms heap analyze peak "$DB" --layer heap --json
assert_eq "--layer heap: one peak" "heap" "$(jq_py "$TMP/heap.out" '[p["layer"] for p in d["peaks"]]')"

same_without_agent "$PROGS/an_peak"
done_testing
