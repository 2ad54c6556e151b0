#!/bin/bash
# test_stress.sh: the stress suite of odd programs (tests/progs/odd.c; issue 24): vfork,
# posix_spawn, 1,000 threads at once, a 1 kHz SIGALRM storm allocating in the handler while the
# program maps memory, forks from a process whose threads allocate, an exec loop, a descriptor
# limit of 16 set at run time, dlopen/dlclose x10,000. Each under memscope gives the stdout and
# exit status of its plain run and its exact allocation counts. (Raw clones: test_raw_clone.sh;
# pid namespaces: test_pidns.sh; closing every descriptor: test_fd_owner.sh.)
. "$(dirname "$0")/lib.sh"

ODD=$PROGS/odd
DL=$PROGS/libms_progs_dl.so

# same NAME ARGS...: plain run and memscope run of odd ARGS; stdout and status equal. The
# database is $TMP/NAME.db.
same() {
    local name=$1
    shift
    "$ODD" "$@" >"$TMP/$name.plain" 2>/dev/null </dev/null
    local prc=$?
    ms "$name" run --format=db -o "$TMP/$name.db" -- "$ODD" "$@"
    assert_eq "$name: exit status as plain ($prc)" "$prc" "$RC"
    assert_eq "$name: stdout as plain" "$(cat "$TMP/$name.plain")" "$(cat "$TMP/$name.out")"
    assert_eq "$name: no warning from memscope" "" \
        "$(grep -Ei 'warning|cannot record|damaged|lost' "$TMP/$name.err")"
}
# counts DB SIZE: "MALLOC|FREE|processes" of the blocks of that size.
counts() {
    q "$1" "SELECT (SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND e.size = $2) || '|' ||
                   (SELECT count(*) FROM blocks WHERE size = $2 AND free_event_id IS NOT NULL)
                   || '|' || (SELECT count(DISTINCT process_id) FROM blocks WHERE size = $2)"
}

same vfork vfork
assert_eq "vfork: 50001 (malloc|freed|processes)" "10|0|1" "$(counts "$TMP/vfork.db" 50001)"
assert_eq "vfork: /bin/true traced 5 times" 5 \
    "$(q "$TMP/vfork.db" "SELECT count(*) FROM processes WHERE exe LIKE '%/true'")"

same spawn spawn
assert_eq "spawn: 50002" "20|20|1" "$(counts "$TMP/spawn.db" 50002)"
assert_eq "spawn: /bin/true traced 20 times" 20 \
    "$(q "$TMP/spawn.db" "SELECT count(*) FROM processes WHERE exe LIKE '%/true'")"

same threads threads 1000
assert_eq "threads: 50003" "1000|1000|1" "$(counts "$TMP/threads.db" 50003)"
assert_eq "threads: on 1000 threads" 1000 \
    "$(q "$TMP/threads.db" "SELECT count(DISTINCT thread_id) FROM blocks WHERE size = 50003")"

# The storm's own counts vary from run to run: its file says what this run did.
ms storm run --format=db -o "$TMP/storm.db" -- "$ODD" storm "$TMP/storm.counts"
assert_eq "storm: exit status" 0 "$RC"
assert_eq "storm: stdout" "odd storm ok" "$(cat "$TMP/storm.out")"
read -r runs maps <"$TMP/storm.counts"
echo "  handler runs $runs, maps $maps"
assert_eq "storm: each handler allocation (malloc|freed|processes)" "$runs|$runs|1" \
    "$(counts "$TMP/storm.db" 50004)"
assert_eq "storm: each map and unmap of the interrupted thread" "$maps|$maps" \
    "$(q "$TMP/storm.db" "SELECT count(*) || '|' || count(free_event_id) FROM blocks b
                          JOIN layers l ON l.id = b.layer WHERE l.event_type = 'MMAP'
                          AND b.size = 53248")"
assert_eq "storm: nothing lost" "0" \
    "$(q "$TMP/storm.db" "SELECT COALESCE(sum(lost_events), 0) FROM processes")"

same forkthreads forkthreads
assert_eq "forkthreads: the threads' 50007" "20000|20000|1" \
    "$(counts "$TMP/forkthreads.db" 50007)"
assert_eq "forkthreads: each child's 50006, in 20 processes" "20|20|20" \
    "$(counts "$TMP/forkthreads.db" 50006)"

same execloop execloop 30
assert_eq "execloop: 31 images, one 50008 each" "31|0|31" "$(counts "$TMP/execloop.db" 50008)"
assert_eq "execloop: one pid" 1 "$(q "$TMP/execloop.db" "SELECT count(DISTINCT pid) FROM processes")"

same nofile nofile
assert_match "nofile: descriptors opened as in the plain run" "^odd nofile first [0-9]+ count" \
    "$(cat "$TMP/nofile.out")"
assert_eq "nofile: the child's 50009" "3|3|1" "$(counts "$TMP/nofile.db" 50009)"

same dlopen dlopen "$DL" 10000
assert_eq "dlopen: 50010" "10000|10000|1" "$(counts "$TMP/dlopen.db" 50010)"
done_testing
