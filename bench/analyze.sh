#!/bin/bash
# analyze.sh: `memscope analyze leaks` + `memscope analyze peak` against `heaptrack_print` on the
# same workload (issue 3, "Speed").
#
#   bench/analyze.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-k]
#
# Builds ../shared/bench/churn.c with frame pointers and records `churn OPS THREADS` (default
# 5000000 2: about 10 million events; 2500000 2 gives about 5 million) once with `memscope run
# --format=trace` + `memscope import` (a database) and once with heaptrack (a .zst file).
# Then, alternating in each round
# (default 5 rounds), under /usr/bin/time -f '%e %M':
#   ms-leaks   memscope analyze leaks X.db
#   ms-peak    memscope analyze peak X.db
#   ms-both    memscope analyze leaks,peak X.db       (one process, one report)
#   heaptrack  heaptrack_print HT.zst                  (its default report: peak, leaks, ...)
# All output goes to files in the work directory (not timed against a terminal). Prints a
# Markdown table of median wall seconds and median peak RSS. MEMSCOPE picks the binary
# (default: the first of build/, build-tests/ under the repository root); -k keeps the work
# directory.
set -euo pipefail
BENCH=analyze.sh
. "$(dirname "$0")/lib.sh"

rounds=5 ops=5000000 threads=2 keep=0
bench_options "[-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-k]" "r:n:t:k" "$@"
bench_memscope
bench_require heaptrack heaptrack_print sqlite3
src=$root/../shared/bench/churn.c

bench_workdir "$keep"
cc -O2 -g -fno-omit-frame-pointer -pthread "$src" -o "$work/churn"
cd "$work"

echo "recording churn $ops $threads with memscope and heaptrack ..." >&2
t0=$EPOCHREALTIME
"$MEMSCOPE" run -q --call-stack=c:32 --format=trace --no-pack -o "$work/trace" -- ./churn "$ops" "$threads" \
    >rec.log 2>&1
"$MEMSCOPE" import --format=db "$work/trace" -o "$work/x.db" >import.log 2>&1
t1=$EPOCHREALTIME
heaptrack -o "$work/ht" ./churn "$ops" "$threads" >ht.log 2>&1
ht=$(ls "$work"/ht*.zst 2>/dev/null | head -1)
[ -n "$ht" ] || ht=$(ls "$work"/ht.* | head -1)
echo "recorded ($(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s for memscope run + import)" >&2

# timed NAME CMD...: runs CMD with stdout to NAME.out, appends "wall_s maxrss_kb" to NAME.times.
timed() {
    local name=$1
    shift
    if ! /usr/bin/time -f '%e %M' -o "$name.t" "$@" >"$name.out" 2>"$name.err"; then
        echo "analyze.sh: $name failed: $*" >&2
        tail -5 "$name.err" >&2
        exit 1
    fi
    tail -1 "$name.t" >>"$name.times"
}

for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    timed ms_leaks "$MEMSCOPE" analyze leaks x.db
    timed heaptrack heaptrack_print "$ht"
    timed ms_peak "$MEMSCOPE" analyze peak x.db
    timed ms_both "$MEMSCOPE" analyze leaks,peak x.db
done
paste -d' ' ms_leaks.times ms_peak.times | awk '{print $1 + $3, ($2 > $4 ? $2 : $4)}' >ms_sum.times

events=$(sqlite3 x.db 'SELECT count(*) FROM events')
blocks=$(sqlite3 x.db 'SELECT count(*) FROM blocks')
db_bytes=$(stat -c %s x.db)
ht_bytes=$(stat -c %s "$ht")
ht_allocs=$(sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p' heaptrack.out | tail -1)
ht_temp=$(sed -n 's/^[[:space:]]*temporary memory allocations:[[:space:]]*\([0-9]*\).*/\1/p' heaptrack.out | tail -1)

h=$(median heaptrack.times 1)
row() {
    local w m
    w=$(median "$1.times" 1) m=$(median "$1.times" 2)
    awk -v n="$2" -v w="$w" -v m="$m" -v h="$h" 'BEGIN {printf "| %s | %.2f | %.0f | %.2f |\n", n, w, m / 1024, w / h}'
}

cat <<EOT
Workload: \`churn $ops $threads\` ($(bench_machine), $rounds rounds alternating, medians).
memscope: \`$("$MEMSCOPE" --version)\` (tree $(git -C "$root" describe --always --dirty)); heaptrack: \`$(heaptrack --version 2>&1 | head -1)\`.
Database: $events events, $blocks blocks, $db_bytes bytes. heaptrack file: $ht_bytes bytes ($ht_allocs allocations, $ht_temp temporary, by its own count).

| command | median wall s | median peak RSS MiB | x heaptrack_print |
|---|---:|---:|---:|
$(row ms_leaks "\`memscope analyze leaks\`")
$(row ms_peak "\`memscope analyze peak\`")
$(row ms_sum "leaks + peak (two runs, summed; RSS: the larger)")
$(row ms_both "\`memscope analyze leaks,peak\` (one run)")
$(row heaptrack "\`heaptrack_print\`")

Raw (wall s, RSS KiB): leaks $(tr '\n' ' ' <ms_leaks.times)/ peak $(tr '\n' ' ' <ms_peak.times)/ both $(tr '\n' ' ' <ms_both.times)/ heaptrack_print $(tr '\n' ' ' <heaptrack.times)
EOT
