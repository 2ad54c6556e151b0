#!/bin/bash
# test_export_speedscope.sh: `memscope export --format=speedscope` on an_export.c, validated
# against the file format schema of npm's speedscope package (web/package.json's dev
# dependencies, with ajv): one profile per process and layer, unit bytes, the exact bytes of
# each call site; a document broken on purpose fails the same check.
. "$(dirname "$0")/an_lib.sh"

command -v node >/dev/null || skip "node is not installed (scripts/setup-debian.sh)"
NM=${MEMSCOPE_NODE_MODULES:-$ANALYZE_SRC/../../web/node_modules}
[ -d "$NM/speedscope" ] && [ -d "$NM/ajv" ] ||
    skip "speedscope and ajv are not installed in $NM (npm ci in web/, scripts/setup-debian.sh)"
check() { node "$ANALYZE_SRC/check_speedscope.js" "$1" "$NM"; }

DB=$TMP/ex.db
ms run run -q -o "$DB" -- "$PROGS/an_export"
assert_eq "run exit status" 0 "$RC"
S=$TMP/ex.speedscope.json
ms sp export "$DB" --format=speedscope -o "$S"
assert_eq "speedscope exit status" 0 "$RC"
check "$S" >"$TMP/check.out" 2>&1
assert_eq "valid against speedscope's schema" 0 "$?"
parent=$(q "$DB" "SELECT pid FROM processes WHERE id = 1")
child=$(q "$DB" "SELECT pid FROM processes WHERE id = 2")
pbytes=$(q "$DB" "SELECT alloc_bytes FROM process_stats WHERE process_id = 1 AND layer = 1")
assert_eq "one profile per process and layer, unit bytes, the run's allocated bytes" \
"an_export (pid $parent) heap: bytes allocated|bytes|$pbytes|$pbytes
an_export (pid $child) heap: bytes allocated|bytes|2222|2222" \
    "$(grep -v '^ ' "$TMP/check.out" | cut -d'|' -f1-3,5)"
assert_eq "the sites' weights" \
"an_export_child 2222
an_export_churn 20480
an_export_inl 777
an_export_keep 3000" "$(grep -E '^  an_export_' "$TMP/check.out" | sed 's/^  //' | sort)"

ms spl export "$DB" --format=speedscope --what=live-at-exit --process="$parent" -o "$TMP/live.json"
check "$TMP/live.json" >"$TMP/live.out" 2>&1
assert_eq "--what=live-at-exit --process: valid" 0 "$?"
assert_eq "--what=live-at-exit --process: one profile, the parent's live sites" \
"1
an_export_inl 777
an_export_keep 3000" "$(grep -c '^an_export' "$TMP/live.out"; grep -E '^  an_export_' "$TMP/live.out" | sed 's/^  //' | sort)"

# the checker can fail: a unit speedscope does not know
sed 's/"unit":"bytes"/"unit":"furlongs"/' "$S" >"$TMP/bad.json"
check "$TMP/bad.json" >/dev/null 2>&1
assert_eq "a unit outside the schema is refused" 1 "$?"
done_testing
