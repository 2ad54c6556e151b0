#!/bin/bash
# test_leaks_growth.sh: the default rule of `memscope analyze leaks` (growth, issue 47 item 6) on
# an_leak_loop.c, a 30-step loop with a bounded prefetch queue, garbage a collector frees every
# 7 steps, a block freed 22 steps later and a cache that fills in steps 2..9 and stops: "healthy"
# is "no leak" (msMemScope's rule, --rule=msmemscope, flags the queue and the garbage); "leak"
# (3000 B kept every step) and "sparse" (6000 B every second step) name exactly an_leak_here,
# +3000 bytes per step, on every line; too few steps say so; runs without steps are judged on
# tenths of the allocations (an_leak_nosteps.c, examples/leaky.c: exactly their leaking site);
# golden text; JSON keys; the msMemScope form of the command keeps msMemScope's lines.
. "$(dirname "$0")/an_lib.sh"

for mode in healthy leak sparse; do
    ms "run_$mode" run -q -o "$TMP/$mode.db" -- "$PROGS/an_leak_loop" "$mode"
    assert_eq "$mode: run exit status" 0 "$RC"
    assert_eq "$mode: the program's output" "an_leak_loop $mode ok" "$(cat "$TMP/run_$mode.out")"
    ms "$mode" analyze leaks "$TMP/$mode.db"
    assert_eq "$mode: analyze exit status" 0 "$RC"
    assert_eq "$mode: nothing on stderr" "" "$(cat "$TMP/$mode.err")"
    assert_eq "$mode: no msMemScope lines" 0 "$(grep -c '^Direct \|Detected memory leaks' "$TMP/$mode.out")"
    ms "j$mode" analyze leaks "$TMP/$mode.db" --json
    json_check leaks "$TMP/j$mode.out"
done

# healthy: no leak, in text and JSON; msMemScope's rule flags the queue's and the garbage's
# blocks (allocated at step s, live at the end of step s+1).
assert_eq "healthy: the verdict line" "leaks: no leak: no call site's live bytes keep growing from step to step" \
    "$(head -1 "$TMP/healthy.out")"
assert_eq "healthy: judged steps" "  process 1 an_leak_loop (pid N): steps 2..30 judged: no leak" \
    "$(grep 'judged:' "$TMP/healthy.out" | normalise)"
assert_eq "healthy: JSON verdict" "growth False steps 1 0 [] 0" \
    "$(jq_py "$TMP/jhealthy.out" 'v = d["verdict"]; "%s %s %s %d %d %s %d" % (v["rule"], v["leak"], v["judged_on"], v["processes_judged"], v["processes_too_few_steps"], v["sites"], v["small_sites"])')"
ms hms analyze leaks "$TMP/healthy.db" --rule=msmemscope
assert_eq "healthy, --rule=msmemscope: the ERROR header" 1 \
    "$(grep -c '^====== ERROR: Detected memory leaks ======$' "$TMP/hms.out")"
assert_match "healthy, --rule=msmemscope: the queue's batches are flagged" \
    "Direct heap leak of 0.003906 Mb" "$(cat "$TMP/hms.out")"
ms jhms analyze leaks "$TMP/healthy.db" --rule=msmemscope --json
assert_eq "healthy, --rule=msmemscope: JSON verdict" "msmemscope True" \
    "$(jq_py "$TMP/jhms.out" '"%s %s" % (d["verdict"]["rule"], d["verdict"]["leak"])')"

# leak and sparse: exactly an_leak_here, +3000 bytes per step, 90000 bytes held at step 30's end.
SITE="an_leak_here (an_leak_loop.c:67)"
assert_eq "leak: the verdict line" "leaks: LEAK: 1 call site keeps growing, by 3000.0 bytes per step in all" \
    "$(head -1 "$TMP/leak.out")"
assert_eq "leak: the one leak line names the site" "+3000.0 28/28 90000 heap $SITE" \
    "$(grep -E '^ +\+[0-9.]+ +[0-9]+/[0-9]+ ' "$TMP/leak.out" | normalise | sed -E 's/ +/ /g; s/^ //')"
assert_eq "sparse: the one leak line names the site" "+3000.0 14/28 90000 heap $SITE" \
    "$(grep -E '^ +\+[0-9.]+ +[0-9]+/[0-9]+ ' "$TMP/sparse.out" | normalise | sed -E 's/ +/ /g; s/^ //')"
