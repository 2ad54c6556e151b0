#!/bin/bash
# view_cpu.sh: the viewer server's CPU time to load a run and to answer its heavy queries
# (issue 45). CPU seconds (utime + stime from /proc/PID/stat) move less with the machine's load
# than wall times do.
#
#   bench/view_cpu.sh RUN.db [REPS]      # MEMSCOPE=path/to/memscope to measure another build
#
# Prints the CPU to load (start to the URL printed), then per query the mean CPU of REPS
# (default 20) requests: the series of the whole run (4000 buckets), /api/window over the
# middle 40% (series and the 2000 largest blocks), /api/at at the middle, /api/blocks of the
# whole run, the flame graph of everything allocated; then the server's peak RSS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MEMSCOPE=${MEMSCOPE:-$root/build/memscope}
DB=${1:?usage: bench/view_cpu.sh RUN.db [REPS]}
REPS=${2:-20}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$MEMSCOPE" view "$DB" --port 0 >"$out" 2>&1 &
pid=$!
url=""
while [ -z "$url" ]; do
    kill -0 $pid 2>/dev/null || { cat "$out" >&2; exit 1; }
    url=$(grep -o 'http://[^ ]*' "$out" || true)
    [ -n "$url" ] || sleep 0.05
done
cpu() { awk '{print ($14 + $15) / 100}' /proc/$pid/stat; }
base=${url%%/?token=*} tok=${url##*token=}
echo "load: $(cpu) s"
end=$(curl -s "$base/api/summary?token=$tok" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["t1"])')
q() {
    local c0
    c0=$(cpu)
    for _ in $(seq "$REPS"); do curl -s -o /dev/null "$base$1&token=$tok"; done
    echo "$2: $(echo "$(cpu) $c0" | awk -v n="$REPS" '{printf "%.0f", ($1 - $2) / n * 1000}') ms"
}
a=$((end * 3 / 10)) b=$((end * 7 / 10)) m=$((end / 2))
q "/api/series?t0=0&t1=$end&n=4000" "series, whole run"
q "/api/window?t0=$a&t1=$b&n=4000&limit=2000&sites=map" "window, middle 40%"
q "/api/at?t=$m&limit=100&mode=live" "at, middle"
q "/api/blocks?t0=0&t1=$end&limit=100&sort=size" "blocks, whole run"
q "/api/flame?mode=alloc" "flame of everything allocated"
echo "peak RSS: $(awk '/VmHWM/ {print $2 / 1024}' /proc/$pid/status) MiB"
kill -INT $pid
wait $pid || true
