#!/bin/bash
# test_threads.sh: 8 threads x 100000 malloc/free pairs: every event recorded once, on the
# right thread, nothing lost (tests/progs/threads.c: thread t allocates 3001 + 2t bytes).
. "$(dirname "$0")/lib.sh"

DB=$TMP/t.db
ms run run --format=db -o "$DB" -- "$PROGS/threads" 8 100000
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "threads ok 8 100000" "$(cat "$TMP/run.out")"
require_db "threads" "$DB"
sanity "$DB"

sizes="3001, 3003, 3005, 3007, 3009, 3011, 3013, 3015"
expected=""
for s in 3001 3003 3005 3007 3009 3011 3013 3015; do
    expected+="$s|100000|1|100000"$'\n'
done
assert_eq "MALLOC per size: size|events|threads|distinct allocation ids" "${expected%$'\n'}" \
    "$(q "$DB" "SELECT e.size, count(*), count(DISTINCT e.thread_id), count(DISTINCT e.allocation_id)
                FROM $EV WHERE k.name = 'MALLOC' AND l.event_type = 'HOST' AND e.size IN ($sizes)
                GROUP BY e.size ORDER BY e.size")"
expected=""
for s in 3001 3003 3005 3007 3009 3011 3013 3015; do expected+="$s|100000"$'\n'; done
assert_eq "FREE per block size" "${expected%$'\n'}" \
    "$(q "$DB" "SELECT b.size, count(*) FROM $EV JOIN blocks b ON b.allocation_id = e.allocation_id
                WHERE k.name = 'FREE' AND b.size IN ($sizes) GROUP BY b.size ORDER BY b.size")"
assert_eq "FREE on the allocating thread, right after its MALLOC in that thread" 800000 \
    "$(q "$DB" "SELECT count(*) FROM blocks b JOIN events f ON f.id = b.free_event_id
                WHERE b.size IN ($sizes) AND f.thread_id = b.thread_id AND f.addr = b.addr")"
assert_eq "blocks still live" 0 \
    "$(q "$DB" "SELECT count(*) FROM blocks WHERE size IN ($sizes) AND free_ns IS NULL")"
assert_eq "distinct worker threads, none of them the main thread" "8|0" \
    "$(q "$DB" "SELECT count(DISTINCT t.tid), sum(t.tid = p.pid) FROM $EV JOIN threads t
                ON t.id = e.thread_id WHERE e.size IN ($sizes)")"
assert_eq "each worker's events come from one thread and one size" "" \
    "$(q "$DB" "SELECT e.thread_id FROM events e WHERE e.size IN ($sizes)
                GROUP BY e.thread_id HAVING count(DISTINCT e.size) != 1")"
assert_eq "lost events reported by the agent" 0 \
    "$(q "$DB" 'SELECT coalesce(sum(lost_events), 0) FROM processes')"
assert_ge "threads.events of each worker (alloc + free)" 200000 \
    "$(q "$DB" "SELECT min(t.events) FROM threads t WHERE t.id IN
                (SELECT thread_id FROM events WHERE size IN ($sizes))")"
done_testing
