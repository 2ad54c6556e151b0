#!/bin/bash
# sampling.sh: memscope's sampling mode (`run --sampling`, docs/production.md "Sampling"), issue 41.
#
#   bench/sampling.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-k]
#
# Speed, on ../shared/bench/churn.c built with frame pointers (as churn.sh), alternating within
# each round (default 5 rounds), every memscope run with --call-stack=c:32:
#   plain       ./churn OPS THREADS
#   exact-rec   memscope run --format=trace --no-pack            (recording every event only)
#   s512-rec    memscope run --sampling=512KiB --format=trace --no-pack   (recording only)
#   exact-e2e   memscope run -o X.db              (the default: recording + compact database)
#   s512-e2e    memscope run --sampling=512KiB -o X.db                     (end to end)
# Accuracy, once: churn and tests/progs/sample_skew.c (skewed sizes: 16 B, 64 B, 4 KiB, 1 MiB,
# a realloc to 2 MiB), each run exactly and with --sampling=64KiB into full databases
# (--format=db); the estimated heap bytes allocated in total and per call site (churn: per stack,
# i.e. per recursion depth; sample_skew: per allocating function) against the exact run's, for
# the sites holding >= 1% of the bytes. SEED=N sets MEMSCOPE_SAMPLING_SEED for the sampled runs
# (default: unset, the agent seeds from the clock). -k keeps the work directory.
# OLD_AGENT=PATH (a libmemscope.so of another tree) adds, in the same rounds, s512-rec with that
# agent (MEMSCOPE_AGENT), so that a change of the unsampled path is measured side by side.
# SPEED_ONLY=1 skips the accuracy runs.
# The cost of one unsampled malloc + free, in every round too: tests/progs/alloc_loop.c (-O2;
# LOOP pairs of malloc(16) and free, default 20M, a sampled 64 MiB block kept meanwhile) plain
# and at --sampling=512KiB (recording only; with OLD_AGENT, also with that agent), less the
# fixed cost of a run (`churn 1 1`, plain and at --sampling=512KiB), over LOOP: the medians of
# the per-round figures, from CPU time.
set -euo pipefail
BENCH=sampling.sh
. "$(dirname "$0")/lib.sh"

rounds=5 ops=2000000 threads=2 keep=0
bench_options "[-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-k]" "r:n:t:k" "$@"
bench_memscope
bench_require sqlite3
src=$root/../shared/bench/churn.c

bench_workdir "$keep"
cc -O2 -g -fno-omit-frame-pointer -pthread "$src" -o "$work/churn"
cc -O2 -g -fno-omit-frame-pointer "$root/tests/progs/alloc_loop.c" -o "$work/alloc_loop"
loop=${LOOP:-20000000}
cc -O0 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread \
    "$root/tests/progs/sample_skew.c" -o "$work/sample_skew"
cd "$work"

# cpu NAME CMD...: bench_timed, and the CPU seconds of CMD and its children appended to
# NAME.cpu: on a machine shared with other jobs, CPU time moves less than wall time. From
# `perf stat -e task-clock` (to the microsecond) where perf can count it, else user + system
# from GNU time (to 10 ms).
use_perf=0
perf stat -x, -e task-clock -o /dev/null true 2>/dev/null && use_perf=1
cpu() {
    local name=$1
    shift
    if [ "$use_perf" = 1 ]; then
        bench_timed "$name" perf stat -x, -e task-clock -o "$work/$name.perf" "$@"
        awk -F, '$3 == "task-clock" {printf "%.4f\n", $1 / 1000}' "$work/$name.perf" >>"$name.cpu"
        return
    fi
    bench_timed "$name" /usr/bin/time -f "%U %S" -a -o "$work/$name.rusage" "$@"
    tail -1 "$work/$name.rusage" | awk '{printf "%.4f\n", $1 + $2}' >>"$name.cpu"
}

