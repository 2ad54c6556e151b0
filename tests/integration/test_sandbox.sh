#!/bin/bash
# test_sandbox.sh: programs in a seccomp sandbox, and deaths by signal (issue 37 item 5). A
# filter that kills on system calls it does not list killed the program with SIGSYS on the
# agent's fallocate, and memscope printed its usual summary without a word about the signal.
# Now the agent reads the filter before the kernel gets it: one it cannot live with stops
# recording (said, and the header's stopped_errno is EPERM) and the program ends as it does
# alone; a filter that allows the agent's calls changes nothing. A death by a signal is said,
# with the status 128+N, and what was recorded is kept. tests/progs/sandboxed.c.
. "$(dirname "$0")/lib.sh"

for mode in kill kill_process; do
    plain=$("$PROGS/sandboxed" $mode 2>&1; echo "rc=$?")
    assert_eq "$mode: the plain run" "sandboxed $mode done 20000
rc=5" "$plain"
    DB=$TMP/$mode.db
    ms $mode run --format=db -o "$DB" -- "$PROGS/sandboxed" $mode
    assert_eq "$mode: under memscope, the plain run's output and status" "$plain" \
        "$(cat "$TMP/$mode.out"; echo "rc=$RC")"
    assert_match "$mode: the agent says why it stopped" \
        "memscope agent: recording stopped: the program installs a seccomp filter that would stop it on fallocate, a system call memscope's agent makes; the program runs on" \
        "$(cat "$TMP/$mode.err")"
    assert_eq "$mode: no death reported" "" "$(grep 'was killed' "$TMP/$mode.err")"
    require_db "$mode" "$DB"
    assert_eq "$mode: what came before the filter is recorded" 3 "$(count_ev "$DB" MALLOC HOST 50001)"
    assert_eq "$mode: nothing after it" 0 \
        "$(q "$DB" "SELECT count(*) FROM events WHERE size BETWEEN 100 AND 149")"
    # 20000 mallocs, 18000 frees and stdout's buffer (printf's first call): counted lost
    assert_eq "$mode: stopped_errno (EPERM) and lost events" "1|38001" \
        "$(q "$DB" "SELECT stopped_errno, lost_events FROM processes")"
done

# A filter that allows every call the agent makes: recording goes on through the loop.
DB=$TMP/lenient.db
ms lenient run --format=db -o "$DB" -- "$PROGS/sandboxed" lenient
assert_eq "lenient: output and status" "sandboxed lenient done 20000
rc=5" "$(cat "$TMP/lenient.out"; echo "rc=$RC")"
require_db "lenient" "$DB"
assert_eq "lenient: every allocation of the loop recorded" 20000 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND e.size BETWEEN 100 AND 149")"
assert_eq "lenient: kept blocks of 100 bytes live at exit" 400 \
    "$(q "$DB" "SELECT count(*) FROM blocks WHERE size = 100 AND free_ns IS NULL")"
assert_eq "lenient: recording never stopped" "0|0" \
    "$(q "$DB" "SELECT stopped_errno, lost_events FROM processes")"

# Deaths by signal: said, status 128+N, the database written with what was recorded.
DB=$TMP/die.db
ms die run --format=db -o "$DB" -- "$PROGS/sandboxed" die
assert_eq "die: output and status (128 + SIGSYS)" "sandboxed die
rc=159" "$(cat "$TMP/die.out"; echo "rc=$RC")"
assert_match "die: the death is said" \
    "^memscope: the program was killed by SIGSYS \(Bad system call\): a seccomp filter \(a sandbox\) forbade a system call it made; what it recorded until then is kept$" \
    "$(cat "$TMP/die.err")"
require_db "die" "$DB"
assert_eq "die: recorded before the filter" 3 "$(count_ev "$DB" MALLOC HOST 50001)"
assert_eq "die: meta.exit_status" 159 "$(q "$DB" "SELECT value FROM meta WHERE key = 'exit_status'")"

DB=$TMP/segv.db
ms segv run --format=db -o "$DB" -- "$PROGS/die_after_leak" segv
assert_eq "segv: status" 139 "$RC"
assert_match "segv: the death is said" \
    "^memscope: the program was killed by SIGSEGV \(Segmentation fault\)(, core dumped)?; what it recorded until then is kept$" \
    "$(cat "$TMP/segv.err")"
assert_eq "segv: the leaked blocks are in the database" 9 \
    "$(q "$DB" "SELECT count(*) FROM blocks WHERE size = 60001 AND free_ns IS NULL")"
# an ordinary exit says nothing of signals
ms plain run --format=db -o "$TMP/plain.db" -- "$PROGS/die_after_leak" exit
assert_eq "exit: status" 3 "$RC"
assert_eq "exit: no death reported" "" "$(grep 'was killed' "$TMP/plain.err")"
done_testing
