#!/bin/bash
# test_budget.sh: memscope run's budgets (docs/ci.md) on known-answer programs: an_budget.c
# (4024 bytes live at exit in 5 blocks, 1024 of them in third_party_cache; a heap peak of
# 1004024 bytes, 1000000 of them an_budget_peak's) and an_leak_loop.c (the growth rule: `leak`
# leaks at an_leak_here, `healthy` does not). Checks the exact set of budgets that fail and
# hold, the call sites named, the suppressions, the JUnit report (parsed as XML), the exit
# status rules (--error-exitcode, the program's own failing status wins) and that bad budget
# options stop memscope before the program runs.
. "$(dirname "$0")/an_lib.sh"

# verdicts NAME: "failed SPEC" / "held SPEC" lines of memscope's stderr, in order.
verdicts() {
    sed -nE 's/^memscope: budget (failed|held): (--[^:]*(:[a-z0-9_]+)*): .*/\1 \2/p' \
        "$TMP/$1.err"
}

printf '# a vendor library we do not own\nleak:third_party_*\n\n' >"$TMP/supp"
ms all run -o "$TMP/a.db" --fail-on-leak --max-peak=1MiB --max-peak=900KiB \
    --max-peak=1KiB:cuda --fail-on-step-leak --suppressions="$TMP/supp" \
    --junit="$TMP/j.xml" -- "$PROGS/an_budget"
assert_eq "a failed budget: status 23 (the default --error-exitcode)" 23 "$RC"
assert_eq "which budgets failed and held" "failed --fail-on-leak
held --max-peak=1MiB
failed --max-peak=900KiB
held --max-peak=1KiB:cuda
held --fail-on-step-leak" "$(verdicts all)"
assert_eq "the leak's line and site (third_party_cache suppressed)" \
    "memscope: budget failed: --fail-on-leak: 3000 bytes live at exit, limit 0
memscope:   3000 bytes in 3 blocks: an_budget_keep (an_budget.c:24)
memscope:   (1024 bytes in 2 blocks suppressed)" \
    "$(grep -A2 'budget failed: --fail-on-leak' "$TMP/all.err" | normalise | sed 's|([^ ]*/|(|')"
assert_eq "the peak's line and sites" \
    "memscope: budget failed: --max-peak=900KiB: peak 1004024 bytes (980.5 KiB) in process 1 an_budget (pid N), heap, limit 921600 (900.0 KiB)
memscope:   1000000 bytes in 4 blocks: an_budget_peak (an_budget.c:38)
memscope:   3000 bytes in 3 blocks: an_budget_keep (an_budget.c:24)
memscope:   1024 bytes in 2 blocks: third_party_cache (an_budget.c:31)" \
    "$(grep -A3 'budget failed: --max-peak=900KiB' "$TMP/all.err" | normalise | sed 's|([^ ]*/|(|')"
assert_match "the suppression's use is said" \
    "suppression leak:third_party_\* \(.*supp:2\) matched 1024 bytes in 2 blocks" \
    "$(cat "$TMP/all.err")"
assert_eq "the program's output" "an_budget ok" "$(cat "$TMP/all.out")"

# The JUnit report: well-formed XML, one test case per budget, <failure> with the sites.
assert_eq "JUnit: tests, failures, failing cases and their sites" \
    "tests=5 failures=2 errors=0
--fail-on-leak: failure: an_budget_keep
--max-peak=1MiB: ok
--max-peak=900KiB: failure: an_budget_peak an_budget_keep third_party_cache
--max-peak=1KiB:cuda: ok
--fail-on-step-leak: ok" \
    "$("$PY" - "$TMP/j.xml" <<'PYEOF'
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
s = root.find("testsuite")
print("tests=%s failures=%s errors=%s" % (s.get("tests"), s.get("failures"), s.get("errors")))
for c in s.findall("testcase"):
    f = c.find("failure")
    if f is None:
        print("%s: ok" % c.get("name"))
    else:
        sites = re.findall(r"blocks: (\w+) \(", f.text)
        print("%s: failure: %s" % (c.get("name"), " ".join(sites)))
PYEOF
)"

