#!/bin/bash
# test_bad_input.sh: `memscope analyze` refuses bad input with one line on stderr and a
# non-zero status: 2 for usage errors (unknown analysis, bad option values, bad step numbers,
# unknown layer), 1 for failures (missing database, not a memscope database, newer format).
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/ok.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_peak"
require_db "an_peak" "$DB"

# expect NAME STATUS REGEX ARGS...: status, exactly one stderr line matching REGEX, no stdout.
expect() {
    local name=$1 status=$2 re=$3
    shift 3
    ms "$name" "$@"
    assert_eq "$name: exit status" "$status" "$RC"
    assert_eq "$name: one line on stderr" 1 "$(wc -l <"$TMP/$name.err")"
    assert_match "$name: message" "$re" "$(cat "$TMP/$name.err")"
    assert_eq "$name: nothing on stdout" "" "$(cat "$TMP/$name.out")"
}

expect missing_db 1 "cannot open '.*/nope.db': No such file" analyze leaks "$TMP/nope.db"
printf 'not a database at all\n' >"$TMP/text.db"
expect not_sqlite 1 "not a memscope database|file is not a database" analyze peak "$TMP/text.db"
sqlite3 "$TMP/other.db" 'CREATE TABLE t (x); INSERT INTO t VALUES (1);'
expect not_memscope 1 "is not a memscope database" analyze peak "$TMP/other.db"
cp "$DB" "$TMP/newer.db"
sqlite3 "$TMP/newer.db" "UPDATE meta SET value = '99' WHERE key = 'format_version'"
expect newer 1 "format version 99, newer than this memscope" analyze leaks "$TMP/newer.db"
expect unknown 2 "unknown analysis 'bogus' \(known: .*leaks.*peak" analyze bogus "$DB"
expect unknown_in_list 2 "unknown analysis 'nope'" analyze leaks,nope "$DB"
expect no_db 2 "no database given" analyze leaks
expect bad_steps 2 "bad step numbers 'x,2'" analyze compare "$DB" --steps x,2
expect bad_steps0 2 "bad step numbers '0,2'" analyze compare "$DB" --steps 0,2
expect one_step 2 "needs two step numbers" analyze compare "$DB" --steps 3
expect same_step 2 "names step 2 twice" analyze compare "$DB" --steps 2,2
expect bad_step 2 "bad step number '-1'" analyze decompose "$DB" --step -1
expect bad_limit 2 "--limit needs a size" analyze trend "$DB" --limit 12Q
expect bad_top 2 "--top needs a positive number" analyze peak "$DB" --top 0
expect bad_pct 2 "--lazy-used needs ns or NN%" analyze inefficient "$DB" --lazy-used 150%
expect bad_layer 2 "no layer named 'gpu'" analyze peak "$DB" --layer gpu
expect bad_option 2 "unknown option '--frobnicate'" analyze peak "$DB" --frobnicate

# A database locked by another process (issue 24 item 11): said so after a bounded wait.
cp "$DB" "$TMP/locked.db"
python3 -c '
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(8)' "$TMP/locked.db" "$TMP/locked.ready" &
while [ ! -e "$TMP/locked.ready" ]; do sleep 0.05; done
expect locked 1 "is locked by another process" analyze peak "$TMP/locked.db"
kill %1 2>/dev/null; wait 2>/dev/null
# A format version below 1 (or not a number) is not a memscope database.
cp "$DB" "$TMP/v0.db"
sqlite3 "$TMP/v0.db" "UPDATE meta SET value = '0' WHERE key = 'format_version'"
expect version0 1 "is not a memscope database" analyze peak "$TMP/v0.db"
# Negative sizes (a damaged or forged database, issue 24 item 12): refused by every reader, not
# printed as negative memory; the default (compact) output and the full one alike.
for fmt in db compact; do
    ms "neg_$fmt" run --format=$fmt -q -o "$TMP/neg_$fmt.db" -- "$PROGS/an_peak"
    sqlite3 "$TMP/neg_$fmt.db" "UPDATE blocks SET size = -size WHERE rowid = (SELECT min(rowid)
                                FROM blocks)"
    for k in leaks peak; do
        expect "neg_${fmt}_$k" 1 "damaged database: blocks.size holds a negative size \(-[0-9]+\)" \
            analyze "$k" "$TMP/neg_$fmt.db"
    done
