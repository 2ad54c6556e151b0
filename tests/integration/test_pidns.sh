#!/bin/bash
# test_pidns.sh: processes in a new pid namespace (unshare -p -f) are recorded with the pids
# memscope run sees, not the namespace's own (1, parent 0), so that they neither collide with
# other processes nor look orphaned (issue 24 item 12). Needs CAP_SYS_ADMIN (root) for unshare.
. "$(dirname "$0")/lib.sh"

command -v unshare >/dev/null || skip "no unshare"
unshare -p -f true 2>/dev/null || skip "cannot make a pid namespace here (needs root)"

DB=$TMP/ns.db
ms run run --format=db -o "$DB" -- unshare -p -f "$PROGS/forker" "$TMP/pids"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "forker ok" "$(cat "$TMP/run.out")"
require_db "forker in a pid namespace" "$DB"
assert_eq "the program's own view: pid 1 and its child 2" "1 2" "$(cat "$TMP/pids")"
assert_eq "process rows (unshare, its child, forker exec'd there, forker's child)" 4 \
    "$(q "$DB" "SELECT count(*) FROM processes")"
assert_eq "no namespace numbers (pid 1 or ppid 0)" 0 \
    "$(q "$DB" "SELECT count(*) FROM processes WHERE pid = 1 OR ppid = 0")"
assert_eq "every process but the first has its parent in the run" 3 \
    "$(q "$DB" "SELECT count(*) FROM processes c WHERE c.ppid IN (SELECT pid FROM processes)")"
parent=$(q "$DB" "SELECT DISTINCT p.pid FROM $EV WHERE e.size = 40001")
child=$(q "$DB" "SELECT DISTINCT p.pid FROM $EV WHERE e.size = 40003")
assert_eq "forker's child: its parent is forker" "$parent" \
    "$(q "$DB" "SELECT ppid FROM processes WHERE pid = $child")"
assert_eq "MALLOC by process (size|count)" "40001|5
40003|7
40005|3" "$(q "$DB" "SELECT e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                    AND e.size IN (40001, 40003, 40005) GROUP BY e.size ORDER BY e.size")"
assert_eq "nothing reported still running" "" "$(grep -i 'still running' "$TMP/run.err")"
done_testing
