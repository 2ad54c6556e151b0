#!/bin/sh
# run_bench.sh MEMSCOPE FILE [ROUNDS]: `memscope snapshot FILE --json` against Python's
# pickle.load of the same file, side by side: the two alternate for ROUNDS rounds (default 5),
# each under /usr/bin/time -v; prints the medians of wall time and peak RSS, the ratios, and
# the file size, as a Markdown table row set for bench/RESULTS.md.
set -eu
ms=$1
file=$2
rounds=${3:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
size=$(stat -c %s "$file")
i=1
while [ "$i" -le "$rounds" ]; do
    /usr/bin/time -v "$ms" snapshot "$file" --json >/dev/null 2>"$tmp/ms.$i"
    /usr/bin/time -v /usr/bin/python3 -c 'import pickle, sys; pickle.load(open(sys.argv[1], "rb"))' \
        "$file" 2>"$tmp/py.$i"
    i=$((i + 1))
done
# Wall time in seconds and max RSS in KiB from each /usr/bin/time -v report.
stats() {
    for f in "$tmp"/"$1".*; do
        awk '/Elapsed \(wall clock\)/ { n = split($NF, p, ":"); s = 0;
                 for (k = 1; k <= n; k++) s = s * 60 + p[k]; w = s }
             /Maximum resident set size/ { r = $NF }
             END { printf "%s %s\n", w, r }' "$f"
    done
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ms_t=$(stats ms | awk '{ print $1 }' | median)
ms_r=$(stats ms | awk '{ print $2 }' | median)
py_t=$(stats py | awk '{ print $1 }' | median)
py_r=$(stats py | awk '{ print $2 }' | median)
awk -v s="$size" -v mt="$ms_t" -v mr="$ms_r" -v pt="$py_t" -v pr="$py_r" -v n="$rounds" 'BEGIN {
    printf "| file size | %.1f MB (%d bytes) |\n", s / 1e6, s
    printf "| rounds (alternating) | %d |\n", n
    printf "| memscope snapshot --json: median wall | %.2f s |\n", mt
    printf "| python3 pickle.load: median wall | %.2f s |\n", pt
    printf "| speedup (python / memscope) | %.1fx |\n", pt / mt
    printf "| memscope peak RSS (median) | %.0f MB = %.2fx file size |\n", mr * 1024 / 1e6, mr * 1024 / s
    printf "| python peak RSS (median) | %.0f MB = %.2fx file size |\n", pr * 1024 / 1e6, pr * 1024 / s
}'
