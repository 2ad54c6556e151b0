#!/bin/bash
# test_monitor_fail_alloc.sh: allocation-failure injection (as test_fail_alloc.sh) for the live
# monitor's reader: memscope monitor --once over a raw trace directory, under every N of its
# allocations, either prints exactly the metrics of a run without failures or ends in one clear
# error with status 1: no crash, no sanitizer report (leaks included). Failure-injection build
# only (cmake -DMEMSCOPE_FAIL_ALLOC=ON, `make check`'s sanitizer build).
. "$(dirname "$0")/lib.sh"

if ! MEMSCOPE_FAIL_ALLOC=count "$MEMSCOPE" --version 2>&1 >/dev/null | grep -q failalloc; then
    skip "memscope is not a failure-injection build (cmake -DMEMSCOPE_FAIL_ALLOC=ON)"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=1
touch "$TMP/go"
ms rec run -q --format=trace --no-pack -o "$TMP/run.trace" -- "$PROGS/monitor_grow" hold "$TMP/go"
assert_eq "recording: status" 0 "$RC"
# the figures that do not depend on the moment: the trace's (not /proc's, not the forecast's)
figures() { grep -E '^memscope_(live_bytes|peak_bytes|allocations_total|frees_total|step|owner_live_bytes)\{' "$1"; }
ms base monitor "$TMP/run.trace" --once
assert_eq "baseline: status" 0 "$RC"
figures "$TMP/base.out" >"$TMP/base.fig"
assert_match "baseline: live heap bytes" 'layer="heap".*\} 3932160$' "$(cat "$TMP/base.fig")"
TOTAL=$(MEMSCOPE_FAIL_ALLOC=count "$MEMSCOPE" monitor "$TMP/run.trace" --once 2>&1 >/dev/null |
    sed -n 's/.*failalloc: \([0-9]*\) allocations.*/\1/p')
assert_ge "allocations of monitor --once" 10 "${TOTAL:-0}"
bad=""
for ((n = 1; n <= TOTAL; n++)); do
    MEMSCOPE_FAIL_ALLOC=$n "$MEMSCOPE" monitor "$TMP/run.trace" --once >"$TMP/n.out" 2>"$TMP/n.err"
    rc=$?
    if grep -qE 'Sanitizer|runtime error' "$TMP/n.err"; then
        bad="$bad N=$n:sanitizer"
    elif [ "$rc" -eq 0 ]; then
        figures "$TMP/n.out" | cmp -s - "$TMP/base.fig" || bad="$bad N=$n:different"
    elif [ "$rc" -ne 1 ] || [ "$(grep -c 'memscope' "$TMP/n.err")" -lt 1 ]; then
        bad="$bad N=$n:status$rc"
    fi
done
assert_eq "every N: the same figures, or one error with status 1" "" "$bad"
done_testing
