#!/bin/bash
# test_mmap.sh: anonymous mmap/mmap64/mremap/munmap are recorded in the MMAP layer with exact
# counts, and file-backed mappings are not (tests/progs/mmap_anon.c). Address space reserved
# without access (PROT_NONE) is not memory until parts of it get access (tests/progs/reserve.c,
# issue 47 section 7: V8's 512 MiB code range made node's mmap layer peak at 641.8 MiB).
. "$(dirname "$0")/lib.sh"

DB=$TMP/m.db
ms run run --format=db -o "$DB" -- "$PROGS/mmap_anon"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "mmap_anon ok" "$(cat "$TMP/run.out")"
require_db "mmap_anon" "$DB"
sanity "$DB"

S="20480, 28672, 36864, 45056, 53248"
assert_eq "MMAP-layer MALLOC events (func|size|count)" "mmap|20480|1
mmap|28672|5
mremap|36864|1
mmap|45056|1" "$(q "$DB" "SELECT e.func, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                          AND l.event_type = 'MMAP' AND e.size IN ($S)
                          GROUP BY e.func, e.size ORDER BY e.size")"
assert_eq "munmap FREE events of the 7-page mappings" 3 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'FREE' AND l.event_type = 'MMAP'
                AND e.func = 'munmap' AND e.size = 28672")"
# The mremap'ed 5-page mapping ends (moved or grown in place) by exactly one event.
assert_eq "FREE events ending the remapped 5-page block" 1 "$(count_freed "$DB" MMAP 20480)"
echo "  info: func of that FREE: $(q "$DB" "SELECT e.func FROM $EV JOIN blocks b
    ON b.allocation_id = e.allocation_id WHERE k.name = 'FREE' AND b.size = 20480")"
# A file mapping is no anonymous block: no MALLOC; its munmap, if recorded, matches no block.
assert_eq "file-backed mapping (13 pages): no MALLOC event" 0 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND e.size = 53248")"
assert_eq "file-backed mapping: its munmap ends no block" 0 \
    "$(q "$DB" "SELECT count(*) FROM events WHERE size = 53248 AND allocation_id IS NOT NULL")"
echo "  info: munmap events of the file mapping kept as unmatched frees:" \
    "$(q "$DB" "SELECT count(*) FROM events WHERE size = 53248")"
assert_eq "none of them in the heap layer" 0 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE l.event_type = 'HOST' AND e.size IN ($S)")"
assert_eq "MMAP blocks (size|live at end|count)" "20480|0|1
28672|0|3
28672|1|2
36864|1|1
45056|1|1" "$(q "$DB" "SELECT b.size, b.free_ns IS NULL, count(*) FROM blocks b JOIN layers l
                      ON l.id = b.layer WHERE l.event_type = 'MMAP' AND b.size IN ($S)
                      GROUP BY b.size, b.free_ns IS NULL ORDER BY b.size, 2")"
assert_eq "mapping addresses are page aligned" 0 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE l.event_type = 'MMAP' AND e.addr % 4096 != 0")"
assert_eq "memscope_dump: MALLOC rows with Event Type MMAP" 8 \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump WHERE Event = 'MALLOC' AND \"Event Type\" = 'MMAP'
                AND json_extract(Attr, '$.size') IN ('20480', '28672', '36864', '45056')")"

DB=$TMP/r.db
ms run run --format=db -o "$DB" -- "$PROGS/reserve"
assert_eq "reserve: exit status" 0 "$RC"
assert_eq "reserve: program stdout untouched" "reserve ok" "$(cat "$TMP/run.out")"
require_db "reserve" "$DB"
sanity "$DB"
# 8192 B plain; 8 MiB committed by mprotect (again read-only: counted once); 1 MiB mmap'ed
# MAP_FIXED over the reservation; 4 MiB decommitted (the commit's block ends, what is left of
# it starts again); the 1 MiB mapped over with PROT_NONE; the reservation unmapped
assert_eq "reserve: mmap-layer events in order (kind|func|size)" "MALLOC|mmap|8192
MALLOC|mprotect|8388608
MALLOC|mmap|1048576
FREE|mprotect|8388608
MALLOC|mprotect|4194304
FREE|mmap|1048576
FREE|munmap|4194304" "$(q "$DB" "SELECT k.name, e.func, e.size FROM $EV WHERE l.name = 'mmap'
                             ORDER BY e.id")"
assert_eq "reserve: mmap layer (allocs|frees|peak|live at exit|unmatched)" "4|3|9445376|8192|0" \
    "$(q "$DB" "SELECT allocs, frees, peak_bytes, live_bytes, unmatched_frees FROM process_stats
                WHERE layer = 2")"
assert_eq "reserve: the reservation, in its own layer (event_type|kind|func|size)" \
    "MMAP_RESERVE|MALLOC|mmap|536870912
MMAP_RESERVE|FREE|munmap|536870912
MMAP_RESERVE|MALLOC|mmap|16777216" "$(q "$DB" "SELECT l.event_type, k.name, e.func, e.size
                                             FROM $EV WHERE l.name = 'mmap_reserved' ORDER BY e.id")"
assert_eq "reserve: its site, and the commit's" "mmap|ms_progs_reserve_map
mprotect|ms_progs_reserve_commit" "$(q "$DB" "SELECT b.func, substr(s.c_text, 1, instr(s.c_text, ' (') - 1)
        FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size IN (536870912, 8388608)
        ORDER BY b.size DESC")"
assert_eq "reserve: reservations (allocs|frees|peak|live at exit)" "2|1|536870912|16777216" \
    "$(q "$DB" "SELECT allocs, frees, peak_bytes, live_bytes FROM process_stats WHERE layer = 6")"
# reserved at exit is no memory still live: neither in run's summary nor in leaks
assert_eq "reserve: run's summary names no reservation among the sites live at exit" 0 \
    "$(sed -n '/top call sites/,$p' "$TMP/run.err" | grep -c ms_progs_reserve_keep)"
assert_eq "reserve: analyze leaks names no reservation" 0 \
    "$("$MEMSCOPE" analyze leaks "$DB" | grep -c ms_progs_reserve_keep)"
assert_eq "reserve: memscope_dump (msMemScope's) leaves the reservations out" "0|8" \
    "$(q "$DB" "SELECT count(*) FILTER (WHERE \"Event Type\" = 'MMAP_RESERVE'), count(*)
                FROM memscope_dump")"
assert_eq "reserve: a pool of the mmap layer carved from the reservations (name|layer|reserve)" \
    "mmap|2|6" "$(q "$DB" "SELECT name, layer, reserve_layer FROM pools")"
for f in db compact; do
    if [ $f = compact ]; then
        DB=$TMP/rc.db
        ms run2 run -o "$DB" -- "$PROGS/reserve"
    fi
    "$MEMSCOPE" analyze peak "$DB" >"$TMP/peak.out" 2>&1
    assert_eq "reserve ($f): analyze peak of the default layers (layer: peak)" "heap: 4096
mmap: 9445376" "$(sed -n 's/.*), \([a-z_]*\): peak \([0-9]*\) bytes.*/\1: \2/p' "$TMP/peak.out")"
    "$MEMSCOPE" analyze peak --layer=mmap_reserved "$DB" >"$TMP/peak.out" 2>&1
    assert_eq "reserve ($f): analyze peak --layer=mmap_reserved" "mmap_reserved: 536870912" \
        "$(sed -n 's/.*), \([a-z_]*\): peak \([0-9]*\) bytes.*/\1: \2/p' "$TMP/peak.out")"
    assert_eq "reserve ($f): decompose's peak of the default layers" "9445376" \
        "$("$MEMSCOPE" analyze decompose "$DB" |
           sed -n 's/.*at the peak of live bytes ([^)]*): \([0-9]*\) B.*/\1/p')"
done
done_testing
