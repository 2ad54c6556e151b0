#!/bin/bash
# test_offline_api.sh: msMemScope's offline analyzers in the Python package (issue 18 item 8):
# list_analyzers, get_analyzer_config, analyze, check_inefficient on b_ineff.c's database (each
# rule once: E early 200 B, L late 300 B, T idle 500 B with idle threshold 5; the findings written
# into the database, as `analyze inefficient --write-back` does), its filters (types, mem_size),
# and bad input (a CSV, a missing file, an unknown analyzer, a bad type). check_leaks is tested on
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

# Bad input: clear errors.
err() { py "import memscope
try:
    $1
except (ValueError, TypeError, RuntimeError) as e:
    print(type(e).__name__, e)"; }
assert_match "a CSV to check_inefficient" "^ValueError .*not CSV" "$(err "memscope.check_inefficient('$TMP/x.csv')")"
assert_match "a missing database" "^ValueError .*not a regular file" "$(err "memscope.check_inefficient('$TMP/no.db')")"
if [ "$(id -u)" != 0 ]; then   # root writes a read-only file anyway
    assert_match "a read-only database" "^ValueError .*not writable" "$(err "memscope.check_inefficient('$TMP/ro.db')")"
fi
assert_match "an unknown type" "^ValueError inefficient_type" "$(err "memscope.check_inefficient('$DB', inefficient_type='lazy')")"
assert_match "an unknown analyzer" "^ValueError unknown analyzer" "$(err "memscope.analyze('oom', input_path='$DB')")"
assert_match "check_leaks wants a CSV" "^ValueError .*expected a .csv" "$(err "memscope.check_leaks('$DB', 'x')")"
done_testing
