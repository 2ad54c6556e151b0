#!/usr/bin/env bash
# test_insight.sh: the files MindStudio Insight and msMemScope's own tools open, checked with the
# statements those programs run (facts read from their sources, ../shared/reference/
# msmemscope.md section 8; written here in our own words):
# - Insight routes only files named ^(memscope|leaks)_dump_\d+\.db$;
# - it finds the tables with type = 'table' (memscope_dump, python_trace_%);
# - it reads events WHERE "Device Id" NOT IN ('N/A', '', 'host') ORDER BY "Timestamp(ns)", the
#   call-stack columns found with pragma_table_info;
# - it writes into the file it imports (its own tables, a Depth column on python_trace_<pid>,
#   UPDATE ... WHERE ROWID = ?), after which memscope still reads the file, with the same answers;
# - msMemScope's check_inefficient looks memscope_dump up with type = 'table' and takes op
#   boundaries from OP_LAUNCH rows ATEN_START / ATEN_END named torch._ops.aten.<op>.<overload>.
. "$(dirname "$0")/lib.sh"

INSIGHT_NAME='^(memscope|leaks)_dump_[0-9]+\.db$'
table_named() { q "$1" "SELECT name FROM sqlite_schema WHERE type = 'table' AND name = '$2'"; }

# A directory run with Python stacks and the tracer (pystack_sim: a test double of the Python
# extension's hooks): the full database, named and laid out as msMemScope's.
ms py run --format=db --call-stack=c:8,python:8 -o "$TMP/out" -- "$PROGS/pystack_sim"
assert_eq "pystack_sim: exit status" 0 "$RC"
DB=$(find "$TMP/out" -name '*.db' | head -1)
assert_match "Insight routes the file by its name" "$INSIGHT_NAME" "$(basename "$DB")"
assert_eq "Insight's lookup of memscope_dump (type = 'table')" memscope_dump \
    "$(table_named "$DB" memscope_dump)"
assert_eq "memscope_dump: msMemScope's columns and types, ID the primary key" \
    "ID INTEGER 1,Event TEXT 0,Event Type TEXT 0,Name TEXT 0,Timestamp(ns) INTEGER 0,Process Id INTEGER 0,Thread Id INTEGER 0,Device Id TEXT 0,Ptr TEXT 0,Attr TEXT 0,Call Stack(Python) TEXT 0,Call Stack(C) TEXT 0" \
    "$(q "$DB" "SELECT group_concat(name || ' ' || type || ' ' || pk, ',') FROM pragma_table_info('memscope_dump')")"
assert_eq "Insight finds the call-stack columns with pragma_table_info" \
    "Call Stack(Python)|Call Stack(C)" \
    "$(q "$DB" "SELECT group_concat(name, '|') FROM pragma_table_info('memscope_dump') WHERE name LIKE 'Call Stack%'")"
PID=$(q "$DB" "SELECT pid FROM processes")
assert_eq "Insight's lookup of the python trace tables (type = 'table')" "python_trace_$PID" \
    "$(q "$DB" "SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'python_trace_%'")"
assert_eq "python_trace_<pid>: msMemScope's columns" \
    "FuncInfo TEXT,StartTime(ns) INTEGER,EndTime(ns) INTEGER,Thread Id INTEGER,Process Id INTEGER" \
    "$(q "$DB" "SELECT group_concat(name || ' ' || type, ',') FROM pragma_table_info('python_trace_$PID')")"
assert_eq "python_trace_<pid>: the tracer's calls" "train.py(1): main|model.py(10): forward" \
    "$(q "$DB" "SELECT group_concat(FuncInfo, '|') FROM (SELECT FuncInfo FROM python_trace_$PID ORDER BY \"StartTime(ns)\")")"
# Insight's memory rows: every MALLOC and FREE has a device ('cpu' for host memory).
assert_eq "Insight's event query keeps every MALLOC and FREE row" \
    "$(q "$DB" "SELECT count(*) FROM events WHERE kind IN (1, 2)")" \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump WHERE \"Device Id\" NOT IN ('N/A', '', 'host') AND Event IN ('MALLOC', 'FREE') ORDER BY \"Timestamp(ns)\"")"
assert_eq "... and no MALLOC row without a device" 0 \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump WHERE Event = 'MALLOC' AND \"Device Id\" IN ('N/A', '', 'host')")"
assert_eq "Insight's block size: Attr size as a string, never 0" 0 \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump WHERE Event = 'MALLOC' AND (json_type(Attr, '\$.size') != 'text' OR CAST(json_extract(Attr, '\$.size') AS INTEGER) = 0)")"

