#!/bin/bash
# view.sh: `memscope view` on a large run (issue 15, "Speed").
#
#   bench/view.sh [-n OPS_PER_THREAD] [-t THREADS] [-r ROUNDS] [-k]
#
# Records ../shared/bench/churn.c (default 2500000 2: about 10 million events) into the default
# database, then in each round (default 3) starts `memscope view` on it and measures: the
# server's start (process start to the URL printed: the model loaded), its peak RSS (VmHWM)
# after the browser is done, and in Debian's chromium (bench/view.mjs) the first view (ms from
# navigation start until every view is drawn) and the zoom, pan and cursor redraws (the page's own
# measures: request, answer, redraw); then `memscope report` on it (wall, peak RSS, file size).
# Prints a Markdown table of medians.
set -euo pipefail
BENCH=view
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
OPS=2500000 THREADS=2 ROUNDS=3 KEEP=0
while getopts "n:t:r:k" o; do
    case $o in
    n) OPS=$OPTARG ;; t) THREADS=$OPTARG ;; r) ROUNDS=$OPTARG ;; k) KEEP=1 ;;
    *) bench_die "usage: bench/view.sh [-n OPS] [-t THREADS] [-r ROUNDS] [-k]" ;;
    esac
done
MEMSCOPE=${MEMSCOPE:-$root/build/memscope}
[ -x "$MEMSCOPE" ] || bench_die "no memscope at $MEMSCOPE (make first)"
[ -d "$root/web/node_modules/playwright-core" ] || bench_die "web/node_modules missing (scripts/setup-debian.sh)"
bench_workdir "$KEEP"
cd "$work"
cc -O2 -g -fno-omit-frame-pointer -pthread "$root/../shared/bench/churn.c" -o churn
"$MEMSCOPE" run -q -o run.db -- ./churn "$OPS" "$THREADS" >/dev/null
events=$(sqlite3 run.db "SELECT value FROM meta WHERE key = 'event_count'")
for r in $(seq "$ROUNDS"); do
    t0=$EPOCHREALTIME
    "$MEMSCOPE" view run.db --port 0 >view.out 2>view.err &
    pid=$!
    url=""
    while [ -z "$url" ]; do
        kill -0 $pid 2>/dev/null || bench_die "memscope view ended: $(cat view.err)"
        url=$(grep -o 'http://[^ ]*' view.out || true)
        [ -n "$url" ] || sleep 0.02
    done
    t1=$EPOCHREALTIME
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >>start.times
    WEB=$root/web node "$root/bench/view.mjs" "$url" 5 >>browser.jsonl
    awk '/VmHWM/ {print $2 / 1024}' /proc/$pid/status >>rss.times
    kill -INT $pid
    wait $pid
done
for r in $(seq "$ROUNDS"); do
    rm -f run.html
    /usr/bin/time -f '%e %M' -o report.time "$MEMSCOPE" report run.db -o run.html 2>report.err
    cut -d' ' -f1 report.time >>report.times
    awk '{print $2 / 1024}' report.time >>report_rss.times
    stat -c %s run.html | awk '{print $1 / 1048576}' >>report_size.times
done
col() { /usr/bin/python3 -c 'import json,sys; print("\n".join(str(json.loads(l)[sys.argv[1]]) for l in open("browser.jsonl")))' "$1" >"$1.times"; }
for k in first_view_ms zoom_ms_median zoom_ms_max pan_ms_median pan_ms_max cursor_ms_median cursor_ms_max; do col $k; done
echo "Workload: churn $OPS $THREADS ($events events), $(nproc) CPUs, $ROUNDS rounds, medians."
echo
echo "| measure | value |"
echo "|---|---:|"
echo "| server start: model loaded, URL printed (s) | $(median start.times) |"
echo "| server peak RSS (MiB) | $(median rss.times) |"
echo "| first view in the browser (ms from navigation start) | $(median first_view_ms.times) |"
echo "| zoom redraw, median / max of 5 (ms) | $(median zoom_ms_median.times) / $(median zoom_ms_max.times) |"
echo "| pan redraw (right arrow: half a window), median / max of 5 (ms) | $(median pan_ms_median.times) / $(median pan_ms_max.times) |"
echo "| cursor move redraw, median / max of 5 (ms) | $(median cursor_ms_median.times) / $(median cursor_ms_max.times) |"
echo "| memscope report: wall (s), peak RSS (MiB), file (MiB) | $(median report.times) / $(median report_rss.times) / $(median report_size.times) |"
