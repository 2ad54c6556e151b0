#!/bin/bash
# test_sigkill.sh: a program SIGKILLed mid-run keeps every event it recorded before the kill,
# and memscope exits 137 (tests/progs/wait_for_kill.c: N x 70001 from the main thread, N x 70003
# from a second thread, then it waits to be killed). Also: SIGTERM sent to memscope itself is
# passed on to the program (docs/cli.md), which dies of it (143) with its events kept.
. "$(dirname "$0")/lib.sh"

N=1000

# start NAME: starts memscope on wait_for_kill in the background (MS_PID) and waits until the
# program is ready (PROG_PID). Ends the test when it never gets ready.
start() {
    "$MEMSCOPE" run --format=db -o "$TMP/$1.db" -- "$PROGS/wait_for_kill" $N "$TMP/$1.ready" \
        >"$TMP/$1.out" 2>"$TMP/$1.err" </dev/null &
    MS_PID=$!
    for _ in $(seq 600); do
        [ -f "$TMP/$1.ready" ] && break
        kill -0 "$MS_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -f "$TMP/$1.ready" ]; then
        fail "$1: wait_for_kill never became ready within 60 s (memscope stderr follows)"
        sed 's/^/  stderr: /' "$TMP/$1.err" >&2
        # End what this test started: memscope's child (the program), then memscope.
        for c in $(pgrep -P "$MS_PID"); do kill -KILL "$c"; done
        kill -KILL "$MS_PID" 2>/dev/null
        wait "$MS_PID"
        done_testing
    fi
    PROG_PID=$(cat "$TMP/$1.ready")
}

# check NAME STATUS: memscope's status and the events recorded before the signal.
check() {
    wait "$MS_PID"
    assert_eq "$1: exit status" "$2" "$?"
    local db=$TMP/$1.db
    require_db "$1" "$db"
    sanity "$db"
    assert_eq "$1: MALLOC before the signal (size|count|pid)" "70001|$N|$PROG_PID
70003|$N|$PROG_PID" "$(q "$db" "SELECT e.size, count(*), p.pid FROM $EV WHERE k.name = 'MALLOC'
                              AND e.size IN (70001, 70003) GROUP BY e.size ORDER BY e.size")"
    assert_eq "$1: threads that allocated them" 2 \
        "$(q "$db" "SELECT count(DISTINCT thread_id) FROM events WHERE size IN (70001, 70003)")"
    assert_eq "$1: meta.exit_status" "$2" "$(q "$db" "SELECT value FROM meta WHERE key = 'exit_status'")"
}

start kill
echo "  SIGKILL to the program, pid $PROG_PID"
kill -KILL "$PROG_PID"
check kill 137

start term
echo "  SIGTERM to memscope, pid $MS_PID"
kill -TERM "$MS_PID"
check term 143
done_testing