for mode in leak sparse; do
    assert_eq "$mode: JSON verdict" "True 3000 1" \
        "$(jq_py "$TMP/j$mode.out" 'v = d["verdict"]; "%s %g %d" % (v["leak"], v["bytes_per_step"], len(v["sites"]))')"
    assert_eq "$mode: JSON site" "$SITE 3000 2 30 90000 heap" \
        "$(jq_py "$TMP/j$mode.out" 's = d["verdict"]["sites"][0]; "%s %g %d %d %d %s" % (s["site"].replace("'"$ANALYZE_SRC/"'", ""), s["bytes_per_step"], s["first_step"], s["last_step"], s["held_bytes"], s["layer"])')"
done
golden leaks_growth "$TMP/leak.out"

# Too few steps after the warm-up (30 ends, steps <= 22 warm-up: 8 ends): not judged, said so.
ms few analyze leaks "$TMP/leak.db" --warmup 22
assert_eq "--warmup 22: too few steps" "leaks: no leak found: too few steps to judge (9 step ends after the warm-up needed)" \
    "$(head -1 "$TMP/few.out")"
assert_eq "--warmup 22: the process line" "  process 1 an_leak_loop (pid N): 8 step ends after the warm-up: too few to judge" \
    "$(grep 'too few to judge' "$TMP/few.out" | normalise)"
# ... 9 ends (steps <= 21 warm-up): judged again, and the queue of 3 is still no leak.
ms nine analyze leaks "$TMP/leak.db" --warmup 21
assert_eq "--warmup 21: judged" "+3000.0 8/8 90000" \
    "$(grep -E '^ +\+[0-9.]+ +[0-9]+/[0-9]+ ' "$TMP/nine.out" | sed -E 's/ +/ /g; s/^ //' | cut -d' ' -f1-3)"

# Without steps: the tenths of the run up to the peak (an_leak_nosteps: an_grow keeps 1000 B
# every round and frees it all before exit).
ms ns_run run -q -o "$TMP/ns.db" -- "$PROGS/an_leak_nosteps"
ms ns analyze leaks "$TMP/ns.db" --json
assert_eq "no steps: judged on tenths of the allocations, exactly an_grow, 10000 B per tenth" \
    "True tenths ['an_grow 10000 8/8 100000']" \
    "$(jq_py "$TMP/ns.out" 'v = d["verdict"]; "%s %s %s" % (v["leak"], v["judged_on"], ["%s %g %d/%d %d" % (s["site"].split()[0], s["bytes_per_step"], s["steps_grown"], s["steps_judged"], s["held_bytes"]) for s in v["sites"]])')"
# The bundled example (examples/leaky.c, -O2, no frame pointers, 200 requests in about 1 ms after
# a start-up that takes most of the run's time): its forgotten reply buffer, 256 B a request.
ms ex_run run -q -o "$TMP/ex.db" -- "$PROGS/leaky"
ms ex analyze leaks "$TMP/ex.db"
assert_eq "leaky.c: exactly format_reply leaks, 51200 B held at the peak" \
    "+5120.0 8/8 51200 format_reply (examples/leaky.c:18)" \
    "$(grep -E '^ +\+[0-9.]+ +[0-9]+/[0-9]+ ' "$TMP/ex.out" | sed -E 's|\(/[^ ]*/examples/|(examples/|; s/ +/ /g; s/^ //')"

# A bad rule is a usage error.
ms badrule analyze leaks "$TMP/leak.db" --rule=valgrind
assert_eq "--rule=valgrind: exit status 2" 2 "$RC"
assert_match "--rule=valgrind: says what it takes" "growth or msmemscope" "$(cat "$TMP/badrule.err")"

# msMemScope's form of the command (--analysis=leaks at the end of a run): msMemScope's rule.
ms msform --analysis=leaks -q -o "$TMP/msform.db" -- "$PROGS/an_leak_loop" healthy
assert_eq "msMemScope form: exit status" 0 "$RC"
assert_eq "msMemScope form: the ERROR header" 1 \
    "$(cat "$TMP/msform.out" "$TMP/msform.err" | grep -c '^====== ERROR: Detected memory leaks ======$')"

same_without_agent "$PROGS/an_leak_loop" leak
done_testing
