#!/bin/bash
# monitor_cost.sh: what the live monitor's exporter costs (docs/monitor.md; issue 39: <= 50 MB
# RSS and <= 0.5% of a core at 1 s scrapes with 8 traced processes).
#
#   bench/monitor_cost.sh [-p PROCS] [-e EVENTS_PER_S] [-s SECONDS] [-k]
#
# Runs PROCS (default 8) processes of a steady workload (each EVENTS_PER_S allocations and frees a
# second, default 20000, for SECONDS, default 20, holding about 8 MiB live) under one memscope run,
# recording only (--format=trace --no-pack: no conversion after), twice: without the monitor and
# with --metrics, scraped by curl once a second. Prints memscope's own peak RSS (VmHWM, read just
# before the program ends) for both, and the monitor thread's CPU (its debug line "live monitor:
# N ticks, N scrapes, X ms of CPU") as a share of one core over the run.
set -euo pipefail
BENCH=monitor_cost.sh
. "$(dirname "$0")/lib.sh"

procs=8 rate=20000 secs=20 keep=0
while getopts "p:e:s:k" o; do
    case $o in
    p) procs=$OPTARG ;;
    e) rate=$OPTARG ;;
    s) secs=$OPTARG ;;
    k) keep=1 ;;
    *) echo "usage: $0 [-p PROCS] [-e EVENTS_PER_S] [-s SECONDS] [-k]" >&2; exit 2 ;;
    esac
done
bench_memscope
bench_require curl cc
bench_workdir "$keep"
cd "$work"
cat >steady.c <<'C'
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* steady RATE SECONDS: RATE/2 malloc+free pairs a second in 100 batches, 1024 blocks kept. */
int main(int argc, char **argv)
{
    long rate = atol(argv[1]) / 2, secs = atol(argv[2]);
    void *keep[1024] = {0};
    unsigned x = 1;
    for (long t = 0; t < secs * 100; t++) {
        for (long i = 0; i < rate / 100; i++) {
            x = x * 1103515245 + 12345;
            unsigned k = (x >> 8) % 1024;
            free(keep[k]);
            keep[k] = malloc(16 + (x >> 20) % 16384);
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
C
cc -O2 -g steady.c -o steady
# job.sh: PROCS workers, and memscope's VmHWM written just before they end
cat >job.sh <<SH
#!/bin/sh
for i in \$(seq $procs); do ./steady $rate $secs & done
sleep $((secs - 1))
grep VmHWM /proc/\$PPID/status >"\$1"
wait
SH
chmod +x job.sh
run() { # run NAME [memscope options]
    local name=$1
    shift
    "$MEMSCOPE" run --log-level=debug --format=trace --no-pack -o "$name" "$@" -- ./job.sh "$name.hwm" \
        >"$name.log" 2>&1 &
    local pid=$!
    if [ "$name" = on ]; then
        local addr=""
        for _ in $(seq 100); do
            addr=$(grep -o 'http://[^/]*/metrics' on.log | head -1 || true)
            [ -n "$addr" ] && break
            sleep 0.1
        done
        while kill -0 "$pid" 2>/dev/null; do
            curl -sf "$addr" >scrape.txt || true
            sleep 1
        done
    fi
    wait "$pid"
}
run off
run on --metrics=127.0.0.1:0
cpu=$(sed -n 's/.*live monitor: \([0-9]*\) ticks, \([0-9]*\) scrapes, \([0-9.]*\) ms of CPU.*/\3/p' on.log)
ticks=$(sed -n 's/.*live monitor: \([0-9]*\) ticks, \([0-9]*\) scrapes.*/\1 \2/p' on.log)
echo "Workload: $procs processes x $rate events/s for $secs s; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "memscope: $("$MEMSCOPE" --version | head -1)"
echo "| run | memscope VmHWM |"
echo "|---|---:|"
echo "| without the monitor | $(awk '{print $2, $3}' off.hwm) |"
echo "| --metrics, scraped every 1 s | $(awk '{print $2, $3}' on.hwm) |"
echo "monitor thread: $cpu ms of CPU over $secs s = $(awk -v c="$cpu" -v s="$secs" 'BEGIN {printf "%.2f", c / 10 / s}')% of one core (ticks, scrapes: $ticks)"
echo "series in the last scrape: $(grep -vc '^#' scrape.txt)"
