#!/bin/bash
# test_compact.sh: the compact database (memscope run's default output, docs/database.md)
# against the full one made from the same traces. Each program is recorded once (--format=trace
# --no-pack); `memscope import` makes the compact database and `import --format=db` the full
# one. Then:
# - the compact database's tables (those the conversion computes for the analyses included)
#   equal the full one's, except events (only the rows that are
#   not MALLOC or FREE) and blocks (the blocks live at exit, live at a peak of their process and
#   layer, live across a step end or an OOM, accessed or of a pool: computed here with SQL on
#   the full database; and the blocks a tag gave another owner);
# - every analysis (`analyze all`, text and JSON) reports the same on both;
# - `export --format=csv` writes the same bytes, and `export --format=db` makes the full
#   database again (every table equal);
# - a compact database is small: at most 12 bytes per event on a 400,000-event run.
# Also the default `memscope run` (packing while converting), and bad input.
. "$(dirname "$0")/lib.sh"
AN=$PROGS/../analyze
# memscope's temporary expansions go here, where nothing else runs
export TMPDIR=$TMP/tmpdir
mkdir "$TMPDIR"

# Every table's rows in a fixed order (tables of both kinds of database; the full one's first).
dump_table() { # DB TABLE [WHERE]
    sqlite3 "$1" "SELECT * FROM $2 ${3:-} ORDER BY 1, 2, 3" 2>&1
}
# A stack's text as docs/database.md defines it, from the stack tree (the stack_frames view),
# written here in SQL apart from the code that makes it (src/store/stack_text.c): one frame a
# line, innermost first, "function (file:line)", else "function (module+0xoffset)" (the module's
# base name), else "function (0xpc)".
TEXT_SQL="SELECT s.id, COALESCE((SELECT group_concat(line, char(10)) FROM (
  SELECT COALESCE(fn.text, '??') || CASE
    WHEN fl.text IS NOT NULL THEN ' (' || fl.text || ':' || COALESCE(f.line, 0) || ')'
    WHEN m.id IS NOT NULL THEN printf(' (%s+0x%x)',
      substr(m.path, length(rtrim(m.path, replace(m.path, '/', ''))) + 1), f.pc - m.bias)
    ELSE printf(' (0x%x)', f.pc) END AS line
  FROM stack_frames sf JOIN frames f ON f.id = sf.frame_id
  LEFT JOIN strings fn ON fn.id = f.function_id LEFT JOIN strings fl ON fl.id = f.file_id
  LEFT JOIN modules m ON m.id = f.module_id WHERE sf.stack_id = s.id ORDER BY sf.position)), '')
  FROM stacks s ORDER BY s.id"
# A stack's Python text from the path of its Python part: "file(line): function" a line.
PY_TEXT_SQL="WITH RECURSIVE w(stack_id, position, node) AS (
    SELECT id, 0, py_node_id FROM stacks WHERE py_node_id IS NOT NULL
    UNION ALL SELECT w.stack_id, w.position + 1, n.parent FROM w
      JOIN stack_nodes n ON n.id = w.node WHERE n.parent IS NOT NULL)
  SELECT stack_id, group_concat(line, char(10)) FROM (
    SELECT w.stack_id, COALESCE(fl.text, '??') || '(' || f.line || '): ' || COALESCE(fn.text, '??')
      AS line FROM w JOIN stack_nodes n ON n.id = w.node JOIN frames f ON f.id = n.frame_id
    LEFT JOIN strings fn ON fn.id = f.function_id LEFT JOIN strings fl ON fl.id = f.file_id
    ORDER BY w.stack_id, w.position) GROUP BY stack_id ORDER BY stack_id"
TABLES="meta processes threads strings modules frames stack_nodes stack_frames event_kinds layers
owners steps ranges pools process_stats python_trace inefficient site_stats live_samples step_live
decompose_points decompose_live owner_peaks usage_samples usage_devices usage_cow usage_cow_stacks"

