#!/bin/bash
# churn.sh: memscope against heaptrack on ../shared/bench/churn.c (issue 2, "Performance").
#
#   bench/churn.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-k]
#
# Builds churn with frame pointers, then runs, alternating within each round (default 5 rounds):
#   plain      ./churn OPS THREADS
#   heaptrack  heaptrack -o OUT ./churn OPS THREADS
#   ms-raw     memscope run --call-stack=c:32 --format=trace --no-pack -o DIR -- ./churn ...
#                                                    (recording only: the trace as the agent wrote it)
#   ms-trace   memscope run --call-stack=c:32 --format=trace -o DIR -- ./churn ...
#                                                    (recording + packing the trace: the default)
#   ms-db      memscope run --call-stack=c:32 -o X.db -- ./churn ...    (recording + database)
# and, after each ms-trace run, `memscope import DIR -o X.db` (packed trace -> database).
# Prints a Markdown table of medians and ratios, and bytes per event: memscope's packed *.mst,
# its raw *.mst, the raw one zstd -3 compressed, and heaptrack's .zst file; heaptrack's events =
# its allocations + its frees (allocations - leaked, from its own stats). MEMSCOPE picks the binary (default: the
# first of build/, build-tests/ under the repository root). -k keeps the work directory.
set -euo pipefail
BENCH=churn.sh
. "$(dirname "$0")/lib.sh"

rounds=5 ops=2000000 threads=2 keep=0
bench_options "[-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-k]" "r:n:t:k" "$@"
bench_memscope
bench_require heaptrack zstd sqlite3
src=$root/../shared/bench/churn.c

bench_workdir "$keep"
cc -O2 -g -fno-omit-frame-pointer -pthread "$src" -o "$work/churn"
cd "$work"

timed() { bench_timed "$@"; }
# Apparent bytes of the files given.
bytes() { cat "$@" | wc -c; }

ms_args=(run -q --call-stack=c:32)
for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf ht.zst ht raw trace x.db i.db
    timed plain ./churn "$ops" "$threads"
    timed heaptrack heaptrack -o "$work/ht" ./churn "$ops" "$threads"
    timed ms_raw "$MEMSCOPE" "${ms_args[@]}" --format=trace --no-pack -o "$work/raw" -- ./churn "$ops" "$threads"
    timed ms_trace "$MEMSCOPE" "${ms_args[@]}" --format=trace -o "$work/trace" -- ./churn "$ops" "$threads"
    timed ms_db "$MEMSCOPE" "${ms_args[@]}" --format=db -o "$work/x.db" -- ./churn "$ops" "$threads"
    timed import "$MEMSCOPE" import --format=db "$work/trace" -o "$work/i.db"
done

events=$(sqlite3 i.db 'SELECT count(*) FROM events')
events_db=$(sqlite3 x.db 'SELECT count(*) FROM events')
mst_bytes=$(bytes raw/*.mst)
mst_zst=$(cat raw/*.mst | zstd -3 -q -c | wc -c)
pk_bytes=$(bytes trace/*.mst)
ht_bytes=$(bytes ht.zst)
ht_allocs=$(sed -n 's/^[[:space:]]*allocations:[[:space:]]*\([0-9]*\).*/\1/p' heaptrack.log | tail -1)
ht_leaked=$(sed -n 's/^[[:space:]]*leaked allocations:[[:space:]]*\([0-9]*\).*/\1/p' heaptrack.log | tail -1)
ht_events=$((2 * ht_allocs - ht_leaked))

p=$(median plain.times) h=$(median heaptrack.times) t=$(median ms_trace.times) w=$(median ms_raw.times)
d=$(median ms_db.times) i=$(median import.times)
f() { awk -v a="$1" 'BEGIN {printf "%.3f", a}'; }
# ratio_median A.times B.times: the median of A's time / B's time, round by round.
ratio_median() {
    paste -d' ' "$1" "$2" | awk '{printf "%.4f\n", $1 / $2}' >ratio.tmp
    awk -v v="$(median ratio.tmp)" 'BEGIN {printf "%.2f", v}'
}
per() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
cat <<EOT
Workload: \`churn $ops $threads\` ($(bench_machine), $rounds rounds, medians of wall time).
memscope: \`$("$MEMSCOPE" --version)\` (tree $(git -C "$root" describe --always --dirty)); heaptrack: \`$(heaptrack --version 2>&1 | head -1)\`.

| run | median s | x plain | x heaptrack |
|---|---:|---:|---:|
| plain | $(f "$p") | 1.00 | $(r "$p" "$h") |
| heaptrack | $(f "$h") | $(r "$h" "$p") | 1.00 |
| memscope, recording only (\`--format=trace --no-pack\`) | $(f "$w") | $(r "$w" "$p") | $(r "$w" "$h") |
| memscope, recording + packing (\`--format=trace\`) | $(f "$t") | $(r "$t" "$p") | $(r "$t" "$h") |
| memscope, recording + full database (\`--format=db\`) | $(f "$d") | $(r "$d" "$p") | $(r "$d" "$h") |
| \`memscope import --format=db\` (packed trace -> full database) | $(f "$i") | | |

| output | bytes | events | bytes / event |
|---|---:|---:|---:|
| memscope packed trace (\`*.mst\`, the default) | $pk_bytes | $events | $(per "$pk_bytes" "$events") |
| memscope raw trace (\`--no-pack\`) | $mst_bytes | $events | $(per "$mst_bytes" "$events") |
| memscope raw trace, \`zstd -3\` | $mst_zst | $events | $(per "$mst_zst" "$events") |
| heaptrack \`.zst\` | $ht_bytes | $ht_events | $(per "$ht_bytes" "$ht_events") |

Per-round ratios to heaptrack (each round runs both back to back, so a machine that speeds up
or slows down between rounds moves both), median over the rounds: recording only
$(ratio_median ms_raw.times heaptrack.times), recording + packing $(ratio_median ms_trace.times heaptrack.times).

Trace to database: $(awk -v s="$i" -v e="$events" 'BEGIN {printf "%.2f", s / (e / 1e6)}') s per million events ($events events; the database run recorded $events_db).
heaptrack's events: $ht_allocs allocations + $((ht_allocs - ht_leaked)) frees.
All raw times (s): plain $(tr '\n' ' ' <plain.times)/ heaptrack $(tr '\n' ' ' <heaptrack.times)/ raw $(tr '\n' ' ' <ms_raw.times)/ packed $(tr '\n' ' ' <ms_trace.times)/ db $(tr '\n' ' ' <ms_db.times)/ import $(tr '\n' ' ' <import.times)
EOT
