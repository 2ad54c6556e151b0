#!/bin/bash
# train_ops.sh: op events and tensor accesses (issue 4, PyTorch part) on
# ../shared/bench/train_cpu.py.
#
#   bench/train_ops.sh [-r ROUNDS] [-s STEPS] [-k]
#
# Runs, alternating within each round (default 5 rounds, 20 training steps):
#   plain     python3 train_cpu.py STEPS
#   torch-off python3 -m memscope.torch train_cpu.py STEPS           (the wrapper, nothing on)
#   ms        memscope run --call-stack=python:32 --format=trace --no-pack -o DIR -- python3 -m memscope.torch ...
#   ms-ops    the same with MEMSCOPE_EVENTS=alloc,free,access: every ATen op as a range and
#             its tensors' accesses (memscope.torch's dispatch mode, docs/torch.md)
#   ms-ops-db ms-ops writing the database
# and prints a Markdown table of medians and ratios: the whole command's wall time and the
# training loop's own seconds (the script's last line). PYTHONMALLOC is left at its default.
# MEMSCOPE picks the binary (default: build/memscope); its Python package must be next to it.
# -k keeps the work directory.
set -euo pipefail
BENCH=train_ops.sh
. "$(dirname "$0")/lib.sh"

rounds=5 steps=20 keep=0
bench_options "[-r ROUNDS] [-s STEPS] [-k]" "r:s:k" "$@"
bench_memscope python
prog=$root/../shared/bench/train_cpu.py
pkg=$(dirname "$MEMSCOPE")/python
py=/usr/bin/python3
"$py" -c 'import torch' 2>/dev/null || { echo "train_ops.sh: $py has no torch (python3-torch)" >&2; exit 1; }

bench_workdir "$keep"
cd "$work"

timed() { # NAME CMD...: bench_timed, plus the loop seconds printed to NAME.loop
    bench_timed "$@"
    sed -n 's/^train_cpu loop seconds \([0-9.]*\)$/\1/p' "$1.log" | tail -1 >>"$1.loop"
}

ms=("$MEMSCOPE" run -q --format=db --call-stack=python:32)
for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf tr1 tr2 x.db
    timed plain "$py" "$prog" "$steps"
    timed torch_off env PYTHONPATH="$pkg" "$py" -m memscope.torch "$prog" "$steps"
    timed ms "${ms[@]}" --format=trace --no-pack -o "$work/tr1" -- "$py" -m memscope.torch "$prog" "$steps"
    timed ms_ops env MEMSCOPE_EVENTS=alloc,free,access "${ms[@]}" --format=trace --no-pack -o "$work/tr2" -- "$py" -m memscope.torch "$prog" "$steps"
    timed ms_ops_db env MEMSCOPE_EVENTS=alloc,free,access "${ms[@]}" -o "$work/x.db" -- "$py" -m memscope.torch "$prog" "$steps"
done
ops=$(sqlite3 x.db 'SELECT count(*) FROM ranges')
acc=$(sqlite3 x.db 'SELECT count(*) FROM events WHERE kind = 8')
matched=$(sqlite3 x.db 'SELECT count(*) FROM events WHERE kind = 8 AND allocation_id IS NOT NULL')

f() { awk -v a="$1" 'BEGIN {printf "%.2f", a}'; }
row() { # label name
    local w l
    w=$(median "$2.times") l=$(median "$2.loop")
    echo "| $1 | $(f "$w") | $(r "$w" "$pw") | $(r "$w" "$mw") | $(f "$l") | $(r "$l" "$pl") | $(r "$l" "$ml") |"
}
pw=$(median plain.times) pl=$(median plain.loop) mw=$(median ms.times) ml=$(median ms.loop)
cat <<EOT
Workload: \`$py train_cpu.py $steps\` ($(bench_machine), $rounds rounds alternating, medians).
memscope: \`$("$MEMSCOPE" --version)\` (tree $(git -C "$root" describe --always --dirty)).

| run | wall s | x plain | x memscope | loop s | x plain | x memscope |
|---|---:|---:|---:|---:|---:|---:|
$(row plain plain)
$(row "\`python3 -m memscope.torch\` (nothing on)" torch_off)
$(row "memscope \`--call-stack=python:32\` (\`--format=trace --no-pack\`)" ms)
$(row "... + op ranges and accesses (\`MEMSCOPE_EVENTS=alloc,free,access\`)" ms_ops)
$(row "... + op ranges and accesses, + database" ms_ops_db)

The database of the ops run: $ops op ranges, $acc accesses ($matched matched to a block).
Raw wall s: plain $(tr '\n' ' ' <plain.times)/ torch-off $(tr '\n' ' ' <torch_off.times)/ ms $(tr '\n' ' ' <ms.times)/ ms-ops $(tr '\n' ' ' <ms_ops.times)/ ms-ops-db $(tr '\n' ' ' <ms_ops_db.times)
Raw loop s: plain $(tr '\n' ' ' <plain.loop)/ torch-off $(tr '\n' ' ' <torch_off.loop)/ ms $(tr '\n' ' ' <ms.loop)/ ms-ops $(tr '\n' ' ' <ms_ops.loop)/ ms-ops-db $(tr '\n' ' ' <ms_ops_db.loop)
EOT
