#!/bin/bash
# test_trace_import.sh: `memscope run --format=trace` keeps the raw per-process traces, and
# `memscope import` turns them into the same database a direct run gives (tests/progs/forker.c:
# two processes, exact counts per pid).
. "$(dirname "$0")/lib.sh"

ms run run --format=db --format=trace -o "$TMP/tr" -- "$PROGS/forker" "$TMP/pids"
assert_eq "exit status" 0 "$RC"
read -r parent child <"$TMP/pids"
assert_eq "one trace file per process: <pid>.<n>.mst" \
    "$(printf '%s\n' "$parent.0.mst" "$child.0.mst" | sort)" \
    "$(cd "$TMP/tr" 2>/dev/null && ls -- *.mst | sort)"
assert_eq "trace files start with the magic" "MSTRACE" "$(head -c 7 "$TMP/tr/$parent.0.mst" 2>&1)"

ms import import --format=db "$TMP/tr" -o "$TMP/i.db"
assert_eq "import: exit status" 0 "$RC"
require_db "imported" "$TMP/i.db"
sanity "$TMP/i.db"
assert_eq "MALLOC by pid (pid|size|count)" "$parent|40001|5
$child|40003|7
$parent|40005|3" "$(q "$TMP/i.db" "SELECT p.pid, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                            AND e.size IN (40001, 40003, 40005) GROUP BY p.pid, e.size ORDER BY e.size")"
assert_match "stacks symbolized at import" "^ms_progs_fork_alloc \((.*/)?forker\.c:[0-9]+\)" \
    "$(q "$TMP/i.db" "SELECT s.c_text FROM events e JOIN stacks s ON s.id = e.stack_id
                      WHERE e.size = 40003 LIMIT 1")"
assert_eq "meta.trace_dir" "$TMP/tr" "$(q "$TMP/i.db" "SELECT value FROM meta WHERE key = 'trace_dir'")"
# Importing twice gives the same events.
ms import2 import --format=db "$TMP/tr" -o "$TMP/i2.db"
assert_eq "import is repeatable (same events)" \
    "$(q "$TMP/i.db" 'SELECT count(*), sum(size), sum(ts_ns % 1000003) FROM events')" \
    "$(q "$TMP/i2.db" 'SELECT count(*), sum(size), sum(ts_ns % 1000003) FROM events')"
done_testing
