#!/bin/bash
# test_signal.sh: allocations made by a signal handler, interrupting a thread that is itself
# allocating, are all recorded (tests/progs/signal_alloc.c prints how many it made).
. "$(dirname "$0")/lib.sh"

DB=$TMP/s.db
ms run run --format=db -o "$DB" -- "$PROGS/signal_alloc" 200
assert_eq "exit status" 0 "$RC"
read -r word loops handled <"$TMP/run.out"
assert_eq "program stdout" "signal_alloc 200" "$word $handled"
require_db "signal_alloc" "$DB"
sanity "$DB"
# +1: each size is allocated once more before the loop, to warm up malloc.
assert_eq "handler MALLOC events (size 1013)" $((handled + 1)) "$(count_ev "$DB" MALLOC HOST 1013)"
assert_eq "handler FREE events" $((handled + 1)) "$(count_freed "$DB" HOST 1013)"
assert_eq "main loop MALLOC events (size 901)" $((loops + 1)) "$(count_ev "$DB" MALLOC HOST 901)"
assert_eq "main loop FREE events" $((loops + 1)) "$(count_freed "$DB" HOST 901)"
assert_eq "handler allocations on the main thread" $((handled + 1)) \
    "$(q "$DB" "SELECT count(*) FROM $EV JOIN threads t ON t.id = e.thread_id
                WHERE k.name = 'MALLOC' AND e.size = 1013 AND t.tid = p.pid")"
assert_eq "lost events" 0 "$(q "$DB" 'SELECT coalesce(sum(lost_events), 0) FROM processes')"
done_testing
