#!/bin/bash
# test_leaks_nosteps.sh: `memscope analyze leaks` names the site that grows in a program without
# steps that frees everything before it exits (issue 18 item 5), on an_leak_nosteps.c: nothing
# live at exit, no steps, and the growth without steps (the blocks live at the peak, by the
# tenth of the run they were allocated in) puts an_grow first with exactly 100000 bytes at the
# peak and about 10000 bytes per tenth, an_static flat (50000 from the first tenth), an_scratch
# only in the last tenth; the same answer from the compact and the full database; a run with
# steps gets none of it.
. "$(dirname "$0")/an_lib.sh"

ms run run -q -o "$TMP/c.db" -- "$PROGS/an_leak_nosteps"
assert_eq "run exit status (compact)" 0 "$RC"
ms runf run -q --format=db -o "$TMP/f.db" -- "$PROGS/an_leak_nosteps"
assert_eq "run exit status (full)" 0 "$RC"
require_db "an_leak_nosteps" "$TMP/f.db"

for kind in c f; do
    ms "j$kind" analyze leaks "$TMP/$kind.db" --json
    J=$TMP/j$kind.out
    json_check leaks "$J"
    assert_eq "$kind: nothing live at exit" 0 "$(jq_py "$J" 'len(d["live_at_exit"])')"
    assert_eq "$kind: no steps" False "$(jq_py "$J" 'd["step_check"]["steps_recorded"]')"
    assert_eq "$kind: one peak (heap)" "1 heap 170000" \
        "$(jq_py "$J" 'g = d["growth_without_steps"]; "%d %s %d" % (len(g), g[0]["layer"], g[0]["peak_bytes"])')"
    site() { jq_py "$J" "s = d['growth_without_steps'][0]['by_site']; $1"; }
    assert_match "$kind: the first site is an_grow" '^an_grow \(' "$(site 's[0]["site"]')"
    assert_eq "$kind: an_grow: 100000 bytes at the peak" 100000 "$(site 's[0]["live"][9]')"
    assert_eq "$kind: an_grow: 5000..20000 bytes per tenth" ok \
        "$(site '"ok" if 5000 <= s[0]["bytes_per_tenth"] <= 20000 else s[0]["bytes_per_tenth"]')"
    assert_eq "$kind: an_grow: live bytes never fall" True \
        "$(site 'all(a <= b for a, b in zip(s[0]["live"], s[0]["live"][1:]))')"
    assert_eq "$kind: an_static: 50000 from the first tenth on, no growth" "[50000] 0" \
        "$(site 'x = [r for r in s if r["site"].startswith("an_static")][0]; "%s %g" % (sorted(set(x["live"])), x["bytes_per_tenth"])')"
    assert_eq "$kind: an_scratch: 20000 in the last tenth only, no growth" "0 20000 0" \
        "$(site 'x = [r for r in s if r["site"].startswith("an_scratch")][0]; "%d %d %g" % (x["live"][8], x["live"][9], x["bytes_per_tenth"])')"
done
assert_eq "compact and full: the same sites and bytes" \
    "$(jq_py "$TMP/jf.out" '[(r["site"], r["live"][9]) for r in d["growth_without_steps"][0]["by_site"]]')" \
    "$(jq_py "$TMP/jc.out" '[(r["site"], r["live"][9]) for r in d["growth_without_steps"][0]["by_site"]]')"

# Text: the growing site only.
ms text analyze leaks "$TMP/c.db"
assert_eq "text: the part is there" 1 "$(grep -c '^leaks: growth without steps' "$TMP/text.out")"
assert_eq "text: an_grow named by the verdict and the growth" 2 "$(grep -c ' an_grow (' "$TMP/text.out")"
assert_eq "text: an_static and an_scratch not listed" 0 "$(grep -c 'an_static (\|an_scratch (' "$TMP/text.out")"

# A run with steps: the step parts, not this one.
ms steps run -q -o "$TMP/s.db" -- "$PROGS/an_leak_steps"
ms js analyze leaks "$TMP/s.db" --json
assert_eq "with steps: no growth without steps" 0 "$(jq_py "$TMP/js.out" 'len(d["growth_without_steps"])')"
ms ts analyze leaks "$TMP/s.db"
assert_eq "with steps: text without the part" 0 "$(grep -c 'growth without steps' "$TMP/ts.out")"
done_testing
