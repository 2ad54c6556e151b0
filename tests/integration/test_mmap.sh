#!/bin/bash
# test_mmap.sh: anonymous mmap/mmap64/mremap/munmap are recorded in the MMAP layer with exact
# counts, and file-backed mappings are not (tests/progs/mmap_anon.c).
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
done_testing