ms=(run -q --call-stack=c:32)
for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf raw sraw x.db s.db
    cpu plain ./churn "$ops" "$threads"
    cpu exact_rec "$MEMSCOPE" "${ms[@]}" --format=trace --no-pack -o "$work/raw" -- ./churn "$ops" "$threads"
    cpu s512_rec "$MEMSCOPE" "${ms[@]}" --sampling=512KiB --format=trace --no-pack -o "$work/sraw" -- ./churn "$ops" "$threads"
    if [ -n "${OLD_AGENT:-}" ]; then
        rm -rf oraw
        cpu s512_old env MEMSCOPE_AGENT="$OLD_AGENT" "$MEMSCOPE" "${ms[@]}" --sampling=512KiB --format=trace --no-pack -o "$work/oraw" -- ./churn "$ops" "$threads"
    fi
    rm -rf fraw lraw
    cpu start ./churn 1 1
    cpu start512 "$MEMSCOPE" "${ms[@]}" --sampling=512KiB --format=trace --no-pack -o "$work/fraw" -- ./churn 1 1
    cpu loop_plain ./alloc_loop "$loop" 16 67108864
    cpu loop_s512 "$MEMSCOPE" "${ms[@]}" --sampling=512KiB --format=trace --no-pack -o "$work/lraw" -- ./alloc_loop "$loop" 16 67108864
    if [ -n "${OLD_AGENT:-}" ]; then
        rm -rf lraw
        cpu loop_old env MEMSCOPE_AGENT="$OLD_AGENT" "$MEMSCOPE" "${ms[@]}" --sampling=512KiB --format=trace --no-pack -o "$work/lraw" -- ./alloc_loop "$loop" 16 67108864
    fi
    cpu exact_e2e "$MEMSCOPE" "${ms[@]}" -o "$work/x.db" -- ./churn "$ops" "$threads"
    cpu s512_e2e "$MEMSCOPE" "${ms[@]}" --sampling=512KiB -o "$work/s.db" -- ./churn "$ops" "$threads"
