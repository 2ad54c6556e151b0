#!/bin/bash
# test_cxx.sh: C++ new/delete are seen as the malloc/free they call (tests/progs/cxx_new.cpp).
. "$(dirname "$0")/lib.sh"
[ -x "$PROGS/cxx_new" ] || skip "no C++ compiler: cxx_new not built"

DB=$TMP/c.db
ms run run -o "$DB" -- "$PROGS/cxx_new"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "cxx_new ok" "$(cat "$TMP/run.out")"
require_db "cxx_new" "$DB"
sanity "$DB"
assert_eq "MALLOC events (func|size|count)" "malloc|90001|4
malloc|90017|2" "$(q "$DB" "SELECT e.func, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                           AND e.size IN (90001, 90017) GROUP BY e.size ORDER BY e.size")"
assert_eq "FREE events (delete[] and delete)" "4|2" \
    "$(count_freed "$DB" HOST 90001)|$(count_freed "$DB" HOST 90017)"
assert_match "stack of new[] names the allocating function" "ms_progs_cxx_new_array" \
    "$(q "$DB" "SELECT \"Call Stack(C)\" FROM memscope_dump WHERE Event = 'MALLOC'
                AND json_extract(Attr, '$.size') = '90001' LIMIT 1")"
done_testing
