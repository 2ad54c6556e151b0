# shellcheck shell=bash
# lib.sh: helpers shared by the benchmark scripts (sourced, not run). A script sets BENCH to its
# own name first, for messages.

# bench_die MESSAGE: one line on stderr, exit 1.
bench_die() {
    echo "$BENCH: $*" >&2
    exit 1
}

# bench_workdir KEEP: makes a work directory in $work, removed on exit unless KEEP is 1.
bench_workdir() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/memscope-bench.XXXXXX")
    if [ "$1" = 1 ]; then
        echo "work directory: $work" >&2
    else
        trap 'rm -rf "$work"' EXIT
    fi
}

# bench_timed NAME CMD...: runs CMD (stdout and stderr to NAME.log) and appends its wall seconds
# to NAME.times; a failing CMD ends the benchmark.
bench_timed() {
    local name=$1 t0 t1
    shift
    t0=$EPOCHREALTIME
    if ! "$@" >"$name.log" 2>&1; then
        echo "$BENCH: $name failed: $*" >&2
        tail -5 "$name.log" >&2
        exit 1
    fi
    t1=$EPOCHREALTIME
    echo "$t0 $t1" | awk '{printf "%.4f\n", $2 - $1}' >>"$name.times"
}

# median FILE [COLUMN]: the median of a column (default 1) of space-separated numbers.
median() {
    cut -d' ' -f"${2:-1}" "$1" | sort -g |
        awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# r A B: A / B with two decimals.
r() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
