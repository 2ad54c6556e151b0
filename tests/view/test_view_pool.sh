#!/bin/bash
# test_view_pool.sh: the allocator state (/api/segments and the page's Allocator state) on
# view_pool.c's run (pool "arena": two regions, blocks handed out and taken back, three steps):
# the regions, their blocks, used bytes and largest free extent exactly, at the end and stepping
# back event by event; then in chromium, served and as a report file (view_pool.mjs). The
# browser part is skipped as test_view_browser.sh's is (CI=true: a failure instead).
. "$(dirname "$0")/view_lib.sh"
"$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd" && skip "memscope built without libmicrohttpd"
KiB=1024 MIB=1048576
ms pool run -q -o "$TMP/pool.db" -- "$PROGS/view_pool"
assert_eq "view_pool: run exit status" 0 "$RC"
require_db "view_pool" "$TMP/pool.db"
view_start "$TMP/pool.db"
get() {
    local sep='?'
    [[ $1 == *\?* ]] && sep='&'
    rm -f "$TMP/body" # a failed request leaves no earlier answer to be read as its own
    curl -s -o "$TMP/body" -w '%{http_code}' "$BASE$1${sep}token=$TOKEN" >"$TMP/status"
}
js() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TMP/body" "$1"; }
# state DICT: regions as size:offset+size,...:largest_free joined by |
state='"|".join("%d:%s:%d" % (g["size"], ",".join("%d+%d" % (b["offset"], b["size"]) for b in g["blocks"]), g["largest_free"]) for g in d["segments"])'
get "/api/summary"
assert_eq "the run's pools" "['arena']" "$(js 'd["pools"]')"
end=$(js 'd["t1"]')
peak=$(js 'd["peak_ns"]') # the last block handed out
get "/api/segments?t=$end"
assert_eq "at the end: pool, regions, blocks, reserved, used" "arena 2 3 $((3 * MIB)) $((1664 * KiB))" \
    "$(js 'd["pool"], d["segment_count"], d["block_count"], d["reserved_bytes"], d["used_bytes"]' | tr -d "(),'")"
assert_eq "at the end: each region's blocks and largest free extent" \
    "$MIB:$((512 * KiB))+$((128 * KiB)):$((512 * KiB))|$((2 * MIB)):0+$MIB,$MIB+$((512 * KiB)):$((512 * KiB))" \
    "$(js "$state")"
assert_eq "at the end: no next event" "None" "$(js 'd["next_t"]')"
assert_eq "at the end: the previous event is the last block handed out, the peak" "$peak" "$(js 'd["prev_t"]')"
get "/api/segments?t=$peak"
prev=$(js 'd["prev_t"]')
get "/api/segments?t=$prev"
assert_eq "one event back: the last block not yet handed out" \
    "$MIB:$((512 * KiB))+$((128 * KiB)):$((512 * KiB))|$((2 * MIB)):0+$MIB:$MIB" "$(js "$state")"
prev=$(js 'd["prev_t"]')
get "/api/segments?t=$prev"
assert_eq "two events back: A's first block not yet freed" \
    "$MIB:0+$((256 * KiB)),$((512 * KiB))+$((128 * KiB)):$((384 * KiB))|$((2 * MIB)):0+$MIB:$MIB" "$(js "$state")"
get "/api/segments?t=-1"
assert_eq "before anything: no region" "0 0" "$(js 'd["segment_count"], d["block_count"]' | tr -d '(),')"
get "/api/segments?pool=1"
assert_eq "a pool that does not exist: 400" 400 "$(cat "$TMP/status")"
view_stop

# a run without pools: the query says so
known_db
view_start "$TMP/known.db"
get "/api/segments"
assert_eq "no pool in the run: 400" 400 "$(cat "$TMP/status")"
assert_match "no pool in the run: says so" "this run has no pool" "$(cat "$TMP/body")"
view_stop

# a real PyTorch snapshot: the regions and the active blocks at an event are the ones the
# snapshot reader's own state (memscope snapshot --state-at, an independent path) gives
SNAP=$VIEW_SRC/../../../shared/data/snapshots/04_cs336_bcrafton_torch2.10plus.pickle
if [ -f "$SNAP" ]; then
    view_start "$SNAP"
    get "/api/summary"
    origin=$(js 'd["origin_ns"]')
    for n in 1000 3000 6400; do
        "$MEMSCOPE" snapshot "$SNAP" --state-at $n >"$TMP/state$n.json" 2>/dev/null
        t=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["time_us"] * 1000 - int(sys.argv[2]))' \
            "$TMP/state$n.json" "$origin")
        get "/api/segments?t=$t"
        cp "$TMP/body" "$TMP/seg$n.json"
        assert_eq "snapshot event $n: regions, reserved bytes, active blocks' addresses and sizes" "same" \
            "$("$PY" - "$TMP/state$n.json" "$TMP/seg$n.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); v = json.load(open(sys.argv[2]))
sa = sorted((x["address"], x["size"]) for s in a["segments"] for x in s["blocks"] if x["state"] == "active_allocated")
sv = sorted((int(s["addr"], 16) + b["offset"], b["size"]) for s in v["segments"] for b in s["blocks"])
ra = sorted((s["address"], s["total_size"]) for s in a["segments"])
rv = sorted((int(s["addr"], 16), s["size"]) for s in v["segments"])
print("same" if (sa, ra, a["reserved_bytes"]) == (sv, rv, v["reserved_bytes"]) else
      f"differ: {len(sa)} vs {len(sv)} blocks, {len(ra)} vs {len(rv)} regions, {a['reserved_bytes']} vs {v['reserved_bytes']}")
PY
)"
    done
    view_stop
else
    echo "note: $SNAP missing: the snapshot case is not run"
fi

missing=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium"
command -v node >/dev/null || missing="$missing node"
[ -d "$WEB/node_modules/playwright-core" ] || missing="$missing web/node_modules"
if [ -n "$missing" ]; then
    [ "${CI:-}" = true ] && fail "missing:$missing (scripts/setup-debian.sh installs them)"
    echo "note: the browser part is not run: missing$missing"
    done_testing
fi
mkdir -p "$PROGS/screenshots"
view_start "$TMP/pool.db"
if WEB=$WEB node "$VIEW_SRC/view_pool.mjs" "$URL" "$PROGS/screenshots" >"$TMP/pool_browser.out" 2>&1; then
    pass "the allocator state in chromium: $(tail -1 "$TMP/pool_browser.out")"
else
    fail "the allocator state in chromium"
fi
sed 's/^/  /' "$TMP/pool_browser.out"
view_stop
ms report report "$TMP/pool.db" -o "$TMP/pool.html"
assert_eq "report: exit status" 0 "$RC"
if WEB=$WEB node "$VIEW_SRC/view_pool.mjs" "file://$TMP/pool.html" "$PROGS/screenshots" report \
    >"$TMP/pool_report.out" 2>&1; then
    pass "the allocator state in the report: $(tail -1 "$TMP/pool_report.out")"
else
    fail "the allocator state in the report"
fi
sed 's/^/  /' "$TMP/pool_report.out"
done_testing
