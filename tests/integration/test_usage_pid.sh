#!/bin/bash
# test_usage_pid.sh: `memscope usage --pid` samples processes memscope did not start, without
# tracing them (docs/usage.md): tests/progs/usage_kinds.c holds a 32 MiB shared memory object
# (and a 6 MiB stack) until the test lets it go; the report has their peaks; --plot draws the
# samples (an SVG document whose series have the report's peaks and samples); a process that
# ends while sampled ends the sampling with what was sampled kept; a missing pid is said.
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

# --plot: the samples over time as an SVG image (usage_plot.c), read with a real XML parser:
# one series for each of RSS, PSS and USS, whose extents are the report's peaks and whose
# sample counts are the report's, drawn inside the frame, the highest point at its peak on the
# y axis. Sampled every millisecond for 2.5 s, a series merges its points to at most 1000
# (USAGE_PLOT_MAX_POINTS), its peak kept.
# svg_facts SVG JSON PID: one line per series: its name; whether its extent and its samples are
# the report's; whether it has data-points points; how many; whether all are inside the frame;
# whether the top point's height is its peak's; whether the peak is 32 MiB or more.
svg_facts() {
    python3 - "$@" <<'EOF'
import json, sys
import xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
rep = json.load(open(sys.argv[2]))["processes"][sys.argv[3]]
assert root.tag == NS + "svg"
num, unit = root.find(f"{NS}g[@class='yticks']").findall(f"{NS}text")[-1].text.split()
ymax = float(num) * 1024 ** ["B", "KiB", "MiB", "GiB"].index(unit)
ax = root.find(f"{NS}g[@class='axes']").findall(f"{NS}line")
left, top, bottom, right = (float(ax[0].get("x1")), float(ax[0].get("y1")),
                            float(ax[0].get("y2")), float(ax[1].get("x2")))
for g in root.iter(f"{NS}g"):
    if g.get("class") != "series":
        continue
    pts = [tuple(map(float, p.split(","))) for p in g.find(f"{NS}polyline").get("points").split()]
    peak = int(g.get("data-max-bytes"))
    high = min(y for _, y in pts)
    print(g.get("data-name"), peak == rep["peak"][g.get("data-kind") + "_bytes"],
          int(g.get("data-samples")) == rep["samples"], len(pts) == int(g.get("data-points")),
          len(pts), all(left <= x <= right and top <= y <= bottom for x, y in pts),
          abs(high - (bottom - (bottom - top) * peak / ymax)) <= 0.06, peak >= 32 * 1048576)
EOF
}
ms plot usage --pid "$SHM" --interval 0.02 --duration 0.3 -o "$TMP/plot.json" --plot "$TMP/plot.svg"
assert_eq "--plot: exit status" 0 "$RC"
n=$(J "$TMP/plot.json" "d['processes']['$SHM']['samples']")
svg_facts "$TMP/plot.svg" "$TMP/plot.json" "$SHM" >"$TMP/plot.facts" 2>&1
assert_eq "--plot: RSS, PSS and USS of usage_kinds shm: the report's peaks (32 MiB or more) and samples, inside the frame" \
    "pid $SHM RSS True True True $n True True True
pid $SHM PSS True True True $n True True True
pid $SHM USS True True True $n True True True" "$(cat "$TMP/plot.facts")"
assert_match "--plot: said" "usage: wrote .*plot\.svg" "$(cat "$TMP/plot.err")"
ms dense usage --pid "$SHM" --interval 0.001 --duration 2.5 -o "$TMP/dense.json" --plot "$TMP/dense.svg"
assert_eq "--plot every 1 ms: exit status" 0 "$RC"
n=$(J "$TMP/dense.json" "d['processes']['$SHM']['samples']")
svg_facts "$TMP/dense.svg" "$TMP/dense.json" "$SHM" >"$TMP/dense.facts" 2>&1
pts=$(awk 'NR == 1 {print $7}' "$TMP/dense.facts")
assert_eq "--plot every 1 ms: $n samples in ${pts:-no} points (all up to 1000, else 500 to 1000)" True \
    "$(python3 -c "print($pts == $n if $n <= 1000 else 500 <= $pts <= 1000)")"
assert_eq "--plot every 1 ms: the report's peaks and samples, inside the frame" \
    "RSS True True True
PSS True True True
USS True True True" "$(awk '{print $3, $4, $5, $8}' "$TMP/dense.facts")"
ms badplot usage --pid "$SHM" --duration 0.1 --plot "$TMP/plot.png"
assert_eq "--plot FILE.png: usage error" 2 "$RC"
ms noplotdir usage --pid "$SHM" --duration 5 --plot "$TMP/no/such/dir/p.svg" -o "$TMP/noplot.json"
assert_eq "--plot into a missing directory: said at once, status 1, no report" "1 1 no" \
    "$RC $(grep -c "cannot create $TMP/no/such/dir/p.svg" "$TMP/noplotdir.err") $([ -e "$TMP/noplot.json" ] && echo yes || echo no)"
ms intoplot usage --pid "$SHM" --into "$TMP" --plot "$TMP/p.svg"
assert_eq "--into with --plot: usage error" 2 "$RC"

# memscope --help names every form of memscope usage
ms mainhelp --help
assert_match "--help: memscope usage with --devices" \
    "memscope usage --pid PID\.\.\. \[--devices N\.\.\.\] \[--interval S\] \[--duration S\]" "$(cat "$TMP/mainhelp.out")"
assert_match "--help: memscope usage's --plot and --into" \
    "\[-o report\.json\] \[--plot usage\.svg\].*memscope usage --pid PID --into TRACE_DIR" "$(tr '\n' ' ' <"$TMP/mainhelp.out")"

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
