#!/bin/bash
# test_crash.sh: a program that leaks and then dies (SIGSEGV, abort, _exit) keeps every event it
# made, and memscope exits with its status: 128+N for a death by signal N
# (tests/progs/die_after_leak.c: 9 x 60001 leaked, 4 x 60007 freed).
. "$(dirname "$0")/lib.sh"

check_mode() { # MODE EXPECTED_STATUS
    local mode=$1 want=$2 db=$TMP/$1.db
    ms "$mode" run --format=db -o "$db" -- "$PROGS/die_after_leak" "$mode"
    assert_eq "$mode: exit status" "$want" "$RC"
    assert_eq "$mode: program stdout kept" "leaked" "$(cat "$TMP/$mode.out")"
    require_db "$mode" "$db"
    sanity "$db"
    assert_eq "$mode: leaked MALLOC events" 9 "$(count_ev "$db" MALLOC HOST 60001)"
    assert_eq "$mode: leaked blocks live at the end" 9 \
        "$(q "$db" "SELECT count(*) FROM blocks WHERE size = 60001 AND free_ns IS NULL")"
    assert_eq "$mode: freed MALLOC events" 4 "$(count_ev "$db" MALLOC HOST 60007)"
    assert_eq "$mode: their FREE events" 4 "$(count_freed "$db" HOST 60007)"
    assert_eq "$mode: meta.exit_status" "$want" \
        "$(q "$db" "SELECT value FROM meta WHERE key = 'exit_status'")"
    assert_eq "$mode: lost events" 0 "$(q "$db" 'SELECT coalesce(sum(lost_events), 0) FROM processes')"
}

check_mode segv 139
check_mode abort 134
check_mode exit 3
done_testing
