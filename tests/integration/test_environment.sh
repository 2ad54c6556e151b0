#!/bin/bash
# test_environment.sh: memscope starts itself again with glibc's huge-page malloc
# (GLIBC_TUNABLES=...glibc.malloc.hugetlb=1, src/cli/main.c) and gives the traced program the
# caller's environment unchanged: GLIBC_TUNABLES as the caller had it (unset, empty, a value of
# its own), no variable of that second start, nothing else but the agent's own variables.
source "$(dirname "$0")/lib.sh"

thp=0
grep -Eq '\[(always|madvise)\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null && thp=1

# run NAME [VAR=VALUE...]: runs a shell under memscope that saves the environment memscope
# started with (/proc/<its parent>/environ: memscope's own) and its own.
run() {
    local name=$1
    shift
    env "$@" "$MEMSCOPE" run -q --format=trace --no-pack -o "$TMP/$name.trace" -- \
        sh -c 'tr "\0" "\n" </proc/$PPID/environ >"$0.memscope"; env >"$0.prog"' "$TMP/$name" \
        || fail "$name: memscope run failed"
}

# the agent's variables, which memscope adds on purpose (docs/cli.md)
ours='^(LD_PRELOAD|MEMSCOPE_[A-Z_]*|NVTX_INJECTION64_PATH|PYTHONPATH|_)='

run unset -u GLIBC_TUNABLES
env -u GLIBC_TUNABLES sh -c 'env' >"$TMP/unset.plain"
assert_eq "program env, memscope's own variables aside" \
    "$(grep -Ev "$ours" "$TMP/unset.plain" | sort)" "$(grep -Ev "$ours" "$TMP/unset.prog" | sort)"
assert_eq "no GLIBC_TUNABLES for the program" "" "$(grep '^GLIBC_TUNABLES' "$TMP/unset.prog")"
assert_eq "no mark of the second start" "" "$(grep '^MEMSCOPE_GLIBC_TUNABLES' "$TMP/unset.prog")"
if [ "$thp" = 1 ]; then
    assert_eq "memscope started with huge-page malloc" "GLIBC_TUNABLES=glibc.malloc.hugetlb=1" \
        "$(grep '^GLIBC_TUNABLES' "$TMP/unset.memscope")"
else
    assert_eq "no huge pages here: memscope as started" "" \
        "$(grep '^GLIBC_TUNABLES' "$TMP/unset.memscope")"
fi

run own GLIBC_TUNABLES=glibc.malloc.arena_max=2
assert_eq "the caller's GLIBC_TUNABLES for the program" "GLIBC_TUNABLES=glibc.malloc.arena_max=2" \
    "$(grep '^GLIBC_TUNABLES' "$TMP/own.prog")"
# (memscope's own start with both is not read here: glibc cuts the string it started with at the
# ':' as it parses its tunables, so /proc shows the caller's part only)

run empty GLIBC_TUNABLES=
assert_eq "an empty GLIBC_TUNABLES stays empty" "GLIBC_TUNABLES=" \
    "$(grep '^GLIBC_TUNABLES' "$TMP/empty.prog")"

run theirs GLIBC_TUNABLES=glibc.malloc.hugetlb=0
assert_eq "the caller's hugetlb is kept (memscope not started again)" \
    "GLIBC_TUNABLES=glibc.malloc.hugetlb=0" "$(grep '^GLIBC_TUNABLES' "$TMP/theirs.memscope")"
assert_eq "and the program's" "GLIBC_TUNABLES=glibc.malloc.hugetlb=0" \
    "$(grep '^GLIBC_TUNABLES' "$TMP/theirs.prog")"

# a variable of that name that memscope did not set is not taken for its mark
run stray GLIBC_TUNABLES=glibc.malloc.arena_max=2 MEMSCOPE_GLIBC_TUNABLES=stray
assert_eq "a stray mark leaves the caller's GLIBC_TUNABLES" "GLIBC_TUNABLES=glibc.malloc.arena_max=2" \
    "$(grep '^GLIBC_TUNABLES' "$TMP/stray.prog")"

done_testing