done
sqlite3 "$TMP/neg_db.db" "UPDATE blocks SET size = -size; UPDATE events SET size = -size"
expect neg_csv 1 "damaged database: events.size holds a negative size" \
    export "$TMP/neg_db.db" --format=csv -o "$TMP/neg.csv"
assert_eq "neg_csv: no output file" no "$([ -e "$TMP/neg.csv" ] && echo yes || echo no)"

# -o with an unknown analysis leaves no file behind.
ms no_file analyze bogus "$DB" -o "$TMP/report.txt"
assert_eq "no report file for a rejected analysis" no "$([ -e "$TMP/report.txt" ] && echo yes || echo no)"
# -o writes the report to the file.
ms to_file analyze peak "$DB" -o "$TMP/peak.txt"
assert_eq "-o: status" 0 "$RC"
assert_match "-o: report in the file" "^peak: " "$(head -1 "$TMP/peak.txt")"
# No arguments: usage on stderr, status 2; --help: usage on stdout, status 0.
ms noargs analyze
assert_eq "no arguments: status" 2 "$RC"
assert_match "no arguments: usage" "usage: memscope analyze" "$(cat "$TMP/noargs.err")"
ms help analyze --help
assert_eq "--help: status" 0 "$RC"
assert_match "--help lists leaks" "^  leaks " "$(cat "$TMP/help.out")"
# compare, inefficient, decompose and fragmentation (tests/analyze/b_*.c programs)
ms steps run --format=db -q -o "$TMP/steps.db" -- "$PROGS/b_steps"
ms pool run --format=db -q -o "$TMP/pool.db" -- "$PROGS/b_pool"
ms nostep run --format=db -q -o "$TMP/nostep.db" -- "$PROGS/b_ineff"
expect cmp_step9 2 "step 9 does not exist" analyze compare "$TMP/steps.db" --steps 2,9
expect cmp_steps14 2 "steps 1 to 4" analyze compare "$TMP/steps.db" --steps 9,1
expect cmp_nostep 2 "never called memscope_step" analyze compare "$TMP/nostep.db" --steps 1,2
expect cmp_noargs 2 "--steps A,B" analyze compare "$TMP/steps.db"
expect cmp_both 2 "not both" analyze compare "$TMP/steps.db" --steps 1,2 --with "$TMP/steps.db"
expect cmp_missing 1 "missing.db" analyze compare "$TMP/steps.db" --with "$TMP/missing.db"
expect cmp_noops 2 "needs ops" analyze compare "$TMP/pool.db" --with "$TMP/pool.db" --csv "$TMP/x.csv"
expect dec_step9 2 "step 9 does not exist" analyze decompose "$TMP/steps.db" --step 9
expect dec_nostep 2 "never called memscope_step" analyze decompose "$TMP/nostep.db" --step 1
expect dec_outside 2 "outside the run" analyze decompose "$TMP/steps.db" --at 1
cp "$TMP/steps.db" "$TMP/new.db"
sqlite3 "$TMP/new.db" "UPDATE meta SET value = '99' WHERE key = 'format_version'"
for k in compare inefficient decompose fragmentation; do
    expect "newer_$k" 1 "newer" analyze "$k" "$TMP/new.db" --steps 1,2
done
# No pools is an answer, not an error.
ms nopools analyze fragmentation "$TMP/steps.db"
assert_eq "fragmentation without pools: status" 0 "$RC"
assert_match "fragmentation without pools: says so" "No pools" "$(cat "$TMP/nopools.out")"

done_testing
