#!/usr/bin/env bash
# test_annotations.sh: the annotation API (include/memscope.h) end to end: tests/progs/annotate
# under memscope; exact steps, owners, ranges, accesses, pools, and their memscope_dump and CSV
# rows. The plain run (progs_annotate) checks the no-agent side.
. "$(dirname "$0")/lib.sh"

ms run run --format=db -o "$TMP/a.db" -- "$PROGS/annotate"
assert_eq "exit status" 0 "$RC"
assert_eq "every API call returns 0 under the agent" "annotate ok 0" "$(head -1 "$TMP/run.out")"
require_db "annotate" "$TMP/a.db"
D=$TMP/a.db

assert_eq "steps: 2 ended by memscope_step(), the 3rd unfinished" $'1|1\n2|1\n3|0' \
    "$(q "$D" "SELECT step, end_event_id IS NOT NULL FROM steps ORDER BY step")"
assert_eq "steps are contiguous" 0 \
    "$(q "$D" "SELECT count(*) FROM steps a JOIN steps b ON b.step = a.step + 1 WHERE b.start_ns <> a.end_ns")"
assert_eq "STEP events name the step they end" $'SYSTEM|STEP|1\nSYSTEM|STEP|2' \
    "$(q "$D" "SELECT \"Event\", \"Event Type\", \"Name\" FROM memscope_dump WHERE \"Event\" = 'SYSTEM'")"

assert_eq "owner strings join nested labels with @" $'model\nmodel@weight' \
    "$(q "$D" "SELECT label FROM owners ORDER BY id")"
assert_eq "owned blocks: size, owner, step, live at exit" \
    $'100|model@weight|1|0\n200|model@weight|2|0\n1000|model|2|1\n300|model@weight|3|0' \
    "$(q "$D" "SELECT b.size, o.label, b.step, b.free_ns IS NULL FROM blocks b JOIN owners o ON o.id = b.owner_id ORDER BY b.allocation_id")"
assert_eq "blocks allocated outside owners have none" 0 \
    "$(q "$D" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE s.c_text LIKE 'ms_progs_annot_alloc%' AND b.owner_id IS NULL")"
assert_eq "owner in the MALLOC Attr" 1 \
    "$(q "$D" "SELECT count(*) FROM memscope_dump WHERE \"Event\" = 'MALLOC' AND json_extract(\"Attr\", '\$.size') = '1000' AND json_extract(\"Attr\", '\$.owner') = 'model'")"

assert_eq "ranges: three op_matmul at depth 0, all closed" $'op_matmul|0|1|3' \
    "$(q "$D" "SELECT name, depth, min(end_ns > start_ns), count(*) FROM ranges GROUP BY name")"
assert_eq "MSTX rows" $'Range_start|op_matmul|3\nRange_end|op_matmul|3\nMark|hello|3' \
    "$(q "$D" "SELECT \"Event Type\", \"Name\", count(*) FROM memscope_dump WHERE \"Event\" = 'MSTX' GROUP BY 1, 2 ORDER BY min(\"ID\")")"

assert_eq "accesses: op, type, size, matched to the owned block" \
    $'matmul|WRITE|100|100\nreader|READ|50|100\nmatmul|WRITE|100|200\nreader|READ|50|200\nmatmul|WRITE|100|300\nreader|READ|50|300' \
    "$(q "$D" "SELECT d.\"Name\", d.\"Event Type\", json_extract(d.\"Attr\", '\$.size'), b.size FROM memscope_dump d JOIN events e ON e.id = d.\"ID\" JOIN blocks b ON b.allocation_id = e.allocation_id WHERE d.\"Event\" = 'ACCESS' ORDER BY d.\"ID\"")"
assert_eq "each write access lies inside its range" 3 \
    "$(q "$D" "SELECT count(*) FROM events e JOIN ranges r ON e.ts_ns BETWEEN r.start_ns AND r.end_ns WHERE e.kind = 8 AND e.flags = 2")"

assert_eq "pool layers" $'arena|16|17\n16|pool:arena|arena\n17|pool:arena:reserved|arena_RESERVED' \
    "$(q "$D" "SELECT name, layer, reserve_layer FROM pools; SELECT id, name, event_type FROM layers WHERE id >= 16")"
assert_eq "pool statistics: 3 blocks, 1 freed; 1 region" $'16|3|1|2|128|192\n17|1|0|1|4096|4096' \
    "$(q "$D" "SELECT layer, allocs, frees, live_blocks, live_bytes, peak_bytes FROM process_stats WHERE layer >= 16 ORDER BY layer")"
assert_eq "pool blocks carry the caller's stack (the header's inline wrapper, then main)" 3 \
    "$(q "$D" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.layer = 16 AND s.c_text LIKE '%main (%annotate.c:%'")"

# CSV: msMemScope's rows for the annotation events.
"$MEMSCOPE" export "$D" --format=csv -o "$TMP/a.csv"
assert_eq "CSV STEP row" "SYSTEM,STEP,1" "$(grep -m1 ',SYSTEM,' "$TMP/a.csv" | cut -d, -f2-4)"
assert_eq "CSV MSTX name quoted, Ptr N/A" 'MSTX,Mark,"hello",N/A,"{}"' \
    "$(grep -m1 ',Mark,' "$TMP/a.csv" | awk -F, '{print $2","$3","$4","$9","$10}')"
assert_eq "CSV ACCESS row" "ACCESS,WRITE,matmul" "$(grep -m1 ',ACCESS,' "$TMP/a.csv" | cut -d, -f2-4)"
assert_match "CSV owner in the MALLOC Attr" 'size:1000,func:malloc,owner:model\}' "$(cat "$TMP/a.csv")"
# Owner tags after the fact (MARKs the Python package writes; the store applies them).
ms tags run --format=db -o "$TMP/t.db" -- "$PROGS/tag_marks"
assert_eq "tag_marks exit status" 0 "$RC"
assert_eq "describe tags extend the allocation's owner (the last one wins); memscope-tag replaces" \
    $'1111|model@w2\n2222|PTA@weight' \
    "$(q "$TMP/t.db" "SELECT b.size, o.label FROM blocks b JOIN owners o ON o.id = b.owner_id WHERE b.size IN (1111, 2222) ORDER BY b.size")"
# The tags are memscope's bookkeeping, not the user's marks (issue 23): they stay in events,
# while memscope_dump and the CSV, whose MSTX rows are the user's marks, leave them out.
assert_eq "the tag MARKs stay in events" 4 "$(q "$TMP/t.db" "SELECT count(*) FROM events WHERE kind = 5")"
assert_eq "... not in memscope_dump" 0 \
    "$(q "$TMP/t.db" "SELECT count(*) FROM memscope_dump WHERE \"Event Type\" = 'Mark'")"
ms tcsv export "$TMP/t.db" --format=csv
assert_eq "... nor in the CSV" 0 "$(grep -c ',MSTX,' "$TMP/tcsv.out")"
assert_eq "... and the user's own marks stay in both (annotate: hello)" "3|3" \
    "$(q "$D" "SELECT count(*) FROM memscope_dump WHERE \"Event Type\" = 'Mark'")|$(grep -c ',MSTX,Mark,"hello"' "$TMP/a.csv")"
done_testing
