#!/bin/bash
# train_peak.sh: the heap peak of ../shared/bench/train_cpu.py under memscope's
# defaults (Python stacks) against heaptrack's and the plain run's (issue 47, section 5: memory
# that memscope itself keeps alive, or allocates, must not show as the program's).
#
#   bench/train_peak.sh [-s STEPS] [-k]
#
# Runs once each (the figures are counts, not times): heaptrack (its "peak heap memory
# consumption") and `memscope run -o X.db` (the heap layer's peak of `memscope analyze peak
# --json`). PYTHONMALLOC is left at its default (pymalloc),
# as users run. MEMSCOPE picks the binary (default: build/, build-py/, build-tests/), TRAIN_CPU
# the script (default: ../shared/bench/train_cpu.py beside the repository).
set -euo pipefail
BENCH=train_peak.sh
. "$(dirname "$0")/lib.sh"

steps=20 keep=0 rounds=1
bench_options "[-s STEPS] [-k]" "r:s:k" "$@"
bench_memscope python
bench_require heaptrack
prog=${TRAIN_CPU:-$root/../shared/bench/train_cpu.py}
[ -f "$prog" ] || bench_die "no $prog (set TRAIN_CPU)"
py=/usr/bin/python3
bench_workdir "$keep"
cd "$work"

# rss FILE CMD...: runs CMD, prints its max RSS in KiB; ends the benchmark when CMD fails.
run() { # NAME CMD...: runs CMD; ends the benchmark when it fails
    "${@:2}" >"$1.log" 2>&1 || bench_die "failed: ${*:2} (see $work/$1.log)"
}
run heaptrack heaptrack -o "$work/hto" "$py" "$prog" "$steps"
ht_peak=$(heaptrack_print "$work"/hto.* 2>/dev/null | sed -n 's/^peak heap memory consumption: //p')
run memscope "$MEMSCOPE" run -q -o "$work/x.db" -- "$py" "$prog" "$steps"
ms_peak=$("$MEMSCOPE" analyze peak "$work/x.db" --json |
    "$py" -c 'import json, sys
d = json.load(sys.stdin)
print(max(p["peak_bytes"] for p in d["peaks"] if p["layer"] == "heap"))')
echo "heaptrack: peak heap memory consumption $ht_peak"
echo "memscope:  heap layer peak $ms_peak B ($(awk -v b="$ms_peak" 'BEGIN {printf "%.2f", b / 1048576}') MiB)"
