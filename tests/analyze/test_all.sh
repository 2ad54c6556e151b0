#!/bin/bash
# test_all.sh: `memscope analyze all` writes one report with a section per analysis, and with
# --json one document with a key per analysis (each checked against docs/analyses.md); a
# comma list runs just those; `memscope run --analysis=` does the same at the end of a run.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/leak.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_leak_steps"
require_db "an_leak_steps" "$DB"

ms all analyze all "$DB"
assert_eq "all: status" 0 "$RC"
for a in leaks peak temporary trend; do
    assert_eq "all: section $a" 1 "$(grep -c "^=== memscope analyze $a ===$" "$TMP/all.out")"
done
# analyze's default leak rule (growth): an_leak_steps has 5 step ends after the warm-up, too few.
assert_eq "all: the leak verdict, no msMemScope lines" "leaks: no leak found: too few steps to judge (9 step ends after the warm-up needed)
0" "$(grep '^leaks: .*leak' "$TMP/all.out" | head -1; grep -c '^Direct heap leak' "$TMP/all.out")"
ms allms analyze all "$DB" --rule=msmemscope
assert_eq "all --rule=msmemscope: the leak lines" 2 "$(grep -c '^Direct heap leak' "$TMP/allms.out")"

ms allj analyze all "$DB" --json
assert_eq "all --json: status" 0 "$RC"
json_check all "$TMP/allj.out"

ms two analyze leaks,peak "$DB" --json
assert_eq "leaks,peak: keys" "leaks
peak" "$(jq_py "$TMP/two.out" 'list(d)')"
json_check leaks <(jq_py "$TMP/two.out" 'json.dumps(d["leaks"])')
ms twot analyze peak,leaks "$DB"
assert_eq "peak,leaks: sections in the order given" "=== memscope analyze peak ===
=== memscope analyze leaks ===" "$(grep '^=== ' "$TMP/twot.out")"

# memscope run --analysis=leaks,peak (wired by cmd_run.c).
if "$MEMSCOPE" run --format=db --help 2>&1 | grep -q -- '--analysis'; then
    ms runan run --format=db -q --analysis=leaks,peak -o "$TMP/r.db" -- "$PROGS/an_leak_steps"
    assert_eq "run --analysis: status" 0 "$RC"
    # --analysis=leaks is msMemScope's option: its rule and lines.
    assert_eq "run --analysis: the leak lines" 2 \
        "$(cat "$TMP/runan.out" "$TMP/runan.err" | grep -c '^Direct heap leak')"
    assert_match "run --analysis: the peak section" "peak: the first moment" \
        "$(cat "$TMP/runan.out" "$TMP/runan.err")"
else
    echo "note: memscope run has no --analysis yet; that part is not checked"
fi
done_testing
