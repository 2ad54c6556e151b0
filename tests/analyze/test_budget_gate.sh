#!/bin/bash
# test_budget_gate.sh: the regression gates of `memscope analyze compare BASE NEW` (docs/ci.md)
# on an_budget.c: BASE (`an_budget`: peak 1004024, 4024 bytes live at exit) and NEW (`an_budget
# 0 6 5`: peak 1506024, +502000 = +50.0%; 6024 live, +2000 = +49.7%). Checks exactly which gates
# fail and hold, the sites that grew, the exit status (23, --error-exitcode), --layer, and that
# bad gate options are usage errors.
. "$(dirname "$0")/an_lib.sh"

# verdicts NAME: "failed SPEC" / "held SPEC" lines of memscope's stderr, in order.
verdicts() {
    sed -nE 's/^memscope: gate (failed|held): ([^:]*): .*/\1 \2/p' "$TMP/$1.err"
}

ms base run -q -o "$TMP/base.db" -- "$PROGS/an_budget"
ms new run -q -o "$TMP/new.db" -- "$PROGS/an_budget" 0 6 5
require_db base "$TMP/base.db"
require_db new "$TMP/new.db"

ms gates analyze compare "$TMP/base.db" "$TMP/new.db" --fail-if-peak-grows=10% \
    --fail-if-peak-grows=60% --fail-if-peak-grows=600KB --fail-if-peak-grows=400000 \
    --fail-if-leak-grows=1KiB --fail-if-leak-grows=50%
assert_eq "a gate failed: status 23" 23 "$RC"
assert_eq "which gates failed and held" "failed --fail-if-peak-grows=10%
held --fail-if-peak-grows=60%
held --fail-if-peak-grows=600KB
failed --fail-if-peak-grows=400000
failed --fail-if-leak-grows=1KiB
held --fail-if-leak-grows=50%" "$(verdicts gates)"
assert_eq "the peak gate's line and the sites that grew" \
    "memscope: gate failed: --fail-if-peak-grows=10%: peak 1004024 -> 1506024 bytes (+502000, +50.0%)
memscope:   +500000 bytes (6 blocks in NEW): an_budget_peak (an_budget.c:38)
memscope:   +2000 bytes (5 blocks in NEW): an_budget_keep (an_budget.c:24)" \
    "$(grep -A2 'failed: --fail-if-peak-grows=10%' "$TMP/gates.err" | sed 's|([^ ]*/|(|')"
assert_eq "the leak gate's line and site" \
    "memscope: gate failed: --fail-if-leak-grows=1KiB: live at exit 4024 -> 6024 bytes (+2000, +49.7%)
memscope:   +2000 bytes (5 blocks in NEW): an_budget_keep (an_budget.c:24)" \
    "$(grep -A1 'failed: --fail-if-leak-grows' "$TMP/gates.err" | sed 's|([^ ]*/|(|')"
assert_match "the compare report is still written" "Compare A \(this run\) with B" \
    "$(cat "$TMP/gates.out")"

ms same analyze compare "$TMP/base.db" "$TMP/base.db" --fail-if-peak-grows=0 \
    --fail-if-leak-grows=0%
assert_eq "a run against itself: every gate holds" "0 held --fail-if-peak-grows=0
held --fail-if-leak-grows=0%" "$RC $(verdicts same)"
ms code analyze compare "$TMP/base.db" "$TMP/new.db" --fail-if-leak-grows=0 --error-exitcode=9
assert_eq "--error-exitcode=9" 9 "$RC"
ms cuda analyze compare "$TMP/base.db" "$TMP/new.db" --layer=cuda --fail-if-peak-grows=0
assert_eq "--layer=cuda: no device memory, holds" "0 held --fail-if-peak-grows=0" \
    "$RC $(verdicts cuda)"
ms heap analyze compare "$TMP/base.db" "$TMP/new.db" --layer=heap --fail-if-peak-grows=0
assert_eq "--layer=heap: fails" "23 failed --fail-if-peak-grows=0" "$RC $(verdicts heap)"

# Bad input: usage errors, status 2.
bad() {
    local want=$1
    shift
    ms bad analyze compare "$@"
    assert_eq "$* : status 2" 2 "$RC"
    assert_match "$* : says why" "$want" "$(cat "$TMP/bad.err")"
}
bad "expected a percentage \(10%\) or a size" "$TMP/base.db" "$TMP/new.db" \
    --fail-if-peak-grows=lots
bad "expected a percentage" "$TMP/base.db" "$TMP/new.db" --fail-if-leak-grows=-3%
bad "needs compare BASE.db NEW.db" "$TMP/base.db" --fail-if-peak-grows=1%
bad "unknown layer 'gpu'" "$TMP/base.db" "$TMP/new.db" --layer=gpu --fail-if-peak-grows=1%
bad "--error-exitcode needs a gate" "$TMP/base.db" "$TMP/new.db" --error-exitcode=5

done_testing
