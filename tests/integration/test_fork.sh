#!/bin/bash
# test_fork.sh: a forked child is traced as its own process; each side's allocations are
# attributed to its own pid (tests/progs/forker.c).
. "$(dirname "$0")/lib.sh"

DB=$TMP/f.db
ms run run --format=db -o "$DB" -- "$PROGS/forker" "$TMP/pids"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "forker ok" "$(cat "$TMP/run.out")"
require_db "forker" "$DB"
sanity "$DB"
read -r parent child <"$TMP/pids"
echo "  parent $parent, child $child"

assert_eq "MALLOC by pid (pid|size|count)" "$parent|40001|5
$child|40003|7
$parent|40005|3" "$(q "$DB" "SELECT p.pid, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                            AND e.size IN (40001, 40003, 40005) GROUP BY p.pid, e.size ORDER BY e.size")"
assert_eq "FREE by pid (pid|block size|count)" "$child|40003|7
$parent|40005|3" "$(q "$DB" "SELECT p.pid, b.size, count(*) FROM $EV JOIN blocks b
                            ON b.allocation_id = e.allocation_id WHERE k.name = 'FREE'
                            AND b.size IN (40001, 40003, 40005) GROUP BY p.pid, b.size ORDER BY b.size")"
assert_eq "the child's process row: ppid" "$parent" \
    "$(q "$DB" "SELECT ppid FROM processes WHERE pid = $child")"
assert_eq "processes of this run (pid rows)" "$parent|1
$child|1" "$(q "$DB" "SELECT pid, count(*) FROM processes GROUP BY pid ORDER BY (pid != $parent), pid")"
assert_eq "child events on the child's own thread" "$child" \
    "$(q "$DB" "SELECT DISTINCT t.tid FROM events e JOIN threads t ON t.id = e.thread_id
                WHERE e.size = 40003")"
assert_eq "blocks and their free events in the same process" 0 \
    "$(q "$DB" "SELECT count(*) FROM blocks b JOIN events f ON f.id = b.free_event_id
                WHERE f.process_id != b.process_id")"
done_testing
