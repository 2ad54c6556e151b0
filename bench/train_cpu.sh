#!/bin/bash
# train_cpu.sh: Python stacks (issue 4, "Speed") on ../shared/bench/train_cpu.py.
#
#   bench/train_cpu.sh [-r ROUNDS] [-s STEPS] [-k]
#
# Runs, alternating within each round (default 5 rounds, 20 training steps):
#   plain      python3 train_cpu.py STEPS
#   heaptrack  heaptrack -o OUT python3 train_cpu.py STEPS
#   ms-py      memscope run --call-stack=python:32 --format=trace --no-pack -o DIR -- python3 ...
#   ms-def     memscope run -o X.db -- python3 ...          (the defaults, end to end: Python
#              stacks, the compact database; issue 18's target: <= 1.2x plain)
#   ms-py-db   memscope run --call-stack=python:32 --format=db -o X.db -- python3 ...
#              (+ the full database, msMemScope's memscope_dump)
#   ms-cpy     memscope run --call-stack=c:32,python:32 --format=trace --no-pack -o DIR -- python3 ...
# and prints a Markdown table of medians and ratios: the whole command's wall time, and the
# training loop's own seconds (the script's last line), which leaves out interpreter start,
# `import torch` and the conversion. PYTHONMALLOC is left at its default (pymalloc), as users
# run. MEMSCOPE picks the binary (default: build/, build-py/, build-tests/ under the root);
# the Python package is found by `memscope run` next to it. -k keeps the work directory.
set -euo pipefail
BENCH=train_cpu.sh
. "$(dirname "$0")/lib.sh"

rounds=5 steps=20 keep=0
bench_options "[-r ROUNDS] [-s STEPS] [-k]" "r:s:k" "$@"
bench_memscope python
bench_require heaptrack
prog=$root/../shared/bench/train_cpu.py
py=/usr/bin/python3
"$py" -c 'import torch' 2>/dev/null || { echo "train_cpu.sh: $py has no torch (python3-torch)" >&2; exit 1; }

bench_workdir "$keep"
cd "$work"

# timed NAME CMD...: bench_timed, plus the loop seconds the script printed to NAME.loop.
timed() {
    bench_timed "$@"
    sed -n 's/^train_cpu loop seconds \([0-9.]*\)$/\1/p' "$1.log" | tail -1 >>"$1.loop"
}

for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf ht* tr1 tr2 x.db d.db
    timed plain "$py" "$prog" "$steps"
    timed heaptrack heaptrack -o "$work/ht" "$py" "$prog" "$steps"
    timed ms_py "$MEMSCOPE" run -q --call-stack=python:32 --format=trace --no-pack -o "$work/tr1" -- "$py" "$prog" "$steps"
    timed ms_def "$MEMSCOPE" run -q -o "$work/d.db" -- "$py" "$prog" "$steps"
    rm -f d.db
    timed ms_py_db "$MEMSCOPE" run -q --call-stack=python:32 --format=db -o "$work/x.db" -- "$py" "$prog" "$steps"
    timed ms_cpy "$MEMSCOPE" run -q --call-stack=c:32,python:32 --format=trace --no-pack -o "$work/tr2" -- "$py" "$prog" "$steps"
done
events=$(sqlite3 x.db 'SELECT count(*) FROM events')
pystacks=$(sqlite3 x.db "SELECT count(*) FROM events e JOIN stacks s ON s.id = e.stack_id WHERE e.kind = 1 AND s.py_text <> ''")
mallocs=$(sqlite3 x.db 'SELECT count(*) FROM events WHERE kind = 1')

f() { awk -v a="$1" 'BEGIN {printf "%.2f", a}'; }
row() { # label name
    local w l
    w=$(median "$2.times") l=$(median "$2.loop")
    echo "| $1 | $(f "$w") | $(r "$w" "$pw") | $(r "$w" "$hw") | $(f "$l") | $(r "$l" "$pl") | $(r "$l" "$hl") |"
}
pw=$(median plain.times) hw=$(median heaptrack.times) pl=$(median plain.loop) hl=$(median heaptrack.loop)
cat <<EOT
Workload: \`$py train_cpu.py $steps\` ($(bench_machine), $rounds rounds alternating, medians).
memscope: \`$("$MEMSCOPE" --version)\` (tree $(git -C "$root" describe --always --dirty)); heaptrack: \`$(heaptrack --version 2>&1 | head -1)\`.

| run | wall s | x plain | x heaptrack | loop s | x plain | x heaptrack |
|---|---:|---:|---:|---:|---:|---:|
$(row plain plain)
$(row heaptrack heaptrack)
$(row "memscope \`--call-stack=python:32\`, recording (\`--format=trace --no-pack\`)" ms_py)
$(row "memscope, default options, run to its default output (compact database)" ms_def)
$(row "memscope \`--call-stack=python:32\`, recording + full database (\`--format=db\`)" ms_py_db)
$(row "memscope \`--call-stack=c:32,python:32\`, recording (\`--format=trace --no-pack\`)" ms_cpy)

The database of the python:32 run: $events events, $mallocs MALLOCs, $pystacks of them with a Python stack.
Raw wall s: plain $(tr '\n' ' ' <plain.times)/ heaptrack $(tr '\n' ' ' <heaptrack.times)/ ms-py $(tr '\n' ' ' <ms_py.times)/ ms-def $(tr '\n' ' ' <ms_def.times)/ ms-py-db $(tr '\n' ' ' <ms_py_db.times)/ ms-cpy $(tr '\n' ' ' <ms_cpy.times)
Raw loop s: plain $(tr '\n' ' ' <plain.loop)/ heaptrack $(tr '\n' ' ' <heaptrack.loop)/ ms-py $(tr '\n' ' ' <ms_py.loop)/ ms-def $(tr '\n' ' ' <ms_def.loop)/ ms-py-db $(tr '\n' ' ' <ms_py_db.loop)/ ms-cpy $(tr '\n' ' ' <ms_cpy.loop)
EOT
