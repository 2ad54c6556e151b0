#!/bin/bash
# test_csv.sh: `memscope export --format=csv` and `memscope run --format=csv` write msMemScope's
# exact header and rows: the known MALLOC rows of tests/progs/alloc_funcs.c, one row per event.
. "$(dirname "$0")/lib.sh"
PY=$(command -v python3) || skip "python3 is needed to parse CSV"
CHECK="$PY $(dirname "$0")/csv_check.py"
HEADER="ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)"
EXPECTED="header exact
ids ascending True
10001 MALLOC HOST malloc 10
10017 MALLOC HOST calloc 5
10051 MALLOC HOST posix_memalign 3
10112 MALLOC HOST aligned_alloc 3"
summary() { $CHECK "$1" 10001 10017 10051 10112 | grep -v '^rows '; }

DB=$TMP/a.db
ms run run --format=db -o "$DB" -- "$PROGS/alloc_funcs"
assert_eq "exit status" 0 "$RC"
require_db "alloc_funcs" "$DB"
events=$(q "$DB" 'SELECT count(*) FROM events')

ms export export "$DB" --format=csv -o "$TMP/e.csv"
assert_eq "export: exit status" 0 "$RC"
assert_eq "export: header line" "$HEADER" "$(head -1 "$TMP/e.csv")"
assert_eq "export: known MALLOC rows" "$EXPECTED" "$(summary "$TMP/e.csv")"
assert_eq "export: one row per event" "rows $events" "$($CHECK "$TMP/e.csv" | grep '^rows ')"
assert_match "export: Attr in msMemScope's form" \
    ',"\{allocation_id:[0-9]+,addr:0x[0-9a-f]+,size:10001,func:malloc\}",' "$(cat "$TMP/e.csv")"
ms exportstdout export "$DB" --format=csv
assert_eq "export without -o writes the same CSV to stdout" "$(cat "$TMP/e.csv")" "$(cat "$TMP/exportstdout.out")"

# Rows agree with memscope_dump: ID, Event, Event Type, Ptr of every MALLOC of size 10001.
assert_eq "export rows = memscope_dump rows (ID,Event,Event Type,Ptr for size 10001)" \
    "$(q "$DB" "SELECT ID || ',' || Event || ',' || \"Event Type\" || ',N/A,' || \"Timestamp(ns)\" || ',' ||
                \"Process Id\" || ',' || \"Thread Id\" || ',cpu,' || Ptr FROM memscope_dump
                WHERE json_extract(Attr, '$.size') = '10001' AND Event = 'MALLOC' ORDER BY ID")" \
    "$(grep -E '^[0-9]+,MALLOC,.*size:10001,' "$TMP/e.csv" | cut -d, -f1-9)"

# Recording straight to CSV: same header, same known rows.
ms csvrun run --format=db --format=csv -o "$TMP/r.csv" -- "$PROGS/alloc_funcs"
assert_eq "--format=csv: exit status" 0 "$RC"
assert_eq "--format=csv: program stdout" "alloc_funcs ok" "$(cat "$TMP/csvrun.out")"
assert_eq "--format=csv: header line" "$HEADER" "$(head -1 "$TMP/r.csv" 2>&1)"
assert_eq "--format=csv: known MALLOC rows" "$EXPECTED" "$(summary "$TMP/r.csv" 2>&1)"
ms csvdir run --format=db --format=csv -o "$TMP/csvdir" -- "$PROGS/alloc_funcs"
assert_eq "--format=csv -o DIR: exit status" 0 "$RC"
f=$(cd "$TMP/csvdir" 2>/dev/null && find . -type f)
assert_match "--format=csv -o DIR: memscope_<pid>_<stamp>/memscope_dump_<stamp>.csv" \
    "^\./memscope_[0-9]+_(20[0-9]{12})/memscope_dump_\1\.csv$" "$f"
[ -f "$TMP/csvdir/$f" ] && assert_eq "--format=csv -o DIR: known MALLOC rows" "$EXPECTED" \
    "$(summary "$TMP/csvdir/$f")"
# A database of an older memscope (no events.attr, no layers.device) still exports.
cp "$DB" "$TMP/older.db"
sqlite3 "$TMP/older.db" "DROP TABLE memscope_dump; ALTER TABLE events DROP COLUMN attr;
    ALTER TABLE layers DROP COLUMN device"
ms older export "$TMP/older.db" --format=csv -o "$TMP/older.csv"
assert_eq "older database: export status" 0 "$RC"
assert_eq "older database: same rows, Device Id N/A" \
    "$(grep -c ',cpu,0x' "$TMP/e.csv")" "$(grep -c ',N/A,0x' "$TMP/older.csv")"
done_testing
