#!/bin/bash
# test_untraceable.sh: a program the agent cannot load into (issue 14 item 6): a static
# executable (no dynamic loader to honour LD_PRELOAD). memscope says why, the program still
# runs with its own output and status, and no empty directory is left behind.
. "$(dirname "$0")/lib.sh"

printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { void *p = malloc(10); printf("static ok\\n"); free(p); return 7; }\n' >"$TMP/st.c"
cc -static -o "$TMP/st" "$TMP/st.c" 2>/dev/null || skip "no static C library to link a static program"
out=$("$MEMSCOPE" run --format=db -o "$TMP/out/" -- "$TMP/st" 2>"$TMP/err"; echo "rc=$?")
assert_eq "static: the program's output and status" "static ok
rc=7" "$out"
assert_match "static: says why nothing was recorded" "ran untraced: it is statically linked" "$(cat "$TMP/err")"
assert_eq "static: no directory left behind" "no" "$([ -e "$TMP/out" ] && echo yes || echo no)"
done_testing