# What memscope answers before and after Insight imported (wrote into) the file.
answers() { # db -> the analyses and the CSV export
    "$MEMSCOPE" analyze all "$1" 2>&1 | sed "s|$1|DB|g"
    "$MEMSCOPE" export "$1" --format=csv 2>&1
}
before=$(answers "$DB")
# Insight's writes on import (the statements' kinds and targets; the column lists are ours).
q "$DB" "CREATE TABLE memory_allocation (id INTEGER PRIMARY KEY, deviceId TEXT, eventType TEXT,
         timestamp INTEGER, totalSize INTEGER);
         INSERT INTO memory_allocation (deviceId, eventType, timestamp, totalSize)
           SELECT \"Device Id\", \"Event Type\", \"Timestamp(ns)\", 0 FROM memscope_dump
           WHERE \"Device Id\" NOT IN ('N/A', '', 'host');
         CREATE TABLE memory_block (id INTEGER PRIMARY KEY, deviceId TEXT, addr TEXT, size INTEGER,
           startTimestamp INTEGER, endTimestamp INTEGER, owner TEXT, groupId INTEGER);
         CREATE TABLE status_info (key TEXT, value TEXT);
         INSERT INTO status_info VALUES ('parse_status', 'finished');
         ALTER TABLE python_trace_$PID ADD COLUMN Depth INTEGER;
         UPDATE python_trace_$PID SET Depth = 0 WHERE ROWID = 1;
         UPDATE python_trace_$PID SET Depth = 1 WHERE ROWID = 2;" >"$TMP/insight.log"
assert_eq "Insight's writes succeed on memscope's file" "" "$(cat "$TMP/insight.log")"
assert_eq "... the Depth column is set" "0|1" \
    "$(q "$DB" "SELECT group_concat(Depth, '|') FROM python_trace_$PID")"
assert_eq "memscope reads the file Insight imported: integrity" ok "$(q "$DB" "PRAGMA integrity_check")"
assert_eq "memscope reads the file Insight imported: the same analyses and CSV" "$before" \
    "$(answers "$DB")"

# PyTorch ops as msMemScope writes them (op_ranges: aten::addmm and aten::add.Tensor ranges
# inside a user's range "forward").
ms ops run --format=db -o "$TMP/ops.db" -- "$PROGS/op_ranges"
assert_eq "op_ranges: every API call returns 0 under the agent" "op_ranges ok 0" \
    "$(head -1 "$TMP/ops.out")"
assert_eq "ops: OP_LAUNCH ATEN_START / ATEN_END rows named torch._ops.aten.<op>.<overload>, user ranges MSTX" \
    "$(printf '%s\n' 'MSTX|Range_start|forward' \
        'OP_LAUNCH|ATEN_START|torch._ops.aten.addmm.default' 'ACCESS|WRITE|aten::addmm' \
        'OP_LAUNCH|ATEN_END|torch._ops.aten.addmm.default' \
        'OP_LAUNCH|ATEN_START|torch._ops.aten.add.Tensor' 'ACCESS|READ|aten::add.Tensor' \
        'OP_LAUNCH|ATEN_END|torch._ops.aten.add.Tensor' 'MSTX|Range_end|forward')" \
    "$(q "$TMP/ops.db" "SELECT Event, \"Event Type\", Name FROM memscope_dump WHERE Event IN ('OP_LAUNCH', 'MSTX', 'ACCESS') ORDER BY ID")"
assert_eq "ops: ACCESS Attr with msMemScope's keys (type, dtype, shape, size, format, allocation_id)" \
    "$(printf '%s\n' 'HOST|torch.float32|[32, 32]|4096|contiguous|1' 'HOST|||4096||1')" \
    "$(q "$TMP/ops.db" "SELECT json_extract(Attr, '\$.type'), json_extract(Attr, '\$.dtype'), json_extract(Attr, '\$.shape'), json_extract(Attr, '\$.size'), json_extract(Attr, '\$.format'), json_extract(Attr, '\$.allocation_id') FROM memscope_dump WHERE Event = 'ACCESS' ORDER BY ID")"
assert_eq "ops: msMemScope's check_inefficient finds the op boundaries" 4 \
    "$(q "$TMP/ops.db" "SELECT count(*) FROM memscope_dump WHERE Event = 'OP_LAUNCH' AND \"Event Type\" IN ('ATEN_START', 'ATEN_END')")"
