#!/bin/bash
# test_early.sh: recording starts at the first allocation of the process, whatever runs first
# (issue 14 item 2): a library constructor that allocates before the agent's constructor
# (tests/progs/ctor_main.c + ctor_lib.c), and libstdc++'s emergency pool in a C++ program. The
# agent keeps such events in static memory and writes them when it starts.
. "$(dirname "$0")/lib.sh"

ms ctor run --format=db -o "$TMP/c.db" -- "$PROGS/ctor_main"
assert_eq "exit status and output" "0 ctor ok" "$RC $(cat "$TMP/ctor.out")"
assert_eq "the constructor's three blocks: allocated and freed (matched)" "3|3" \
    "$(q "$TMP/c.db" "SELECT count(*), count(free_event_id) FROM blocks WHERE size = 12345")"
assert_eq "their stacks: the helper, then the constructor" "3" \
    "$(q "$TMP/c.db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
        WHERE b.size = 12345 AND s.c_text LIKE 'ms_ctor_alloc (%ctor_lib.c:%)
ms_ctor_allocate (%ctor_lib.c:%'")"
assert_eq "they come first, before main's block" "1" \
    "$(q "$TMP/c.db" "SELECT max(alloc_ns) FILTER (WHERE size = 12345) < min(alloc_ns) FILTER (WHERE size = 54321) FROM blocks")"
assert_eq "no unmatched free in the program" "0" \
    "$(q "$TMP/c.db" "SELECT sum(unmatched_frees) FROM process_stats WHERE layer = 1")"
if [ -x "$PROGS/cxx_new" ]; then
    ms cxx run --format=db -o "$TMP/x.db" -- "$PROGS/cxx_new"
    assert_ge "C++: libstdc++'s emergency pool is recorded (one block of 64 KiB or more)" 1 \
        "$(q "$TMP/x.db" "SELECT count(*) FROM blocks WHERE size >= 65536 AND size < 90001
            AND free_ns IS NULL")"
fi
done_testing
