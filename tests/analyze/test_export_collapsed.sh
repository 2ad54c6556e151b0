#!/bin/bash
# test_export_collapsed.sh: `memscope export --format=collapsed` on an_export.c: the folded
# stacks (root first, ';' joined, one count per line) with the exact bytes of each call site
# for every --what, the selectors (process, step, time window), a compact and a full database
# alike, and ';' in a frame's name escaped.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/ex.db
FULL=$TMP/exfull.db
ms run run -q -o "$DB" -- "$PROGS/an_export"
assert_eq "run exit status" 0 "$RC"
ms runfull run -q --format=db -o "$FULL" -- "$PROGS/an_export"
assert_eq "run --format=db exit status" 0 "$RC"
require_db "an_export" "$FULL"

# leaves FILE: "function bytes" of the lines whose innermost frame is one of an_export's sites
leaves() {
    sed -E 's/.*;//; s/ \(.*\) / /' "$1" | grep -E '^an_export_[a-z]+ [0-9]+$' | sort
}

ms col export "$DB" --format=collapsed
assert_eq "collapsed exit status" 0 "$RC"
assert_eq "allocated bytes per site (default --what)" \
"an_export_child 2222
an_export_churn 20480
an_export_inl 777
an_export_keep 3000" "$(leaves "$TMP/col.out")"
assert_eq "every line: frames then one count" 0 "$(grep -cvE '^[^ ].* [0-9]+$' "$TMP/col.out")"
assert_eq "root first: _start, then __libc_start_main ... main" 5 \
    "$(grep -cE '^_start \(an_export\+0x[0-9a-f]+\);__libc_start_main[^;]*;__libc_start_call_main[^;]*;main \(' "$TMP/col.out")"
assert_eq "the inlined function under the one it is inlined into" 1 \
    "$(grep -cE ';an_export_outer \([^;]*an_export.c:[0-9]+\);an_export_inl \([^;]*an_export.c:[0-9]+\) 777$' "$TMP/col.out")"
assert_eq "the total is the run's allocated heap bytes" \
    "$(q "$FULL" 'SELECT sum(size) FROM events WHERE kind = 1')" \
    "$(awk '{s += $NF} END {print s}' "$TMP/col.out")"

ms colfull export "$FULL" --format=collapsed
if diff -u <(leaves "$TMP/col.out") <(leaves "$TMP/colfull.out") >&2; then
    pass "a full database gives the same sites and bytes"
else
    fail "compact and full database differ"
fi

ms live export "$DB" --format=collapsed --what=live-at-exit
assert_eq "live at exit" \
"an_export_child 2222
an_export_inl 777
an_export_keep 3000" "$(leaves "$TMP/live.out")"
ms peak export "$DB" --format=collapsed --what=peak
assert_eq "live at each process's heap peak (the parent's: the fifth 4096)" \
"an_export_child 2222
an_export_churn 20480" "$(leaves "$TMP/peak.out")"
ms leak export "$DB" --format=collapsed --what=leaked --step=2
assert_eq "leaked from step 2" \
"an_export_inl 777
an_export_keep 3000" "$(leaves "$TMP/leak.out")"
ms s1 export "$DB" --format=collapsed --step=1
assert_eq "--step=1: allocated in step 1" "an_export_churn 20480" "$(leaves "$TMP/s1.out")"
ms s1live export "$DB" --format=collapsed --step=1 --what=live-at-exit
assert_eq "--step=1: live at its end: the child's block only (the churn's are freed)" \
    "an_export_child 2222" "$(leaves "$TMP/s1live.out")"

child=$(q "$DB" "SELECT pid FROM processes WHERE id = 2")
ms pr export "$DB" --format=collapsed --process="$child"
assert_eq "--process=the child" "an_export_child 2222" "$(leaves "$TMP/pr.out")"
assert_eq "--process: nothing else" 1 "$(wc -l <"$TMP/pr.out")"

# a window that closes after the churn's first malloc and before the second (times of the full
# database's run)
t2=$(q "$FULL" "SELECT ts_ns FROM events WHERE kind = 1 AND size = 4096 ORDER BY id LIMIT 1 OFFSET 1")
t1=$(q "$FULL" "SELECT ts_ns FROM events WHERE kind = 1 AND size = 4096 ORDER BY id LIMIT 1")
if [ "$t2" -gt "$t1" ]; then
    ms win export "$FULL" --format=collapsed --from="$t1" --to="$t1"
    assert_eq "--from/--to: the one malloc in the window" "an_export_churn 4096" \
        "$(leaves "$TMP/win.out")"
    ms at export "$FULL" --format=collapsed --at="$t1" --what=live-at-exit
    assert_eq "--at: live then" "an_export_child 2222
an_export_churn 4096" "$(leaves "$TMP/at.out")"
else
    pass "two mallocs in one ns: the window check needs distinct times (skipped)"
fi

# ';' in a name (here the source file's) is escaped as '\;'
if command -v cc >/dev/null; then
    mkdir -p "$TMP/semi"
    cp "$ANALYZE_SRC/an_export.c" "$TMP/semi/a;b.c"
    if cc -O0 -g -fno-omit-frame-pointer -I "$ANALYZE_SRC/../../include" -o "$TMP/semi/an_semi" \
        "$TMP/semi/a;b.c"; then
        ms semirun run -q -o "$TMP/semi.db" -- "$TMP/semi/an_semi"
        ms semi export "$TMP/semi.db" --format=collapsed
        assert_eq "';' escaped in a frame's name" 1 \
            "$(grep -cF "an_export_keep ($TMP/semi/a\\;b.c:" "$TMP/semi.out")"
        assert_eq "no unescaped ';' inside a frame" 0 \
            "$(grep -c 'a;b\.c' "$TMP/semi.out")"
    else
        fail "cc could not build the ';' program"
    fi
else
    echo "note: no cc: the ';' escape is not checked"
fi
done_testing
