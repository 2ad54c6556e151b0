#!/bin/bash
# test_sanitizers.sh: programs built with a sanitizer (issue 37 item 17). AddressSanitizer's
# runtime must be the first library loaded: under the agent it aborted at start (and memscope
# blamed a removed LD_PRELOAD), or spun forever with verify_asan_link_order=0. memscope refuses
# it before starting anything (exit 2, the reason said, nothing left behind), as it does a
# runtime linked into the program (-static-libasan, -static-liblsan: malloc is the program's
# own); ThreadSanitizer's and LeakSanitizer's shared runtimes are traced (the program's malloc
# recorded). Every run is bounded (timeout), so a spin fails the test instead of hanging it.
. "$(dirname "$0")/lib.sh"

printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { char *p = malloc(12345); p[0] = 1; printf("ran %%d\\n", p[0]); free(p); return 3; }\n' >"$TMP/p.c"
gcc -fsanitize=address -o "$TMP/asan" "$TMP/p.c" 2>/dev/null || skip "gcc cannot build with -fsanitize=address here"

# run NAME ARGS...: memscope run ARGS under a 60 s bound; RC, $TMP/NAME.out, $TMP/NAME.err
run() {
    local name=$1
    shift
    timeout 60 "$MEMSCOPE" run "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
    RC=$?
}

for opts in "" "verify_asan_link_order=0"; do
    name=asan${opts:+_nolinkorder}
    ASAN_OPTIONS=$opts run "$name" -o "$TMP/out_$name/" -- "$TMP/asan"
    assert_eq "$name: refused with status 2 (not a spin: 124)" 2 "$RC"
    assert_eq "$name: the program did not run" "" "$(cat "$TMP/$name.out")"
    assert_match "$name: says why" \
        "cannot trace '.*/asan': it is built with AddressSanitizer \(it needs libasan\.so\.[0-9]+\), whose runtime must be the first library loaded" \
        "$(cat "$TMP/$name.err")"
    assert_eq "$name: nothing left behind" "no" "$([ -e "$TMP/out_$name" ] && echo yes || echo no)"
done
# found on PATH as well (execvp's rule)
PATH="$TMP:$PATH" run path -o "$TMP/path.db" -- asan
assert_eq "asan on PATH: refused" 2 "$RC"
assert_match "asan on PATH: says why" "cannot trace 'asan': it is built with AddressSanitizer" \
    "$(cat "$TMP/path.err")"

if gcc -fsanitize=address -static-libasan -o "$TMP/sasan" "$TMP/p.c" 2>/dev/null; then
    run sasan -o "$TMP/sasan.db" -- "$TMP/sasan"
    assert_eq "static libasan: refused" 2 "$RC"
    assert_match "static libasan: says why" \
        "it is built with AddressSanitizer or LeakSanitizer \(a static runtime\), which serves malloc from inside the program" \
        "$(cat "$TMP/sasan.err")"
    assert_eq "static libasan: no database" "no" "$([ -e "$TMP/sasan.db" ] && echo yes || echo no)"
fi

# ThreadSanitizer and LeakSanitizer (shared runtimes) work under the agent: traced, the
# program's own malloc recorded once, its output and status its own.
for san in thread leak; do
    gcc -fsanitize=$san -o "$TMP/$san" "$TMP/p.c" 2>/dev/null || continue
    run "$san" --format=db -o "$TMP/$san.db" -- "$TMP/$san"
    assert_eq "-fsanitize=$san: the program's status" 3 "$RC"
    assert_eq "-fsanitize=$san: the program's output" "ran 1" "$(cat "$TMP/$san.out")"
    assert_eq "-fsanitize=$san: its malloc(12345) recorded" 1 "$(count_ev "$TMP/$san.db" MALLOC HOST 12345)"
done

# UBSan alone replaces no allocator: traced as any program.
if gcc -fsanitize=undefined -static-libubsan -o "$TMP/ubsan" "$TMP/p.c" 2>/dev/null; then
    run ubsan --format=db -o "$TMP/ubsan.db" -- "$TMP/ubsan"
    assert_eq "static UBSan: traced, the program's status" 3 "$RC"
    assert_eq "static UBSan: its malloc(12345) recorded" 1 "$(count_ev "$TMP/ubsan.db" MALLOC HOST 12345)"
fi
done_testing
