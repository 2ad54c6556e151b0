#!/bin/bash
# test_term_escape.sh: names the traced program sets (owner, pool, range, mark, op, thread, its
# own file name) hold terminal escapes (clear screen, window title, OSC 52 clipboard write,
# colour), BEL, CR, a C1 CSI byte and newlines followed by "FORGED" (issue 37 item 10). run's
# summary, --analysis and every `memscope analyze` text report show them escaped: no control
# byte but the newlines of the report itself, no line of the program's making; the JSON
# reports and the database keep the exact bytes. tests/progs/hostile_names.c.
. "$(dirname "$0")/lib.sh"

EVIL=$'\e[2J\e]0;TITLE\a\e]52;c;SGVsbG8=\a\e[31m\r\nFORGED line\x9b'
ESCAPED='\x1b[2J\x1b]0;TITLE\x07\x1b]52;c;SGVsbG8=\x07\x1b[31m\r\nFORGED line\x9b'
PROG=$TMP/$'hostile\e]0;T\a\nFORGED exe'
cp "$PROGS/hostile_names" "$PROG" || skip "cannot copy the program under a hostile name"

# clean WHAT FILE: no control byte but \n, no line the program made
clean() {
    assert_eq "$1: control bytes" 0 "$(LC_ALL=C tr -d '\n' <"$2" | LC_ALL=C tr -cd '\000-\037\177\233' | wc -c)"
    assert_eq "$1: lines of the program's making" 0 "$(grep -ac '^FORGED' "$2")"
}

DB=$TMP/h.db
# --usage-interval: samples of the program (it stays 0.2 s), so that analyze usage prints its name
ms run run --format=db --analysis=all --usage-interval=0.001 -o "$DB" -- "$PROG"
assert_eq "run: status" 0 "$RC"
require_db "hostile_names" "$DB"
assert_ge "the usage monitor sampled the program" 1 \
    "$(q "$DB" "SELECT count(*) FROM usage_samples WHERE exited = 0")"
clean "run's summary and --analysis" "$TMP/run.err"
assert_match "run: the pool's name, escaped" "pool:pool\\\\x1b\[2J\\\\x1b\]0;TITLE" "$(cat "$TMP/run.err")"
for a in leaks peak temporary trend decompose fragmentation inefficient oom usage all; do
    ms "$a" analyze "$a" "$DB"
    assert_eq "analyze $a: status" 0 "$RC"
    clean "analyze $a" "$TMP/$a.out"
done
assert_eq "leaks: the owner, escaped (each byte said)" 1 \
    "$(grep -acF "[owner$ESCAPED]" "$TMP/leaks.out")"
assert_match "leaks: the exe, escaped" 'process 1 hostile\\x1b\]0;T\\x07\\nFORGED exe \(pid' "$(cat "$TMP/leaks.out")"
assert_eq "fragmentation: the pool, escaped" "Pool 'pool$ESCAPED': peak used 12288 B." \
    "$(grep -a "^Pool" "$TMP/fragmentation.out")"
ms cmp analyze compare "$DB" --steps 1,2
clean "analyze compare --steps" "$TMP/cmp.out"
ms cmpw analyze compare "$DB" --with "$DB"
clean "analyze compare --with" "$TMP/cmpw.out"

# exact bytes where bytes are the point: the database and --json
assert_eq "the database keeps the owner's bytes" "$(printf '%s' "owner$EVIL" | od -An -tx1 | tr -d ' \n')" \
    "$(q "$DB" "SELECT lower(hex(label)) FROM owners WHERE label LIKE 'owner%'")"
ms json analyze decompose --json "$DB"
assert_eq "decompose --json keeps the owner's ESC and newline" 1 \
    "$(grep -c '"owner\\u001b\[2J\\u001b\]0;TITLE\\u0007\\u001b\]52;c;SGVsbG8=\\u0007\\u001b\[31m\\r\\nFORGED line' "$TMP/json.out")"
done_testing
