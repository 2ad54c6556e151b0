#!/bin/bash
# test_interrupt_outputs.sh: SIGTERM (and SIGINT, SIGHUP) during import, export and report
# (issue 37, low): memscope removes its temporary files and directories (beside the output and
# in TMPDIR; import's conversion child too) and dies of the signal (status 143); the output is
# not created. test_interrupt.sh covers `memscope run`. Each command works on 4M events
# (seconds), and the signal is sent as soon as its first temporary file or directory appears.
. "$(dirname "$0")/lib.sh"

"$MEMSCOPE" run -q --format=trace -o "$TMP/tr" -- "$PROGS/threads" 2 1000000 >/dev/null 2>&1
"$MEMSCOPE" import "$TMP/tr" -o "$TMP/c.db" >/dev/null 2>&1
require_db "the run to read from" "$TMP/c.db"
mkdir "$TMP/out" "$TMP/tmpd"

left() { find "$TMP/out" "$TMP/tmpd" -mindepth 1 -printf '%P\n'; }

# interrupted NAME ARGS...: runs memscope ARGS (outputs in $TMP/out, TMPDIR $TMP/tmpd), sends
# SIGTERM once a temporary file or directory of it exists, and checks what is left.
interrupted() {
    local name=$1
    shift
    TMPDIR=$TMP/tmpd "$MEMSCOPE" "$@" >/dev/null 2>&1 &
    local p=$! seen=no
    for _ in $(seq 800); do
        if [ -n "$(left)" ]; then seen=yes; break; fi
        kill -0 $p 2>/dev/null || break
        sleep 0.025
    done
    kill -TERM $p 2>/dev/null
    wait $p
    local rc=$?
    assert_eq "$name: a temporary file was there, SIGTERM ended memscope (143)" "yes 143" "$seen $rc"
    assert_eq "$name: nothing left (output directory, TMPDIR)" "" "$(left)"
    rm -rf "${TMP:?}"/out/* "${TMP:?}"/out/.[!.]* "${TMP:?}"/tmpd/*
}
interrupted "import" import "$TMP/tr" -o "$TMP/out/i.db"
interrupted "export CSV (the expansion in TMPDIR)" export "$TMP/c.db" -o "$TMP/out/e.csv"
interrupted "export --format=db (the expansion beside it)" export "$TMP/c.db" --format=db \
    -o "$TMP/out/f.db"
interrupted "report of a trace directory (converted in TMPDIR)" report "$TMP/tr" -o "$TMP/out/r.html"
done_testing