done
raw_bytes=$(cat raw/*.mst | wc -c)
sraw_bytes=$(cat sraw/*.mst | wc -c)

# ratio_median A.times B.times: the median over the rounds of A's time / B's time.
ratio_median() {
    paste -d' ' "$1" "$2" | awk '{printf "%.4f\n", $1 / $2}' >ratio.tmp
    awk -v v="$(median ratio.tmp)" 'BEGIN {printf "%.2f", v}'
}
f() { awk -v a="$1" 'BEGIN {printf "%.3f", a}'; }

# Accuracy. site_sql: heap bytes allocated per site (key, bytes).
seed_env=()
[ -n "${SEED:-}" ] && seed_env=(env MEMSCOPE_SAMPLING_SEED="$SEED")
by_depth="SELECT s.depth, sum(e.size) FROM events e JOIN stacks s ON s.id = e.stack_id
  WHERE e.kind = 1 AND e.layer = 1 GROUP BY s.depth"
by_func="SELECT (SELECT text FROM strings WHERE id = f.function_id), sum(e.size) FROM events e
  JOIN stacks s ON s.id = e.stack_id JOIN stack_nodes n ON n.id = s.node_id
  JOIN frames f ON f.id = n.frame_id WHERE e.kind = 1 AND e.layer = 1 GROUP BY 1"
exact_total="SELECT sum(size) FROM events WHERE kind = 1 AND layer = 1"
est_total="SELECT sum(size) FROM events WHERE kind = 1 AND layer = 1"
meta_total="SELECT value FROM meta WHERE key = 'heap_alloc_bytes_exact'"
# accuracy NAME SQL CMD...: one exact and one sampled run; a Markdown table of the sites.
accuracy() {
    local name=$1 sql=$2
    shift 2
    "$MEMSCOPE" "${ms[@]}" --format=db -o "$work/$name-x.db" -- "$@" >/dev/null
    "${seed_env[@]}" "$MEMSCOPE" "${ms[@]}" --sampling=64KiB --format=db -o "$work/$name-s.db" -- "$@" >/dev/null
    local tx ts tm
    tx=$(sqlite3 "$name-x.db" "$exact_total")
    ts=$(sqlite3 "$name-s.db" "$est_total")
    tm=$(sqlite3 "$name-s.db" "$meta_total")
    sqlite3 -separator ' ' "$name-x.db" "$sql" | sort >x.sites
    sqlite3 -separator ' ' "$name-s.db" "$sql" | sort >s.sites
    echo "| $name: total | $tx | $ts | $(awk -v a="$ts" -v b="$tx" 'BEGIN {printf "%+.2f%%", 100 * (a - b) / b}') |"
    join -a1 -e 0 -o 0,1.2,2.2 x.sites s.sites | awk -v t="$tx" -v n="$name" \
        '$2 >= t / 100 {printf "| %s: %s | %d | %d | %+.2f%% |\n", n, $1, $2, $3, 100 * ($3 - $2) / $2}'
    echo "| $name: exact counters (meta heap_alloc_bytes_exact) | $tx | $tm | $(awk -v a="$tm" -v b="$tx" 'BEGIN {printf "%+.2f%%", 100 * (a - b) / b}') |"
}
churn_rows="| (SPEED_ONLY) | | | |" skew_rows=""
if [ -z "${SPEED_ONLY:-}" ]; then
    churn_rows=$(accuracy churn "$by_depth" ./churn "$ops" "$threads")
    skew_rows=$(accuracy skew "$by_func" ./sample_skew 20)
fi
# ns_per_pair NAME: the median over the rounds of (NAME's CPU - loop_plain's - the fixed cost)
# per malloc + free pair of alloc_loop, in ns.
ns_per_pair() {
    paste -d' ' "$1.cpu" loop_plain.cpu start512.cpu start.cpu |
        awk -v n="$loop" '{printf "%.3f\n", ($1 - $2 - ($3 - $4)) * 1e9 / n}' >pair.tmp
    awk -v v="$(median pair.tmp)" 'BEGIN {printf "%.1f", v}'
}
old_row=""
[ -n "${OLD_AGENT:-}" ] && old_row="| \`--sampling=512KiB\`, recording only, OLD_AGENT ($OLD_AGENT) | $(f "$(median s512_old.times)") | $(ratio_median s512_old.times plain.times) | $(f "$(median s512_old.cpu)") | $(ratio_median s512_old.cpu plain.cpu) |
"

p=$(median plain.times)
cat <<EOT
Workload: \`churn $ops $threads\` ($(bench_machine), $rounds rounds, medians of wall time and of
CPU time (the program's and memscope's: perf stat's task-clock, or user + system); ratios are the medians of the per-round
ratios to plain), \`--call-stack=c:32\`.
memscope: \`$("$MEMSCOPE" --version)\` (tree $(git -C "$root" describe --always --dirty)).

| run | median wall s | x plain (wall) | median CPU s | x plain (CPU) |
|---|---:|---:|---:|---:|
| plain | $(f "$p") | 1.00 | $(f "$(median plain.cpu)") | 1.00 |
| exact, recording only (\`--format=trace --no-pack\`) | $(f "$(median exact_rec.times)") | $(ratio_median exact_rec.times plain.times) | $(f "$(median exact_rec.cpu)") | $(ratio_median exact_rec.cpu plain.cpu) |
| \`--sampling=512KiB\`, recording only | $(f "$(median s512_rec.times)") | $(ratio_median s512_rec.times plain.times) | $(f "$(median s512_rec.cpu)") | $(ratio_median s512_rec.cpu plain.cpu) |
$old_row| exact, end to end (default compact database) | $(f "$(median exact_e2e.times)") | $(ratio_median exact_e2e.times plain.times) | $(f "$(median exact_e2e.cpu)") | $(ratio_median exact_e2e.cpu plain.cpu) |
| \`--sampling=512KiB\`, end to end (default compact database) | $(f "$(median s512_e2e.times)") | $(ratio_median s512_e2e.times plain.times) | $(f "$(median s512_e2e.cpu)") | $(ratio_median s512_e2e.cpu plain.cpu) |

Raw trace: exact $raw_bytes bytes, sampled at 512 KiB $sraw_bytes bytes.

Fixed cost (\`churn 1 1\`, median CPU): plain $(f "$(median start.cpu)") s, at \`--sampling=512KiB\` $(f "$(median start512.cpu)") s.
The unsampled path: \`alloc_loop $loop 16 67108864\` (-O2) at \`--sampling=512KiB\`, median CPU $(f "$(median loop_s512.cpu)") s against plain $(f "$(median loop_plain.cpu)") s: **$(ns_per_pair loop_s512) ns per unsampled malloc + free** (the run's CPU - plain's - the fixed cost, over $loop pairs; median of the rounds)${OLD_AGENT:+; OLD_AGENT $(ns_per_pair loop_old) ns}.

Accuracy at \`--sampling=64KiB\`${SEED:+ (MEMSCOPE_SAMPLING_SEED=$SEED)}: heap bytes allocated, exact run against the
sampled run's estimate, in total and for every site holding >= 1% of the bytes (churn: sites are
stacks, one per recursion depth; sample_skew 20: the allocating functions).

| site | exact bytes | estimated bytes | error |
|---|---:|---:|---:|
$churn_rows
$skew_rows

CPU (s): plain $(tr '\n' ' ' <plain.cpu)/${OLD_AGENT:+ s512-old $(tr '\n' ' ' <s512_old.cpu)/ loop-old $(tr '\n' ' ' <loop_old.cpu)/} loop-plain $(tr '\n' ' ' <loop_plain.cpu)/ loop-s512 $(tr '\n' ' ' <loop_s512.cpu)/ exact-rec $(tr '\n' ' ' <exact_rec.cpu)/ s512-rec $(tr '\n' ' ' <s512_rec.cpu)/ exact-e2e $(tr '\n' ' ' <exact_e2e.cpu)/ s512-e2e $(tr '\n' ' ' <s512_e2e.cpu)
All raw times (s): plain $(tr '\n' ' ' <plain.times)/${OLD_AGENT:+ s512-old $(tr '\n' ' ' <s512_old.times)/} exact-rec $(tr '\n' ' ' <exact_rec.times)/ s512-rec $(tr '\n' ' ' <s512_rec.times)/ exact-e2e $(tr '\n' ' ' <exact_e2e.times)/ s512-e2e $(tr '\n' ' ' <s512_e2e.times)
EOT
