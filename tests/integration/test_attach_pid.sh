#!/usr/bin/env bash
# test_attach_pid.sh: `memscope attach PID` (src/cli/cmd_attach.c, src/cli/inject.c,
# src/agent/inject.c) on tests/progs/attach_target, a running process that makes known
# allocations when a file appears: exactly those made while attached are recorded (the blocks
# it made before are unknown: their frees are unmatched frees, said as such), the process runs
# on unharmed after a detach (its descriptors and mappings as before, its heap working, its
# output and exit status its own), a second attach to the same process works, --duration and
# the process's end stop the recording, and the processes that must not be touched are
# refused, untouched. Needs ptrace (root or CAP_SYS_PTRACE, or Yama's ptrace_scope 0).
. "$(dirname "$0")/lib.sh"

[ "$(uname -m)" = x86_64 ] || skip "memscope attach is x86-64 only"
TARGET=$PROGS/attach_target
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

# wait_for FILE: waits (at most 30 s, a bound, not a timed assertion) for FILE to exist.
wait_for() {
    local i
    for i in $(seq 300); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    echo "  (gave up waiting for $1)" >&2
    return 1
}

# start_target NAME [churn] [blocksig]: attach_target in $TMP/NAME; TPID gets its pid.
start_target() {
    local d=$TMP/$1
    shift
    mkdir -p "$d"
    "$TARGET" "$d" "$@" >"$d/out" 2>"$d/err" </dev/null &
    TPID=$!
    PIDS+=("$TPID")
    wait_for "$d/ready"
}

# attach_bg NAME PID ARGS...: memscope attach PID ARGS in the background, stderr in
# $TMP/NAME.err; returns once it records (or has ended). MPID gets its pid.
attach_bg() {
    local name=$1 pid=$2 i
    shift 2
    "$MEMSCOPE" attach "$pid" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
    MPID=$!
    PIDS+=("$MPID")
    for i in $(seq 300); do
        grep -q "recording process" "$TMP/$name.err" 2>/dev/null && return 0
        kill -0 "$MPID" 2>/dev/null || return 0
        sleep 0.1
    done
}

# stop_attach: Ctrl-C to memscope attach; RC gets its status.
stop_attach() {
    kill -INT "$MPID"
    wait "$MPID"
    RC=$?
}

fds_of() { ls "/proc/$1/fd" | sort | paste -sd' ' -; }
agent_maps() { grep -c 'libmemscope\.so' "/proc/$1/maps" 2>/dev/null || true; }

# ---- bad input and refusals: the process is left untouched ----
ms badpid attach notapid
assert_eq "a pid that is not a number: usage error" 2 "$RC"
true &
gone=$!
wait "$gone"
ms nopid attach "$gone"
assert_eq "a pid that does not exist: status" 1 "$RC"
assert_match "a pid that does not exist: said" "cannot attach: no process $gone" \
    "$(cat "$TMP/nopid.err")"

start_target stopped
kill -STOP "$TPID"
for i in $(seq 50); do grep -q '^State:.*T' "/proc/$TPID/status" && break; sleep 0.1; done
ms stopped attach "$TPID" -o "$TMP/stopped.db"
assert_eq "a stopped process: status" 1 "$RC"
assert_match "a stopped process: said" "process $TPID \(attach_target\) is stopped \(state T" \
    "$(cat "$TMP/stopped.err")"
assert_eq "a stopped process: no agent loaded in it" 0 "$(agent_maps "$TPID")"
assert_eq "a stopped process: still stopped (nothing sent to it)" T \
    "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$TPID/status")"
assert_eq "a stopped process: no database" 0 "$(find "$TMP" -name 'stopped.db' | wc -l)"
kill -CONT "$TPID"

# another tracer: a Python ctypes PTRACE_SEIZE holds it
PY=/usr/bin/python3
if [ -x "$PY" ]; then
    "$PY" -c "
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:
    sys.exit(3)
