#!/bin/bash
# storage.sh: the default output's size on real programs, side by side with heaptrack (issue 47,
# section 1). One run of each tool per workload (sizes do not vary between runs):
#   clang      clang++ -O1 -c bench/real/templ.cpp (Debian's clang: no debug info, no frame
#              pointers; its templates and <regex> make millions of allocations)
#   cc1        GCC's cc1 -quiet -O2 on the generated file of bench/unwind.sh
#   train      python3 ../shared/bench/train_cpu.py STEPS (PyTorch CPU training, DataLoader
#              workers): memscope's defaults (Python stacks) and --call-stack=c:32 (native)
#   churn      ../shared/bench/churn.c OPS 2
# Each: `heaptrack -o OUT CMD` (its .zst file) and `memscope run -q -o X.db -- CMD` (the
# default compact database): bytes, memscope's bytes per event (meta.event_count: allocations
# and frees), the ratio of the two files, and the database's largest tables (SQLite's dbstat). Usage: bench/storage.sh [-s STEPS] [-n OPS] [-k]
set -eu
BENCH=storage.sh
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
steps=10 ops=500000 keep=0 rounds=1 threads=2
bench_options "[-s STEPS] [-n OPS] [-k]" "s:n:k" "$@"
bench_memscope
bench_require heaptrack sqlite3 cc clang++
CC1=$(cc -print-prog-name=cc1)
PY=/usr/bin/python3
bench_workdir "$keep"
cc -O2 -g -pthread "$root/../shared/bench/churn.c" -o "$work/churn"
cd "$work"
bench_gen_c gen.c

# row NAME CMD...: one line of the table.
row() {
    local name=$1 ht hb mb ev tables
    shift
    rm -rf ht.* ms.db
    heaptrack -o ht "$@" >/dev/null 2>&1 </dev/null || true
    ht=$(ls ht.*) hb=$(stat -c %s "$ht")
    "$MEMSCOPE" run -q -o ms.db "${MSOPTS[@]}" -- "$@" >/dev/null 2>&1 </dev/null || true
    mb=$(stat -c %s ms.db)
    ev=$(sqlite3 ms.db "SELECT value FROM meta WHERE key = 'event_count'")
    tables=$(sqlite3 ms.db "SELECT group_concat(printf('%s %.1f', name, mb), ', ') FROM
        (SELECT name, sum(pgsize) / 1048576.0 AS mb FROM dbstat GROUP BY name ORDER BY 2 DESC
         LIMIT 4)")
    printf '| %s | %s | %.1f | %.2f | %.1f | %.2f | %s |\n' "$name" "$ev" "$(r "$mb" 1048576)" \
        "$(r "$mb" "$ev")" "$(r "$hb" 1048576)" "$(r "$mb" "$hb")" "$tables"
}

cat <<HEAD
Workloads on $(bench_machine); $(clang++ --version | head -1); train_cpu.py $steps steps.

| workload | events | memscope MB | B/event | heaptrack MB | memscope / heaptrack | largest tables (MB) |
|---|---|---|---|---|---|---|
HEAD
MSOPTS=()
row "clang++ -O1 -c templ.cpp" clang++ -O1 -c "$root/bench/real/templ.cpp" -o templ.o
row "cc1 -O2 gen.c" "$CC1" -quiet -O2 gen.c -o gen.s
row "train_cpu.py (defaults: Python stacks)" $PY "$root/../shared/bench/train_cpu.py" "$steps"
MSOPTS=(--call-stack=c:32)
row "train_cpu.py --call-stack=c:32" $PY "$root/../shared/bench/train_cpu.py" "$steps"
MSOPTS=()
row "churn $ops 2" ./churn "$ops" 2
