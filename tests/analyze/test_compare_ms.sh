#!/bin/bash
# test_compare_ms.sh: msMemScope's offline compare form, `memscope --compare
# --input-path=A,B [--output-path=DIR]` (issue 18 item 8), on b_steps.c and its baseline run:
# no program runs, the report is `analyze compare A --with B`'s byte for byte, -i and -o work,
# the output directory gets the op compare CSV `analyze compare --csv` writes, and bad input
# (one path, a CSV, a missing file, --level=kernel) is refused.
. "$(dirname "$0")/an_lib.sh"

ms a run -q -o "$TMP/a.db" -- "$PROGS/b_steps"
ms b run -q -o "$TMP/b.db" -- "$PROGS/b_steps" base
require_db "b_steps" "$TMP/a.db"

ms ms --compare --input-path="$TMP/a.db,$TMP/b.db"
assert_eq "--compare exit status" 0 "$RC"
ms an analyze compare "$TMP/a.db" --with "$TMP/b.db"
assert_eq "the report is analyze compare --with's" "$(cat "$TMP/an.out")" "$(cat "$TMP/ms.out")"
assert_match "the report compares the runs" 'Compare A \(this run\) with B' "$(head -1 "$TMP/ms.out")"

mkdir "$TMP/out"
ms mso --compare -i "$TMP/a.db,$TMP/b.db" -o "$TMP/out"
assert_eq "-i and -o: exit status" 0 "$RC"
csv=$(ls "$TMP/out")
assert_match "the op compare CSV in the output directory" '^memscope_compare_[0-9]{14}\.csv$' "$csv"
ms ancsv analyze compare "$TMP/a.db" --with "$TMP/b.db" --csv "$TMP/want.csv"
assert_eq "the CSV is analyze compare --csv's" "$(cat "$TMP/want.csv")" "$(cat "$TMP/out/$csv")"

# Runs without ops (issue 47): the compare works, the CSV holds msMemScope's two header lines,
# the report says why; an output directory that does not exist is created (as msMemScope).
ms c run -q -o "$TMP/c.db" -- "$PROGS/../progs/live_at_exit"
ms d run -q -o "$TMP/d.db" -- "$PROGS/../progs/live_at_exit"
ms noops --compare --input-path="$TMP/c.db,$TMP/d.db" --output-path="$TMP/new/dir"
assert_eq "runs without ops, -o a new directory: exit status" 0 "$RC"
assert_eq "... no error" "" "$(grep -v '^memscope: op compare CSV written to' "$TMP/noops.err")"
csv=$(ls "$TMP/new/dir" 2>/dev/null)
assert_match "... the CSV in the directory created" '^memscope_compare_[0-9]{14}\.csv$' "$csv"
assert_eq "... the CSV: the header lines only" ",,,Base,Compare
Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte)" \
    "$(cat "$TMP/new/dir/$csv" 2>/dev/null)"
assert_eq "... the report says why" 1 "$(grep -c '^Neither run has ops' "$TMP/noops.out")"
ms noopsfail --compare -i "$TMP/c.db,$TMP/nosuch.db" -o "$TMP/new2/dir"
assert_eq "a missing input with -o a new directory: failure" 1 "$RC"
assert_eq "... the directory it made is gone" "no" "$([ -e "$TMP/new2" ] && echo yes || echo no)"

ms one --compare -i "$TMP/a.db"
assert_eq "one input: usage error" 2 "$RC"
ms csvin --compare -i "$TMP/a.csv,$TMP/b.db"
assert_eq "a CSV input: usage error" 2 "$RC"
assert_eq "a CSV input: said" 1 "$(grep -c 'not CSV files' "$TMP/csvin.err")"
ms missing --compare -i "$TMP/a.db,$TMP/nosuch.db"
assert_eq "a missing input: failure" 1 "$RC"
ms kernel --compare --level=kernel -i "$TMP/a.db,$TMP/b.db"
assert_eq "--level=kernel: usage error" 2 "$RC"
ms noinput --compare
assert_eq "no input: usage error" 2 "$RC"
done_testing
