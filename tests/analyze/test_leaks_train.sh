#!/bin/bash
# test_leaks_train.sh: the default rule of `memscope analyze leaks` on real PyTorch training
# (issue 47 item 6), unmodified, steps from the optimizer: an_train_healthy.py (DataLoader with
# 2 workers, AdamW, OneCycleLR, 30 steps) is "no leak", also with ops and accesses
# (--events=alloc,free,access), where msMemScope's rule prints its ERROR block;
# ../shared/bench/train_cpu.py, which keeps a 1 MiB tensor per step, leaks at exactly that line.
# Skipped (77) without Debian's python3 with torch, or without memscope's Python package. About 15 s per run on 2 loaded CPUs.
. "$(dirname "$0")/an_lib.sh"

PYT=/usr/bin/python3
"$PYT" -c 'import torch' 2>/dev/null || skip "$PYT has no torch"
# steps come from memscope's Python package beside the binary (the sanitizer build has none)
[ -d "$(dirname "$MEMSCOPE")/python/memscope" ] || skip "no Python package beside $MEMSCOPE"
HEALTHY=$ANALYZE_SRC/an_train_healthy.py

ms run run -q -o "$TMP/h.db" -- "$PYT" "$HEALTHY" 30
assert_eq "healthy: run exit status" 0 "$RC"
assert_eq "healthy: the script's output" "an_train_healthy ok" "$(cat "$TMP/run.out")"
ms h analyze leaks "$TMP/h.db"
assert_eq "healthy: no leak" "leaks: no leak: no call site's live bytes keep growing from step to step" \
    "$(head -1 "$TMP/h.out")"
assert_eq "healthy: steps 2..30 of the main process judged" 1 \
    "$(grep -c '^  process 1 python3[.0-9]* (pid [0-9]*): steps 2\.\.30 judged: no leak$' "$TMP/h.out")"
assert_eq "healthy: no msMemScope lines" 0 "$(grep -c '^Direct \|Detected memory leaks' "$TMP/h.out")"
ms hms analyze leaks "$TMP/h.db" --rule=msmemscope
assert_eq "healthy, --rule=msmemscope: msMemScope's ERROR block (what the issue saw)" 1 \
    "$(grep -c '^====== ERROR: Detected memory leaks ======$' "$TMP/hms.out")"

ms runa run -q --events=alloc,free,access -o "$TMP/a.db" -- "$PYT" "$HEALTHY" 30
assert_eq "healthy with accesses: run exit status" 0 "$RC"
ms a analyze leaks "$TMP/a.db" --json
assert_eq "healthy with accesses: no leak" "False []" \
    "$(jq_py "$TMP/a.out" '"%s %s" % (d["verdict"]["leak"], d["verdict"]["sites"])')"

# shared/ beside the checkout (../shared), or beside the folder of worktrees (../../shared).
TRAIN=$ANALYZE_SRC/../../../shared/bench/train_cpu.py
[ -f "$TRAIN" ] || TRAIN=$ANALYZE_SRC/../../../../shared/bench/train_cpu.py
if [ -f "$TRAIN" ]; then
    ms runt run -q -o "$TMP/t.db" -- "$PYT" "$TRAIN" 12
    assert_eq "train_cpu.py: run exit status" 0 "$RC"
    ms t analyze leaks "$TMP/t.db" --json
    # The kept tensor: 1 MiB of data and the tensor's own small allocations, every step.
    assert_eq "train_cpu.py: one leak, at line 32, 1 MiB and a little per step, 10/10 steps" \
        "True ['main (train_cpu.py:32) 10/10 ok']" \
        "$(jq_py "$TMP/t.out" 'v = d["verdict"]; "%s %s" % (v["leak"], ["%s %d/%d %s" % (s["site"].replace(s["site"][s["site"].index("(") + 1:s["site"].rindex("/") + 1], ""), s["steps_grown"], s["steps_judged"], "ok" if 1048576 <= s["bytes_per_step"] < 1048576 + 4096 else s["bytes_per_step"]) for s in v["sites"]])')"
else
    echo "note: $TRAIN missing: the train_cpu.py case is not run"
fi
done_testing