# The blocks a compact database keeps, computed on the full one: live at exit; live at the
# peak event of their process and layer, or at the peak of all default layers (a pool's reserve
# layer is not one); live when a STEP or OOM event of their process happened.
KEPT_SQL="SELECT b.* FROM blocks b WHERE b.free_ns IS NULL
  OR EXISTS (SELECT 1 FROM process_stats s WHERE s.process_id = b.process_id AND
     s.layer = b.layer AND s.peak_bytes > 0 AND b.alloc_event_id <= s.peak_event_id AND
     (b.free_event_id > s.peak_event_id OR (b.free_event_id IS NULL AND
      b.free_ns >= (SELECT ts_ns FROM events WHERE id = s.peak_event_id))))
  OR EXISTS (SELECT 1 FROM events e WHERE e.process_id = b.process_id AND e.kind IN (4, 9) AND
     e.id > b.alloc_event_id AND (b.free_event_id > e.id OR (b.free_event_id IS NULL AND
      b.free_ns >= e.ts_ns)))
  OR (b.layer NOT IN (SELECT reserve_layer FROM pools) AND EXISTS (SELECT 1 FROM meta m
     WHERE m.key = 'all_peak_event_id' AND b.alloc_event_id <= CAST(m.value AS INTEGER) AND
     (b.free_event_id > CAST(m.value AS INTEGER) OR (b.free_event_id IS NULL AND
      b.free_ns >= (SELECT ts_ns FROM events WHERE id = CAST(m.value AS INTEGER))))))
  OR EXISTS (SELECT 1 FROM events e WHERE e.kind = 8 AND e.allocation_id = b.allocation_id)
  OR b.layer IN (SELECT layer FROM pools UNION SELECT reserve_layer FROM pools)
  ORDER BY b.allocation_id"
# (Blocks whose owner a tag changed are kept too; in these programs, tag_marks, they are all
# live at exit.)

# What the conversion computes for the analyses (docs/database.md), cleared: the analyses then
# compute from the events, their own way.
CLEAR_COMPUTED="DELETE FROM site_stats; DELETE FROM live_samples; DELETE FROM step_live;
  DELETE FROM decompose_points; DELETE FROM decompose_live; DELETE FROM owner_peaks;
  DELETE FROM meta WHERE key IN ('max_live_bytes', 'final_live_bytes', 'all_peak_event_id',
  'all_peak_ns', 'all_peak_bytes', 'retagged');
  UPDATE process_stats SET peak_event_id = NULL, peak_allocation_id = NULL"
