#!/bin/bash
# test_cxx.sh: C++ new/delete are seen as the malloc/free they call (tests/progs/cxx_new.cpp).
. "$(dirname "$0")/lib.sh"
[ -x "$PROGS/cxx_new" ] || skip "no C++ compiler: cxx_new not built"

DB=$TMP/c.db
ms run run --format=db -o "$DB" -- "$PROGS/cxx_new"
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
# C++ names are demangled in stacks (issue 14 item 4); the linkage name stays in the database.
assert_match "stack: operator new demangled, the helper with its parameters" \
    "operator new\(unsigned long\) \(libstdc\+\+[^)]*\).ms_progs_cxx_new_array\(unsigned long\) \(" \
    "$(q "$DB" "SELECT replace(\"Call Stack(C)\", char(10), '|') FROM memscope_dump WHERE Event = 'MALLOC'
                AND json_extract(Attr, '$.size') = '90001' LIMIT 1")"
assert_eq "frames keep the linkage name beside the readable one" "_Znwm|_Z22ms_progs_cxx_new_arraym" \
    "$(q "$DB" "SELECT group_concat(l.text, '|') FROM (SELECT DISTINCT f.linkage_id FROM frames f
        JOIN strings s ON s.id = f.function_id WHERE s.text IN ('operator new(unsigned long)',
        'ms_progs_cxx_new_array(unsigned long)') ORDER BY f.linkage_id) x JOIN strings l ON l.id = x.linkage_id")"
done_testing
