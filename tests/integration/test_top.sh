#!/bin/bash
# test_top.sh: memscope top in a terminal (tmux: send-keys, capture-pane), on a program holding
# known blocks (tests/progs/monitor_grow.c hold: 3.8 MiB live, 4.0 MiB peak, 3 steps, weight
# 3.0 MiB, activation 512 KiB, all from hold_here): --targets (one line per rank, a target that
# is down, the job's total), --pid (the process's layers, owners and call sites), q quits; the
# call sites growing fastest first (monitor_grow shift).
. "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || skip "tmux is not installed"

wait_for() {
    for _ in $(seq 300); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
SOCK="memscope-test-$$"
T() { tmux -L "$SOCK" "$@"; }
trap 'tmux -L "$SOCK" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT

rm -f "$TMP/go"
"$MEMSCOPE" run --metrics=127.0.0.1:0 --rank=1 -o "$TMP/hold.db" -- \
    "$PROGS/monitor_grow" hold "$TMP/go" >"$TMP/hold.out" 2>"$TMP/hold.err" &
RUN=$!
wait_for grep -q 'serving metrics on' "$TMP/hold.err"
ADDR=$(grep -o 'http://[^/]*/metrics' "$TMP/hold.err" | head -1 | sed 's|http://||; s|/metrics||')
held() { curl -sf "http://$ADDR/metrics" | grep -q 'memscope_step{.*} 3$'; }
wait_for held

# --targets: one line per rank, the target that is down, the job's totals
T new-session -d -s targets -x 150 -y 20 "$MEMSCOPE top --targets $ADDR,127.0.0.1:1"
screen() { T capture-pane -p -t "$1"; }
shows() { screen "$1" | grep -Eq -- "$2"; }
wait_for shows targets '^job +total'
S=$(screen targets)
assert_match "targets: the rank's line" "^1 +$ADDR +3\.8 MiB +4\.0 MiB .* 3 " "$S"
assert_match "targets: the target that is down" '^- +127\.0\.0\.1:1 +down: Connection refused' "$S"
assert_match "targets: the job's total" '^job +total +3\.8 MiB +4\.0 MiB' "$S"
assert_match "targets: the header" '2 targets, 1 up' "$S"
T send-keys -t targets q
gone() { ! T has-session -t "$1" 2>/dev/null; }
wait_for gone targets
assert_eq "targets: q quits" 0 "$?"

# --pid: the traced process's figures and call sites
P=$(curl -sf "http://$ADDR/metrics" | grep -o 'memscope_step{pid="[0-9]*"' | grep -o '[0-9]*')
T new-session -d -s pid -x 150 -y 20 "$MEMSCOPE top --pid $P"
wait_for shows pid 'hold_here \('
S=$(screen pid)
assert_match "pid: the process's line" "^$P +- +3\.8 MiB +4\.0 MiB .* 3 +0 +limit" "$S"
assert_match "pid: layers and owners" 'heap 3\.8 MiB +mmap 0 B +weight 3\.0 MiB +activation 512\.0 KiB' "$S"
assert_match "pid: the call site (growth, held)" '^ +\+[0-9.]+ (B|KiB|MiB)/s +3\.0 MiB +hold_here \(.*monitor_grow\.c:[0-9]+\)' "$S"
T send-keys -t pid q
wait_for gone pid
assert_eq "pid: q quits" 0 "$?"

# growth: the call site growing fastest is listed first, not the one holding the most
# (monitor_grow shift: 8 MiB held by hold_here, then grow_here growing 64 KiB every 50 ms)
rm -f "$TMP/g1" "$TMP/g2"
"$MEMSCOPE" run --metrics=127.0.0.1:0 -o "$TMP/shift.db" -- \
    "$PROGS/monitor_grow" shift "$TMP/g1" "$TMP/g2" >"$TMP/shift.out" 2>"$TMP/shift.err" &
SHIFT=$!
wait_for grep -q 'serving metrics on' "$TMP/shift.err"
SADDR=$(grep -o 'http://[^/]*/metrics' "$TMP/shift.err" | head -1)
held8() { curl -sf "$SADDR" | grep -q 'memscope_live_bytes{.*layer="heap".*} 8388608$'; }
wait_for held8
SP=$(curl -sf "$SADDR" | grep -o 'memscope_step{pid="[0-9]*"' | grep -o '[0-9]*')
T new-session -d -s shift -x 150 -y 20 "$MEMSCOPE top --pid $SP --interval 0.2 --window 0.5"
wait_for shows shift 'hold_here \('
touch "$TMP/g1"
grow_first() {
    local s
    s=$(screen shift)
    grep -m1 -E '^ +\+' <<<"$s" | grep -q 'grow_here \(' && ! grep -q 'hold_here' <<<"$s"
}
wait_for grow_first
S=$(screen shift)
assert_match "growth: the growing site first" '^ +\+[0-9.]+ (KiB|MiB)/s +[0-9.]+ (KiB|MiB) +grow_here \(.*monitor_grow\.c:[0-9]+\)' "$(grep -m1 -E '^ +\+' <<<"$S")"
assert_eq "growth: the site holding the most (8 MiB, not growing) is not listed" 0 "$(grep -c hold_here <<<"$S")"
T send-keys -t shift q
wait_for gone shift
touch "$TMP/g2"
wait "$SHIFT"
assert_eq "the shifting run's status" 0 "$?"

# bad input
ms nopid top --pid 1
assert_eq "top --pid of an untraced process: status" 1 "$RC"
assert_match "top --pid of an untraced process: message" "is not traced by memscope" "$(cat "$TMP/nopid.err")"
ms twosrc top "$TMP" --targets "$ADDR"
assert_eq "top with two sources: usage error" 2 "$RC"
ms badwin top "$TMP" --window 0
assert_eq "top --window 0: usage error" 2 "$RC"
assert_match "top --window 0: message" "expected 0\.1 to 3600 seconds, not '0'" "$(cat "$TMP/badwin.err")"

touch "$TMP/go"
wait "$RUN"
assert_eq "the held run's status" 0 "$?"
done_testing
