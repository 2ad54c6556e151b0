#!/bin/bash
# export.sh: `memscope export --format=pprof|collapsed|speedscope|perfetto` on large runs, beside
# converting the same run (issue 41, section 3). Per workload: the run recorded as traces
# (`memscope run --format=trace`), converted (`memscope import`: the compact database, the
# default output), then each format exported from that database (a replay of its packed
# traces: every event read again). Wall seconds and maximum RSS (GNU time) of each, one run
# each; the exports' memory is bounded by the distinct stacks and the blocks live at once.
#   churn      ../shared/bench/churn.c OPS 2 and 5*OPS 2 (few stacks, many events: the
#              exports' memory stays the same for five times the events)
#   clang      clang++ -O1 -c bench/real/templ.cpp (Debian's clang: millions of allocations,
#              tens of thousands of distinct stacks)
# Usage: bench/export.sh [-n OPS] [-k]
set -eu
BENCH=export.sh
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
ops=2000000 keep=0 rounds=1 threads=2
bench_options "[-n OPS] [-k]" "n:k" "$@"
bench_memscope
bench_require sqlite3 cc clang++ /usr/bin/time
bench_workdir "$keep"
cc -O2 -g -pthread "$root/../shared/bench/churn.c" -o "$work/churn"
cd "$work"

# timed CMD...: "seconds max-RSS-MB" of CMD (which must succeed)
timed() {
    /usr/bin/time -f '%e %M' -o time.out "$@" >/dev/null 2>cmd.err ||
        bench_die "failed: $* ($(tail -2 cmd.err))"
    awk '{printf "%.2f s, %.0f MB", $1, $2 / 1024}' time.out
}

row() {
    local name=$1 conv ev stacks f cells=""
    shift
    rm -rf tr x.db out.*
    "$MEMSCOPE" run -q --format=trace -o tr -- "$@" >/dev/null 2>&1 </dev/null || true
    conv=$(timed "$MEMSCOPE" import tr -o x.db)
    ev=$(sqlite3 x.db "SELECT value FROM meta WHERE key = 'event_count'")
    stacks=$(sqlite3 x.db "SELECT count(*) FROM stacks")
    for f in pprof collapsed speedscope perfetto; do
        cells="$cells | $(timed "$MEMSCOPE" export x.db --format=$f -o out.$f), $(
            stat -c %s out.$f | awk '{printf "%.1f MB", $1 / 1048576}')"
    done
    printf '| %s | %s | %s | %s%s |\n' "$name" "$ev" "$stacks" "$conv" "$cells"
}

cat <<HEAD
Workloads on $(bench_machine); one run each.

| workload | events | stacks | convert (import) | pprof | collapsed | speedscope | perfetto |
|---|---|---|---|---|---|---|---|
HEAD
row "churn $ops 2" ./churn "$ops" 2
row "churn $((ops * 5)) 2" ./churn $((ops * 5)) 2
row "clang++ -O1 -c templ.cpp" clang++ -O1 -c "$root/bench/real/templ.cpp" -o templ.o
