#!/bin/bash
# test_trend_limit.sh: `memscope analyze trend --limit` says when it cannot predict (issue 47
# item 7): on an_trend_fall.c (a start-up ramp, then live bytes fall; about 30 ms), where a fit
# over the whole run grows, the limit is "never at this rate" because the last half of the run
# does not grow; on an_trend.c (20 fast steps, +100000 bytes each) a limit of 1 GiB is "too
# short" (the run) and "too few steps" (the steps), where 5000000 bytes is still predicted at
# step 50. JSON: time_to_limit.status and step_to_limit.status; tail_fit.
. "$(dirname "$0")/an_lib.sh"

ms run run -q -o "$TMP/fall.db" -- "$PROGS/an_trend_fall"
assert_eq "an_trend_fall: run exit status" 0 "$RC"
ms fall analyze trend "$TMP/fall.db" --limit 2M
assert_eq "an_trend_fall: analyze exit status" 0 "$RC"
assert_match "an_trend_fall: the limit is never reached at this rate" \
    "^  limit 2097152 bytes: never at this rate: live bytes are not growing over the last half of the run \([0-9.]+ ms\)$" \
    "$(grep '^  limit' "$TMP/fall.out")"
ms fallj analyze trend "$TMP/fall.db" --limit 2M --json
json_check trend "$TMP/fallj.out"
assert_eq "an_trend_fall: JSON status, no prediction, the last half falls" "not_growing None True" \
    "$(jq_py "$TMP/fallj.out" 't = d["time_to_limit"]; "%s %s %s" % (t["status"], t["predicted_ns"], d["tail_fit"]["slope"] < 0)')"
# What the issue saw: the fit over the whole run grows (the ramp). Timing decides it; a note only.
[ "$(jq_py "$TMP/fallj.out" 'd["time_fit"]["slope"] > 0')" = True ] ||
    echo "note: this run's whole-run fit did not grow (a loaded machine): the old answer would have been right too"

ms trun run -q -o "$TMP/trend.db" -- "$PROGS/an_trend"
ms big analyze trend "$TMP/trend.db" --limit 1G
assert_eq "an_trend --limit 1G: the run is too short" 1 \
    "$(grep -c '^  limit 1073741824 bytes: not predicted: the run ([0-9.]* ms) is too short; at this rate it is more than 10 times the last half of the run away$' "$TMP/big.out")"
assert_eq "an_trend --limit 1G: too few steps" 1 \
    "$(grep -c '^  limit 1073741824 bytes: not predicted: too few steps; at this rate it is more than 10 times the steps fitted away$' "$TMP/big.out")"
ms bigj analyze trend "$TMP/trend.db" --limit 1G --json
assert_eq "an_trend --limit 1G: JSON statuses" "too_short too_short None" \
    "$(jq_py "$TMP/bigj.out" '"%s %s %s" % (d["time_to_limit"]["status"], d["steps"][0]["step_to_limit"]["status"], d["steps"][0]["step_to_limit"]["predicted_step"])')"
ms fivej analyze trend "$TMP/trend.db" --limit 5000000 --json
assert_eq "an_trend --limit 5000000: predicted at step 50" "predicted 50" \
    "$(jq_py "$TMP/fivej.out" 's = d["steps"][0]["step_to_limit"]; "%s %s" % (s["status"], s["predicted_step_end"])')"
ms lowj analyze trend "$TMP/trend.db" --limit 150000 --json
assert_eq "an_trend --limit 150000: reached" "reached reached 2" \
    "$(jq_py "$TMP/lowj.out" 's = d["steps"][0]["step_to_limit"]; "%s %s %s" % (d["time_to_limit"]["status"], s["status"], s["reached_at_step"])')"
done_testing
