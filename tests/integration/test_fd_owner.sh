#!/bin/bash
# test_fd_owner.sh: the agent leaves the program's descriptors alone (issue 24, items 1-3;
# tests/progs/fd_owner.c): after fork it closes only its own trace file, never descriptor 900
# when the program made that number its own; it never writes its messages into a program's
# fd 2 that is a data file now (memscope prints them instead); and under a low descriptor limit
# the program's first open still gets 3.
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/a" "$TMP/b" "$TMP/c" "$TMP/d"
plain=$("$PROGS/fd_owner" fork900 "$TMP/a"; echo "rc=$?")
traced=$("$MEMSCOPE" run --format=db -q -o "$TMP/f.db" -- "$PROGS/fd_owner" fork900 "$TMP/b" 2>"$TMP/f.err"; echo "rc=$?")
assert_eq "fork900: plain run" "fork900 ok
rc=0" "$plain"
assert_eq "fork900: under memscope, the child's descriptor 900 is its own" "$plain" "$traced"

"$PROGS/fd_owner" std "$TMP/c"
assert_eq "std: plain run exits 0" "0" "$?"
"$MEMSCOPE" run --format=db -o "$TMP/s.db" -- "$PROGS/fd_owner" std "$TMP/d" 2>"$TMP/s.err"
assert_eq "std: under memscope, the program's status (its data files untouched)" "0" "$?"
for fd in 0 1 2; do
    assert_eq "std: data file on fd $fd holds only the program's bytes" "data" "$(cat "$TMP/d/std$fd")"
done
assert_ge "std: memscope printed the agent's message" 1 "$(grep -c 'memscope agent: cannot record' "$TMP/s.err")"

for lim in 512 16; do
    plain=$(ulimit -n $lim; "$PROGS/fd_owner" first 2>&1)
    traced=$(ulimit -n $lim; "$MEMSCOPE" run --format=db -q -o "$TMP/l$lim.db" -- "$PROGS/fd_owner" first 2>&1)
    assert_match "first: RLIMIT_NOFILE $lim, plain run" "^first fd [0-9]+$" "$plain"
    assert_eq "first: RLIMIT_NOFILE $lim, the program's first open gets the same number" \
        "$plain" "$traced"
done
done_testing
