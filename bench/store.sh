#!/bin/bash
# store.sh: from run to answer, memscope's default output against heaptrack (issue 13).
#
#   bench/store.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-f] [-k]
#
# Builds ../shared/bench/churn.c with frame pointers and, alternating in each round (default 5
# rounds of `churn 2000000 2`, about 4 million events), times what a user waits for:
#   ht_rec     heaptrack -o ht ./churn ...              (recording)
#   ht_print   heaptrack_print ht.zst                   (its report: peak, leaks, temporary ...)
#   ms_run     memscope run --call-stack=c:32 -o x.db -- ./churn ...   (default output)
#   ms_leaks   memscope analyze leaks x.db
#   ms_all     memscope analyze all x.db
# and with -f the full database as well (the default before issue 13):
#   ms_frun    memscope run --format=db ... ; ms_fleaks  memscope analyze leaks on it
# Each command runs under /usr/bin/time (wall seconds and peak RSS) after an untimed sync.
# Prints a Markdown table of medians, the per-round ratios to heaptrack, bytes per event of
# each output and memscope run's peak RSS (the conversion: the traced program is small).
set -euo pipefail
BENCH=store.sh
. "$(dirname "$0")/lib.sh"

rounds=5 ops=2000000 threads=2 keep=0 full=0
usage="[-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-f] [-k]"
OPTIND=1
while getopts "r:n:t:fk" o; do
    case $o in
    r) rounds=$OPTARG ;;
    n) ops=$OPTARG ;;
    t) threads=$OPTARG ;;
    f) full=1 ;;
    k) keep=1 ;;
    *) echo "usage: $0 $usage" >&2; exit 2 ;;
    esac
done
bench_memscope
bench_require heaptrack heaptrack_print sqlite3 /usr/bin/time
src=$root/../shared/bench/churn.c

bench_workdir "$keep"
cc -O2 -g -fno-omit-frame-pointer -pthread "$src" -o "$work/churn"
cd "$work"

# timed NAME CMD...: appends "wall_s maxrss_kb" to NAME.times; a failing CMD ends the benchmark.
timed() {
    local name=$1 t0 t1
    shift
    sync
    t0=$EPOCHREALTIME
    if ! /usr/bin/time -f '%M' -o "$name.t" "$@" >"$name.log" 2>&1; then
        echo "$BENCH: $name failed: $*" >&2
        tail -5 "$name.log" >&2
        exit 1
    fi
    t1=$EPOCHREALTIME
    echo "$t0 $t1 $(tail -1 "$name.t")" | awk '{printf "%.4f %s\n", $2 - $1, $3}' >>"$name.times"
}

prog=(./churn "$ops" "$threads")
for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf ht.* x.db f.db
    timed ht_rec heaptrack -o "$work/ht" "${prog[@]}"
    timed ht_print heaptrack_print ht.zst
    timed ms_run "$MEMSCOPE" run -q --call-stack=c:32 -o "$work/x.db" -- "${prog[@]}"
    timed ms_leaks "$MEMSCOPE" analyze leaks x.db
    timed ms_all "$MEMSCOPE" analyze all x.db
    if [ "$full" = 1 ]; then
        timed ms_frun "$MEMSCOPE" run -q --call-stack=c:32 --format=db -o "$work/f.db" -- \
            "${prog[@]}"
        timed ms_fleaks "$MEMSCOPE" analyze leaks f.db
    fi
done

sum_times() { paste -d' ' "$1" "$2" | awk '{printf "%.4f\n", $1 + $3}'; }
sum_times ht_rec.times ht_print.times >ht_path.times
sum_times ms_run.times ms_leaks.times >ms_path.times
[ "$full" = 0 ] || sum_times ms_frun.times ms_fleaks.times >ms_fpath.times
# ratio_median A.times B.times: the median over the rounds of A's time / B's time.
ratio_median() {
    paste -d' ' <(cut -d' ' -f1 "$1") <(cut -d' ' -f1 "$2") |
        awk '{printf "%.4f\n", ($2 > 0 ? $1 / $2 : 0)}' >ratio.tmp
    awk -v v="$(median ratio.tmp)" 'BEGIN {printf "%.2f", v}'
}
f() { awk -v a="$1" 'BEGIN {printf "%.3f", a}'; }
per() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

