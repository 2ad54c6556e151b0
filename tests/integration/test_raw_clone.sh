#!/bin/bash
# test_raw_clone.sh: a child made without glibc's fork() (the clone system call through libc's
# syscall(), clone3, an inline syscall instruction, glibc's clone() wrapper) is traced as its
# own process, exactly like a forked one, and never writes into its parent's trace
# (tests/progs/raw_clone.c; issue 24 item 8).
. "$(dirname "$0")/lib.sh"

for mode in syscall clone3 asm glibc; do
    DB=$TMP/$mode.db
    ms "run_$mode" run --format=db -o "$DB" -- "$PROGS/raw_clone" "$mode" "$TMP/pids.$mode"
    assert_eq "$mode: exit status" 0 "$RC"
    assert_eq "$mode: program stdout untouched" "raw_clone ok" "$(cat "$TMP/run_$mode.out")"
    if [ "$RC" != 0 ] || [ ! -s "$TMP/pids.$mode" ]; then
        sed 's/^/  stderr: /' "$TMP/run_$mode.err" | head -20 >&2
        continue
    fi
    require_db "$mode" "$DB"
    assert_eq "$mode: no warning (no damaged trace data, no untraced child)" "" \
        "$(grep -Ei 'warning|damaged|untraced|malformed' "$TMP/run_$mode.err")"
    read -r parent child <"$TMP/pids.$mode"
    echo "  parent $parent, child $child"
    assert_eq "$mode: MALLOC by pid (pid|size|count)" "$parent|40001|5
$child|40003|7
$parent|40005|3
$parent|40007|200" "$(q "$DB" "SELECT p.pid, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
            AND e.size IN (40001, 40003, 40005, 40007) GROUP BY p.pid, e.size ORDER BY e.size")"
    assert_eq "$mode: FREE by pid (pid|block size|count)" "$child|40003|7
$parent|40005|3
$parent|40007|200" "$(q "$DB" "SELECT p.pid, b.size, count(*) FROM $EV JOIN blocks b
            ON b.allocation_id = e.allocation_id WHERE k.name = 'FREE'
            AND b.size IN (40001, 40003, 40005, 40007) GROUP BY p.pid, b.size ORDER BY b.size")"
    assert_eq "$mode: the child's process row: ppid" "$parent" \
        "$(q "$DB" "SELECT ppid FROM processes WHERE pid = $child")"
    assert_eq "$mode: child events on the child's own thread" "$child" \
        "$(q "$DB" "SELECT DISTINCT t.tid FROM events e JOIN threads t ON t.id = e.thread_id
                    WHERE e.size = 40003")"
    assert_eq "$mode: the child's stacks name its function" "1" \
        "$(q "$DB" "SELECT count(DISTINCT e.stack_id) FROM events e WHERE e.size = 40003")"
    assert_eq "$mode: blocks and their free events in the same process" 0 \
        "$(q "$DB" "SELECT count(*) FROM blocks b JOIN events f ON f.id = b.free_event_id
                    WHERE f.process_id != b.process_id")"
    assert_eq "$mode: frees without an allocation (none: the parent's chunk is whole)" 0 \
        "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'FREE' AND e.allocation_id IS NULL
                    AND p.pid IN ($parent, $child) AND l.event_type = 'HOST'
                    AND e.size IN (40003, 40005, 40007)")"
done
done_testing
