#!/bin/bash
# test_fail_io.sh: a full disk at every phase of the conversion, the analyses' reports and the
# exports (issue 24). The file size limit stands in for the full disk (SIGXFSZ ignored, so
# that memscope's writes fail with EFBIG as they would with ENOSPC), swept from 1 KiB to the
# size the output needs: each limit either lets the command finish with exactly the output of
# an unlimited run, or ends it with one clear error and status 1, nothing half-written left
# beside the output, and the input untouched.
. "$(dirname "$0")/lib.sh"

STEPS=${MS_FAIL_IO_STEPS:-16}
W=$TMP/w
mkdir -p "$W"
ms rec run -q --format=trace --no-pack -o "$W/run.trace" -- "$PROGS/threads" 2 3000
assert_eq "recording: status" 0 "$RC"
ms base_db import "$W/run.trace" -o "$W/run.db"
assert_eq "baseline import: status" 0 "$RC"
sums() { (cd "$W" && find run.trace run.db -type f | sort | xargs md5sum); }
before=$(sums)

normalize() {
    case "$1" in
    *.db) sqlite3 "$1" .dump | grep -Ev "'(cwd|trace_dir|start_time_ns|end_time_ns)'" ;;
    *) cat "$1" ;;
    esac
}

# check NAME OUTPUT CMD...: memscope CMD (writing OUTPUT in $W) under limits up to its size.
check() {
    local name=$1 out=$2
    shift 2
    rm -rf "$W/$out"
    (cd "$W" && "$MEMSCOPE" "$@" >"$TMP/$name.base.out" 2>"$TMP/$name.base.err" </dev/null)
    if [ ! -s "$W/$out" ]; then
        fail "$name: the unlimited run wrote no $out"
        return
    fi
    local want size kib step bad=0 failed=0 ok=0 why
    want=$(cd "$W" && normalize "$out")
    size=$(($(stat -c %s "$W/$out") / 1024 + 1))
    step=$((size / STEPS))
    [ "$step" -ge 1 ] || step=1
    for ((kib = 1; kib <= size + step; kib += step)); do
        rm -rf "$W/$out"
        (
            cd "$W" || exit 99
            trap '' XFSZ
            ulimit -f "$kib"
            "$MEMSCOPE" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
        )
        local rc=$?
        why=""
        if [ "$rc" -eq 0 ]; then
            [ "$(cd "$W" && normalize "$out")" == "$want" ] ||
                why="status 0 but the output differs from the unlimited run's"
            ok=$((ok + 1))
        elif [ "$rc" -ne 1 ]; then
            why="status $rc: $(head -c 300 "$TMP/$name.err")"
        elif ! grep -q "^memscope: " "$TMP/$name.err"; then
            why="status 1 without a memscope error line"
        elif [ -e "$W/$out" ]; then
            why="failed, yet $out was left behind"
        elif [ -n "$(find "$W" -name '*.tmp*' -o -name '*.traces-*')" ]; then
            why="failed, yet a half-written file is left: $(find "$W" -name '*.tmp*' | head -1)"
        else
            failed=$((failed + 1))
        fi
        if [ -n "$why" ]; then
            bad=$((bad + 1))
            [ "$bad" -le 3 ] && fail "$name: ulimit -f $kib: $why"
        fi
    done
    [ "$bad" -eq 0 ] && pass "$name: limits 1..$((size + step)) KiB: $failed clear errors," \
        "$ok runs with the same output, nothing else"
    [ "$bad" -gt 3 ] && fail "$name: $bad limits went wrong (the first 3 shown)"
    [ "$failed" -ge 1 ] || fail "$name: no limit made it fail: the sweep tested nothing"
}

check import out.db import run.trace -o out.db
check import_full out.db import run.trace --format=db -o out.db
check export_csv out.csv export run.db --format=csv -o out.csv
check export_db out.db export run.db --format=db -o out.db
check report report.txt analyze all run.db -o report.txt
assert_eq "the traces and the database read are untouched" "$before" "$(sums)"
done_testing