REC_OPTS=() # memscope run options of the recording
compare_formats() { # NAME PROGRAM ARGS...
    local name=$1
    shift
    local t=$TMP/$name.trace c=$TMP/$name.c.db f=$TMP/$name.f.db
    ms "$name-rec" run --format=trace --no-pack "${REC_OPTS[@]}" -o "$t" -- "$@"
    ms "$name-c" import "$t" -o "$c"
    assert_eq "$name: compact import status" 0 "$RC"
    ms "$name-f" import --format=db "$t" -o "$f"
    assert_eq "$name: full import status" 0 "$RC"
    assert_eq "$name: the compact database says so" "compact" \
        "$(sqlite3 "$c" "SELECT value FROM meta WHERE key = 'store'")"
    assert_eq "$name: it has no memscope_dump (one row per event: the full database's)" "0" \
        "$(sqlite3 "$c" "SELECT count(*) FROM sqlite_master WHERE name = 'memscope_dump'")"
    assert_ne "$name: its traces are in trace_files" "0" \
        "$(sqlite3 "$c" "SELECT count(*) FROM trace_files")"
    local tb diffs=""
    for tb in $TABLES; do
        if [ "$tb" = meta ]; then
            [ "$(dump_table "$c" meta "WHERE key != 'store'")" = "$(dump_table "$f" meta)" ] ||
                diffs="$diffs meta"
        elif [ "$(dump_table "$c" "$tb")" != "$(dump_table "$f" "$tb")" ]; then
            diffs="$diffs $tb"
        fi
    done
    assert_eq "$name: tables equal to the full database's" "" "$diffs"
    assert_eq "$name: stacks equal to the full database's (the compact one makes the text on demand)" \
        "$(dump_table "$f" "(SELECT id, process_id, depth, node_id, py_node_id FROM stacks)")" \
        "$(dump_table "$c" "(SELECT id, process_id, depth, node_id, py_node_id FROM stacks)")"
    assert_eq "$name: the compact database stores no stack text (but a PyTorch allocator stack's)" "0" \
        "$(sqlite3 "$c" "SELECT count(*) FROM stacks WHERE c_text IS NOT NULL OR (py_text IS NOT NULL AND py_node_id IS NOT NULL)")"
    assert_eq "$name: the full database's Python stack text is the Python frames' lines of the stack tree" \
        "$(sqlite3 "$c" "$PY_TEXT_SQL")" \
        "$(sqlite3 "$f" "SELECT id, py_text FROM stacks WHERE py_node_id IS NOT NULL ORDER BY id")"
    assert_eq "$name: the full database's stack text is the frames' lines of the stack tree" \
        "$(sqlite3 "$c" "$TEXT_SQL")" "$(sqlite3 "$f" "SELECT id, c_text FROM stacks ORDER BY id")"
    assert_eq "$name: events rows: the full database's that are not MALLOC or FREE" \
        "$(dump_table "$f" events "WHERE kind NOT IN (1, 2)")" "$(dump_table "$c" events)"
    sqlite3 "$c" "SELECT * FROM blocks ORDER BY 1" >"$TMP/$name.cb"
    sqlite3 "$f" "SELECT * FROM blocks ORDER BY 1" >"$TMP/$name.fb"
    sqlite3 "$f" "$KEPT_SQL" >"$TMP/$name.kb"
    assert_eq "$name: blocks rows: each as in the full database" "" \
        "$(comm -23 <(sort "$TMP/$name.cb") <(sort "$TMP/$name.fb"))"
    assert_eq "$name: blocks rows: every block live at exit, at a peak, across a step end or an OOM, accessed, of a pool" \
        "" "$(comm -13 <(sort "$TMP/$name.cb") <(sort "$TMP/$name.kb"))"
    assert_eq "$name: blocks rows: no other" "" \
        "$(comm -23 <(sort "$TMP/$name.cb") <(sort "$TMP/$name.kb"))"
    local j
    for j in "" --json; do
        ms "$name-allc$j" analyze all "$c" $j
        ms "$name-allf$j" analyze all "$f" $j
        assert_eq "$name: analyze all $j: same report" "$(cat "$TMP/$name-allf$j.out")" \
            "$(cat "$TMP/$name-allc$j.out")"
    done
    # the computed tables against the analyses' own computation from the events: a copy of the
    # full database without them answers the same
    cp "$f" "$TMP/$name.s.db"
    sqlite3 "$TMP/$name.s.db" "$CLEAR_COMPUTED"
    for j in "" --json; do
        ms "$name-alls$j" analyze all "$TMP/$name.s.db" $j
        assert_eq "$name: analyze all $j: the same from the events alone" \
            "$(cat "$TMP/$name-allf$j.out")" "$(cat "$TMP/$name-alls$j.out")"
    done
    ms "$name-csvc" export "$c" --format=csv
    ms "$name-csvf" export "$f" --format=csv
    assert_eq "$name: CSV export: same bytes" "$(md5sum <"$TMP/$name-csvf.out")" \
        "$(md5sum <"$TMP/$name-csvc.out")"
    ms "$name-exp" export "$c" --format=db -o "$TMP/$name.e.db"
    assert_eq "$name: export --format=db status" 0 "$RC"
    diffs=""
    for tb in $TABLES events blocks; do
        [ "$(dump_table "$TMP/$name.e.db" "$tb")" = "$(dump_table "$f" "$tb")" ] ||
            diffs="$diffs $tb"
    done
    assert_eq "$name: export --format=db: every table equal to the full database's" "" "$diffs"
}

