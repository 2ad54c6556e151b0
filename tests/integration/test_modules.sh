#!/bin/bash
# test_modules.sh: modules over time (issue 14 item 5). A library loaded by a relative path is
# symbolized; a library loaded where a closed one was gets its own names and full stacks, and
# the closed one's stacks keep theirs; the first allocation made in a library just loaded has
# its full stack (tests/progs/swap_main.c, swap_lib.c: -O2 without frame pointers).
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../progs" && pwd)
DB=$TMP/swap.db
ms run run --format=db -o "$DB" -- "$PROGS/swap_main" "$PROGS"
assert_eq "exit status" 0 "$RC"
assert_match "program stdout" "^swap ok [01]$" "$(cat "$TMP/run.out")"
require_db "swap_main" "$DB"
[ "$(cat "$TMP/run.out")" == "swap ok 1" ] ||
    echo "  (the second library was not mapped at the first one's address this time)"
stacks() {
    q "$DB" "SELECT b.size || ' ' || replace(s.c_text, char(10), ' < ') FROM blocks b
             JOIN stacks s ON s.id = b.stack_id WHERE b.size = $1 ORDER BY b.allocation_id" |
        sed -E 's/ < __libc_start_call_main .*//'
}
assert_eq "the first library's allocations (relative path: symbolized, full stacks)" \
    "60001 ms_swap_a_alloc ($SRC/swap_lib.c:26) < call ($SRC/swap_main.c:28) < main ($SRC/swap_main.c:40)
60001 ms_swap_a_alloc ($SRC/swap_lib.c:26) < call ($SRC/swap_main.c:29) < main ($SRC/swap_main.c:40)" \
    "$(stacks 60001)"
assert_eq "the second library's, loaded where the first was: its own names" \
    "60002 ms_swap_b_alloc ($SRC/swap_lib.c:19) < call ($SRC/swap_main.c:28) < main ($SRC/swap_main.c:41)
60002 ms_swap_b_alloc ($SRC/swap_lib.c:19) < call ($SRC/swap_main.c:29) < main ($SRC/swap_main.c:41)" \
    "$(stacks 60002)"
assert_eq "modules: absolute paths, both libraries" \
    "$PROGS/libms_swap_a.so
$PROGS/libms_swap_b.so" "$(q "$DB" "SELECT path FROM modules WHERE path LIKE '%libms_swap%' ORDER BY id")"
done_testing
