#!/bin/bash
# test_usage_pid.sh: `memscope usage --pid` samples processes memscope did not start, without
# tracing them (docs/usage.md): tests/progs/usage_kinds.c holds a 32 MiB shared memory object
# (and a 6 MiB stack) until the test lets it go; the report has their peaks; a process that ends
# while sampled ends the sampling with what was sampled kept; a missing pid is said.
. "$(dirname "$0")/lib.sh"

MIB=1048576
J() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
# start MODE: usage_kinds MODE in the background, holding until $TMP/go-MODE exists; sets PID.
start() {
    USAGE_KINDS_HOLD="$TMP/go-$1" "$PROGS/usage_kinds" "$1" >"$TMP/$1.out" 2>&1 &
    PID=$!
    for _ in $(seq 600); do [ -e "$TMP/go-$1.ready" ] && return; sleep 0.1; done
    fail "usage_kinds $1 did not get ready"
}

# sampling ERR: waits until memscope usage said it samples (after its first samples).
sampling() {
    for _ in $(seq 600); do grep -q "usage: sampling" "$1" && return; sleep 0.1; done
    fail "memscope usage did not start sampling"
}

start shm
SHM=$PID
start stack
STACK=$PID
ms two usage --pid "$SHM" "$STACK" --interval 0.02 --duration 0.2 -o "$TMP/two.json"
assert_eq "two processes: exit status" 0 "$RC"
assert_eq "two processes in the report" "$(printf '%s\n' "$SHM" "$STACK" | sort | tr '\n' ' ')" \
    "$(J "$TMP/two.json" "' '.join(sorted(d['processes'])) + ' '")"
assert_ge "samples: the first and the one at the end at least" 2 \
    "$(J "$TMP/two.json" "d['processes']['$SHM']['samples']")"
assert_eq "shm: peak shmem within [32 MiB, 33 MiB], PSS and USS at least 32 MiB" "True" \
    "$(J "$TMP/two.json" "(lambda p: 32*$MIB <= p['shmem_bytes'] <= 33*$MIB and p['pss_bytes'] >= 32*$MIB and p['uss_bytes'] >= 32*$MIB)(d['processes']['$SHM']['peak'])")"
assert_eq "stack: peak stack within [6 MiB, 6 MiB + 256 KiB]" "True" \
    "$(J "$TMP/two.json" "6*$MIB <= d['processes']['$STACK']['peak']['stack_bytes'] <= 6*$MIB + 262144")"
assert_eq "the command of each" "usage_kinds shm" \
    "$(J "$TMP/two.json" "d['processes']['$SHM']['command'].split('/')[-1]")"
assert_eq "still running: not ended" "False" "$(J "$TMP/two.json" "d['processes']['$SHM']['ended']")"
assert_eq "no device figures without NVML" "False" "$(J "$TMP/two.json" "'devices' in d")"
assert_eq "the processes were not traced: no trace, no agent" "0" \
    "$(grep -c libmemscope "/proc/$SHM/maps" 2>/dev/null)"

# A process that ends while sampled: the sampling ends with it, its samples kept.
"$MEMSCOPE" usage --pid "$STACK" --interval 0.02 -o "$TMP/end.json" 2>"$TMP/end.err" &
USAGE=$!
sampling "$TMP/end.err"
touch "$TMP/go-stack"
wait "$USAGE"
assert_eq "ended while sampled: exit status" 0 "$?"
assert_eq "ended while sampled: said ended, its peak kept" "True True" \
    "$(J "$TMP/end.json" "str(d['processes']['$STACK']['ended']) + ' ' + str(d['processes']['$STACK']['peak']['stack_bytes'] >= 6*$MIB)")"
assert_match "ended while sampled: said on stderr" "pid $STACK ended after [0-9]+ samples" "$(cat "$TMP/end.err")"
wait "$STACK"

# Ctrl-C (SIGINT) ends it with a report.
"$MEMSCOPE" usage --pid "$SHM" --interval 0.02 -o "$TMP/int.json" 2>"$TMP/int.err" &
USAGE=$!
sampling "$TMP/int.err"
kill -INT "$USAGE"
wait "$USAGE"
assert_eq "Ctrl-C: exit status" 0 "$?"
assert_ge "Ctrl-C: the report has the samples" 1 "$(J "$TMP/int.json" "d['processes']['$SHM']['samples']")"
touch "$TMP/go-shm"
wait "$SHM"

# Bad input: a pid that does not exist, no pid, a bad interval.
ms missing usage --pid 4194000 --duration 0.1 -o "$TMP/missing.json"
assert_eq "no such process: exit status" 1 "$RC"
assert_match "no such process: said" "no process 4194000" "$(cat "$TMP/missing.err")"
assert_eq "no such process: no report" "no" "$([ -e "$TMP/missing.json" ] && echo yes || echo no)"
ms mixed usage --pid 4194000 $$ --duration 0.05 -o "$TMP/mixed.json"
assert_eq "one missing of two: exit status 1" 1 "$RC"
assert_eq "one missing of two: the other reported" "$$" "$(J "$TMP/mixed.json" "' '.join(d['processes'])")"
ms nopid usage --duration 1
assert_eq "no --pid: usage error" 2 "$RC"
ms badint usage --pid $$ --interval soon
assert_eq "--interval soon: usage error" 2 "$RC"
done_testing