compare_formats peak "$AN/an_peak"
# A peak reached 40 times, the peak of all layers (round 10's, a 4 MiB mapping held) older
# than the heap's (round 40's): the converter drops the blocks newer peaks left behind while it
# keeps these two rounds' (12,000 candidates in all).
compare_formats peaks "$PROGS/peaks"
assert_eq "peaks: blocks rows: round 10's 300 and round 40's 300, no other round's" \
    "1010|300 1040|300" \
    "$(sqlite3 "$TMP/peaks.c.db" "SELECT size, count(*) FROM blocks
        WHERE size BETWEEN 1001 AND 1040 GROUP BY size" | tr '\n' ' ' | sed 's/ $//')"
assert_eq "peaks: the mapping live at the peak of all layers" "1" \
    "$(sqlite3 "$TMP/peaks.c.db" "SELECT count(*) FROM blocks WHERE size = 4194304")"
compare_formats leak_steps "$AN/an_leak_steps"
compare_formats steps "$AN/b_steps"
compare_formats pool "$AN/b_pool"
compare_formats ineff "$AN/b_ineff"
compare_formats threads "$PROGS/threads" 4 2000
compare_formats mmap "$PROGS/mmap_anon"
compare_formats annotate "$PROGS/annotate"
compare_formats tags "$PROGS/tag_marks"
compare_formats fork "$PROGS/forker" "$TMP/fork.pid"
compare_formats exec "$PROGS/exec_parent" "$PROGS/exec_child"
compare_formats base "$AN/b_steps" base
REC_OPTS=(--call-stack=c:8,python:8) # Python stacks (py_text), as the Python layer records them
compare_formats pystacks "$PROGS/pystack_sim"
REC_OPTS=()
# pystack_sim's Python stacks (tests/progs/pystack_sim.c): the full database's text (equal to
# the compact one's tree above) is the known answer
assert_eq "pystacks: the Python stacks, made from the stack tree" \
    "$(printf '%s\n' 'train.py(5): main' 'model.py(12): forward|train.py(7): main' 'train.py(9): main')" \
    "$(sqlite3 "$TMP/pystacks.f.db" "SELECT replace(py_text, char(10), '|') FROM stacks WHERE py_text IS NOT NULL ORDER BY id")"

# Trend's and decompose's series are computed by the conversion of raw traces (the time of the
# last event is known before); from packed ones the analyses replay them: the same either way.
assert_eq "trend's series in the compact database (raw traces)" "101" \
    "$(sqlite3 "$TMP/leak_steps.c.db" "SELECT count(*) FROM live_samples")"
ms packed-rec run --format=trace -o "$TMP/packed.trace" -- "$AN/an_leak_steps"
ms packed-c import "$TMP/packed.trace" -o "$TMP/packed.c.db"
ms packed-f import --format=db "$TMP/packed.trace" -o "$TMP/packed.f.db"
assert_eq "packed traces: no series in the compact database" "0" \
    "$(sqlite3 "$TMP/packed.c.db" "SELECT count(*) FROM live_samples")"
for a in trend decompose; do
    for j in "" --json; do
        ms "packed-$a-c$j" analyze $a "$TMP/packed.c.db" $j
        ms "packed-$a-f$j" analyze $a "$TMP/packed.f.db" $j
        assert_eq "packed traces: analyze $a $j (replayed): the same on both" \
            "$(cat "$TMP/packed-$a-f$j.out")" "$(cat "$TMP/packed-$a-c$j.out")"
    done
done
# Decompose's owner series too, unless a tag gave a block another owner (tag_marks): then
# analyze decompose replays the traces
assert_ne "decompose's series in the compact database" "0" \
    "$(sqlite3 "$TMP/leak_steps.c.db" "SELECT count(*) FROM decompose_points")"