open(sys.argv[2], 'w').close()
time.sleep(60)" "$TPID" "$TMP/traced" &
    tracer=$!
    PIDS+=("$tracer")
    for i in $(seq 300); do
        [ -e "$TMP/traced" ] || ! kill -0 "$tracer" 2>/dev/null && break
        sleep 0.1
    done
    if [ -e "$TMP/traced" ]; then
        ms traced attach "$TPID"
        assert_eq "a process traced by another: status" 1 "$RC"
        assert_match "a process traced by another: names the tracer" \
            "already traced by process $tracer \(python3" "$(cat "$TMP/traced.err")"
        assert_eq "a process traced by another: no agent loaded in it" 0 "$(agent_maps "$TPID")"
    else
        echo "  (python3 could not trace the process: that refusal is not checked)"
    fi
    kill "$tracer" 2>/dev/null
    wait "$tracer" 2>/dev/null
fi
kill -9 "$TPID"
wait "$TPID" 2>/dev/null

# MEMSCOPE_TRACE_DIR in its environment (the agent's constructor would record there alone)
MEMSCOPE_TRACE_DIR=$TMP/nowhere start_target envdir
ms envdir attach "$TPID"
assert_eq "MEMSCOPE_TRACE_DIR in its environment: status" 1 "$RC"
assert_match "MEMSCOPE_TRACE_DIR in its environment: said" "has MEMSCOPE_TRACE_DIR in its environment" \
    "$(cat "$TMP/envdir.err")"
assert_eq "MEMSCOPE_TRACE_DIR in its environment: no agent loaded in it" 0 "$(agent_maps "$TPID")"
kill -9 "$TPID"
wait "$TPID" 2>/dev/null

# a seccomp filter
start_target sandboxed seccomp
ms seccomp attach "$TPID"
assert_eq "a process under a seccomp filter: status" 1 "$RC"
assert_match "a process under a seccomp filter: said" "runs under a seccomp filter" \
    "$(cat "$TMP/seccomp.err")"
assert_eq "a process under a seccomp filter: no agent loaded in it" 0 "$(agent_maps "$TPID")"
kill -9 "$TPID"
wait "$TPID" 2>/dev/null

# another PID namespace
if unshare -p -f --mount-proc true 2>/dev/null; then
    mkdir -p "$TMP/ns"
    unshare -p -f --mount-proc "$TARGET" "$TMP/ns" >/dev/null 2>&1 </dev/null &
    PIDS+=("$!")
    wait_for "$TMP/ns/ready"
    nspid=$(pgrep -f "^$TARGET $TMP/ns" | while read -r p; do
        [ "$(readlink "/proc/$p/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] && echo "$p"
    done | head -1)
    ms pidns attach "${nspid:-0}"
    assert_eq "a process in another PID namespace: status" 1 "$RC"
    assert_match "a process in another PID namespace: said" "runs in another PID namespace" \
        "$(cat "$TMP/pidns.err")"
    assert_eq "a process in another PID namespace: no agent loaded in it" 0 \
        "$(agent_maps "${nspid:-0}")"
    kill -9 "$nspid" 2>/dev/null
else
    echo "  (no PID namespace here: that refusal is not checked)"
fi

# a process with no safe moment (blocked in flock(2), a wait the C library may make holding a
# lock): given up after 5 s, untouched; and one that ends while memscope waits for that moment
if command -v flock >/dev/null; then
    flock "$TMP/lock" sleep 60 >/dev/null 2>&1 </dev/null &
    holder=$!
    PIDS+=("$holder")
    for i in $(seq 50); do [ -n "$(pgrep -P "$holder")" ] && break; sleep 0.1; done
    PIDS+=($(pgrep -P "$holder"))
    flock "$TMP/lock" true >/dev/null 2>&1 </dev/null &
    blocked=$!
    PIDS+=("$blocked")
    for i in $(seq 50); do grep -q '^State:.*S' "/proc/$blocked/status" 2>/dev/null && break; sleep 0.1; done
    ms nosafe attach "$blocked"
    assert_eq "no safe moment: status" 1 "$RC"
    assert_match "no safe moment: said" "no thread of process $blocked was at a safe moment.*left untouched" \
        "$(cat "$TMP/nosafe.err")"
    assert_eq "no safe moment: no agent loaded in it" 0 "$(agent_maps "$blocked")"
    assert_eq "no safe moment: not traced any more" 0 \
        "$(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$blocked/status")"
    "$MEMSCOPE" attach "$blocked" >"$TMP/gone.out" 2>"$TMP/gone.err" </dev/null &
    MPID=$!
    sleep 1 # memscope is still looking for a safe moment (for 5 s)
    kill -9 "$blocked"
    wait "$MPID"
    assert_eq "a process that ends during the attach: status" 1 "$?"
    assert_match "a process that ends during the attach: said" \
        "process $blocked ended during the attach" "$(cat "$TMP/gone.err")"
