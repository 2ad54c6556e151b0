#!/bin/bash
# test_offline_api.sh: msMemScope's offline analyzers in the Python package (issue 18 item 8):
# list_analyzers, get_analyzer_config, analyze, check_inefficient on b_ineff.c's database (each
# rule once: E early 200 B, L late 300 B, T idle 500 B with idle threshold 5; the findings written
# into the database, as `analyze inefficient --write-back` does), its filters (types, mem_size),
# the same on the run's CSV (findings written into its MALLOC rows), and bad input (CSVs that are
# not msMemScope's or out of order, a missing file, an unknown analyzer, a bad type). check_leaks is tested on
# a CUDA run in tests/cuda/test_cuda.sh. Skipped without the package (an ASan build has none).
. "$(dirname "$0")/an_lib.sh"
PKG=$(dirname "$MEMSCOPE")/python
ls "$PKG"/memscope/_native*.so >/dev/null 2>&1 || skip "no memscope Python package in $PKG"
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"

DB=$TMP/ineff.db
ms run run -q --format=db -o "$DB" -- "$PROGS/b_ineff"
require_db "b_ineff" "$DB"
cp "$DB" "$TMP/ro.db"
chmod a-w "$TMP/ro.db"

py() { PYTHONPATH=$PKG MEMSCOPE=$MEMSCOPE /usr/bin/python3 -c "$1" 2>&1; }
assert_eq "list_analyzers" "['leaks', 'inefficient']" \
    "$(py 'import memscope; print(memscope.list_analyzers())')"
assert_eq "get_analyzer_config(inefficient)" \
    "InefficientConfig ['input_path', 'mem_size', 'inefficient_type', 'idle_threshold']" \
    "$(py 'import memscope; c = memscope.get_analyzer_config("inefficient"); print(c["config_class"], c["parameters"])')"
assert_eq "check_inefficient: the three blocks, each rule once" \
    "[(200, ['early_allocation']), (300, ['late_deallocation']), (500, ['temporary_idleness'])]" \
    "$(py "import memscope, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    r = memscope.check_inefficient('$DB', idle_threshold=5)
print(sorted((b['size'], b['types']) for b in r))")"
assert_eq "the findings are in the database" 3 "$(q "$DB" 'SELECT count(*) FROM inefficient')"
assert_eq "check_inefficient: mem_size and one type" "[500]" \
    "$(py "import memscope, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    r = memscope.analyze('inefficient', input_path='$DB', mem_size=250,
                         inefficient_type='temporary_idleness', idle_threshold=5)
print([b['size'] for b in r])")"
assert_eq "check_inefficient: the printed lines" 3 \
    "$(py "import memscope; memscope.check_inefficient('$DB', idle_threshold=5)" | grep -c 'bytes, allocation')"

# The same run's CSV (issue 18 item 8): the same three blocks as on the database, their MALLOC
# rows' Attr gain inefficient_type (only the asked types of blocks >= mem_size), every other
# record unchanged; a second call replaces the value instead of appending.
CSV=$TMP/ineff.csv
"$MEMSCOPE" export "$DB" --format=csv -o "$CSV"
cp "$CSV" "$TMP/orig.csv"
assert_eq "check_inefficient on the CSV: the database's blocks" \
    "$(py "import memscope, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    r = memscope.check_inefficient('$DB', idle_threshold=5)
print(sorted((b['allocation_id'], b['size'], b['types']) for b in r))")" \
    "$(py "import memscope, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    r = memscope.check_inefficient('$CSV', idle_threshold=5)
print(sorted((b['allocation_id'], b['size'], b['types']) for b in r))")"
assert_eq "the CSV's flagged MALLOC rows" \
    "MALLOC 200 early_allocation|MALLOC 300 late_deallocation|MALLOC 500 temporary_idleness" \
    "$(py "import csv, re
out = []
for r in csv.DictReader(open('$CSV', newline='')):
    if 'inefficient_type' in r['Attr']:
        out.append('%s %s %s' % (r['Event'], re.search(r'size:(\\d+)', r['Attr']).group(1),
                                 r['Attr'].split('inefficient_type:')[1].rstrip('}')))
print('|'.join(out))")"
assert_eq "the CSV's other records unchanged" 3 \
    "$(diff "$TMP/orig.csv" "$CSV" | grep -c '^>')"
assert_eq "the CSV's records count unchanged" "$(wc -l <"$TMP/orig.csv")" "$(wc -l <"$CSV")"
py "import memscope, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    memscope.check_inefficient('$CSV', mem_size=400, inefficient_type=['temporary_idleness',
                               'late_deallocation'], idle_threshold=5)" >/dev/null
assert_eq "a second call on the CSV replaces the values" \
    "{allocation_id:5,addr:X,size:500,func:malloc,inefficient_type:temporary_idleness}" \
    "$(grep -o '{[^}]*inefficient_type[^}]*}' "$CSV" | sed 's/addr:0x[0-9a-f]*/addr:X/' | sort | tail -1)"
printf 'ID,Event,Event Type\n1,MALLOC,HOST\n' >"$TMP/bad.csv"
printf 'ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr\n2,MALLOC,HOST,N/A,1,1,1,cpu,0x1,"{allocation_id:1,size:8}"\n1,FREE,HOST,N/A,2,1,1,cpu,0x1,"{allocation_id:1}"\n' >"$TMP/order.csv"

# Bad input: clear errors.
err() { py "import memscope
try:
    $1
except (ValueError, TypeError, RuntimeError) as e:
    print(type(e).__name__, e)"; }
assert_match "a missing CSV" "^ValueError .*not a regular file" "$(err "memscope.check_inefficient('$TMP/x.csv')")"
assert_match "a CSV without msMemScope's columns" "^ValueError .*not msMemScope's CSV" "$(err "memscope.check_inefficient('$TMP/bad.csv')")"
assert_match "a CSV out of ID order" "^ValueError .*ID 1 after 2" "$(err "memscope.check_inefficient('$TMP/order.csv')")"
assert_match "a missing database" "^ValueError .*not a regular file" "$(err "memscope.check_inefficient('$TMP/no.db')")"
if [ "$(id -u)" != 0 ]; then   # root writes a read-only file anyway
    assert_match "a read-only database" "^ValueError .*not writable" "$(err "memscope.check_inefficient('$TMP/ro.db')")"
fi
assert_match "an unknown type" "^ValueError inefficient_type" "$(err "memscope.check_inefficient('$DB', inefficient_type='lazy')")"
assert_match "an unknown analyzer" "^ValueError unknown analyzer" "$(err "memscope.analyze('oom', input_path='$DB')")"
assert_match "check_leaks wants a CSV" "^ValueError .*expected a .csv" "$(err "memscope.check_leaks('$DB', 'x')")"
done_testing
