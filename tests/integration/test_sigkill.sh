#!/bin/bash
# test_sigkill.sh: a program SIGKILLed mid-run keeps every event it recorded before the kill,
# and memscope exits 137 (tests/progs/wait_for_kill.c: N x 70001 from the main thread, N x 70003
# from a second thread, then it waits to be killed).
. "$(dirname "$0")/lib.sh"

N=1000
DB=$TMP/k.db
"$MEMSCOPE" run -o "$DB" -- "$PROGS/wait_for_kill" $N "$TMP/ready" >"$TMP/run.out" 2>"$TMP/run.err" </dev/null &
ms_pid=$!
for _ in $(seq 600); do
    [ -f "$TMP/ready" ] && break
    kill -0 "$ms_pid" 2>/dev/null || break
    sleep 0.1
done
if [ ! -f "$TMP/ready" ]; then
    fail "wait_for_kill never became ready within 60 s (memscope stderr follows)"
    sed 's/^/  stderr: /' "$TMP/run.err" >&2
    # End what this test started: memscope's child (the program), then memscope.
    for c in $(pgrep -P "$ms_pid"); do kill -KILL "$c"; done
    kill -KILL "$ms_pid" 2>/dev/null
    wait "$ms_pid"
    done_testing
fi
pid=$(cat "$TMP/ready")
echo "  killing the program, pid $pid"
kill -KILL "$pid"
wait "$ms_pid"
RC=$?
assert_eq "exit status (128 + SIGKILL)" 137 "$RC"
require_db "killed program" "$DB"
sanity "$DB"
assert_eq "MALLOC before the kill (size|count|pid)" "70001|$N|$pid
70003|$N|$pid" "$(q "$DB" "SELECT e.size, count(*), p.pid FROM $EV WHERE k.name = 'MALLOC'
                          AND e.size IN (70001, 70003) GROUP BY e.size ORDER BY e.size")"
assert_eq "threads that allocated them" 2 \
    "$(q "$DB" "SELECT count(DISTINCT thread_id) FROM events WHERE size IN (70001, 70003)")"
assert_eq "meta.exit_status" 137 "$(q "$DB" "SELECT value FROM meta WHERE key = 'exit_status'")"
done_testing
