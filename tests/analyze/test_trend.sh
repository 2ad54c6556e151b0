#!/bin/bash
# test_trend.sh: `memscope analyze trend` on an_trend.c (20 steps, +100000 bytes each): the
# growth per step is 100000 bytes with R^2 = 1, and --limit 5000000 predicts step 50 within
# 5%; the step part of the text report is golden; JSON keys; same without the agent.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/trend.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_trend"
assert_eq "run exit status" 0 "$RC"
require_db "an_trend" "$DB"

ms trend analyze trend "$DB" --limit 5000000
assert_eq "analyze trend exit status" 0 "$RC"
# The time samples depend on the machine's speed; the step part does not.
sed -n '/^trend: live bytes at step ends/,$p' "$TMP/trend.out" >"$TMP/trend.steps"
golden trend_steps "$TMP/trend.steps"

ms trendj analyze trend "$DB" --limit 5000000 --json
J=$TMP/trendj.out
json_check trend "$J"
assert_eq "JSON: growth per step" 100000 "$(jq_py "$J" 'round(d["steps"][0]["step_fit"]["slope"])')"
assert_eq "JSON: R^2 of the step fit" 1.0 "$(jq_py "$J" 'float(round(d["steps"][0]["step_fit"]["r2"], 6))')"
pred=$(jq_py "$J" 'd["steps"][0]["step_to_limit"]["predicted_step"]')
assert_eq "JSON: predicted step within 5% of 50 (got $pred)" ok \
    "$(awk -v p="$pred" 'BEGIN { print (p >= 47.5 && p <= 52.5) ? "ok" : "no" }')"
assert_eq "JSON: 20 step ends, live bytes 100000 apart" "20 100000" \
    "$(jq_py "$J" 'e = d["steps"][0]["ends"]; "%s %s" % (len(e), e[19]["live_bytes"] - e[18]["live_bytes"],)')"
assert_eq "JSON: final live bytes = process_stats.live_bytes" \
    "$(q "$DB" 'SELECT sum(live_bytes) FROM process_stats')" "$(jq_py "$J" 'd["final_live_bytes"]')"
assert_eq "JSON: 101 samples, the last = final" "101 True" \
    "$(jq_py "$J" '"%s %s" % (len(d["samples"]), d["samples"][-1]["live_bytes"] == d["final_live_bytes"],)')"
assert_eq "JSON: time fit grows" True "$(jq_py "$J" 'd["time_fit"]["slope"] > 0')"
# Suffixes: 5000000 bytes is not 5M (5 MiB = 5242880), which predicts step ~52.4.
ms trendm analyze trend "$DB" --limit 5M --json
assert_eq "--limit 5M = 5242880 bytes" 5242880 "$(jq_py "$TMP/trendm.out" 'd["limit"]')"
# A limit already reached.
ms low analyze trend "$DB" --limit 150000
assert_match "a limit already reached" "reached at the end of step 2" "$(cat "$TMP/low.out")"

same_without_agent "$PROGS/an_trend"
done_testing