else
    echo "  (no flock: the wait for a safe moment is not checked)"
fi

# ---- memscope attach killed while recording: the agent stops by itself at the process's next
# chunk (its new threads' first), lets the trace go, and a new attach works ----
start_target orphan
FDS1=$(fds_of "$TPID")
attach_bg o1 "$TPID" -o "$TMP/o1.db"
if grep -q "ptrace_scope\|not ours to trace" "$TMP/o1.err"; then
    skip "this user cannot trace other processes here: $(cat "$TMP/o1.err")"
fi
kill -9 "$MPID"
wait "$MPID" 2>/dev/null
touch "$TMP/orphan/go1"
wait_for "$TMP/orphan/go1.done"
assert_eq "memscope killed: the process's descriptors as before" "$FDS1" "$(fds_of "$TPID")"
assert_eq "memscope killed: no mapping of a trace file" 0 "$(grep -c '\.mst' "/proc/$TPID/maps")"
attach_bg o2 "$TPID" -o "$TMP/o2.db"
touch "$TMP/orphan/go2"
wait_for "$TMP/orphan/go2.done"
stop_attach
assert_eq "memscope killed, attach again: status" 0 "$RC"
ms o2-full export "$TMP/o2.db" --format=db -o "$TMP/o2-full.db"
assert_eq "memscope killed, attach again: its blocks (size|blocks|freed)" "5001|6|6" \
    "$(q "$TMP/o2-full.db" "SELECT size, count(*), sum(free_ns IS NOT NULL) FROM blocks
                            WHERE size IN (3333, 4001, 4003, 5001) GROUP BY 1 ORDER BY 1")"
touch "$TMP/orphan/end"
wait "$TPID"
assert_eq "memscope killed: the process's exit status" 0 "$?"
assert_eq "memscope killed: the process's stderr" "" "$(cat "$TMP/orphan/err")"

# ---- a normal attach: threads already running, known allocations, Ctrl-C, the process runs on
start_target main
FDS0=$(fds_of "$TPID")
attach_bg a1 "$TPID" -o "$TMP/a1.db"
assert_match "first attach: recording" "recording process $TPID \(attach_target\)" \
    "$(cat "$TMP/a1.err")"
touch "$TMP/main/go1"
wait_for "$TMP/main/go1.done"
stop_attach
assert_eq "first attach: status" 0 "$RC"
assert_match "first attach: the process runs on" "stopped: the process runs on" \
    "$(cat "$TMP/a1.err")"
assert_match "first attach: frees of earlier blocks said as such" \
    "attached mid-run: 3 frees of blocks memscope did not see allocated \(made before the attach\) counted apart as unmatched frees, not as errors" \
    "$(cat "$TMP/a1.err")"
assert_eq "after detach: the process's descriptors as before" "$FDS0" "$(fds_of "$TPID")"
assert_eq "after detach: no mapping of a trace file" 0 \
    "$(grep -c '\.mst' "/proc/$TPID/maps")"
assert_eq "after detach: the trace directory is removed" "" \
    "$(find "$TMP" -maxdepth 1 -name '.memscope-attach-*' -newer "$TMP/o2.db")"