events=$(sqlite3 x.db "SELECT value FROM meta WHERE key = 'event_count'")
x_bytes=$(stat -c %s x.db)
ht_bytes=$(stat -c %s ht.zst)
ht_allocs=$(sed -n 's/^[[:space:]]*allocations:[[:space:]]*\([0-9]*\).*/\1/p' ht_rec.log | tail -1)
ht_leaked=$(sed -n 's/^[[:space:]]*leaked allocations:[[:space:]]*\([0-9]*\).*/\1/p' ht_rec.log |
    tail -1)
ht_events=$((2 * ht_allocs - ht_leaked))
hp=$(median ht_path.times) mp=$(median ms_path.times)
hpr=$(median ht_print.times) ma=$(median ms_all.times)
cat <<EOT
Workload: \`churn $ops $threads\` ($(bench_machine), $rounds rounds, medians).
memscope: \`$("$MEMSCOPE" --version)\` (tree $(git -C "$root" describe --always --dirty)); heaptrack: \`$(heaptrack --version 2>&1 | head -1)\`.

| path | heaptrack s | memscope s | memscope / heaptrack (ratio of medians) | (median of per-round ratios) |
|---|---:|---:|---:|---:|
| record, then the leak report | $(f "$hp") | $(f "$mp") | $(r "$mp" "$hp") | $(ratio_median ms_path.times ht_path.times) |
| every analysis (\`heaptrack_print\` / \`memscope analyze all\`) | $(f "$hpr") | $(f "$ma") | $(r "$ma" "$hpr") | $(ratio_median ms_all.times ht_print.times) |
| recording (\`heaptrack\` / \`memscope run\`, conversion included) | $(f "$(median ht_rec.times)") | $(f "$(median ms_run.times)") | $(r "$(median ms_run.times)" "$(median ht_rec.times)") | $(ratio_median ms_run.times ht_rec.times) |
| the leak report alone | $(f "$hpr") | $(f "$(median ms_leaks.times)") | $(r "$(median ms_leaks.times)" "$hpr") | |
EOT
if [ "$full" = 1 ]; then
    fp=$(median ms_fpath.times)
    cat <<EOT
| record, then the leak report, full database (\`--format=db\`) | $(f "$hp") | $(f "$fp") | $(r "$fp" "$hp") | $(ratio_median ms_fpath.times ht_path.times) |
EOT
fi
cat <<EOT

| output | bytes | events | bytes / event |
|---|---:|---:|---:|
| memscope default output (compact database) | $x_bytes | $events | $(per "$x_bytes" "$events") |
| heaptrack \`.zst\` | $ht_bytes | $ht_events | $(per "$ht_bytes" "$ht_events") |
EOT
[ "$full" = 0 ] || echo "| memscope full database (\`--format=db\`) | $(stat -c %s f.db) | $events | $(per "$(stat -c %s f.db)" "$events") |"
cat <<EOT

Peak RSS (median, MB): memscope run $(awk -v k="$(median ms_run.times 2)" 'BEGIN {printf "%.0f", k / 1024}') (the conversion; the program itself is small), analyze all $(awk -v k="$(median ms_all.times 2)" 'BEGIN {printf "%.0f", k / 1024}'); heaptrack_print $(awk -v k="$(median ht_print.times 2)" 'BEGIN {printf "%.0f", k / 1024}').
All raw wall times (s): heaptrack $(cut -d' ' -f1 ht_rec.times | tr '\n' ' ')/ heaptrack_print $(cut -d' ' -f1 ht_print.times | tr '\n' ' ')/ memscope run $(cut -d' ' -f1 ms_run.times | tr '\n' ' ')/ leaks $(cut -d' ' -f1 ms_leaks.times | tr '\n' ' ')/ all $(cut -d' ' -f1 ms_all.times | tr '\n' ' ')
EOT
