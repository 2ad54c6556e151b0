#!/bin/bash
# pytest_overhead.sh: the cost of memscope.pytest_plugin (docs/ci.md): bench/pytest_suite (200
# tests of ordinary Python work, no markers) run plain and with --memscope, alternately, RUNS
# times each (default 5); prints the wall time and the CPU time (user + system: steadier than
# the wall time on a loaded machine) of each session, then the medians and the minimums of the
# CPU times and their ratios. Usage: bench/pytest_overhead.sh [BUILD_DIR] [RUNS]
set -u
BUILD=${1:-build}
RUNS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$(cd "$BUILD" && pwd)/python PYTHONDONTWRITEBYTECODE=1
declare -A CPU
run() {
    local tf cpu
    tf=$(mktemp)
    /usr/bin/time -o "$tf" -f "%e %U %S" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" \
        "$HERE/pytest_suite" >/dev/null 2>&1
    set -- $(tail -1 "$tf")
    rm -f "$tf"
    cpu=$(echo "$2 + $3" | bc)
    CPU[$label]="${CPU[$label]:-} $cpu"
    printf '%-10s wall %5.2f s   cpu %5.2f s\n' "$label" "$1" "$cpu"
}
for i in $(seq "$RUNS"); do
    label=plain run -p no:memscope.pytest_plugin
    label=memscope run -p memscope.pytest_plugin --memscope
done
stat() { # median and minimum of the numbers in $1
    echo $1 | tr ' ' '\n' | sort -n | awk '{v[NR]=$1} END {printf "%.2f %.2f", \
        (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2), v[1]}'
}
read -r pm pn <<<"$(stat "${CPU[plain]}")"
read -r mm mn <<<"$(stat "${CPU[memscope]}")"
printf 'cpu median: plain %.2f s, memscope %.2f s: %.2fx;  minimum: %.2f s, %.2f s: %.2fx\n' \
    "$pm" "$mm" "$(echo "$mm / $pm" | bc -l)" "$pn" "$mn" "$(echo "$mn / $pn" | bc -l)"
