#!/bin/bash
# test_fail_alloc.sh: allocation-failure injection, as SQLite's malloc tests do (issue 24). In
# the test build (cmake -DMEMSCOPE_FAIL_ALLOC=ON, which `make check` uses for its sanitizer
# build), MEMSCOPE_FAIL_ALLOC=N fails the Nth allocation that memscope or SQLite makes
# (src/cli/failalloc.c). For a conversion, analyses and exports of a small run, each N either
# succeeds with exactly the output of a run without failures, or ends in one clear error with
# status 1: no crash, no sanitizer report (leaks included), nothing half-written left behind,
# the input kept. Every N up to FIRST, then about SAMPLES more spread over the rest.
. "$(dirname "$0")/lib.sh"

if ! MEMSCOPE_FAIL_ALLOC=count "$MEMSCOPE" --version 2>&1 >/dev/null | grep -q failalloc; then
    skip "memscope is not a failure-injection build (cmake -DMEMSCOPE_FAIL_ALLOC=ON)"
fi
FIRST=${MS_FAIL_FIRST:-60}
SAMPLES=${MS_FAIL_SAMPLES:-60}
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=1

W=$TMP/w
mkdir -p "$W"
ms rec run -q --format=trace -o "$W/run.trace" -- "$PROGS/forker" "$TMP/pids"
assert_eq "recording: status" 0 "$RC"
ms base_db import "$W/run.trace" -o "$W/run.db"
assert_eq "baseline import: status" 0 "$RC"
(cd "$W" && find run.trace -type f | sort | xargs md5sum) >"$TMP/trace.md5"

# The values of N to try for a command that makes `total` allocations.
points() {
    local total=$1 n step
    for ((n = 1; n <= FIRST && n <= total; n++)); do echo "$n"; done
    step=$(((total - FIRST) / SAMPLES))
    [ "$step" -ge 1 ] || step=1
    for ((n = FIRST + step; n <= total; n += step)); do echo "$n"; done
}

# check NAME OUTPUT CMD...: runs memscope CMD under every N. OUTPUT is the file the command
# writes (or - for stdout); its content on success must equal the run without failures
# (compared by normalize).
normalize() {
    case "$1" in
    *.db) sqlite3 "$1" .dump | grep -Ev "'(cwd|trace_dir|start_time_ns|end_time_ns)'" ;;
    -) cat "$2" ;;
    *) cat "$1" ;;
    esac
}
check() {
    local name=$1 out=$2
    shift 2
    rm -f "$W/$out" 2>/dev/null
    (cd "$W" && MEMSCOPE_FAIL_ALLOC=count "$MEMSCOPE" "$@" >"$TMP/$name.base" 2>"$TMP/$name.err")
    local total
    total=$(sed -n 's/^memscope: failalloc: \([0-9]*\) allocations$/\1/p' "$TMP/$name.err")
    if [ -z "$total" ] || [ "$total" -lt 1 ]; then
        fail "$name: no allocation count"
        return
    fi
    local want
    want=$(cd "$W" && normalize "$out" "$TMP/$name.base")
    local tried=0 failed=0 ok=0 bad=0
    for n in $(points "$total"); do
        rm -f "$W/$out" 2>/dev/null
        (cd "$W" && MEMSCOPE_FAIL_ALLOC=$n timeout 60 "$MEMSCOPE" "$@" >"$TMP/$name.out" \
            2>"$TMP/$name.err" </dev/null)
        local rc=$? why=""
        tried=$((tried + 1))
        if grep -Eq "Sanitizer|runtime error" "$TMP/$name.err"; then
            why="sanitizer report: $(grep -Em1 'ERROR|runtime error' "$TMP/$name.err")"
        elif [ "$rc" -eq 0 ]; then
            if [ "$(cd "$W" && normalize "$out" "$TMP/$name.out")" != "$want" ]; then
                why="status 0 but the output differs from the run without failures"
            fi
            ok=$((ok + 1))
        elif [ "$rc" -ne 1 ]; then
            why="status $rc: $(head -c 300 "$TMP/$name.err")"
        elif ! grep -q "^memscope: " "$TMP/$name.err"; then
            why="status 1 without a memscope error line"
        elif [ "$out" != - ] && [ -e "$W/$out" ]; then
            why="failed, yet $out was left behind"
        elif [ -n "$(find "$W" -name '*.tmp*' -o -name '*.traces-*')" ]; then
            why="failed, yet a half-written file is left: $(find "$W" -name '*.tmp*' | head -1)"
        else
            failed=$((failed + 1))
        fi
        if [ -n "$why" ]; then
            bad=$((bad + 1))
            [ "$bad" -le 3 ] && fail "$name: MEMSCOPE_FAIL_ALLOC=$n: $why"
        fi
    done
    [ "$bad" -eq 0 ] && pass "$name: $tried values of N of $total allocations: $failed clear" \
        "errors, $ok runs with the same output, nothing else"
    [ "$bad" -gt 3 ] && fail "$name: $bad values of N went wrong (the first 3 shown)"
    [ "$failed" -ge 1 ] || fail "$name: no value of N made it fail: the injection did nothing"
}

check import out.db import run.trace -o out.db
for a in leaks peak temporary trend inefficient decompose usage; do
    check "analyze_$a" - analyze "$a" run.db
done
check export_csv out.csv export run.db --format=csv -o out.csv
check export_db out.db export run.db --format=db -o out.db
for f in pprof speedscope perfetto; do # collapsed: speedscope's profile and stacks
    check "export_$f" "out.$f" export run.db --format=$f -o "out.$f"
done
assert_eq "the recorded traces are untouched" "$(cat "$TMP/trace.md5")" \
    "$(cd "$W" && find run.trace -type f | sort | xargs md5sum)"
done_testing
