# shellcheck shell=bash
# an_lib.sh: helpers for the tests/analyze scripts (sourced). Builds on tests/integration/lib.sh
# (assertions, $TMP, ms, q) and adds: golden text reports compared with diff -u after
# normalising what changes from run to run, and the JSON key checker.
#
# Environment: MEMSCOPE, PROGS (the tests/analyze build directory, where the programs are),
# ANALYZE_SRC (this directory). UPDATE_GOLDEN=1 rewrites the golden files instead of comparing.
: "${ANALYZE_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
# shellcheck source=../integration/lib.sh
. "$ANALYZE_SRC/../integration/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

# normalise: stdin -> stdout with the source directory, pids, addresses, times and event ids
# replaced by fixed words. Everything else in a report is deterministic for these programs.
normalise() {
    sed -E -e "s|$ANALYZE_SRC/||g" \
        -e 's/pid [0-9]+/pid N/g' \
        -e 's/0x[0-9a-f]+/0xADDR/g' \
        -e 's/\+[0-9]+\.[0-9]+ ms/+T ms/g' \
        -e 's/event [0-9]+/event N/g'
}

# golden NAME FILE: compares normalise(FILE) with golden/NAME.txt (diff -u).
golden() {
    local want=$ANALYZE_SRC/golden/$1.txt got=$TMP/$1.normalised
    normalise <"$2" >"$got"
    if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
        cp "$got" "$want"
        pass "golden $1 rewritten"
    elif diff -u "$want" "$got" >&2; then
        pass "golden $1"
    else
        fail "golden $1 differs (above: - expected, + got)"
    fi
}

# json_check KIND FILE: the document has the keys docs/analyses.md lists for KIND.
json_check() {
    local out
    if out=$("$PY" "$ANALYZE_SRC/check_json.py" "$1" "$2" 2>&1); then
        pass "JSON keys of $1 ($out)"
    else
        fail "JSON keys of $1: $out"
    fi
}

# jq_py FILE CODE: runs Python CODE with d = json.load(FILE) and prints the value of its last
# statement (an expression); a list prints one element per line.
jq_py() {
    "$PY" -c 'import ast, json, sys
d = json.load(open(sys.argv[1]))
tree = ast.parse(sys.argv[2])
last = tree.body.pop()
exec(compile(tree, "code", "exec"))
v = eval(compile(ast.Expression(last.value), "code", "eval"))
print("\n".join(map(str, v)) if isinstance(v, list) else v)' "$1" "$2" 2>&1
}

# same_without_agent PROG ARGS...: the program's stdout and exit status are the same run
# plainly and under `memscope run` (the annotation calls are no-ops without the agent).
same_without_agent() {
    local plain_out plain_rc traced_rc
    plain_out=$("$@" 2>"$TMP/plain.err")
    plain_rc=$?
    "$MEMSCOPE" run --format=db -q -o "$TMP/plain_vs.db" -- "$@" >"$TMP/traced.out" 2>"$TMP/traced.err"
    traced_rc=$?
    assert_eq "$(basename "$1"): exit status without the agent = with it" "$traced_rc" "$plain_rc"
    assert_eq "$(basename "$1"): stdout without the agent = with it" "$(cat "$TMP/traced.out")" \
        "$plain_out"
    assert_eq "$(basename "$1"): nothing on stderr without the agent" "" "$(cat "$TMP/plain.err")"
}