assert_eq "retagged blocks: no decompose series" "0" \
    "$(sqlite3 "$TMP/tags.c.db" "SELECT count(*) FROM decompose_points")"

# compare of two runs, each kind against its own kind and a compact one against a full one
mkdir -p "$TMP/cmpc" "$TMP/cmpf"
cp "$TMP/base.c.db" "$TMP/cmpc/base.db"
cp "$TMP/base.f.db" "$TMP/cmpf/base.db"
for j in "" --json; do
    ms "cmpc$j" analyze compare "$TMP/steps.c.db" --with "$TMP/cmpc/base.db" $j
    ms "cmpf$j" analyze compare "$TMP/steps.f.db" --with "$TMP/cmpf/base.db" $j
    ms "cmpx$j" analyze compare "$TMP/steps.c.db" --with "$TMP/cmpf/base.db" $j
    assert_eq "compare --with $j: the same on both" "$(cat "$TMP/cmpf$j.out")" "$(cat "$TMP/cmpc$j.out")"
    assert_eq "compare --with $j: compact against full, the same" "$(cat "$TMP/cmpf$j.out")" \
        "$(cat "$TMP/cmpx$j.out")"
done
assert_match "compare --with: a report" "allocated" "$(cat "$TMP/cmpc.out")"
# a compact database whose owners a tag changed: compare reads its full database
cp "$TMP/tags.c.db" "$TMP/cmpc/tags.db"
cp "$TMP/tags.f.db" "$TMP/cmpf/tags.db"
ms cmpt analyze compare "$TMP/steps.c.db" --with "$TMP/cmpc/tags.db" --json
ms cmptf analyze compare "$TMP/steps.f.db" --with "$TMP/cmpf/tags.db" --json
assert_eq "compare --with a retagged compact database: the same" "$(cat "$TMP/cmptf.out")" \
    "$(cat "$TMP/cmpt.out")"
assert_match "... whose owners are the tags' (block B: PTA@weight)" "PTA@weight" "$(cat "$TMP/cmpt.out")"

# Analyses with options, on both: those that read the compact database as it is, through the
# replay, and through the expansion (compare of steps, decompose at a time, one layer)
at=$(sqlite3 "$TMP/steps.f.db" "SELECT ts_ns FROM events WHERE kind = 4 AND name = '2'")
tat=$(sqlite3 "$TMP/tags.f.db" "SELECT ts_ns FROM events WHERE id = (SELECT max(id) / 2 FROM events)")
while read -r db args; do
    # shellcheck disable=SC2086 # the analysis and its options
    assert_eq "$db: analyze $args: the same on both" \
        "$("$MEMSCOPE" analyze $args "$TMP/$db.f.db" 2>&1)" "$("$MEMSCOPE" analyze $args "$TMP/$db.c.db" 2>&1)"
done <<EOT
steps decompose --step 1 --json
steps decompose --step 4 --json
steps decompose --at $at --json
steps decompose --at $at --by=stack
tags decompose --at $tat --json
steps compare --steps 2,3 --json
steps compare --steps 1,3
tags compare --steps 1,2 --json
steps leaks --warmup 0 --json
steps trend --layer heap --json
ineff inefficient --accessed-only --json
ineff inefficient --idle-threshold 5 --lazy-used 100000000 --json
leak_steps decompose --step 3
leak_steps trend --json --limit 1000000
pool leaks --layer pool:arena --json
threads temporary --json --top 3
threads temporary --layer heap --json
leak_steps trend --layer heap --json
EOT

# The default output of memscope run: a compact database, packed while converting.
ms def run -o "$TMP/def.db" -- "$PROGS/threads" 4 50000
assert_eq "default run: status" 0 "$RC"
assert_eq "default run: a compact database" "compact" \
    "$(sqlite3 "$TMP/def.db" "SELECT value FROM meta WHERE key = 'store'")"
