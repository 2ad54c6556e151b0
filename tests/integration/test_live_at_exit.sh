#!/bin/bash
# test_live_at_exit.sh: blocks still live when the program ends are exact in blocks and
# process_stats, and the summary on stderr names their call site (tests/progs/live_at_exit.c).
. "$(dirname "$0")/lib.sh"

DB=$TMP/l.db
ms run run --format=db -o "$DB" -- "$PROGS/live_at_exit"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "live_at_exit ok" "$(cat "$TMP/run.out")"
require_db "live_at_exit" "$DB"
sanity "$DB"

assert_eq "live blocks at exit (size|count)" "20011|5
20021|3" "$(q "$DB" "SELECT size, count(*) FROM blocks WHERE size IN (20011, 20021)
                     AND free_ns IS NULL GROUP BY size ORDER BY size")"
assert_eq "live bytes of those blocks" 160118 \
    "$(q "$DB" "SELECT sum(size) FROM blocks WHERE size IN (20011, 20021) AND free_ns IS NULL")"
assert_eq "freed blocks of size 20011" 2 \
    "$(q "$DB" "SELECT count(*) FROM blocks WHERE size = 20011 AND free_ns IS NOT NULL")"
# process_stats counts the runtime's blocks too: at least ours, and not absurdly more.
live=$(q "$DB" "SELECT s.live_bytes FROM process_stats s JOIN layers l ON l.id = s.layer
                WHERE l.event_type = 'HOST'")
assert_ge "process_stats.live_bytes (heap)" 160118 "$live"
assert_eq "process_stats.live_bytes = live blocks' bytes" \
    "$(q "$DB" "SELECT sum(size) FROM blocks b JOIN layers l ON l.id = b.layer
                WHERE l.event_type = 'HOST' AND free_ns IS NULL")" "$live"
assert_eq "process_stats.live_blocks = live blocks" \
    "$(q "$DB" "SELECT count(*) FROM blocks b JOIN layers l ON l.id = b.layer
                WHERE l.event_type = 'HOST' AND free_ns IS NULL")" \
    "$(q "$DB" "SELECT s.live_blocks FROM process_stats s JOIN layers l ON l.id = s.layer
                WHERE l.event_type = 'HOST'")"
# Peak: all 10 blocks (200130 bytes) were live together before the two frees.
assert_ge "process_stats.peak_bytes (heap)" 200130 \
    "$(q "$DB" "SELECT s.peak_bytes FROM process_stats s JOIN layers l ON l.id = s.layer
                WHERE l.event_type = 'HOST'")"
assert_match "summary on stderr names the top live call site" "ms_progs_leak_site" \
    "$(cat "$TMP/run.err")"
done_testing
