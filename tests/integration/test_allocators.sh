#!/bin/bash
# test_allocators.sh: programs that use another allocator (Debian's jemalloc, tcmalloc, mimalloc,
# preloaded as users do) with threads, under memscope: nothing hangs, the output and status are
# the program's, every allocation is recorded once with its full stack (issue 14 item 1: jemalloc
# maps memory while holding its lock; memscope's mmap hook used to find the thread's stack with
# pthread_getattr_np, which reallocs into jemalloc and waited on that lock forever).
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
done
[ "$ran" = 1 ] || skip "no other allocator installed"
done_testing
