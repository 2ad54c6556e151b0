#!/bin/bash
# test_descendants.sh: a descendant that outlives the program (a daemon: setsid, still running
# when the program ends) keeps writing its trace; memscope converts what there is, deletes
# nothing the descendant still writes, and says where the traces are and how to convert them
# again (issue 24 item 7).
. "$(dirname "$0")/lib.sh"

cd "$TMP" || exit 1
ms daemon run --format=db -o "$TMP/d.db" -- /bin/sh -c \
    "setsid /bin/sh -c 'sleep 1.5; exec \"$PROGS/alloc_funcs\"' >/dev/null 2>&1 & sleep 0.3; echo parent done"
assert_eq "exit status and output" "0 parent done" "$RC $(cat "$TMP/daemon.out")"
assert_match "says which process still writes and where the traces are" \
    "process [0-9]+ \(started by the program\) is still running and writing its trace: the traces are kept in .*memscope import" \
    "$(cat "$TMP/daemon.err")"
dir=$(ls -d "$TMP"/.memscope-trace-* 2>/dev/null | head -1)
assert_ne "the trace directory is kept" "" "$dir"
require_db "what there was at the end of the program" "$TMP/d.db"
sleep 2.5 # the descendant ends (it runs alloc_funcs after 1.5 s)
ms again import --format=db "$dir" -o "$TMP/again.db"
assert_eq "the kept traces convert again, the descendant's work included" "1" \
    "$(q "$TMP/again.db" "SELECT count(*) > 0 FROM processes WHERE exe LIKE '%alloc_funcs'")"
# A child in a new pid namespace is pid 1 there: it is not taken for a process still running
# (pid 1 here is init), and the traces go as usual.
if unshare -p -f true 2>/dev/null; then
    mkdir -p "$TMP/ns" && cd "$TMP/ns" || exit 1
    ms ns run --format=db -o "$TMP/ns/n.db" -- unshare -p -f /bin/sh -c 'echo in ns'
    assert_eq "pid namespace: exit status and output" "0 in ns" "$RC $(cat "$TMP/ns.out")"
    assert_eq "pid namespace: no process said to be still running" "0" \
        "$(grep -c 'still running' "$TMP/ns.err")"
    assert_eq "pid namespace: no trace directory left" "" "$(ls -d "$TMP"/ns/.memscope-trace-* 2>/dev/null)"
fi
done_testing