assert_eq "default run: its summary counts every event (2 x 200000 + the rest)" \
    "$(sqlite3 "$TMP/def.db" "SELECT value FROM meta WHERE key = 'event_count'")" \
    "$(sed -n 's/^memscope: \([0-9]*\) events from 1 process$/\1/p' "$TMP/def.err")"
assert_eq "default run: the stored trace is packed (format version 2, little-endian at 8)" \
    "4D5354524143450002000000" \
    "$(sqlite3 "$TMP/def.db" "SELECT hex(substr(data, 1, 12)) FROM trace_files WHERE part = 0 AND name LIKE '%.mst'")"
events=$(sqlite3 "$TMP/def.db" "SELECT value FROM meta WHERE key = 'event_count'")
bytes=$(stat -c %s "$TMP/def.db")
assert_ge "default run: 400000 events or more" 400000 "$events"
assert_eq "default run: at most 12 bytes per event ($bytes bytes)" 1 \
    "$(awk -v b="$bytes" -v e="$events" 'BEGIN {print (b / e <= 12) ? 1 : 0}')"
ms defleaks analyze leaks "$TMP/def.db" --json
assert_eq "default run: leaks runs on it" 0 "$RC"
ls "$TMP" | grep -q 'packing' && fail "a packing directory was left behind" ||
    pass "no packing directory left behind"

# Bad input: a compact database whose traces were damaged or removed.
cp "$TMP/peak.c.db" "$TMP/bad.db"
sqlite3 "$TMP/bad.db" "DELETE FROM trace_files"
ms badexp export "$TMP/bad.db" --format=db -o "$TMP/bad.e.db"
assert_eq "no traces: export --format=db fails" 1 "$RC"
assert_match "no traces: says why" "holds no traces" "$(cat "$TMP/badexp.err")"
assert_eq "no traces: nothing written" "no" "$([ -e "$TMP/bad.e.db" ] && echo yes || echo no)"
ms badleaks analyze leaks "$TMP/bad.db"
assert_eq "no traces: leaks still runs (it reads the tables)" 0 "$RC"
ms badtemp analyze temporary "$TMP/bad.db"
assert_eq "no traces: temporary still runs (site_stats)" 0 "$RC"
ms badtrend analyze trend "$TMP/bad.db"
assert_eq "no traces: trend still runs (the conversion computed its series)" 0 "$RC"
ms baddec analyze decompose "$TMP/bad.db"
assert_eq "no traces: decompose still runs (the conversion computed its series)" 0 "$RC"
ms baddecl analyze decompose "$TMP/bad.db" --layer heap
assert_eq "no traces: decompose of one layer (reads every event) fails" 1 "$RC"
assert_match "... and says why" "holds no traces" "$(cat "$TMP/baddecl.err")"
cp "$TMP/peak.c.db" "$TMP/bad2.db"
sqlite3 "$TMP/bad2.db" "UPDATE trace_files SET name = '../escape.mst'"
ms badname export "$TMP/bad2.db" --format=db -o "$TMP/bad2.e.db"
assert_eq "a hostile file name: export fails" 1 "$RC"
assert_eq "a hostile file name: nothing written outside" "no" \
    "$([ -e "$TMP/escape.mst" ] && echo yes || echo no)"
cp "$TMP/peak.c.db" "$TMP/bad3.db"
sqlite3 "$TMP/bad3.db" "UPDATE trace_files SET data = zeroblob(100)"
ms badblob export "$TMP/bad3.db" --format=db -o "$TMP/bad3.e.db"
assert_eq "damaged traces: export fails" 1 "$RC"
assert_match "damaged traces: says why" "trace" "$(cat "$TMP/badblob.err")"
sqlite3 "$TMP/other.db" "CREATE TABLE t (x)"
printf 'not a database\n' >"$TMP/text.db"
for f in other text; do
    ms "notms-$f" export "$TMP/$f.db" --format=db -o "$TMP/$f.e.db"
    assert_eq "not a memscope database ($f): export --format=db fails" 1 "$RC"
    assert_match "... and says so" "not a memscope database" "$(cat "$TMP/notms-$f.err")"
