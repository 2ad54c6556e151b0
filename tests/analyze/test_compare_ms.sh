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
