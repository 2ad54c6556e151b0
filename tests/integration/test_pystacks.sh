#!/usr/bin/env bash
# test_pystacks.sh: Python stacks in the agent and the store, driven by tests/progs/pystack_sim,
# a test double of the Python extension's profile hook (no Python involved): exact
# "file(line): func" stacks per allocation, python:N depth limits, and stacks off without
# python in --call-stack.
. "$(dirname "$0")/lib.sh"

ms py run --format=db --call-stack=c:8,python:8 -o "$TMP/p.db" -- "$PROGS/pystack_sim"
assert_eq "exit status" 0 "$RC"
require_db "pystack_sim" "$TMP/p.db"
assert_eq "Python stack of each allocation" \
    "$(printf '111|train.py(5): main\n222|model.py(12): forward\ntrain.py(7): main\n333|train.py(9): main')" \
    "$(q "$TMP/p.db" "SELECT b.size, s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size IN (111, 222, 333) ORDER BY b.size")"
assert_eq "native stacks are still there" 3 \
    "$(q "$TMP/p.db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size IN (111, 222, 333) AND s.c_text LIKE 'ms_progs_py_alloc (%pystack_sim.c:%'")"
assert_eq "memscope_dump Call Stack(Python)" "model.py(12): forward" \
    "$(q "$TMP/p.db" "SELECT substr(\"Call Stack(Python)\", 1, 21) FROM memscope_dump WHERE json_extract(\"Attr\", '\$.size') = '222' AND \"Event\" = 'MALLOC'")"

assert_eq "tracer: main contains forward, both closed" \
    "$(printf 'train.py(1): main|0|1\nmodel.py(10): forward|1|1')" \
    "$(q "$TMP/p.db" "SELECT \"FuncInfo\", depth, \"EndTime(ns)\" > \"StartTime(ns)\" FROM python_trace ORDER BY \"StartTime(ns)\"")"
PID=$(q "$TMP/p.db" "SELECT pid FROM processes")
assert_eq "msMemScope's python_trace_<pid> table" 2 \
    "$(q "$TMP/p.db" "SELECT count(*) FROM python_trace_$PID")"

ms py1 run --format=db --call-stack=c:8,python:1 -o "$TMP/p1.db" -- "$PROGS/pystack_sim"
assert_eq "python:1 keeps the innermost frame" "222|model.py(12): forward" \
    "$(q "$TMP/p1.db" "SELECT b.size, s.py_text FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size = 222")"

ms noc run --format=db --call-stack=python:4 -o "$TMP/p2.db" -- "$PROGS/pystack_sim"
assert_eq "python only: no native frames, Python stack kept" "222|0|model.py(12): forward" \
    "$(q "$TMP/p2.db" "SELECT b.size, s.depth, substr(s.py_text, 1, instr(s.py_text, char(10)) - 1) FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size = 222")"

ms nopy run --format=db --call-stack=c:8 -o "$TMP/p3.db" -- "$PROGS/pystack_sim"
assert_eq "without python in --call-stack: no Python stacks" 0 \
    "$(q "$TMP/p3.db" "SELECT count(*) FROM stacks WHERE py_text IS NOT NULL")"
done_testing