# Limits are "more than": 4024 bytes live fail 4023 and hold 4KiB; with the suppression, 3000.
ms edge run -o "$TMP/b.db" --fail-on-leak=4023 --fail-on-leak=4KiB -- "$PROGS/an_budget"
assert_eq "4024 live: fails 4023, holds 4KiB" "failed --fail-on-leak=4023
held --fail-on-leak=4KiB" "$(verdicts edge)"
assert_eq "edge: status 23" 23 "$RC"
ms held run -o "$TMP/c.db" --fail-on-leak=3000 --suppressions="$TMP/supp" --max-peak="1 MB" \
    -- "$PROGS/an_budget"
assert_eq "every budget held: status 0" 0 "$RC"
assert_eq "held: both" "held --fail-on-leak=3000
held --max-peak=1 MB" "$(verdicts held)"

# Exit status: --error-exitcode; a failing program's status wins, the failure still said;
# -q keeps the failure lines; --format=csv checks before the database goes.
ms code run -q -o "$TMP/d.db" --fail-on-leak --error-exitcode=42 -- "$PROGS/an_budget"
assert_eq "--error-exitcode=42" 42 "$RC"
assert_eq "-q: the failure is still said" "failed --fail-on-leak" "$(verdicts code)"
ms prog run -q -o "$TMP/e.db" --fail-on-leak -- "$PROGS/an_budget" 3
assert_eq "the program's own status 3 wins" 3 "$RC"
assert_eq "... and the budget failure is reported" "failed --fail-on-leak" "$(verdicts prog)"
ms csv run -q --format=csv -o "$TMP/f.csv" --max-peak=900KiB -- "$PROGS/an_budget"
assert_eq "--format=csv: budgets checked" "23 failed --max-peak=900KiB" "$RC $(verdicts csv)"

# --fail-on-step-leak: the growth rule of analyze leaks.
ms leak run -o "$TMP/g.db" --fail-on-step-leak -- "$PROGS/an_leak_loop" leak
assert_eq "leak: --fail-on-step-leak fails" 23 "$RC"
assert_eq "leak: the site and its growth" \
    "memscope: budget failed: --fail-on-step-leak: 1 call site keeps growing, by 3000 bytes per step in all
memscope:   +3000.0 bytes/step, 90000 bytes held: an_leak_here (an_leak_loop.c:67)" \
    "$(grep -A1 'budget failed' "$TMP/leak.err" | normalise | sed 's|([^ ]*/|(|')"
ms healthy run -o "$TMP/h.db" --fail-on-step-leak -- "$PROGS/an_leak_loop" healthy
assert_eq "healthy: holds, status 0" "0 held --fail-on-step-leak" "$RC $(verdicts healthy)"

# The default --max-peak is heap and mmap together: `an_budget 0 4 3 1` also maps 1 MiB while
# its heap peaks (heap 1004024, mmap 1048576, together 2052600 at that moment).
ms host run -o "$TMP/m.db" --max-peak=1.5MiB --max-peak=2052600 --max-peak=2052599 \
    --max-peak=1MiB:mmap --max-peak=1MiB:heap -- "$PROGS/an_budget" 0 4 3 1
assert_eq "heap+mmap: which budgets failed and held" "failed --max-peak=1.5MiB
held --max-peak=2052600
failed --max-peak=2052599
held --max-peak=1MiB:mmap
held --max-peak=1MiB:heap" "$(verdicts host)"
assert_eq "heap+mmap: the peak's line and sites" \
    "memscope: budget failed: --max-peak=1.5MiB: peak 2052600 bytes (2004.5 KiB) in process 1 an_budget (pid N), heap+mmap, limit 1572864 (1536.0 KiB)
memscope:   1048576 bytes in 1 block: an_budget_map (an_budget.c:45)
memscope:   1000000 bytes in 4 blocks: an_budget_peak (an_budget.c:38)
memscope:   3000 bytes in 3 blocks: an_budget_keep (an_budget.c:24)
memscope:   1024 bytes in 2 blocks: third_party_cache (an_budget.c:31)" \
    "$(grep -A4 'budget failed: --max-peak=1.5MiB' "$TMP/host.err" | normalise | sed 's|([^ ]*/|(|')"

