#!/bin/bash
# test_cannot_record.sh: when the agent cannot record (here: the file-size limit, RLIMIT_FSIZE,
# stops the trace from growing, as a full disk would), it says so once on stderr, stops
# recording, and the program runs on untouched: same output, same exit status (not killed by
# SIGXFSZ); what was recorded before is kept (tests/progs/threads.c).
. "$(dirname "$0")/lib.sh"

# 1000 blocks of 512 bytes: 512 KB for the traces, a small fraction of what 2 x 100000 pairs
# need. --format=trace: memscope itself then writes only the packed trace, smaller than what
# the agent wrote, under the same limit.
(
    ulimit -f 1000
    "$MEMSCOPE" run --format=db --format=trace -o "$TMP/tr" -- "$PROGS/threads" 2 100000 \
        >"$TMP/run.out" 2>"$TMP/run.err" </dev/null
)
RC=$?
assert_eq "exit status: the program's, not a death by SIGXFSZ (153)" 0 "$RC"
assert_eq "program stdout untouched" "threads ok 2 100000" "$(cat "$TMP/run.out")"
sed 's/^/  stderr: /' "$TMP/run.err"
assert_ge "a message on stderr" 1 "$(grep -ci 'record' "$TMP/run.err")"

ms import import --format=db "$TMP/tr" -o "$TMP/i.db"
assert_eq "import of what was recorded: exit status" 0 "$RC"
require_db "partial trace" "$TMP/i.db"
sanity "$TMP/i.db"
kept=$(q "$TMP/i.db" "SELECT count(*) FROM events WHERE size IN (3001, 3003)")
assert_ge "events recorded before the limit are kept" 1000 "$kept"
assert_ne "not all 400000 events fit: the limit did bite" 400000 "$kept"
assert_ne "the database says recording stopped (stopped_errno or lost_events)" "0|0" \
    "$(q "$TMP/i.db" 'SELECT max(stopped_errno), sum(lost_events) FROM processes')"

# A program that closes every descriptor and opens a file that may get the trace's number:
# the agent stops (EBADF), never writes into that file, and counts what it could not record.
ms closefds run --format=db -o "$TMP/c.db" -- "$PROGS/close_fds" "$TMP/victim.log"
assert_eq "close_fds: exit status" 0 "$RC"
assert_eq "close_fds: the program's file is untouched" "log ok: hello" "$(cat "$TMP/closefds.out")"
assert_ge "close_fds: a message on stderr" 1 "$(grep -c 'recording stopped' "$TMP/closefds.err")"
require_db "close_fds" "$TMP/c.db"
assert_eq "close_fds: stopped with EBADF" 9 "$(q "$TMP/c.db" 'SELECT max(stopped_errno) FROM processes')"
assert_ge "close_fds: the events after the stop are counted as lost" 390000 \
    "$(q "$TMP/c.db" 'SELECT sum(lost_events) FROM processes')"
done_testing
