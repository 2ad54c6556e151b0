#!/bin/bash
# b_bad_input.sh: compare, inefficient, decompose and fragmentation given bad input answer with
# one line on stderr and a non-zero exit (2: usage, 1: failure); nothing on stdout.
set -u
: "${MEMSCOPE:?}" "${PROGS:?}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$MEMSCOPE" run --format=db -o "$T/steps.db" -- "$PROGS/b_steps" >/dev/null 2>&1 || bad "run b_steps"
"$MEMSCOPE" run --format=db -o "$T/pool.db" -- "$PROGS/b_pool" >/dev/null 2>&1 || bad "run b_pool"

expect() { # exit-status pattern args...
    local want=$1 pat=$2
    shift 2
    "$MEMSCOPE" analyze "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || bad "analyze $*: exit $rc, want $want"
    [ "$(wc -l <"$T/err")" = 1 ] || bad "analyze $*: stderr is not one line: $(cat "$T/err")"
    grep -q -- "$pat" "$T/err" || bad "analyze $*: stderr lacks '$pat': $(cat "$T/err")"
    [ ! -s "$T/out" ] || bad "analyze $*: wrote to stdout"
}
expect 2 "step 9 does not exist" compare "$T/steps.db" --steps 2,9
expect 2 "steps 1 to 4" compare "$T/steps.db" --steps 9,1
"$MEMSCOPE" run --format=db -o "$T/nostep.db" -- "$PROGS/b_ineff" >/dev/null 2>&1 || bad "run b_ineff"
expect 2 "never called memscope_step" compare "$T/nostep.db" --steps 1,2
expect 2 "--steps A,B" compare "$T/steps.db"
expect 2 "not both" compare "$T/steps.db" --steps 1,2 --with "$T/steps.db"
expect 1 "missing.db" compare "$T/steps.db" --with "$T/missing.db"
expect 2 "needs ops" compare "$T/pool.db" --with "$T/pool.db" --csv "$T/x.csv"
expect 2 "step 9 does not exist" decompose "$T/steps.db" --step 9
expect 2 "never called memscope_step" decompose "$T/nostep.db" --step 1
expect 2 "outside the run" decompose "$T/steps.db" --at 1
# A database from a newer format version.
cp "$T/steps.db" "$T/new.db"
sqlite3 "$T/new.db" "UPDATE meta SET value = '99' WHERE key = 'format_version'"
for k in compare inefficient decompose fragmentation; do
    expect 1 "newer" "$k" "$T/new.db" --steps 1,2
done
# No pools is an answer, not an error.
"$MEMSCOPE" analyze fragmentation "$T/steps.db" >"$T/out" 2>&1 || bad "fragmentation, no pools"
grep -q "No pools" "$T/out" || bad "fragmentation without pools: $(cat "$T/out")"
exit $fail