ms a1-full export "$TMP/a1.db" --format=db -o "$TMP/a1-full.db"
require_db "first attach" "$TMP/a1-full.db"
sanity "$TMP/a1-full.db"
assert_eq "first attach: known blocks (size|blocks|freed)" "4001|5|4
4003|14|14" "$(q "$TMP/a1-full.db" "SELECT size, count(*), sum(free_ns IS NOT NULL) FROM blocks
                  WHERE size IN (3333, 4001, 4003, 5001) GROUP BY 1 ORDER BY 1")"
assert_eq "first attach: the main thread's blocks at their site" 5 \
    "$(q "$TMP/a1-full.db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
                            WHERE b.size = 4001 AND s.c_text LIKE 'attach_site_main (%'")"
assert_eq "first attach: the running threads' blocks at their site, on 2 threads" "14|2" \
    "$(q "$TMP/a1-full.db" "SELECT count(*), count(DISTINCT e.thread_id) FROM blocks b
                            JOIN stacks s ON s.id = b.stack_id
                            JOIN events e ON e.id = b.alloc_event_id
                            WHERE b.size = 4003 AND s.c_text LIKE 'attach_site_worker (%'")"
assert_eq "first attach: the blocks made before it are unmatched frees" 3 \
    "$(q "$TMP/a1-full.db" "SELECT unmatched_frees FROM process_stats s JOIN layers l
                            ON l.id = s.layer WHERE l.event_type = 'HOST'")"
assert_eq "first attach: nothing of the blocks made before it" 0 \
    "$(q "$TMP/a1-full.db" "SELECT count(*) FROM events WHERE size = 3333")"

# ---- a second attach to the same process (the agent is loaded already) ----
attach_bg a2 "$TPID" -o "$TMP/a2.db"
touch "$TMP/main/go2"
wait_for "$TMP/main/go2.done"
stop_attach
assert_eq "second attach: status" 0 "$RC"
assert_eq "second attach: one agent in the process" 5 "$(agent_maps "$TPID")"
ms a2-full export "$TMP/a2.db" --format=db -o "$TMP/a2-full.db"
require_db "second attach" "$TMP/a2-full.db"
assert_eq "second attach: only its own blocks (size|blocks|freed)" "5001|6|6" \
    "$(q "$TMP/a2-full.db" "SELECT size, count(*), sum(free_ns IS NOT NULL) FROM blocks
                            WHERE size IN (3333, 4001, 4003, 5001) GROUP BY 1 ORDER BY 1")"
assert_eq "second attach: its forked child is not recorded (one process, no 6007 B blocks)" "1|0" \
    "$(q "$TMP/a2-full.db" "SELECT (SELECT count(*) FROM processes),
                            (SELECT count(*) FROM events WHERE size = 6007)")"
assert_eq "second attach: calloc at its site" 6 \
    "$(q "$TMP/a2-full.db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
                            WHERE b.size = 5001 AND s.c_text LIKE 'attach_site_main2 (%'")"
assert_eq "after the second detach: descriptors as before" "$FDS0" "$(fds_of "$TPID")"

# another memscope's agent (another file) is refused where this one is loaded
mkdir -p "$TMP/other"
cp "$(dirname "$MEMSCOPE")/libmemscope.so" "$TMP/other/libmemscope.so"
MEMSCOPE_AGENT=$TMP/other/libmemscope.so ms other attach "$TPID" -o "$TMP/other.db"
assert_eq "another agent loaded: status" 1 "$RC"
assert_match "another agent loaded: said" "has another memscope agent loaded" \
    "$(cat "$TMP/other.err")"
assert_eq "another agent loaded: still one agent in the process" 5 "$(agent_maps "$TPID")"

# ---- --duration ----
ms dur attach "$TPID" --duration=0.3 -o "$TMP/dur.db"
assert_eq "--duration: status" 0 "$RC"
assert_match "--duration: said" "duration reached: the process runs on" "$(cat "$TMP/dur.err")"
assert_file "--duration: database" "$TMP/dur.db"
# no memory of the agent's own per attach: three more sessions leave the mappings as they were
MAPS0=$(wc -l <"/proc/$TPID/maps")
for i in 1 2 3; do ms "dur$i" attach "$TPID" --duration=0.1 -o "$TMP/dur$i.db"; done
assert_eq "three more attaches: statuses" "0" "$RC"
assert_eq "three more attaches: the process's mappings as many as before" "$MAPS0" \
    "$(wc -l <"/proc/$TPID/maps")"
assert_eq "three more attaches: descriptors as before" "$FDS0" "$(fds_of "$TPID")"
ms dur-bad attach "$TPID" --duration=-1
assert_eq "--duration=-1: usage error" 2 "$RC"

# ---- the process ends while attached: recorded to its end; its output and status its own ----
attach_bg a3 "$TPID" -o "$TMP/a3.db"
touch "$TMP/main/end"
wait "$MPID"
RC=$?
assert_eq "process ended while attached: memscope's status" 0 "$RC"
assert_match "process ended while attached: said" "the process ended" "$(cat "$TMP/a3.err")"
wait "$TPID"
assert_eq "the process's exit status" 0 "$?"
assert_eq "the process's output" "attach_target ok" "$(cat "$TMP/main/out")"
assert_eq "the process's stderr (nothing from the agent)" "" "$(cat "$TMP/main/err")"
ms a3-full export "$TMP/a3.db" --format=db -o "$TMP/a3-full.db"
require_db "attached to the end" "$TMP/a3-full.db"
assert_eq "attached to the end: its last 1000 reallocs" 1000 \
    "$(q "$TMP/a3-full.db" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND e.func = 'realloc'")"

