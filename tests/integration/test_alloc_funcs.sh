#!/bin/bash
# test_alloc_funcs.sh: every interposed heap function records exact counts, sizes and frees
# (tests/progs/alloc_funcs.c holds the known answer), and memscope_dump renders them as
# msMemScope does.
. "$(dirname "$0")/lib.sh"

DB=$TMP/a.db
ms run run --format=db -o "$DB" -- "$PROGS/alloc_funcs"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "alloc_funcs ok" "$(cat "$TMP/run.out")"
require_db "alloc_funcs" "$DB"
sanity "$DB"

# Sizes 10000..12000 are the program's own; the runtime allocates none of them.
R="e.size BETWEEN 10000 AND 12000"
expected="malloc|10001|10
calloc|10017|5
realloc|10031|1
realloc|10032|1
realloc|10033|1
realloc|10034|1
realloc|10035|1
realloc|10036|1
realloc|10037|1
realloc|10038|1
realloc|10039|1
realloc|10040|1
reallocarray|10043|1
posix_memalign|10051|3
memalign|10061|2
valloc|10071|2
pvalloc|10081|2
aligned_alloc|10112|3
reallocarray|11869|1"
assert_eq "MALLOC events (func|size|count), heap layer" "$expected" \
    "$(q "$DB" "SELECT e.func, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                AND l.event_type = 'HOST' AND $R GROUP BY e.func, e.size ORDER BY e.size, e.func")"
assert_eq "blocks of those sizes" 39 \
    "$(q "$DB" "SELECT count(*) FROM blocks b WHERE b.size BETWEEN 10000 AND 12000")"
assert_eq "blocks of those sizes still live at exit" 0 \
    "$(q "$DB" "SELECT count(*) FROM blocks b WHERE b.size BETWEEN 10000 AND 12000 AND free_ns IS NULL")"
# 10 + 5 + 15 from free() and 9 + 1 from realloc/reallocarray moving (or growing) a block.
assert_eq "FREE events ending those blocks" 39 \
    "$(q "$DB" "SELECT count(*) FROM $EV JOIN blocks b ON b.allocation_id = e.allocation_id
                WHERE k.name = 'FREE' AND b.size BETWEEN 10000 AND 12000")"
assert_eq "FREE events with the freed block's address" 0 \
    "$(q "$DB" "SELECT count(*) FROM $EV JOIN blocks b ON b.allocation_id = e.allocation_id
                WHERE k.name = 'FREE' AND b.size BETWEEN 10000 AND 12000 AND e.addr != b.addr")"
assert_eq "one FREE per block (no duplicate)" "" \
    "$(q "$DB" "SELECT e.allocation_id FROM $EV JOIN blocks b ON b.allocation_id = e.allocation_id
                WHERE k.name = 'FREE' AND b.size BETWEEN 10000 AND 12000
                GROUP BY e.allocation_id HAVING count(*) != 1")"
echo "  info: FREE events by func: $(q "$DB" "SELECT e.func || ':' || count(*) FROM $EV
    JOIN blocks b ON b.allocation_id = e.allocation_id WHERE k.name = 'FREE'
    AND b.size BETWEEN 10000 AND 12000 GROUP BY e.func" | tr '\n' ' ')"
assert_eq "realloc chain: each step frees the previous block before the next one starts" 9 \
    "$(q "$DB" "SELECT count(*) FROM blocks a JOIN blocks n ON n.size = a.size + 1
                WHERE a.func = 'realloc' AND n.func = 'realloc' AND a.size BETWEEN 10031 AND 10039
                AND a.free_event_id IS NOT NULL AND a.free_event_id < n.alloc_event_id")"
assert_eq "reallocarray: the second call frees the first block" 1 \
    "$(q "$DB" "SELECT count(*) FROM blocks a JOIN blocks n ON n.size = 11869
                WHERE a.size = 10043 AND a.free_event_id < n.alloc_event_id")"
assert_eq "aligned blocks have aligned addresses (posix_memalign 64, aligned_alloc 128, memalign/valloc/pvalloc 4096)" 0 \
    "$(q "$DB" "SELECT count(*) FROM events e WHERE (e.size = 10051 AND e.addr % 64 != 0)
                OR (e.size = 10112 AND e.addr % 128 != 0)
                OR (e.size IN (10061, 10071, 10081) AND e.addr % 4096 != 0)")"
assert_eq "all in one process and its main thread" "1|1" \
    "$(q "$DB" "SELECT count(DISTINCT p.pid), min(t.tid = p.pid) FROM $EV JOIN threads t
                ON t.id = e.thread_id WHERE $R")"
assert_eq "allocation ids unique per block lifetime" 39 \
    "$(q "$DB" "SELECT count(DISTINCT e.allocation_id) FROM $EV WHERE k.name = 'MALLOC' AND $R")"

# memscope_dump: msMemScope's columns and formats.
assert_eq "memscope_dump columns" \
    "ID|Event|Event Type|Name|Timestamp(ns)|Process Id|Thread Id|Device Id|Ptr|Attr|Call Stack(Python)|Call Stack(C)" \
    "$(q "$DB" "SELECT group_concat(name, '|') FROM pragma_table_info('memscope_dump')")"
assert_eq "memscope_dump MALLOC/HOST rows of size 10001" 10 \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump WHERE Event = 'MALLOC' AND \"Event Type\" = 'HOST'
                AND json_extract(Attr, '$.size') = '10001'")"
assert_eq "memscope_dump rows with Ptr != 0x%016x of addr, Attr addr/size/allocation_id mismatch" 0 \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump d JOIN events e ON e.id = d.ID
                WHERE e.size BETWEEN 10000 AND 12000 AND (d.Ptr != printf('0x%016x', e.addr)
                OR json_extract(d.Attr, '$.size') != CAST(e.size AS TEXT)
                OR json_extract(d.Attr, '$.allocation_id') != CAST(e.allocation_id AS TEXT)
                OR json_extract(d.Attr, '$.addr') IS NULL
                OR d.Name != 'N/A' OR d.\"Device Id\" != 'cpu'
                OR d.\"Timestamp(ns)\" != e.ts_ns)")"
assert_eq "Attr values are JSON strings" "text|text|text" \
    "$(q "$DB" "SELECT json_type(Attr, '$.allocation_id'), json_type(Attr, '$.addr'),
                json_type(Attr, '$.size') FROM memscope_dump WHERE Event = 'MALLOC'
                AND json_extract(Attr, '$.size') = '10017' LIMIT 1")"
assert_eq "memscope_dump Process Id / Thread Id are OS ids" "1" \
    "$(q "$DB" "SELECT min(d.\"Process Id\" = p.pid AND d.\"Thread Id\" = t.tid) FROM memscope_dump d
                JOIN events e ON e.id = d.ID JOIN processes p ON p.id = e.process_id
                JOIN threads t ON t.id = e.thread_id")"
done_testing
