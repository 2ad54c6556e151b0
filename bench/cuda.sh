#!/bin/bash
# cuda.sh: the cost of memscope's CUDA hooks per driver call, against memscope's TEST DRIVER
# (tests/cuda/ms_test_libcuda.c: a stand-in libcuda.so.1 that runs nothing, so the time is the
# driver's bookkeeping plus memscope's). tests/cuda/cuda_bench times N calls of one kind inside
# the program (startup and conversion excluded) through dlsym'ed entry points, as cudart reaches
# the driver:
#   launch: N cuLaunchKernel; plain, under memscope with --events=launch (recorded) and without
#           (not recorded: the entry point handed out is the driver's own, so the cost must be 0)
#   alloc:  N cuMemAlloc + cuMemFree pairs of 4 KiB; plain and under memscope (default options)
# Rounds alternate the runs; it prints medians of ns per call (or pair) and memscope's added ns.
# Usage: bench/cuda.sh [-r ROUNDS] [-n CALLS]     (default 5 rounds of 1000000)
# No GPU tool runs side by side here (Nsight and CUPTI need a GPU): on a lent GPU,
# bench/gpu-verify.sh measures against the real driver.
set -eu
BENCH=cuda.sh
. "$(dirname "$0")/lib.sh"
rounds=5 ops=1000000
bench_options "[-r ROUNDS] [-n CALLS]" "r:n:" "$@"
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
MEMSCOPE=${MEMSCOPE:-$build/memscope}
prog=$build/tests/cuda/cuda_bench
drv=$build/tests/cuda/cuda-test-driver
[ -x "$MEMSCOPE" ] && [ -x "$prog" ] || bench_die "build first: make (needs $prog)"
bench_workdir 0
cd "$work"
run() { # NAME [memscope options...]: one timed run, its ns per call appended to NAME.ns
    local name=$1
    shift
    if [ "${1:-}" = plain ]; then
        LD_LIBRARY_PATH=$drv "$prog" "$2" "$ops" >>"$name.ns"
    else
        LD_LIBRARY_PATH=$drv "$MEMSCOPE" run -q "$@" -o "$work/x.db" -- "$prog" "${name%%_*}" "$ops" \
            >>"$name.ns" 2>/dev/null
        rm -f "$work/x.db"
    fi
}
for ((i = 0; i < rounds; i++)); do
    run launch_plain plain launch
    run launch_rec --events=alloc,free,launch
    run launch_off
    run alloc_plain plain alloc
    run alloc_rec
done
m() { median "$1.ns"; }
d() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", a - b}'; }
echo "| calls ($ops, $rounds rounds, medians) | plain ns | memscope ns | added ns |"
echo "|---|---:|---:|---:|"
echo "| cuLaunchKernel, --events=launch | $(m launch_plain) | $(m launch_rec) | $(d "$(m launch_rec)" "$(m launch_plain)") |"
echo "| cuLaunchKernel, launches not recorded | $(m launch_plain) | $(m launch_off) | $(d "$(m launch_off)" "$(m launch_plain)") |"
echo "| cuMemAlloc + cuMemFree pair | $(m alloc_plain) | $(m alloc_rec) | $(d "$(m alloc_rec)" "$(m alloc_plain)") |"