# The sum's peak without expanding the compact database (the lines above: its bytes and sites
# as the replay of the events gives them): the conversion's host_peaks, and the blocks live at
# that peak, which the compact database keeps. Without its traces (trace_files emptied), which
# an expansion would convert, the peak is still read; a copy without the host_peaks rows (an
# older memscope's database) is replayed from its events: the same peak.
assert_eq "host_peaks: the peak, its time and the MALLOC that reached it" "1|2052600|1" \
    "$(sqlite3 "$TMP/m.db" "SELECT process_id, peak_bytes, peak_event_id > 0 AND peak_ns > 0 FROM host_peaks")"
cp "$TMP/m.db" "$TMP/nt.db"
sqlite3 "$TMP/nt.db" "DELETE FROM trace_files"
ms notraces analyze compare "$TMP/nt.db" "$TMP/nt.db" --fail-if-peak-grows=0
assert_eq "heap+mmap peak of a compact database without its traces: not expanded" \
    "0 memscope: gate held: --fail-if-peak-grows=0: peak 2052600 -> 2052600 bytes (+0, +0.0%)" \
    "$RC $(grep 'gate held' "$TMP/notraces.err")"
cp "$TMP/m.db" "$TMP/old.db"
sqlite3 "$TMP/old.db" "DELETE FROM host_peaks"
ms replayed analyze compare "$TMP/m.db" "$TMP/old.db" --fail-if-peak-grows=0
assert_eq "without host_peaks: replayed, the same peak" \
    "0 memscope: gate held: --fail-if-peak-grows=0: peak 2052600 -> 2052600 bytes (+0, +0.0%)" \
    "$RC $(grep 'gate held' "$TMP/replayed.err")"

# A pool's layer by name (b_pool: pool "arena" peaks at 2304 bytes; its reserved region, 4096
# bytes, is not the family "pool").
ms pool run -o "$TMP/p.db" --max-peak=2KiB:pool:arena --max-peak=2304:pool -- "$PROGS/b_pool"
assert_eq "pools: 2KiB:pool:arena fails, 2304:pool holds" "23 failed --max-peak=2KiB:pool:arena
held --max-peak=2304:pool" "$RC $(verdicts pool)"
assert_match "pools: the peak named" "peak 2304 bytes in process 1 b_pool \(pid [0-9]+\), pool:arena" \
    "$(cat "$TMP/pool.err")"

# A program that runs untraced (static) recorded nothing: its budgets cannot pass.
printf 'int main(void) { return 0; }\n' >"$TMP/st.c"
if cc -static -o "$TMP/st" "$TMP/st.c" 2>/dev/null; then
    ms untraced run -o "$TMP/u.db" --fail-on-leak -- "$TMP/st"
    assert_eq "untraced program with a budget: status 1" 1 "$RC"
    assert_match "untraced: says the budgets were not checked" \
        "the budgets could not be checked: nothing was recorded" "$(cat "$TMP/untraced.err")"
else
    pass "no static C library: the untraced case is left out"
fi

# Bad input: a usage error (2) before anything runs (the program would create $TMP/ran).
printf 'leak:ok\nrace:foo\n' >"$TMP/badkind"
bad() {
    local want=$1
    shift
    rm -f "$TMP/ran"
    ms bad run -o "$TMP/bad.db" "$@" -- touch "$TMP/ran"
    assert_eq "$* : status 2" 2 "$RC"
    assert_match "$* : says why" "$want" "$(cat "$TMP/bad.err")"
    [ ! -e "$TMP/ran" ] && pass "$* : the program did not run" || fail "$*: the program ran"
}
bad "--max-peak: '12 parsecs' is not a size" '--max-peak=12 parsecs'
bad "--max-peak: unknown layer 'gpu'" --max-peak=1MiB:gpu
bad "--fail-on-leak: '-5' is not a size" --fail-on-leak=-5
bad "cannot read suppressions file '/nonexistent/supp'" --fail-on-leak \
    --suppressions=/nonexistent/supp
bad "badkind:2: unknown suppression kind 'race'" --fail-on-leak --suppressions="$TMP/badkind"
bad "--junit: needs a budget" --junit="$TMP/x.xml"
bad "--junit: cannot write in '/nonexistent/dir'" --fail-on-leak --junit=/nonexistent/dir/j.xml
bad "--error-exitcode: expected a status in 1..255" --fail-on-leak --error-exitcode=0
bad "budgets need a database" --fail-on-leak --format=trace

done_testing