# ---- a process that blocks every signal and is in the middle of a malloc loop ----
start_target busy churn blocksig
FDS0=$(fds_of "$TPID")
attach_bg b1 "$TPID" -o "$TMP/b1.db"
assert_match "busy process: recording" "recording process $TPID" "$(cat "$TMP/b1.err")"
touch "$TMP/busy/go1"
wait_for "$TMP/busy/go1.done"
stop_attach
assert_eq "busy process: status" 0 "$RC"
ms b1-full export "$TMP/b1.db" --format=db -o "$TMP/b1-full.db"
require_db "busy process" "$TMP/b1-full.db"
assert_eq "busy process: known blocks (size|blocks|freed)" "4001|5|4
4003|14|14" "$(q "$TMP/b1-full.db" "SELECT size, count(*), sum(free_ns IS NOT NULL) FROM blocks
                  WHERE size IN (3333, 4001, 4003) GROUP BY 1 ORDER BY 1")"
assert_ge "busy process: its malloc loop was recorded" 1 \
    "$(q "$TMP/b1-full.db" "SELECT count(*) FROM events WHERE size = 77")"
assert_eq "busy process: its signal mask as before" \
    "$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$TPID/status")" "fffffffe7ffbfeff"
assert_eq "busy process: descriptors as before" "$FDS0" "$(fds_of "$TPID")"
touch "$TMP/busy/go2" "$TMP/busy/end"
wait "$TPID"
assert_eq "busy process: exit status" 0 "$?"
assert_eq "busy process: output" "attach_target ok" "$(cat "$TMP/busy/out")"

# ---- a running python3: Python stacks from the attach on (the memscope package's hook) ----
if [ -x "$PY" ] && [ -d "$(dirname "$MEMSCOPE")/python/memscope" ]; then
    mkdir -p "$TMP/py"
    cat >"$TMP/py/t.py" <<'PYEOF'
import os, sys, time
d = sys.argv[1]
def attach_py_site():
    return [bytearray(200001) for _ in range(5)]
open(d + '/ready', 'w').close()
while not os.path.exists(d + '/go1'):
    time.sleep(0.005)
while 'memscope._attach' not in sys.modules:  # the hook is in once the session's code ran
    time.sleep(0.005)
keep = attach_py_site()
open(d + '/go1.done', 'w').close()
while not os.path.exists(d + '/end'):
    time.sleep(0.005)
print("attach_py ok", len(keep))
PYEOF
    "$PY" "$TMP/py/t.py" "$TMP/py" >"$TMP/py/out" 2>"$TMP/py/err" </dev/null &
    TPID=$!
    PIDS+=("$TPID")
    wait_for "$TMP/py/ready"
    attach_bg p1 "$TPID" -o "$TMP/p1.db"
    assert_match "python3: recording" "recording process $TPID \(python3\)" "$(cat "$TMP/p1.err")"
    touch "$TMP/py/go1"
    wait_for "$TMP/py/go1.done"
    stop_attach
    assert_eq "python3: status" 0 "$RC"
    ms p1-full export "$TMP/p1.db" --format=db -o "$TMP/p1-full.db"
    require_db "python3" "$TMP/p1-full.db"
    assert_eq "python3: the 5 bytearrays with their Python stack" 5 \
        "$(q "$TMP/p1-full.db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
                                WHERE b.size BETWEEN 200001 AND 200100
                                AND s.py_text LIKE '%t.py(4): attach_py_site%'")"
    touch "$TMP/py/end"
    wait "$TPID"
    assert_eq "python3: exit status" 0 "$?"
    assert_eq "python3: output" "attach_py ok 5" "$(cat "$TMP/py/out")"
    assert_eq "python3: stderr (nothing from memscope)" "" "$(cat "$TMP/py/err")"
else
    echo "  (no /usr/bin/python3 or no memscope Python package: Python stacks not checked)"
fi
done_testing
