#!/bin/bash
# test_exec.sh: exec is followed by default (both images of the pid are in the database, each
# with its own allocations) and not with --no-follow (tests/progs/exec_parent.c, exec_child.c).
. "$(dirname "$0")/lib.sh"

pid_of() { sed -n "s/^$1 pid //p" "$2"; }

DB=$TMP/e.db
ms run run --format=db -o "$DB" -- "$PROGS/exec_parent" "$PROGS/exec_child"
assert_eq "exit status (the exec'd image's)" 7 "$RC"
pid=$(pid_of exec_parent "$TMP/run.out")
assert_eq "both images ran in one pid" "$pid" "$(pid_of exec_child "$TMP/run.out")"
require_db "exec followed" "$DB"
sanity "$DB"
assert_eq "MALLOC per image (pid|image_seq|size|count)" "$pid|0|50001|3
$pid|1|50003|4" "$(q "$DB" "SELECT p.pid, p.image_seq, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                           AND e.size IN (50001, 50003) GROUP BY p.id, e.size ORDER BY e.size")"
assert_eq "process rows of that pid" 2 "$(q "$DB" "SELECT count(*) FROM processes WHERE pid = $pid")"
assert_match "exe of the second image" "exec_child$" \
    "$(q "$DB" "SELECT exe FROM processes WHERE pid = $pid AND image_seq = 1")"
assert_match "exe of the first image" "exec_parent$" \
    "$(q "$DB" "SELECT exe FROM processes WHERE pid = $pid AND image_seq = 0")"
assert_eq "exec_child's frees" 4 "$(count_freed "$DB" HOST 50003)"
assert_eq "exec_parent's blocks end live (the exec discarded them, nothing freed them)" 3 \
    "$(q "$DB" "SELECT count(*) FROM blocks WHERE size = 50001 AND free_ns IS NULL")"
assert_eq "meta.exit_status" 7 "$(q "$DB" "SELECT value FROM meta WHERE key = 'exit_status'")"

DB=$TMP/n.db
ms nofollow run --format=db --no-follow -o "$DB" -- "$PROGS/exec_parent" "$PROGS/exec_child"
assert_eq "--no-follow: exit status" 7 "$RC"
assert_match "--no-follow: the exec'd program still runs" "^exec_child pid [0-9]+$" \
    "$(sed -n 2p "$TMP/nofollow.out")"
pid=$(pid_of exec_parent "$TMP/nofollow.out")
require_db "exec not followed" "$DB"
assert_eq "--no-follow: MALLOC per image (pid|image_seq|size|count)" "$pid|0|50001|3" \
    "$(q "$DB" "SELECT p.pid, p.image_seq, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                AND e.size IN (50001, 50003) GROUP BY p.id, e.size ORDER BY e.size")"
assert_eq "--no-follow: process rows of that pid" 1 \
    "$(q "$DB" "SELECT count(*) FROM processes WHERE pid = $pid")"
done_testing
