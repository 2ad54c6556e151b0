#!/bin/bash
# test_leaks.sh: `memscope analyze leaks` on an_leak_steps.c: exactly the blocks of steps 3 and 4
# are flagged by msMemScope's rule (--rule=msmemscope; warm-up and one-step-late frees are not),
# with msMemScope's console lines; the live-at-exit table and the growth per step are exact;
# golden text; JSON keys; the program behaves the same without the agent. (The default rule,
# growth: test_leaks_growth.sh.)
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/leak.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_leak_steps"
assert_eq "run exit status" 0 "$RC"
require_db "an_leak_steps" "$DB"
assert_eq "steps recorded" 7 "$(q "$DB" 'SELECT count(*) FROM steps')"

ms leaks analyze leaks "$DB" --rule=msmemscope
assert_eq "analyze leaks exit status" 0 "$RC"
assert_eq "nothing on stderr" "" "$(cat "$TMP/leaks.err")"
out=$TMP/leaks.out
assert_eq "the leak lines, exactly steps 3 and 4" \
"Direct heap leak of 0.046875 Mb(s) at 0xADDR at step 3.
Direct heap leak of 0.078125 Mb(s) at 0xADDR at step 4." \
    "$(grep '^Direct ' "$out" | sed -E 's/0x[0-9a-f]+/0xADDR/')"
assert_eq "ERROR header once" 1 "$(grep -c '^====== ERROR: Detected memory leaks ======$' "$out")"
assert_eq "SUMMARY line" "====== SUMMARY: 0.125 Mb(s) leaked in 2 allocation(s) ======" \
    "$(grep '^====== SUMMARY' "$out")"
# The flagged addresses are the blocks of 49152 and 81920 bytes.
assert_eq "flagged addresses are the step-3 and step-4 blocks" \
    "$(q "$DB" "SELECT printf('%x', addr) FROM blocks WHERE size IN (49152, 81920) ORDER BY step")" \
    "$(grep '^Direct ' "$out" | sed -E 's/.* at 0x([0-9a-f]+) at step.*/\1/')"
golden leaks "$out"

ms leaksj analyze leaks "$DB" --json
assert_eq "analyze leaks --json exit status" 0 "$RC"
J=$TMP/leaksj.out
json_check leaks "$J"
assert_eq "JSON: flagged (size, step, flagged_at_step, owner)" "49152 3 4 model@layer1
81920 4 5 model@layer2" \
    "$(jq_py "$J" '["%s %s %s %s" % (l["size"], l["step"], l["flagged_at_step"], l["owner"],) for l in d["step_check"]["leaks"]]')"
assert_eq "JSON: leaked bytes and allocations" "131072 2" \
    "$(jq_py "$J" '"%s %s" % (d["step_check"]["bytes"], d["step_check"]["allocations"],)')"
assert_eq "JSON: live at exit, top site" "an_leak_at_step 131072 2 ['model@layer1', 'model@layer2']" \
    "$(jq_py "$J" 's = d["live_at_exit"][0]["sites"][0]; "%s %s %s %s" % (s["site"].split()[0], s["bytes"], s["blocks"], s["owners"],)')"
assert_eq "JSON: growth of an_leak_at_step per step end" "[0, 0, 49152, 131072, 131072, 131072] 32768" \
    "$(jq_py "$J" 's = [g for g in d["growth"][0]["by_site"] if g["site"].startswith("an_leak_at_step")][0]; "%s %g" % (s["live"], s["bytes_per_step"],)')"
assert_eq "JSON: growth by owner" "model@layer2 [0, 0, 0, 81920, 81920, 81920]
model@layer1 [0, 0, 49152, 49152, 49152, 49152]" \
    "$(jq_py "$J" '["%s %s" % (o["owner"], o["live"],) for o in d["growth"][0]["by_owner"]]')"

# --warmup 3: the step-3 block is warm-up now; only step 4's is flagged.
ms w3 analyze leaks "$DB" --warmup 3 --rule=msmemscope
assert_eq "--warmup 3 flags only step 4" "Direct heap leak of 0.078125 Mb(s) at 0xADDR at step 4." \
    "$(grep '^Direct ' "$TMP/w3.out" | sed -E 's/0x[0-9a-f]+/0xADDR/')"
# --warmup 0: step 1's block (live at the end of step 2) is flagged too.
ms w0 analyze leaks "$DB" --warmup 0 --rule=msmemscope
assert_eq "--warmup 0 flags steps 1, 3, 4" "1
3
4" "$(grep '^Direct ' "$TMP/w0.out" | sed -E 's/.* at step ([0-9]+)\./\1/')"

# A run without steps: the check says so and finds nothing.
ms nosteps run --format=db -q -o "$TMP/peak.db" -- "$PROGS/an_peak"
ms leaks2 analyze leaks "$TMP/peak.db" --rule=msmemscope
assert_eq "no steps: analyze leaks exit status" 0 "$RC"
assert_match "no steps: said so" "no steps recorded" "$(cat "$TMP/leaks2.out")"
assert_eq "no steps: no leak lines" 0 "$(grep -c '^Direct ' "$TMP/leaks2.out")"

same_without_agent "$PROGS/an_leak_steps"
done_testing
