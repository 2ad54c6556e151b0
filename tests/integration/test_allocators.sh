#!/bin/bash
# test_allocators.sh: programs that use another allocator (Debian's jemalloc, tcmalloc, mimalloc,
# preloaded as users do) with threads, under memscope: nothing hangs, the output and status are
# the program's, every allocation is recorded once with its full stack (issue 14 item 1: jemalloc
# maps memory while holding its lock; memscope's mmap hook used to find the thread's stack with
# pthread_getattr_np, which reallocs into jemalloc and waited on that lock forever).
# And the heap is counted once (issue 47 section 7): the mappings an allocator makes to hold the
# heap (its arenas) are not added to the mmap layer, as glibc's are not (tests/progs/arenas.c).
. "$(dirname "$0")/lib.sh"

ran=0
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    path=/usr/lib/x86_64-linux-gnu/$lib
    if [ ! -e "$path" ]; then
        echo "skip: $lib is not installed (scripts/setup-debian.sh installs it)"
        continue
    fi
    ran=1
    db="$TMP/$lib.db"
    # the allocator is preloaded into the program only (after the agent, as a user's
    # LD_PRELOAD would be), not into memscope itself (an ASan build refuses that)
    out=$(timeout 60 "$MEMSCOPE" run --format=db -q -o "$db" -- /bin/sh -c \
          'LD_PRELOAD="$LD_PRELOAD:$1" exec "$2" 4 20000' _ "$path" "$PROGS/threads" 2>&1)
    assert_eq "$lib: output and status (no hang: timeout's 124 otherwise)" "threads ok 4 20000
rc=0" "$out
rc=$?"
    assert_eq "$lib: every thread's allocations, once each" "3001|20000
3003|20000
3005|20000
3007|20000" "$(q "$db" "SELECT size, count(*) FROM events WHERE kind = 1 AND size BETWEEN 3001 AND 3007
        GROUP BY size ORDER BY size")"
    assert_eq "$lib: the threads' stacks are whole (helper, then its caller)" "4" \
        "$(q "$db" "SELECT count(DISTINCT b.size) FROM blocks b JOIN stacks s ON s.id = b.stack_id
            WHERE b.size BETWEEN 3001 AND 3007 AND s.c_text LIKE 'ms_progs_thread_alloc (%threads.c:%)
work (%threads.c:%)%'")"

    db="$TMP/$lib.arenas.db"
    out=$(timeout 60 "$MEMSCOPE" run --format=db -q -o "$db" -- /bin/sh -c \
          'LD_PRELOAD="$LD_PRELOAD:$1" exec "$2"' _ "$path" "$PROGS/arenas" 2>&1)
    assert_eq "$lib: arenas: output and status" "arenas ok
rc=0" "$out
rc=$?"
    assert_eq "$lib: arenas: the program's heap blocks (size|count|func)" "100|1000|malloc
1048576|32|malloc" "$(q "$db" "SELECT e.size, count(*), e.func FROM $EV JOIN stacks s
        ON s.id = e.stack_id WHERE k.name = 'MALLOC' AND l.event_type = 'HOST'
        AND s.c_text LIKE 'ms_progs_arenas_alloc (%' GROUP BY e.size ORDER BY e.size")"
    # the allocator's own mappings (jemalloc's extents, mimalloc's segments) are not there
    assert_eq "$lib: arenas: the mmap layer holds the program's mapping only (allocs|peak)" \
        "1|4194304" "$(q "$db" "SELECT allocs, peak_bytes FROM process_stats p
            JOIN processes r ON r.id = p.process_id WHERE r.exe LIKE '%arenas' AND p.layer = 2")"
    # the heap's peak: the program's blocks and what the start-up allocated and still held
    # (libstdc++'s emergency pool in a C++ allocator, freed at exit), every other block being
    # freed before the peak
    heap=$(q "$db" "SELECT p.peak_bytes - 33654432 - (SELECT coalesce(sum(b.size), 0) FROM blocks b
            WHERE b.process_id = r.id AND b.layer = 1 AND (b.free_ns IS NULL
              OR b.free_event_id > (SELECT max(e.id) FROM events e JOIN blocks m
                ON m.allocation_id = e.allocation_id JOIN stacks s ON s.id = m.stack_id
                WHERE e.process_id = r.id AND s.c_text LIKE 'ms_progs_arenas_alloc (%'))
              AND b.allocation_id < (SELECT min(m.allocation_id) FROM blocks m JOIN stacks s
                ON s.id = m.stack_id WHERE m.process_id = r.id
                AND s.c_text LIKE 'ms_progs_arenas_alloc (%'))
            FROM process_stats p JOIN processes r ON r.id = p.process_id
            WHERE r.exe LIKE '%arenas' AND p.layer = 1")
    assert_eq "$lib: arenas: heap peak = the program's 33654432 B + the start-up's live blocks" \
        0 "$heap"
    # decompose's moment, the peak of all default layers of every process: the program's heap
    # peak + its 4 MiB mapping + the shell image's heap blocks (never freed, live from before)
    want=$(q "$db" "SELECT (SELECT p.peak_bytes FROM process_stats p JOIN processes r
            ON r.id = p.process_id WHERE r.exe LIKE '%arenas' AND p.layer = 1) + 4194304 +
            (SELECT coalesce(sum(b.size), 0) FROM blocks b JOIN processes r ON r.id = b.process_id
             WHERE r.exe NOT LIKE '%arenas' AND b.layer = 1 AND b.free_ns IS NULL)")
    got=$("$MEMSCOPE" analyze decompose "$db" | sed -n 's/.*at the peak of live bytes ([^)]*): \([0-9]*\) B.*/\1/p')
    assert_eq "$lib: arenas: the peak of the default layers counts the heap once" "$want" "$got"
done
[ "$ran" = 1 ] || skip "no other allocator installed"
done_testing
