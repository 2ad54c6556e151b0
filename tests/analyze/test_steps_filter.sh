#!/bin/bash
# test_steps_filter.sh: `memscope run --steps=LIST` (msMemScope's --steps) records only the
# events of the listed steps, on b_steps.c (step 1: 4096 + 2048 B kept; steps 2 and 3: 1000 B
# allocated and freed; step 3 also 5000 B kept; step 4 empty): the exact heap rows of each
# choice, every step still numbered (4 rows in steps), no analysis run, bad lists refused, and a
# MEMSCOPE_STEPS left in the environment ignored.
. "$(dirname "$0")/an_lib.sh"

# heap_rows DB: the heap MALLOC (M) and FREE (F) rows with their sizes, in order.
heap_rows() {
    q "$1" "SELECT group_concat(k, ' ') FROM (SELECT CASE kind WHEN 1 THEN 'M' ELSE 'F' END
            || size AS k FROM events WHERE kind IN (1, 2) AND layer = 1 ORDER BY id)"
}

check() { # check NAME STEPS EXPECTED_ROWS
    local db=$TMP/$1.db
    ms "$1" run -q --format=db $2 -o "$db" -- "$PROGS/b_steps"
    assert_eq "$1: run exit status" 0 "$RC"
    assert_eq "$1: heap rows" "$3" "$(heap_rows "$db")"
    assert_eq "$1: the four steps are numbered" 4 "$(q "$db" 'SELECT count(*) FROM steps')"
}
check all "" "M4096 M2048 M1000 F1000 M1000 M5000 F1000"
check s1 --steps=1 "M4096 M2048"
check s3 --steps=3 "M1000 M5000 F1000"
check s23 --steps=2,3 "M1000 F1000 M1000 M5000 F1000"
check s4 --steps=4 ""
check s14 --steps=1,4 "M4096 M2048"

# The blocks of step 3 keep their step and owner.
assert_eq "--steps=3: the 5000 B block is step 3's, owner act@extra" "3|act@extra" \
    "$(q "$TMP/s3.db" "SELECT b.step, o.label FROM blocks b JOIN owners o ON o.id = b.owner_id
                        WHERE b.size = 5000")"

# No analysis on a trace of some steps: said once, exit status 0.
ms an run --format=db --steps=3 --analysis=leaks -o "$TMP/an.db" -- "$PROGS/b_steps"
assert_eq "--steps with --analysis: exit status" 0 "$RC"
assert_eq "--steps with --analysis: said" 1 "$(grep -c 'records some steps only' "$TMP/an.err")"
assert_eq "--steps with --analysis: no leak report" 0 "$(grep -c 'Detected memory leaks' "$TMP/an.err")"

# Bad lists: usage errors, nothing run.
for bad in 0 a 1,,2 1,2,3,4,5,6 -1 1000000000; do
    ms bad run -q --steps="$bad" -o "$TMP/bad.db" -- "$PROGS/b_steps"
    assert_eq "--steps=$bad: usage error" 2 "$RC"
done
assert_eq "bad lists: no database" "" "$(ls "$TMP" | grep '^bad.db' || true)"

# A MEMSCOPE_STEPS in the environment is not this run's --steps.
MEMSCOPE_STEPS=3 ms env run -q --format=db -o "$TMP/env.db" -- "$PROGS/b_steps"
assert_eq "MEMSCOPE_STEPS in the environment: every step recorded" \
    "M4096 M2048 M1000 F1000 M1000 M5000 F1000" "$(heap_rows "$TMP/env.db")"

# The program's output and status are those of a plain run.
same_without_agent "$PROGS/b_steps"
done_testing
