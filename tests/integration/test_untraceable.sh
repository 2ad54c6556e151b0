#!/bin/bash
# test_untraceable.sh: a program the agent cannot load into (issue 14 item 6): a static
# executable (no dynamic loader to honour LD_PRELOAD), and a setuid program run by another user
# (the loader ignores LD_PRELOAD then). memscope says why, the program still runs with its own
# output and status, and no empty directory is left behind.
. "$(dirname "$0")/lib.sh"

printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { void *p = malloc(10); printf("static ok\\n"); free(p); return 7; }\n' >"$TMP/st.c"
cc -static -o "$TMP/st" "$TMP/st.c" 2>/dev/null || skip "no static C library to link a static program"
out=$("$MEMSCOPE" run --format=db -o "$TMP/out/" -- "$TMP/st" 2>"$TMP/err"; echo "rc=$?")
assert_eq "static: the program's output and status" "static ok
rc=7" "$out"
assert_match "static: says why nothing was recorded" "ran untraced: it is statically linked" "$(cat "$TMP/err")"
assert_eq "static: no directory left behind" "no" "$([ -e "$TMP/out" ] && echo yes || echo no)"

# setuid: a root-owned setuid copy of a dynamic program, run by memscope as the user nobody
# (needs root to make it; skipped otherwise).
printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { void *p = malloc(10); printf("setuid ok\\n"); free(p); return 5; }\n' >"$TMP/su.c"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && cc -o "$TMP/su" "$TMP/su.c" 2>/dev/null &&
    chmod 4755 "$TMP/su" && chmod 755 "$TMP" && id nobody >/dev/null 2>&1; then
    mkdir -m 777 "$TMP/nb"
    out=$(cd "$TMP/nb" && setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$MEMSCOPE" run --format=db -o "$TMP/nb/out/" -- "$TMP/su" 2>"$TMP/nb.err"; echo "rc=$?")
    assert_eq "setuid: the program's output and status" "setuid ok
rc=5" "$out"
    assert_match "setuid: says why nothing was recorded" \
        "ran untraced: it is a setuid or setgid program" "$(cat "$TMP/nb.err")"
    assert_eq "setuid: no directory left behind" "no" \
        "$([ -e "$TMP/nb/out" ] && echo yes || echo no)"
else
    echo "  (setuid case skipped: needs root, setpriv and the user nobody)"
fi
done_testing
