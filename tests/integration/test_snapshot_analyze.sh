#!/usr/bin/env bash
# test_snapshot_analyze.sh: every analysis works on a database imported from a real PyTorch
# snapshot (issue 5): the numbers agree with `memscope snapshot --json` of the same file.
. "$(dirname "$0")/lib.sh"

SNAP=$(dirname "$0")/../../../shared/data/snapshots/04_cs336_bcrafton_torch2.10plus.pickle
[ -f "$SNAP" ] || skip "the real snapshots (../shared/data/snapshots) are not here"
"$MEMSCOPE" snapshot "$SNAP" -o "$TMP/s.db" 2>"$TMP/imp.err"
assert_eq "import exit status" 0 "$?"
"$MEMSCOPE" snapshot "$SNAP" --json >"$TMP/s.json"
J() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$TMP/s.json'))['devices'][0]; print($1)"; }

RESERVED=$(J "d['reserved_bytes']")
# Blocks live at the end are the snapshot's active_allocated blocks. (Their bytes differ from
# the snapshot's allocated_bytes: trace entries carry requested sizes, segments rounded ones.)
ACTIVE=$(J "d['blocks_by_state']['active_allocated']['count']")
LIVE=$(q "$TMP/s.db" "SELECT sum(size) FROM blocks WHERE layer = 3 AND free_ns IS NULL")
assert_eq "leaks: PTA blocks and bytes live at the end" "$ACTIVE|$LIVE" \
    "$("$MEMSCOPE" analyze leaks "$TMP/s.db" --json | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
g = [g for g in d['live_at_exit'] if g['layer'] == 'PTA'][0]
print(f\"{g['blocks']}|{g['bytes']}\")" 2>&1)"
PEAK=$(q "$TMP/s.db" "SELECT peak_bytes FROM process_stats WHERE layer = 3")
assert_eq "peak: PTA peak = process_stats" "$PEAK" \
    "$("$MEMSCOPE" analyze peak "$TMP/s.db" --json | /usr/bin/python3 -c "
import json, sys
print([p['peak_bytes'] for p in json.load(sys.stdin)['peaks'] if p['layer'] == 'PTA'][0])" 2>&1)"
assert_eq "fragmentation: reserved at the end = the snapshot's reserved bytes" "$RESERVED" \
    "$("$MEMSCOPE" analyze fragmentation "$TMP/s.db" --json | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
print([m['reserved'] for m in d['pools'][0]['rows'] if m['label'] == 'end'][0])" 2>&1)"
assert_eq "decompose --by=stack: the tree adds up to the PTA peak" "$PEAK" \
    "$("$MEMSCOPE" analyze decompose --by=stack --layer=PTA "$TMP/s.db" --json | /usr/bin/python3 -c "
import json, sys
t = json.load(sys.stdin)['tree'][0]
print(sum(k['bytes'] for k in t['children'][0]['children']))" 2>&1)"
for k in trend temporary inefficient; do
    "$MEMSCOPE" analyze "$k" "$TMP/s.db" >"$TMP/$k.txt" 2>&1
    assert_eq "analyze $k runs" 0 "$?"
done
"$MEMSCOPE" analyze compare --with "$TMP/s.db" "$TMP/s.db" --json >"$TMP/cmp.json" 2>&1
assert_eq "compare a snapshot with itself: no difference" 0 \
    "$(/usr/bin/python3 -c "
import json
d = json.load(open('$TMP/cmp.json'))
print(sum(abs(r['diff_bytes']) for sec in d.values() if isinstance(sec, dict) for rows in sec.values() if isinstance(rows, list) for r in rows if isinstance(r, dict) and 'diff_bytes' in r))" 2>&1)"
done_testing
