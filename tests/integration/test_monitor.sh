#!/bin/bash
# test_monitor.sh: the live monitor (docs/monitor.md): memscope run --metrics serves Prometheus
# metrics from the trace while the program runs (tests/progs/monitor_grow.c's known figures),
# memscope monitor --once reads a kept trace directory, the OOM warning of a program growing
# 10 MiB/s against a limit of 200 MiB, and bad input. Waits are loops with a cap, never timed
# expectations.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed"

# wait_for CMD...: runs CMD every 0.1 s until it succeeds (at most 30 s); status 1 if it never did
wait_for() {
    for _ in $(seq 300); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
port_of() { grep -o 'http://[^/]*/metrics' "$1" | head -1 | sed 's|http://||; s|/metrics||'; }
# metric FILE SERIES: the value of the line that starts with SERIES in a scrape
metric() { grep -F -- "$2 " "$1" | head -1 | awk '{print $NF}'; }

# 1. a run holding known blocks: its figures while it runs, with --rank
rm -f "$TMP/go"
"$MEMSCOPE" run --metrics=127.0.0.1:0 --rank=5 -o "$TMP/hold.db" -- \
    "$PROGS/monitor_grow" hold "$TMP/go" >"$TMP/hold.out" 2>"$TMP/hold.err" &
RUN=$!
wait_for grep -q 'serving metrics on' "$TMP/hold.err"
ADDR=$(port_of "$TMP/hold.err")
assert_match "the address served" '^127\.0\.0\.1:[0-9]+$' "$ADDR"
scrape_held() {
    curl -sf --max-time 10 "http://$ADDR/metrics" >"$TMP/s.txt" &&
        grep -q 'memscope_step{.*} 3$' "$TMP/s.txt" &&
        grep -q 'memscope_live_bytes{.*layer="heap".*} 3932160$' "$TMP/s.txt"
}
wait_for scrape_held
PID=$(grep -o 'memscope_step{pid="[0-9]*"' "$TMP/s.txt" | grep -o '[0-9]*')
L="pid=\"$PID\",rank=\"5\",host=\"$(hostname)\",Hostname=\"$(hostname)\""
assert_eq "live heap bytes" 3932160 "$(metric "$TMP/s.txt" "memscope_live_bytes{$L,layer=\"heap\",device=\"cpu\"}")"
assert_eq "peak heap bytes" 4194304 "$(metric "$TMP/s.txt" "memscope_peak_bytes{$L,layer=\"heap\",device=\"cpu\"}")"
assert_eq "allocations" 6 "$(metric "$TMP/s.txt" "memscope_allocations_total{$L,layer=\"heap\",device=\"cpu\"}")"
assert_eq "frees" 1 "$(metric "$TMP/s.txt" "memscope_frees_total{$L,layer=\"heap\",device=\"cpu\"}")"
assert_eq "steps" 3 "$(metric "$TMP/s.txt" "memscope_step{$L}")"
assert_eq "owner weight" 3145728 "$(metric "$TMP/s.txt" "memscope_owner_live_bytes{$L,owner=\"weight\"}")"
assert_eq "owner activation" 524288 "$(metric "$TMP/s.txt" "memscope_owner_live_bytes{$L,owner=\"activation\"}")"
assert_eq "owner other" 262144 "$(metric "$TMP/s.txt" "memscope_owner_live_bytes{$L,owner=\"other\"}")"
assert_eq "owner gradient" 0 "$(metric "$TMP/s.txt" "memscope_owner_live_bytes{$L,owner=\"gradient\"}")"
assert_eq "lag" 0 "$(metric "$TMP/s.txt" "memscope_trace_lag_events{$L}")"
assert_eq "rss kinds" "anon file shmem" \
    "$(grep -o 'memscope_rss_bytes{.*kind="[a-z]*"' "$TMP/s.txt" | grep -o 'kind="[a-z]*"' | tr -d '"' | sed 's/kind=//' | xargs)"
assert_eq "every series has a HELP and a TYPE" "" \
    "$(for m in $(grep -v '^#' "$TMP/s.txt" | sed 's/{.*//' | sort -u); do grep -q "^# TYPE $m " "$TMP/s.txt" || echo "$m"; done)"
assert_eq "content type" "text/plain; version=0.0.4; charset=utf-8" \
    "$(curl -sf --max-time 10 -o /dev/null -w '%{content_type}' "http://$ADDR/metrics")"
assert_eq "another path: 404" 404 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://$ADDR/")"
assert_eq "another method: 405" 405 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/metrics")"
# the port is taken while this run serves: a second run says so and runs nothing
ms busy run --metrics="$ADDR" -o "$TMP/busy.db" -- /usr/bin/touch "$TMP/ran"
assert_eq "port in use: status" 1 "$RC"
assert_match "port in use: message" "is in use" "$(cat "$TMP/busy.err")"
assert_eq "port in use: the program did not run" "no" "$([ -e "$TMP/ran" ] && echo yes || echo no)"
touch "$TMP/go"
wait "$RUN"
assert_eq "the held run's status" 0 "$?"

# 2. a kept raw trace directory, read afterwards by memscope monitor --once: the same figures
rm -f "$TMP/go2"
touch "$TMP/go2"
ms keep run --keep-trace --no-pack -o "$TMP/keep.db" -- "$PROGS/monitor_grow" hold "$TMP/go2"
TD=$(grep -o 'traces kept in [^ ;]*' "$TMP/keep.err" | sed 's/traces kept in //')
assert_eq "kept trace directory" yes "$([ -d "$TD" ] && echo yes)"
ms once monitor "$TD" --once --rank=2
assert_eq "monitor --once: status" 0 "$RC"
assert_match "monitor --once: live heap" 'memscope_live_bytes\{pid="[0-9]+",rank="2",.*layer="heap",device="cpu"\} 3932160$' "$(cat "$TMP/once.out")"
assert_match "monitor --once: allocations" 'memscope_allocations_total\{.*layer="heap".*\} 6$' "$(cat "$TMP/once.out")"
assert_match "monitor --once: owner weight" 'owner="weight"\} 3145728$' "$(cat "$TMP/once.out")"

# 3. the OOM warning: 10 MiB/s against 200 MiB; the ETA within 20% of the truth at the warning
ms grow run --limit=200MiB --warn-before=60 -o "$TMP/grow.db" -- "$PROGS/monitor_grow" grow 10 5
assert_eq "grow: status" 0 "$RC"
W=$(grep 'warning: process' "$TMP/grow.err")
assert_eq "grow: one warning line" 1 "$(grep -c 'warning: process' "$TMP/grow.err")"
assert_match "grow: the warning names the growing call site" 'most held by grow_here \(.*monitor_grow.c:[0-9]+\)' "$W"
LIVE=$(sed -n 's/.*(live \([0-9.]*\) MiB.*/\1/p' <<<"$W")
ETA=$(sed -n 's/.* in about \([0-9]*\) s[ ,].*/\1/p' <<<"$W")
assert_eq "grow: warned after at least 2 s of growth (live >= 20 MiB)" True \
    "$(python3 -c "print($LIVE >= 20)")"
assert_eq "grow: ETA $ETA s within 20% of (200 - $LIVE) / 10 s" True \
    "$(python3 -c "t=(200-$LIVE)/10; print(abs($ETA-t) <= 0.2*t)")"
STEP=$(sed -n 's/.*, at about step \([0-9]*\) .*/\1/p' <<<"$W")
# a step per MiB: 200 MiB is reached at step 200
assert_eq "grow: the step at the limit, $STEP, within 20% of 200" True \
    "$(python3 -c "print(abs(${STEP:-0} - 200) <= 40)")"
REPORT=$(sed -n 's/.*report: //p' <<<"$W")
assert_file "grow: report" "$REPORT"
assert_match "grow: report's first site" '1\. [0-9.]+ MiB by grow_here' "$(cat "$REPORT")"
assert_match "grow: report's limit" 'limit: 200.0 MiB \(--limit\)' "$(cat "$REPORT")"
assert_match "grow: the report's fastest-growing site" '1\. \+[0-9.]+ MiB/s by grow_here' "$(sed -n '/growing fastest/,$p' "$REPORT")"
# the program marks steps (10 a second): the fit is of each step's peak, not of seconds
assert_match "grow: the fit is of the steps' peaks" 'growth: 1\.0 MiB per step \(the peak of each of the last [0-9]+ steps' "$(cat "$REPORT")"

# 3b. a custom allocator's pool (memscope_pool_*): the report's reserved, allocated, free bytes,
# largest free block and fragmentation, by the fragmentation analysis's rule
ms poolkeep run --keep-trace --no-pack -o "$TMP/pool.db" -- "$PROGS/monitor_grow" pool
PD=$(grep -o 'traces kept in [^ ;]*' "$TMP/poolkeep.err" | sed 's/traces kept in //')
mkdir -p "$TMP/poolrep"
ms poolonce monitor "$PD" --once --limit=1KiB --report-dir "$TMP/poolrep"
assert_eq "pool: status" 0 "$RC"
assert_match "pool: the warning" 'has reached its limit of 1\.0 KiB' "$(cat "$TMP/poolonce.err")"
PREP=$(ls "$TMP"/poolrep/memscope-oom-warning-*.txt | head -1)
assert_match "pool: the report's pool line" \
    '^  P +reserved 4\.0 KiB \(4096 B\), allocated 1\.5 KiB \(1536 B\), free 2\.5 KiB \(2560 B\), largest free block 1\.5 KiB \(1536 B\), fragmentation 40\.0%$' \
    "$(cat "$PREP")"

# 4. a run started elsewhere (the torchrun recipe of docs/monitor.md): the agent in the
# environment of two workers with RANK=0 and 1, one memscope monitor following their directory
AGENT=$(dirname "$MEMSCOPE")/libmemscope.so
mkdir -p "$TMP/job"
"$MEMSCOPE" monitor "$TMP/job" --listen 127.0.0.1:0 --until-exit >"$TMP/mon.out" 2>"$TMP/mon.err" &
MON=$!
rm -f "$TMP/go3"
for r in 0 1; do
    RANK=$r MEMSCOPE_TRACE_DIR="$TMP/job" LD_PRELOAD="$AGENT" \
        "$PROGS/monitor_grow" holdn $((r + 2)) "$TMP/go3" &
done
wait_for grep -q 'serving metrics on' "$TMP/mon.err"
MADDR=$(port_of "$TMP/mon.err")
both_held() {
    curl -sf --max-time 10 "http://$MADDR/metrics" >"$TMP/m.txt" &&
        [ "$(grep -cE 'memscope_live_bytes\{.*layer="heap".*\} (2097152|3145728)$' "$TMP/m.txt")" -eq 2 ]
}
wait_for both_held
assert_eq "monitor: each rank's live heap bytes" $'0 2097152\n1 3145728' \
    "$(sed -n 's/^memscope_live_bytes{.*rank="\([0-9]*\)".*layer="heap".*} \([0-9]*\)$/\1 \2/p' "$TMP/m.txt" | sort)"
touch "$TMP/go3"
wait_for sh -c "! kill -0 $MON 2>/dev/null"
assert_eq "monitor --until-exit: ended after the workers (kill -0 fails)" 1 "$(kill -0 "$MON" 2>/dev/null; echo $?)"
if kill -0 "$MON" 2>/dev/null; then # never wait for ever: say what it said, then end it
    sed 's/^/  monitor: /' "$TMP/mon.err" | tail -20 >&2
    kill "$MON"
fi
wait "$MON"
assert_eq "monitor: status" 0 "$?"

# 5. bad input: clear messages, nothing run
ms badaddr run --metrics=127.0.0.1:99999 -o "$TMP/bad.db" -- /usr/bin/touch "$TMP/ran"
assert_eq "malformed address: status" 1 "$RC"
assert_match "malformed address: message" "malformed address '127.0.0.1:99999'" "$(cat "$TMP/badaddr.err")"
assert_eq "malformed address: the program did not run" "no" "$([ -e "$TMP/ran" ] && echo yes || echo no)"
ms badhost run --metrics=no-such-host.invalid:9400 -o "$TMP/bad.db" -- /usr/bin/touch "$TMP/ran"
assert_eq "unknown host: status" 1 "$RC"
assert_match "unknown host: message" "cannot resolve 'no-such-host.invalid'" "$(cat "$TMP/badhost.err")"
ms notlocal run --metrics=192.0.2.1:9400 -o "$TMP/bad.db" -- /usr/bin/touch "$TMP/ran"
assert_eq "an address not on this machine: status" 1 "$RC"
assert_match "an address not on this machine: message" "cannot listen on 192.0.2.1:9400: no such address on this machine" "$(cat "$TMP/notlocal.err")"
assert_eq "an address not on this machine: the program did not run" "no" "$([ -e "$TMP/ran" ] && echo yes || echo no)"
ms v6nobr run --metrics=::1:9400 -o "$TMP/bad.db" -- /usr/bin/touch "$TMP/ran"
assert_match "an IPv6 address without brackets: malformed" "malformed address '::1:9400'" "$(cat "$TMP/v6nobr.err")"
mkdir -p "$TMP/notrace"
echo hello >"$TMP/notrace/readme.txt"
ms notrace monitor "$TMP/notrace" --once
assert_eq "not a trace directory: status" 1 "$RC"
assert_match "not a trace directory: message" "is not a trace directory" "$(cat "$TMP/notrace.err")"
ms nodir monitor "$TMP/notrace/readme.txt" --once
assert_eq "a file: status" 1 "$RC"
assert_match "a file: message" "not a directory" "$(cat "$TMP/nodir.err")"
ms noopt monitor "$TD"
assert_eq "monitor without --listen: usage error" 2 "$RC"
# a program that ends before any scrape: its status is memscope's
ms quick run --metrics=127.0.0.1:0 -o "$TMP/quick.db" -- /bin/sh -c 'exit 3'
assert_eq "a program that exits at once: its status" 3 "$RC"

done_testing