done
# An output that exists and is not a regular file (a FIFO): refused, and left as it was
mkfifo "$TMP/fifo.db"
ms fiforun run -o "$TMP/fifo.db" -- "$AN/an_peak"
assert_eq "a FIFO as run's database: refused before the program runs" "1|" \
    "$RC|$(cat "$TMP/fiforun.out")"
ms fifoimp import "$TMP/peak.trace" -o "$TMP/fifo.db"
assert_eq "a FIFO as import's database: refused" 1 "$RC"
ms fifoexp export "$TMP/peak.c.db" --format=db -o "$TMP/fifo.db"
assert_eq "a FIFO as export's database: refused" 1 "$RC"
assert_match "... saying why" "not a regular file" "$(cat "$TMP/fifoexp.err")"
assert_eq "... and the FIFO is still there" "yes" "$([ -p "$TMP/fifo.db" ] && echo yes || echo no)"
ms fullexp export "$TMP/peak.f.db" --format=db -o "$TMP/again.db"
assert_eq "export --format=db of a full database: refused" 1 "$RC"
assert_match "... and says why" "already a full database" "$(cat "$TMP/fullexp.err")"
assert_eq "no temporary expansion left in TMPDIR" "" "$(ls -A "$TMPDIR")"

# A full disk during the conversion (the file size limit stands in for it, SIGXFSZ ignored as
# memscope's own writes then fail with EFBIG): a clear error, nothing half-written left, and the
# traces untouched. 8 KiB stops the packing of the trace; 8 KiB less than the database, whose
# tables take more than that beside the packed trace, its commit.
ms big-rec run --format=trace --no-pack -o "$TMP/big.trace" -- "$PROGS/threads" 4 50000
before=$(md5sum "$TMP"/big.trace/*.mst)
ms big-ok import "$TMP/big.trace" -o "$TMP/big.db"
for kib in 8 $(($(stat -c %s "$TMP/big.db") / 1024 - 8)); do
    mkdir "$TMP/out$kib"
    (
        trap '' XFSZ
        ulimit -f $kib
        "$MEMSCOPE" import "$TMP/big.trace" -o "$TMP/out$kib/x.db" >"$TMP/full$kib.out" 2>"$TMP/full$kib.err"
    ) </dev/null
    rc=$?
    assert_eq "disk full ($kib KiB): import fails" 1 "$rc"
    assert_match "disk full ($kib KiB): says why" "cannot pack .*File too large|disk I/O error" \
        "$(cat "$TMP/full$kib.err")"
    assert_eq "disk full ($kib KiB): nothing left beside the database" "" \
        "$(ls -A "$TMP/out$kib" 2>/dev/null)"
done
assert_eq "disk full: the traces untouched" "$before" "$(md5sum "$TMP"/big.trace/*.mst)"

# A trace cut anywhere: both kinds of database keep what is before the damage and say the same.
for cut in 5000 300001 1000003; do
    mkdir -p "$TMP/cut$cut"
    head -c $cut "$(ls "$TMP"/big.trace/*.mst 2>/dev/null | head -1)" >"$TMP/cut$cut/1.0.mst"
    ms "cut$cut-c" import "$TMP/cut$cut" -o "$TMP/cut$cut.c.db"
    assert_eq "cut at $cut: compact import status" 0 "$RC"
    assert_match "cut at $cut: says what was damaged" "truncated" "$(cat "$TMP/cut$cut-c.err")"
    ms "cut$cut-f" import --format=db "$TMP/cut$cut" -o "$TMP/cut$cut.f.db"
    ms "cut$cut-ac" analyze all "$TMP/cut$cut.c.db" --json
    ms "cut$cut-af" analyze all "$TMP/cut$cut.f.db" --json
    assert_eq "cut at $cut: analyze all: the same on both" "$(cat "$TMP/cut$cut-af.out")" \
        "$(cat "$TMP/cut$cut-ac.out")"
done

done_testing
