#!/bin/bash
# test_ring.sh: `memscope run --trace-ring=SIZE` (docs/production.md, "A bounded trace"): the
# trace's disk usage stays under SIZE for a run of any length, the latest events are kept
# whole, and the descriptions they need (stacks, modules, the process) are there although they
# were first written in events the ring dropped, Python frames included.
#
# tests/progs/ring_phases.c: 1000 blocks of 555 bytes first; then 8 phases of 200,000
# malloc(24)/free pairs (about 13 MB of trace: the 4 MiB ring drops the first phases); last,
# 5000 blocks of 777 bytes from the same call site as the first ones (kept to the end) and the
# frees of the 1000 first blocks, whose allocations were dropped. The program measures the
# trace directory's disk usage after every phase and its own resident memory after the first
# and the last churn phase.
. "$(dirname "$0")/lib.sh"

P=$PROGS/ring_phases
CAP=$((4 << 20))

# Bad input: a clear error and exit status 2, nothing run.
for bad in abc 1MiB 0 ""; do
    ms bad run --trace-ring="$bad" -o "$TMP/bad.db" -- "$P" 1 10
    assert_eq "--trace-ring=$bad: exit status" 2 "$RC"
    assert_match "--trace-ring=$bad: the error" "--trace-ring: expected a size of at least 4MiB" "$(cat "$TMP/bad.err")"
done
ms both run --trace-ring=8MiB --max-trace-size=8MiB -o "$TMP/bad.db" -- "$P" 1 10
assert_eq "--trace-ring with --max-trace-size: exit status" 2 "$RC"
assert_match "--trace-ring with --max-trace-size: the error" "give one" "$(cat "$TMP/both.err")"
[ -e "$TMP/bad.db" ] && fail "a database was written for bad input" || pass "no database for bad input"

ms ring run --trace-ring=4MiB --call-stack=c:16,python:4 --format=db -o "$TMP/ring.db" -- "$P" 8 200000
assert_eq "ring run: exit status" 0 "$RC"
assert_eq "ring run: program output" "ring_phases done" "$(sed -n 1p "$TMP/ring.out")"
D=$TMP/ring.db
require_db "ring run" "$D"

# The disk usage, polled after every phase, never above the cap (and the ring did drop events:
# about 13 MB were written).
disk=$(sed -n 's/^disk //p' "$TMP/ring.out")
[[ "$disk" =~ ^[0-9]+$ ]] && [ "$disk" -gt $((CAP / 4)) ] && [ "$disk" -le $CAP ] &&
    pass "trace directory's disk usage at most $disk bytes (cap $CAP)" ||
    fail "trace directory's disk usage ${disk:-?} bytes: not within the cap of $CAP"
assert_match "ring run: events dropped, said in the database" "^earlier events dropped \(--trace-ring\) in 1 process" \
    "$(q "$D" "SELECT value FROM meta WHERE key = 'events_dropped'")"
assert_eq "ring run: the window starts at the first kept event" \
    "$(q "$D" "SELECT value FROM meta WHERE key = 'first_event_ns'")" \
    "$(q "$D" "SELECT value FROM meta WHERE key = 'events_dropped_before_ns'")"
assert_eq "ring run: recording did not stop, nothing damaged" "0|" \
    "$(q "$D" "SELECT coalesce(stopped_errno, 0), damage FROM processes")"

# The agent's memory constant: the same after the last churn phase as after the first.
read -r _ early late < <(grep '^rss ' "$TMP/ring.out")
if [[ "$early$late" =~ ^[0-9]+$ ]] && [ $((late - early)) -le 256 ]; then
    pass "resident memory constant (${early} KiB after the first churn phase, ${late} KiB after the last)"
else
    fail "resident memory ${early:-?} KiB after the first churn phase, ${late:-?} KiB after the last (over 256 KiB more)"
fi

# Kept, exactly: the last phase's 5000 blocks of 777 bytes, live at the end, with their stack
# and Python frame (described when phase 1 ran, in a dropped epoch) symbolized; the process's
# name.
H="(SELECT id FROM layers WHERE event_type = 'HOST')"
assert_eq "last phase: its blocks" "5000|3885000|5000" \
    "$(q "$D" "SELECT count(*), sum(size), sum(free_ns IS NULL) FROM blocks WHERE size = 777 AND layer = $H")"
assert_eq "last phase: their stack" "make|blocks|main" \
    "$(q "$D" "SELECT group_concat(name, '|') FROM (SELECT st.text AS name FROM stack_frames sf
              JOIN frames f ON f.id = sf.frame_id JOIN strings st ON st.id = f.function_id
              WHERE sf.stack_id = (SELECT stack_id FROM blocks WHERE size = 777 LIMIT 1)
              AND sf.position < 3 ORDER BY sf.position)")"
assert_eq "last phase: their Python frame (described once, in phase 1)" "service.py(21): handle" \
    "$(q "$D" "SELECT s.py_text FROM stacks s WHERE s.id = (SELECT stack_id FROM blocks WHERE size = 777 LIMIT 1)")"
assert_match "the process's record" "/ring_phases$" "$(q "$D" "SELECT exe FROM processes")"
# Dropped: the first phase's allocations; their 1000 frees, kept, count as unmatched (one more
# at most: a churn pair cut by the window's start, at the churn's address).
assert_eq "first phase: its allocations dropped" 0 "$(q "$D" "SELECT count(*) FROM blocks WHERE size = 555")"
churn=$(printf '%d' "$(sed -n 's/^churn //p' "$TMP/ring.out")")
assert_eq "first phase's blocks: frees of unknown blocks" 1000 \
    "$(q "$D" "SELECT count(*) FROM events WHERE kind = (SELECT id FROM event_kinds WHERE name = 'FREE')
              AND allocation_id IS NULL AND addr != $churn AND layer = $H")"
unmatched=$(q "$D" "SELECT unmatched_frees FROM process_stats WHERE layer = $H")
[ "$unmatched" = 1000 ] || [ "$unmatched" = 1001 ] &&
    pass "unmatched frees: $unmatched (the 1000, and perhaps a cut churn pair)" ||
    fail "unmatched frees: $unmatched, not 1000 or 1001"
done_testing
