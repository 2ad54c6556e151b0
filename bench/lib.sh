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
# to NAME.times; a failing CMD ends the benchmark. The files earlier runs wrote are flushed to
# disk first (sync, not timed): otherwise their writeback (hundreds of MB for a database) runs
# beside whichever command comes next and is counted in its time.
bench_timed() {
    local name=$1 t0 t1
    shift
    sync
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

# bench_options USAGE SPEC ARGS...: parses the options in SPEC (a getopts string of r: n: t: s:
# k w:) into rounds, ops, threads, steps, keep=1 and workload; anything else prints "usage: $0 USAGE", exit 2.
bench_options() {
    local usage=$1 spec=$2 o
    shift 2
    OPTIND=1
    while getopts "$spec" o; do
        case $o in
        r) rounds=$OPTARG ;;
        n) ops=$OPTARG ;;
        t) threads=$OPTARG ;;
        s) steps=$OPTARG ;;
        p) passes=$OPTARG ;;
        w) workload=$OPTARG ;;
        x) xargs_old=$OPTARG ;;
        y) xargs_new=$OPTARG ;;
        k) keep=1 ;;
        *) echo "usage: $0 $usage" >&2; exit 2 ;;
        esac
    done
}

# bench_memscope [python]: sets root (the repository) and MEMSCOPE (an absolute path): the
# given $MEMSCOPE, else the first memscope of build/, build-py/, build-tests/ under root; with
# `python`, one with its Python package (PyTorch layer included) beside it.
bench_memscope() {
    local need=${1:-} b
    root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
    if [ -z "${MEMSCOPE:-}" ]; then
        for b in "$root/build/memscope" "$root/build-py/memscope" "$root/build-tests/memscope"; do
            [ -x "$b" ] || continue
            [ -z "$need" ] || [ -d "$(dirname "$b")/python/memscope/torch" ] || continue
            MEMSCOPE=$b
            break
        done
    fi
    [ -n "${MEMSCOPE:-}" ] && MEMSCOPE=$(readlink -f "$MEMSCOPE")
    [ -x "${MEMSCOPE:-}" ] || bench_die "no memscope binary; build it or set MEMSCOPE"
    [ -z "$need" ] || [ -d "$(dirname "$MEMSCOPE")/python/memscope/torch" ] ||
        bench_die "no Python package beside $MEMSCOPE; build it or set MEMSCOPE"
}

# bench_require CMD...: ends the benchmark when one of the commands is not installed.
bench_require() {
    local c
    for c; do
        command -v "$c" >/dev/null || bench_die "$c is not installed"
    done
}

# bench_gen_c FILE: a C file for cc1 to compile (1500 structs and functions: about 8M
# allocations in Debian's GCC 12), the workload of unwind.sh and ab_default.sh.
bench_gen_c() {
    local i
    for i in $(seq 1500); do
        printf 'struct s%d { int a; double b; char c[%d]; };\n' "$i" $((i % 17 + 1))
        printf 'int f%d(int x, struct s%d *p) { int y = x * %d; for (int k = 0; k < x; k++) { y += k ^ %d; if (y > %d) y -= p->a; } p->b = y * 0.5; return y + (int)p->c[0]; }\n' "$i" "$i" "$i" "$i" $((i * 3))
    done >"$1"
    echo 'int main(void) { return 0; }' >>"$1"
}

# bench_machine: the machine, for the heading of a result: CPUs, model and clock rate,
# architecture, and the kernel's clocksource (with kvm-clock, as on VMs started with
# tsc=unstable, memscope's agent reads the time with clock_gettime at every event instead of
# the TSC: docs/ARCHITECTURE.md, the agent's clock). Figures of two machines differ by more
# than most changes measured here.
bench_machine() {
    local model mhz cs
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
    mhz=$(sed -n 's/^cpu MHz[[:space:]]*: \([0-9]*\).*/\1/p' /proc/cpuinfo | head -1)
    cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)
    echo "$(nproc) CPUs (${model:-unknown}${mhz:+, $mhz MHz}), $(uname -m), clocksource $cs"
}
