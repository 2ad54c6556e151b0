#!/bin/bash
# ab.sh: two memscope builds against each other on churn.sh's workload, alternating, so that a
# change's effect is measured under the same machine conditions (this machine's speed drifts by
# 20% or more over minutes; alternating cancels that out of the comparison).
#
#   bench/ab.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-x OLD_ARGS] [-y NEW_ARGS] [-k] OLD NEW
#
# OLD and NEW are memscope binaries (each with its libmemscope.so beside it: a build directory's
# memscope, or a copy of both files). Each round runs, for OLD then NEW:
#   trace  memscope run -q --call-stack=c:32 --format=trace -o DIR -- ./churn OPS THREADS
#          (recording + packing)
#   raw    the same with --no-pack (recording only)
#   db     memscope run -q --call-stack=c:32 -o DIR -- ./churn OPS THREADS
#          (the default output: recording, then the conversion to the compact database, which
#          decodes the trace and matches every block: what a user waits for before an answer)
# and prints medians of wall, user and system seconds (GNU time), and NEW / OLD. -x and -y add
# options to OLD's and NEW's runs (split at spaces): one build against itself with two settings,
# e.g. `bench/ab.sh -x --unwind=fp build/memscope build/memscope`.
set -euo pipefail
BENCH=ab.sh
. "$(dirname "$0")/lib.sh"

rounds=9 ops=2000000 threads=2 keep=0 xargs_old="" xargs_new=""
usage="[-r ROUNDS] [-n OPS_PER_THREAD] [-t THREADS] [-x OLD_ARGS] [-y NEW_ARGS] [-k] OLD NEW"
bench_options "$usage" "r:n:t:x:y:k" "$@"
shift $((OPTIND - 1))
[ $# -eq 2 ] || bench_die "usage: $0 $usage"
old=$(readlink -f "$1") new=$(readlink -f "$2")
for b in "$old" "$new"; do
    [ -x "$b" ] && [ -f "$(dirname "$b")/libmemscope.so" ] ||
        bench_die "$b: not a memscope binary with libmemscope.so beside it"
done
bench_require time
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)

bench_workdir "$keep"
cc -O2 -g -fno-omit-frame-pointer -pthread "$root/../shared/bench/churn.c" -o "$work/churn"
cd "$work"

# one NAME BINARY ARGS...: runs a traced churn, appends "wall user sys" to NAME.times (wall from
# the shell's clock; user and system from GNU time, in hundredths).
one() {
    local name=$1 bin=$2 t0 t1
    shift 2
    rm -rf out
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%U %S" -o cpu.1 \
        "$bin" run -q --call-stack=c:32 "$@" -o out -- ./churn "$ops" "$threads" >/dev/null
    t1=$EPOCHREALTIME
    echo "$t0 $t1 $(cat cpu.1)" | awk '{printf "%.4f %s %s\n", $2 - $1, $3, $4}' >>"$name.times"
}
for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    # shellcheck disable=SC2086 # the extra options are split at spaces on purpose
    {
        one trace_old "$old" $xargs_old --format=trace
        one trace_new "$new" $xargs_new --format=trace
        one raw_old "$old" $xargs_old --format=trace --no-pack
        one raw_new "$new" $xargs_new --format=trace --no-pack
        one db_old "$old" $xargs_old
        one db_new "$new" $xargs_new
    }
done

echo "Workload: \`churn $ops $threads\` ($(bench_machine), $rounds alternating rounds, medians)."
echo "OLD: $old $xargs_old"
echo "NEW: $new $xargs_new"
echo
echo "| run | OLD wall s | NEW wall s | NEW / OLD | OLD user+sys s | NEW user+sys s | NEW / OLD |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for run in trace raw db; do
    for v in old new; do
        awk '{print $2 + $3}' "${run}_$v.times" >"${run}_$v.cpu"
    done
    wo=$(median "${run}_old.times" 1) wn=$(median "${run}_new.times" 1)
    co=$(median "${run}_old.cpu") cn=$(median "${run}_new.cpu")
    label="recording + packing (\`--format=trace\`)"
    [ "$run" = raw ] && label="recording only (\`--no-pack\`)"
    [ "$run" = db ] && label="default output (compact database)"
    echo "| $label | $wo | $wn | $(r "$wn" "$wo") | $co | $cn | $(r "$cn" "$co") |"
done