assert_eq "ops: the CSV has the same rows" \
    "$(printf '%s\n' 'MSTX,Range_start,"forward"' \
        'OP_LAUNCH,ATEN_START,torch._ops.aten.addmm.default' 'ACCESS,WRITE,aten::addmm' \
        'OP_LAUNCH,ATEN_END,torch._ops.aten.addmm.default' \
        'OP_LAUNCH,ATEN_START,torch._ops.aten.add.Tensor' 'ACCESS,READ,aten::add.Tensor' \
        'OP_LAUNCH,ATEN_END,torch._ops.aten.add.Tensor' 'MSTX,Range_end,"forward"')" \
    "$("$MEMSCOPE" export "$TMP/ops.db" --format=csv | cut -d, -f2-4 | grep -E '^(OP_LAUNCH|MSTX|ACCESS),')"
assert_eq "ops: the analyses still see ranges named by schema (aten::addmm)" \
    "forward|aten::addmm|aten::add.Tensor" \
    "$(q "$TMP/ops.db" "SELECT group_concat(name, '|') FROM (SELECT name FROM events WHERE kind = 6 ORDER BY id)")"

# msMemScope's --compare reads a CSV one physical line per record and ends a quoted field at
# the first '"' (its reader, in our words): a run without stacks, with marks, owner tags
# (tag_marks) and ops, gives rows of exactly 12 fields that way.
ms nostack run --format=csv --call-stack=c:0 -o "$TMP/ns.csv" -- "$PROGS/tag_marks"
ms nostack2 run --format=csv --call-stack=c:0 -o "$TMP/ns2.csv" -- "$PROGS/op_ranges"
assert_eq "a stack-less CSV, read as msMemScope's compare reads it: 12 fields on every line" \
    "ok" "$(/usr/bin/python3 - "$TMP/ns.csv" "$TMP/ns2.csv" <<'PYEOF'
import sys
bad = []
for path in sys.argv[1:]:
    for n, line in enumerate(open(path, encoding="utf-8").read().split("\n")[1:-1], 2):
        fields, i = [], 0
        while True:
            if line[i:i + 1] == '"':
                j = line.find('"', i + 1)       # the first quote ends the field
                if j < 0:
                    bad.append("%s:%d: a quoted field goes on to the next line" % (path, n))
                    break
                fields.append(line[i + 1:j])
                i = j + 1
            else:
                j = line.find(",", i)
                fields.append(line[i:] if j < 0 else line[i:j])
                i = len(line) if j < 0 else j
            if i >= len(line):
                break
            if line[i] != ",":
                bad.append("%s:%d: text after a quoted field" % (path, n))
                break
            i += 1
            if i == len(line):
                fields.append("")
                break
        if len(fields) != 12:
            bad.append("%s:%d: %d fields: %s" % (path, n, len(fields), line[:120]))
print("\n".join(bad[:5]) if bad else "ok")
PYEOF
)"

# The default (compact) output is not what Insight opens: its name says so, and memscope export
# writes the file Insight opens beside it, under the name Insight routes.
ms compact run -o "$TMP/cout" -- "$PROGS/op_ranges"
C=$(find "$TMP/cout" -name '*.db' | head -1)
assert_match "compact output: memscope_<stamp>.db in the run's folder" \
    '/memscope_[0-9]+_(20[0-9]{12})/memscope_\1\.db$' "$C"
assert_eq "compact output has no memscope_dump" "" "$(table_named "$C" memscope_dump)"
ms exp export "$C" --format=db
assert_eq "export --format=db without -o: status" 0 "$RC"
F=$(dirname "$C")/$(basename "$C" | sed 's/^memscope_/memscope_dump_/')
assert_match "... writes memscope_dump_<stamp>.db beside it" "$INSIGHT_NAME" "$(basename "$F")"
assert_eq "... a file Insight opens" memscope_dump "$(table_named "$F" memscope_dump)"
assert_eq "... with the same rows as a run's full database" \
    "$(q "$TMP/ops.db" "SELECT Event, \"Event Type\", Name FROM memscope_dump WHERE Event != 'MALLOC' AND Event != 'FREE' ORDER BY ID")" \
    "$(q "$F" "SELECT Event, \"Event Type\", Name FROM memscope_dump WHERE Event != 'MALLOC' AND Event != 'FREE' ORDER BY ID")"
ms exp2 export "$C" --format=db
assert_eq "export --format=db never replaces a file it did not name: status" 1 "$RC"
assert_match "... and says so" "exists; name the output with -o" "$(cat "$TMP/exp2.err")"
done_testing
