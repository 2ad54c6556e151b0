#!/bin/bash
# test_interrupt.sh: a signal during the conversion (issue 24 item 10), and a conversion that
# dies (issue 14 item 7). SIGINT and SIGTERM stop
# it, remove what is half-written, keep the traces, say where they are and how to convert
# them, and exit with the signal's status (130, 143). The signal is sent again and again until
# memscope exits, so that one landing while the program is still exiting (ignored or passed on
# then) does not make the test depend on timing; the conversion of 4M events takes seconds.
. "$(dirname "$0")/lib.sh"

for sig in INT TERM; do
    out="$TMP/$sig"
    mkdir -p "$out"
    "$MEMSCOPE" run --format=db -o "$out/run.db" -- "$PROGS/threads" 2 1000000 >"$out/stdout" 2>"$out/stderr" &
    ms=$!
    while ! grep -q "threads ok" "$out/stdout" 2>/dev/null && kill -0 $ms 2>/dev/null; do
        sleep 0.05
    done
    while kill -0 $ms 2>/dev/null; do
        kill -$sig $ms 2>/dev/null
        sleep 0.2
    done
    wait $ms
    rc=$?
    want=$([ $sig = INT ] && echo 130 || echo 143)
    assert_eq "SIG$sig: exit status" "$want" "$rc"
    assert_match "SIG$sig: says where the traces are and how to convert them" \
        "stopped by .* during the conversion; the traces are kept in .*memscope import" \
        "$(cat "$out/stderr")"
    assert_eq "SIG$sig: no database, no half-written file" "" \
        "$(ls "$out" | grep -E '\.db|\.tmp' || true)"
    assert_ge "SIG$sig: the traces are kept" 1 "$(ls "$out"/.memscope-trace-*/*.mst 2>/dev/null | wc -l)"
    dir=$(ls -d "$out"/.memscope-trace-* | head -1)
    "$MEMSCOPE" import --format=db "$dir" -o "$out/later.db" >/dev/null 2>&1
    assert_eq "SIG$sig: the kept traces convert afterwards" "2000000" \
        "$(q "$out/later.db" "SELECT count(*) FROM events WHERE kind = 1 AND size BETWEEN 3001 AND 3003")"
done

# A conversion that dies (libdw exits or crashes when memory runs out; here the converter's
# failure-injection point MEMSCOPE_FAULT_CONVERT, a SIGSEGV after its files were created): it
# runs in a child process, so memscope says so, removes what it half-wrote, keeps the traces
# (they convert afterwards) and returns the program's status; for both outputs.
for fmt in compact db; do
    out="$TMP/crash-$fmt"
    mkdir -p "$out"
    MEMSCOPE_FAULT_CONVERT=1 "$MEMSCOPE" run --format=$fmt -o "$out/run.db" -- \
        "$PROGS/die_after_leak" exit >"$out/stdout" 2>"$out/stderr" </dev/null
    assert_eq "$fmt: a crashing conversion: the program's status" 3 "$?"
    # (under AddressSanitizer the SIGSEGV becomes its report and exit status 1)
    assert_match "$fmt: ... says so and where the traces are" \
        "the conversion (crashed \(Segmentation fault\)|ended without finishing \(exit status 1).*; the raw traces are kept in .*memscope-trace" \
        "$(cat "$out/stderr")"
    assert_eq "$fmt: ... nothing half-written left" "" "$(ls "$out" | grep -v '^stdout$\|^stderr$' || true)"
    dir=$(ls -d "$out"/.memscope-trace-* | head -1)
    "$MEMSCOPE" import --format=db "$dir" -o "$out/later.db" >/dev/null 2>&1
    assert_eq "$fmt: ... the kept traces convert afterwards: the 9 leaked blocks" "9" \
        "$(q "$out/later.db" "SELECT count(*) FROM blocks WHERE size = 60001 AND free_ns IS NULL")"
done
done_testing
