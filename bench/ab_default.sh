#!/bin/bash
# ab_default.sh: two memscope builds against each other with the default options, end to end
# (recording, then the conversion to the compact database: what a user waits for), on the
# workloads of issues 25 and 18, alternating within each round, beside the program alone.
#
#   bench/ab_default.sh [-r ROUNDS] [-k] OLD NEW
#
# OLD and NEW are memscope binaries, each with its libmemscope.so and Python package beside it
# (a build directory's memscope). Each round runs
#   cc1    cc1 -quiet -O2 gen.c (Debian's GCC, built without frame pointers; unwind.sh's file)
#          alone, then `memscope run -q -o X.db -- cc1 ...` with OLD, then with NEW
#   train  /usr/bin/python3 train_cpu.py 20 (../shared/bench; CPU PyTorch) the same way
# and prints medians, each against the program alone, and NEW / OLD. -k keeps the work dir.
set -euo pipefail
BENCH=ab_default.sh
. "$(dirname "$0")/lib.sh"

rounds=5 keep=0
usage="[-r ROUNDS] [-k] OLD NEW"
bench_options "$usage" "r:k" "$@"
shift $((OPTIND - 1))
[ $# -eq 2 ] || bench_die "usage: $0 $usage"
old=$(readlink -f "$1") new=$(readlink -f "$2")
for b in "$old" "$new"; do
    [ -x "$b" ] && [ -f "$(dirname "$b")/libmemscope.so" ] ||
        bench_die "$b: not a memscope binary with libmemscope.so beside it"
done
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
bench_require cc
CC1=$(cc -print-prog-name=cc1)
[ -x "$CC1" ] || bench_die "cc1 not found (cc -print-prog-name=cc1)"
py=/usr/bin/python3 prog=$root/../shared/bench/train_cpu.py
"$py" -c 'import torch' 2>/dev/null || bench_die "$py has no torch (python3-torch)"

bench_workdir "$keep"
cd "$work"
bench_gen_c gen.c
for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -f old.db new.db
    bench_timed cc1_plain "$CC1" -quiet -O2 gen.c -o plain.s
    bench_timed cc1_old "$old" run -q -o old.db -- "$CC1" -quiet -O2 gen.c -o old.s
    bench_timed cc1_new "$new" run -q -o new.db -- "$CC1" -quiet -O2 gen.c -o new.s
    rm -f old.db new.db
    bench_timed train_plain "$py" "$prog" 20
    bench_timed train_old "$old" run -q -o old.db -- "$py" "$prog" 20
    bench_timed train_new "$new" run -q -o new.db -- "$py" "$prog" 20
done
row() { # label workload
    local p o n
    p=$(median "$2_plain.times") o=$(median "$2_old.times") n=$(median "$2_new.times")
    echo "| $1 | $p | $o | $(r "$o" "$p") | $n | $(r "$n" "$p") | $(r "$n" "$o") |"
}
cat <<EOT
OLD: \`$old\`, NEW: \`$new\`; $(bench_machine), $rounds rounds alternating, medians (wall s).

| workload | alone | OLD | OLD / alone | NEW | NEW / alone | NEW / OLD |
|---|---:|---:|---:|---:|---:|---:|
$(row "cc1 -O2 of a generated file (about 8M allocations, DWARF stacks)" cc1)
$(row "train_cpu.py 20 (PyTorch CPU, Python stacks)" train)

Raw wall s: cc1 alone $(tr '\n' ' ' <cc1_plain.times)/ OLD $(tr '\n' ' ' <cc1_old.times)/ NEW $(tr '\n' ' ' <cc1_new.times)
/ train alone $(tr '\n' ' ' <train_plain.times)/ OLD $(tr '\n' ' ' <train_old.times)/ NEW $(tr '\n' ' ' <train_new.times)
EOT
