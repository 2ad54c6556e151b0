#!/bin/bash
# usage.sh: what the usage monitor costs (docs/usage.md; issue 38: <= 1% of the traced program's
# wall time at the default interval, the sampler <= 0.5% of a core).
#
#   bench/usage.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-w churn|fork] [-p PASSES] [-k]
#
# Runs ../shared/bench/churn.c (-w churn, the default) or bench/cow_workers.c (-w fork: a parent
# holding 256 MiB of 256-byte blocks and two forked workers that write into every block PASSES (60)
# times, so the sampler walks their pagemaps: copy-on-write) under memscope, recording only
# (--format=trace --no-pack, so the conversion's time does not hide the difference),
# alternating within each round (default 7):
#   off   memscope run --usage-interval=0 ...   (no sampling)
#   on    memscope run ...                      (the default: every 0.1 s)
# Prints the medians of wall time, their ratio, and the sampler's own CPU time (memscope's
# debug line "usage sampler: N samples in M ticks, X ms of CPU; W pagemap walks (Y ms of CPU),
# K written; P PSS/USS reads (Z ms of CPU); L directory listings", the thread's own
# CLOCK_THREAD_CPUTIME_ID, which the machine's load changes little) as a share of a core.
set -euo pipefail
BENCH=usage.sh
. "$(dirname "$0")/lib.sh"

rounds=7 ops=10000000 threads=2 keep=0 workload=churn passes=60
bench_options "[-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-w churn|fork] [-p PASSES] [-k]" "r:n:t:w:p:k" "$@"
bench_memscope
bench_workdir "$keep"
if [ "$workload" = fork ]; then
    cc -O2 -g -fno-omit-frame-pointer "$root/bench/cow_workers.c" -o "$work/prog"
    prog=(./prog 256 2 "$passes")
else
    cc -O2 -g -fno-omit-frame-pointer -pthread "$root/../shared/bench/churn.c" -o "$work/prog"
    prog=(./prog "$ops" "$threads")
fi
cd "$work"

for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf off on
    bench_timed off "$MEMSCOPE" run --log-level=debug --usage-interval=0 --format=trace --no-pack \
        -o off -- "${prog[@]}"
    rm -rf off
    bench_timed on "$MEMSCOPE" run --log-level=debug --format=trace --no-pack -o on -- \
        "${prog[@]}"
    t=$(tail -1 on.times)
    line=$(grep 'usage sampler:' on.log)
    # PSS/USS reads: "- -" from a memscope that does not say them
    smaps=$(echo "$line" | sed -n 's/.* \([0-9]*\) PSS\/USS reads (\([0-9.]*\) ms.*/\1 \2/p')
    echo "$line" | sed -n 's/.*usage sampler: \([0-9]*\) samples in \([0-9]*\) ticks, \([0-9.]*\) ms of CPU; \([0-9]*\) pagemap walks (\([0-9.]*\) ms.*/\1 \2 \3 \4 \5/p' |
        awk -v t="$t" -v sm="${smaps:-- -}" '{printf "%s %s %s %.4f %s %s %s\n", $1, $2, $3, $3 / 1000 / t * 100, $4, $5, sm}' >>sampler.txt
    rm -rf on
done
med() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
off=$(med off.times) on=$(med on.times)
cpu=$(awk '{print $3}' sampler.txt | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
pct=$(awk '{print $4}' sampler.txt | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
echo "Workload: ${prog[*]}, $rounds rounds, medians; $(bench_machine)"
echo "memscope: $("$MEMSCOPE" --version | head -1)"
echo
echo "| run | median s | x off |"
echo "|---|---:|---:|"
echo "| --usage-interval=0 (off) | $off | 1.000 |"
echo "| default (0.1 s) | $on | $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a / b}') |"
echo
echo "sampler (median of the rounds): $cpu ms of CPU, $pct% of one core over the run;"
echo "per round (samples, ticks, CPU ms (walks included), % of a core, pagemap walks, their CPU ms,"
echo "PSS/USS reads, their CPU ms):"
sed 's/^/    /' sampler.txt
