#!/bin/bash
# test_cuda.sh: memscope's CUDA hooks against the TEST DRIVER (ms_test_libcuda.c, a stand-in
# libcuda.so.1; no GPU). cuda_known makes one fixed sequence of driver calls; it is run reaching
# the driver the three ways real programs do (-lcuda, dlopen + dlsym, cuGetProcAddress_v2), and
# each run must give exactly the rows below. Also: fork + IPC, a program that never touches CUDA
# (sees no difference), no driver at all, --device, launches off, threads.
# Environment: MEMSCOPE, PROGS, CUDA_PROGS (this directory's build), CUDA_DRIVER_DIR.
. "$(dirname "$0")/../integration/lib.sh"
: "${CUDA_PROGS:?}" "${CUDA_DRIVER_DIR:?}"

# layer name|allocs|frees|live bytes|live blocks|unmatched frees, for every CUDA layer
STATS="SELECT l.name || '|' || s.allocs || '|' || s.frees || '|' || s.live_bytes || '|' ||
       s.live_blocks || '|' || s.unmatched_frees FROM process_stats s JOIN layers l ON l.id = s.layer
       WHERE l.name LIKE 'cuda%' ORDER BY s.layer"
EXPECT_STATS="cuda_pinned|3|2|4096|1|0
cuda:0|208|202|4286464|6|0
cuda_pool:0|4|3|4096|1|0
cuda_va:0|1|1|0|0|0
cuda_map:0|2|2|0|0|0
cuda:1|203|200|4210688|3|1
cuda_vmm:1|2|2|0|0|0"

K_LINE=$(grep_line "$(dirname "$0")/cuda_known.c" 'OK(A.MemAlloc(&k, 4 << 20));')
for mode in direct dlsym procaddr procaddr-alias; do
    db="$TMP/$mode.db"
    prog="$CUDA_PROGS/cuda_known"
    arg=$mode
    env=()
    case $mode in
        direct) prog="$CUDA_PROGS/cuda_known_direct" ;;
        procaddr-alias) arg=procaddr; env=(MEMSCOPE_TEST_CUDA_PROC_ALIASES=1) ;;
    esac
    out=$(env "${env[@]}" LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q --events=alloc,free,launch \
          -o "$db" -- "$prog" "$arg" 2>"$TMP/err")
    assert_eq "$mode: program output" "ok" "$out"
    assert_eq "$mode: layers (allocs, frees, live, unmatched)" "$EXPECT_STATS" "$(q "$db" "$STATS")"
    # what Insight keeps: rows with a device
    assert_eq "$mode: HAL rows by device" "FREE|0|205
FREE|1|203
MALLOC|0|212
MALLOC|1|205" "$(q "$db" "SELECT Event, \"Device Id\", count(*) FROM memscope_dump
        WHERE \"Device Id\" NOT IN ('N/A','','host') AND \"Event Type\" = 'HAL' GROUP BY 1, 2")"
    # Insight's own statement, then its breakdown's rule: MALLOC rows of PTA, MINDSPORE, ATB,
    # HAL, PTA_WORKSPACE, HOST_PINNED only (address-space rows stay in memscope's tables)
    assert_eq "$mode: every MALLOC row Insight reads has an Event Type its breakdown accepts" "0" \
        "$(q "$db" "SELECT count(*) FROM (SELECT * FROM memscope_dump WHERE \"Device Id\" NOT IN
            ('N/A','','host') ORDER BY \"Timestamp(ns)\") WHERE Event = 'MALLOC' AND \"Event Type\"
            NOT IN ('PTA','MINDSPORE','ATB','HAL','PTA_WORKSPACE','HOST_PINNED','HOST')")"
    assert_eq "$mode: the reservation and mappings stay in memscope's tables" "1|2|0" \
        "$(q "$db" "SELECT (SELECT count(*) FROM blocks b JOIN layers l ON l.id = b.layer WHERE l.name = 'cuda_va:0'),
            (SELECT count(*) FROM blocks b JOIN layers l ON l.id = b.layer WHERE l.name = 'cuda_map:0'),
            (SELECT count(*) FROM memscope_dump WHERE \"Event Type\" IN ('VMM_RESERVE', 'VMM_MAP'))")"
    assert_eq "$mode: HAL MALLOC attrs" "alloc|208
create|2
alloc|4|pool" "$(q "$db" "SELECT json_extract(Attr, '\$.alloc_type'), count(*) FROM memscope_dump
        WHERE Event = 'MALLOC' AND \"Event Type\" = 'HAL' AND json_extract(Attr, '\$.pool') IS NULL
          AND \"Device Id\" = '0' OR (\"Device Id\" = '1' AND json_extract(Attr, '\$.alloc_type') = 'create')
        GROUP BY 1 ORDER BY 2 DESC;
        SELECT json_extract(Attr, '\$.alloc_type'), count(*), 'pool' FROM memscope_dump
        WHERE json_extract(Attr, '\$.pool') IS NOT NULL AND Event = 'MALLOC'")"
    # msMemScope's HAL Attr used: the process's device memory on that device with the block,
    # checked against a running sum of the HAL rows (MALLOC +size, matched FREE -size)
    assert_eq "$mode: HAL MALLOC Attr used = the running sum of the device's HAL rows" "0|0|1" \
        "$(q "$db" "WITH h AS (SELECT ID, \"Device Id\" AS dev, Event, CAST(json_extract(Attr,
            '\$.size') AS INTEGER) AS sz, CAST(json_extract(Attr, '\$.used') AS INTEGER) AS used
            FROM memscope_dump WHERE \"Event Type\" = 'HAL' AND (Event = 'MALLOC' OR
            json_extract(Attr, '\$.allocation_id') IS NOT NULL)),
          r AS (SELECT dev, Event, used, sum(CASE Event WHEN 'MALLOC' THEN sz ELSE -sz END)
            OVER (PARTITION BY dev ORDER BY ID) AS run FROM h)
          SELECT count(*) FILTER (WHERE Event = 'MALLOC' AND used IS NULL),
                 count(*) FILTER (WHERE Event = 'MALLOC' AND used != run),
                 count(*) FILTER (WHERE Event = 'MALLOC') > 100 FROM r")"
    assert_eq "$mode: stream-ordered allocations: pool, its reserved bytes, stream" \
        "cuMemAllocAsync|0x7000|2097152|0x5001|3
cuMemAllocFromPoolAsync|0x7000|2097152|0x5001|1" "$(q "$db" "SELECT json_extract(Attr, '\$.api'),
            json_extract(Attr, '\$.pool'), json_extract(Attr, '\$.pool_reserved'),
            json_extract(Attr, '\$.stream'), count(*) FROM memscope_dump
            WHERE Event = 'MALLOC' AND json_extract(Attr, '\$.pool') IS NOT NULL GROUP BY 1, 2, 3, 4")"
    assert_eq "$mode: managed, pitch, IPC-free attributes" "cuMemAllocManaged|true|65536
cuMemAllocPitch|1024|10240" "$(q "$db" "SELECT json_extract(Attr, '\$.api'),
        COALESCE(json_extract(Attr, '\$.managed'), json_extract(Attr, '\$.pitch')), json_extract(Attr, '\$.size')
        FROM memscope_dump WHERE json_extract(Attr, '\$.api') IN ('cuMemAllocManaged', 'cuMemAllocPitch')
        AND Event = 'MALLOC' ORDER BY 1")"
    assert_eq "$mode: OOM row" "OOM_DETAIL|OOM_TRIGGER|1|cuMemAlloc|17179869184|17179869184|N/A" \
        "$(q "$db" "SELECT Event, \"Event Type\", \"Device Id\", json_extract(Attr, '\$.func'),
            json_extract(Attr, '\$.req_size'), json_extract(Attr, '\$.device_total'), Ptr
            FROM memscope_dump WHERE \"Event Type\" = 'OOM_TRIGGER'")"
    assert_eq "$mode: the live block after the OOM, as newest and as largest" \
        "OOM_RECENT_ALLOC|1|cuda:1|4194304
OOM_TOP_ALLOC|1|cuda:1|4194304" "$(q "$db" "SELECT \"Event Type\", \"Device Id\", json_extract(Attr, '\$.pool'),
            json_extract(Attr, '\$.size') FROM memscope_dump WHERE Event = 'OOM_DETAIL' AND ID > (
            SELECT ID FROM memscope_dump WHERE \"Event Type\" = 'OOM_TRIGGER') ORDER BY ID")"
    assert_eq "$mode: the failed free of an unknown pointer" "FREE|1|0x000000000dead000|1||" \
        "$(q "$db" "SELECT Event, \"Device Id\", Ptr, json_extract(Attr, '\$.result'),
            json_extract(Attr, '\$.allocation_id'), json_extract(Attr, '\$.size')
            FROM memscope_dump WHERE json_extract(Attr, '\$.result') IS NOT NULL")"
    assert_eq "$mode: kernel launches" "cuLaunchCooperativeKernel|reduce_sum|1|16x1x1|1
cuLaunchKernel|reduce_sum|1|64x2x1|2
cuLaunchKernel|vector_add|1|128x1x1|3
cuLaunchKernelEx|reduce_sum|1|32x1x1|1" "$(q "$db" "SELECT e.func, d.Name, d.\"Device Id\",
            json_extract(d.Attr, '\$.grid'), count(*) FROM memscope_dump d JOIN events e ON e.id = d.ID
            WHERE Event = 'KERNEL_LAUNCH' GROUP BY 1, 2, 4 ORDER BY 1, 2, 4")"
    assert_eq "$mode: every CUDA event has the program's stack" "0" \
        "$(q "$db" "SELECT count(*) FROM memscope_dump WHERE Event IN ('MALLOC','OOM_DETAIL','KERNEL_LAUNCH')
            AND \"Event Type\" != 'HOST' AND \"Call Stack(C)\" NOT LIKE '%cuda_known.c:%'")"
    assert_eq "$mode: the worker threads' blocks" "4" \
        "$(q "$db" "SELECT count(DISTINCT thread_id) FROM blocks WHERE layer IN (1024, 1032) AND size = 8192")"
    assert_eq "$mode: leaks analysis sees device blocks (the 4 MiB block live at exit)" "1" \
        "$("$MEMSCOPE" analyze leaks "$db" 2>/dev/null | grep -cE "^ +4194304 +1  main \(.*cuda_known.c:$K_LINE\)")"
    assert_eq "$mode: the block of a destroyed context stays live (64 KiB, cuda:0)" "65536|cuda:0" \
        "$(q "$db" "SELECT b.size, l.name FROM blocks b JOIN layers l ON l.id = b.layer
            WHERE b.free_ns IS NULL AND b.size = 65536 AND l.name LIKE 'cuda%'")"
done

# A program linked with -lcuda run plainly and under memscope: same output and status.
plain=$("$CUDA_PROGS/cuda_known_direct" direct; echo "rc=$?")
traced=$("$MEMSCOPE" run --format=db -q -o "$TMP/d2.db" -- "$CUDA_PROGS/cuda_known_direct" direct 2>/dev/null; echo "rc=$?")
assert_eq "direct: same output and status under memscope" "$plain" "$traced"
assert_eq "launches are not recorded without --events=launch" "0" \
    "$(q "$TMP/d2.db" "SELECT count(*) FROM events WHERE kind = 10")"

# --device selects devices; cpu turns the CUDA hooks off
LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q --device=cuda:1 -o "$TMP/dev1.db" -- \
    "$CUDA_PROGS/cuda_known" dlsym >/dev/null 2>&1
assert_eq "--device=cuda:1: only device 1's layers (and pinned host memory)" "cuda_pinned
cuda:1
cuda_vmm:1" "$(q "$TMP/dev1.db" "SELECT name FROM layers WHERE name LIKE 'cuda%' ORDER BY id")"
LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q --device=cpu -o "$TMP/cpu.db" -- \
    "$CUDA_PROGS/cuda_known" dlsym >/dev/null 2>&1
assert_eq "--device=cpu: no CUDA rows" "0" \
    "$(q "$TMP/cpu.db" "SELECT count(*) FROM layers WHERE name LIKE 'cuda%'")"
out=$("$MEMSCOPE" run --format=db --device=gpu -o "$TMP/x.db" -- true 2>&1; echo "rc=$?")
assert_match "--device=gpu is refused" "--device: expected.*rc=2" "${out//$'\n'/ }"

# fork + IPC: the child's trace has the imported block and its own allocation
out=$(LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q -o "$TMP/fork.db" -- "$CUDA_PROGS/cuda_fork" 2>/dev/null)
assert_eq "fork: program output" "ok" "$out"
assert_eq "fork: per process (parent first): HAL allocs, frees, live, IPC opens" "1|1|1|0|0
2|2|2|0|1" "$(q "$TMP/fork.db" "SELECT s.process_id, s.allocs, s.frees, s.live_blocks,
        (SELECT count(*) FROM events e WHERE e.process_id = s.process_id AND e.func = 'cuIpcOpenMemHandle')
        FROM process_stats s WHERE s.layer = 1024 ORDER BY 1")"
assert_eq "fork: the imported block has the exporter's size and ipc:true" "1048576|true" \
    "$(q "$TMP/fork.db" "SELECT json_extract(Attr, '\$.size'), json_extract(Attr, '\$.ipc') FROM memscope_dump
        WHERE json_extract(Attr, '\$.api') = 'cuIpcOpenMemHandle'")"

# direct binding in a library dlopen'ed after start (as PyTorch's libcaffe2_nvrtc.so)
plain=$(LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$CUDA_PROGS/cuda_dlopen"; echo "rc=$?")
traced=$(LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q -o "$TMP/dl.db" -- "$CUDA_PROGS/cuda_dlopen" 2>/dev/null; echo "rc=$?")
assert_eq "dlopen: same output and status (the library's RUNPATH still finds its plugin)" "plugin: two
ok
rc=0" "$traced"
assert_eq "dlopen: plain run" "$plain" "$traced"
assert_eq "dlopen: the library's direct calls are recorded, with its frames" "cuMemAlloc|1048576|1
cuMemAlloc|2097152|1
cuMemAlloc|3145728|1
cuMemAlloc|4194304|0
cuMemFree|2097152|0" "$(q "$TMP/dl.db" "SELECT json_extract(Attr, '\$.func'), json_extract(Attr, '\$.size'),
        \"Call Stack(C)\" LIKE 'user_allocs (%cuda_user_lib.c:%' FROM memscope_dump
        WHERE \"Event Type\" = 'HAL' AND Event IN ('MALLOC', 'FREE') ORDER BY 1, 2")"

# a driver of the CUDA 11.3 era: cuGetProcAddress's first ABI, no kernel names, no pool figures
OLD_DRV="$(dirname "$CUDA_DRIVER_DIR")/cuda-test-driver-old"
out=$(LD_LIBRARY_PATH="$OLD_DRV" "$MEMSCOPE" run --format=db -q --events=alloc,free,launch -o "$TMP/old.db" -- \
      "$CUDA_PROGS/cuda_old" 2>&1; echo "rc=$?")
assert_eq "old driver: program output" "ok
rc=0" "$out"
assert_eq "old driver: rows (through cuGetProcAddress v1)" "cuMemAlloc|MALLOC|1048576|
cuMemAlloc|MALLOC|2097152|
cuMemAllocAsync|MALLOC|4096|
cuMemFree|FREE|1048576|" "$(q "$TMP/old.db" "SELECT json_extract(Attr, '\$.func'), Event,
        json_extract(Attr, '\$.size'), json_extract(Attr, '\$.pool_reserved') FROM memscope_dump
        WHERE \"Event Type\" = 'HAL' ORDER BY 1, 3")"
assert_eq "old driver: launches named by their handle (no cuFuncGetName)" "0x8000|2" \
    "$(q "$TMP/old.db" "SELECT name, count(*) FROM events WHERE kind = 10 GROUP BY 1")"

# an agent that cannot record (no trace directory) hands out no wrapper: the program runs as is
AGENT="$(dirname "$MEMSCOPE")/libmemscope.so"
out=$(LD_PRELOAD="$AGENT" MEMSCOPE_TRACE_DIR="$TMP/no/such/dir" LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" \
      "$CUDA_PROGS/cuda_known" procaddr 2>"$TMP/cannot.err"; echo "rc=$?")
assert_eq "agent that cannot record: the CUDA program's output and status" "ok
rc=0" "$out"
assert_eq "agent that cannot record: it says so" "1" "$(grep -c 'cannot record' "$TMP/cannot.err")"

# a program that never touches CUDA sees no difference (no cu* symbol; RTLD_NEXT unchanged)
plain=$("$CUDA_PROGS/nocuda_probe")
traced=$("$MEMSCOPE" run --format=db -q -o "$TMP/probe.db" -- "$CUDA_PROGS/nocuda_probe" 2>/dev/null)
assert_eq "no CUDA: the program sees the same" "$plain" "$traced"
assert_match "no CUDA: dlsym(RTLD_NEXT) from a library finds the next library's" "from a library: two" "$traced"
# no driver at all: the program's own answer
out=$("$MEMSCOPE" run --format=db -q -o "$TMP/nodrv.db" -- "$CUDA_PROGS/cuda_known" dlsym 2>/dev/null; echo "rc=$?")
assert_eq "no driver: the program's output and status" "no CUDA driver
rc=3" "$out"

# OOM: the rows after the trigger (--analysis=oom:2) and memscope analyze oom
out=$(MEMSCOPE_TEST_CUDA_CAPACITY=67108864 LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q \
      --analysis=oom:2 -o "$TMP/oom.db" -- "$CUDA_PROGS/cuda_oom" 2>"$TMP/oom.err")
assert_eq "oom: program output" "ok" "$out"
assert_eq "oom: OOM_DETAIL rows in order (type, pool, size)" "OOM_TRIGGER|0||104857600
OOM_RECENT_ALLOC|0|pool:mypool|1048576
OOM_RECENT_ALLOC|0|pool:mypool|1048576
OOM_TOP_ALLOC|0|cuda:0|8388608
OOM_TOP_ALLOC|0|cuda:0|5242880" "$(q "$TMP/oom.db" "SELECT \"Event Type\", \"Device Id\", json_extract(Attr, '\$.pool'),
        COALESCE(json_extract(Attr, '\$.size'), json_extract(Attr, '\$.req_size'))
        FROM memscope_dump WHERE Event = 'OOM_DETAIL' ORDER BY ID")"
assert_eq "oom: the report at the end of the run (stderr) names the call" "1" \
    "$(grep -c 'OOM 1 of 1: cuMemAlloc of 100.0 MiB failed on device 0' "$TMP/oom.err")"
"$MEMSCOPE" analyze oom "$TMP/oom.db" --json > "$TMP/oom.json"
assert_eq "oom: live bytes, blocks, driver total/free, layers, owners, pool fragmentation" \
    "20971520|5|67108864|46137344|cuda:0=20971520/5|(none)=8388608/1,activations=6291456/2,weights=6291456/2|mypool=6291456/1" \
    "$(python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))["ooms"]
assert len(o) == 1
r = o[0]
g = lambda k: ",".join("%s=%d/%d" % (x["name"], x["bytes"], x["blocks"]) for x in r[k])
print("|".join(map(str, [r["live_bytes"], r["live_blocks"], r["device_total"], r["device_free"],
      g("layers"), g("owners"), g("pools_reserved_unallocated")])))' "$TMP/oom.json")"
assert_match "oom: text report: call sites" "cuda_oom.c:[0-9]+" "$("$MEMSCOPE" analyze oom "$TMP/oom.db")"
# Exports (docs/exports.md): the OOM as an instant event of Chrome's trace format, the device's
# live bytes as a counter of its own (its maximum: the layer's peak); --device selects its layers
"$MEMSCOPE" export "$TMP/oom.db" --format=perfetto -o "$TMP/oom.trace.json"
assert_eq "perfetto export: the OOM, and the counter of cuda:0 (max = its peak)" \
"OOM p 104857600 cuMemAlloc cuda:0
live bytes cuda:0 $(q "$TMP/oom.db" "SELECT max(peak_bytes) FROM process_stats p JOIN layers l ON l.id = p.layer WHERE l.name = 'cuda:0'")" \
    "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["traceEvents"]
for e in d:
    if e.get("cat") == "oom":
        print(e["name"], e["s"], e["args"]["requested"], e["args"]["func"], e["args"]["layer"])
print("live bytes cuda:0", max(e["args"]["bytes"] for e in d if e["name"] == "live bytes cuda:0"))' "$TMP/oom.trace.json")"
"$MEMSCOPE" export "$TMP/oom.db" --format=collapsed --device=0 --what=live-at-exit -o "$TMP/oom.folded"
assert_eq "collapsed --device=0: the bytes live at exit in device 0's layers" \
    "$(q "$TMP/oom.db" "SELECT sum(live_bytes) FROM process_stats p JOIN layers l ON l.id = p.layer WHERE l.device = '0' AND l.id >= 1024 AND l.event_type != 'VMM_RESERVE'")" \
    "$(awk '{s += $NF} END {print s + 0}' "$TMP/oom.folded")"
# The default output (compact database): oom (and every analysis) reads it as it is and says
# what its full database says
MEMSCOPE_TEST_CUDA_CAPACITY=67108864 LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run -q \
    -o "$TMP/oomc.db" -- "$CUDA_PROGS/cuda_oom" >/dev/null 2>&1
"$MEMSCOPE" export "$TMP/oomc.db" --format=db -o "$TMP/oomf.db" 2>/dev/null
assert_eq "compact: a compact database" "compact" \
    "$(q "$TMP/oomc.db" "SELECT value FROM meta WHERE key = 'store'")"
for a in "oom --json" "oom" "all --json" "fragmentation --json"; do
    # shellcheck disable=SC2086 # the analysis and its option
    assert_eq "compact: analyze $a: the same as on its full database" \
        "$("$MEMSCOPE" analyze $a "$TMP/oomf.db" 2>&1)" "$("$MEMSCOPE" analyze $a "$TMP/oomc.db" 2>&1)"
done
assert_eq "compact: blocks live at the OOM kept" "5" \
    "$("$MEMSCOPE" analyze oom "$TMP/oomc.db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ooms"][0]["live_blocks"])')"
# NVML (the test NVML beside the test driver): at both steps and at exit, per device
assert_eq "nvml: DEVICE_USAGE rows (device, process_used, device_used, total)" "0|6291456|6291456|67108864
1|0|0|67108864
0|12582912|12582912|67108864
1|0|0|67108864
0|20971520|20971520|67108864
1|0|0|67108864" "$(q "$TMP/oom.db" "SELECT \"Device Id\", json_extract(Attr, '\$.process_used'),
        json_extract(Attr, '\$.device_used'), json_extract(Attr, '\$.device_total') FROM memscope_dump
        WHERE Event = 'SYSTEM' AND \"Event Type\" = 'DEVICE_USAGE' ORDER BY ID")"
assert_eq "nvml: the driver layer's live bytes at exit = what NVML reports" "20971520" \
    "$(q "$TMP/oom.db" "SELECT sum(s.live_bytes) FROM process_stats s JOIN layers l ON l.id = s.layer
        WHERE l.device = '0' AND l.event_type = 'HAL'")"
mkdir -p "$TMP/nonvml" && ln -sf "$CUDA_DRIVER_DIR/libcuda.so.1" "$TMP/nonvml/libcuda.so.1"
MEMSCOPE_TEST_CUDA_CAPACITY=67108864 LD_LIBRARY_PATH="$TMP/nonvml" "$MEMSCOPE" run --format=db -q \
    -o "$TMP/nonvml.db" -- "$CUDA_PROGS/cuda_oom" >/dev/null 2>&1
assert_eq "nvml: absent, no DEVICE_USAGE rows and the same device rows" "0|20971520" \
    "$(q "$TMP/nonvml.db" "SELECT (SELECT count(*) FROM events WHERE kind = 13), sum(s.live_bytes)
        FROM process_stats s JOIN layers l ON l.id = s.layer WHERE l.device = '0' AND l.event_type = 'HAL'")"

# NVTX (NVIDIA's header-only library, where a toolkit provides it): ranges and marks
if [ -x "$CUDA_PROGS/nvtx_known" ]; then
    out=$("$MEMSCOPE" run --format=db -q -o "$TMP/nvtx.db" -- "$CUDA_PROGS/nvtx_known" 2>/dev/null)
    assert_eq "nvtx: program output" "ok" "$out"
    assert_eq "nvtx: ranges (name, depth, parent, closed)" "outer|0||1
mydomain::inner|1|outer|1
wide|1|outer|1" "$(q "$TMP/nvtx.db" "SELECT r.name, r.depth, p.name, r.end_ns IS NOT NULL FROM ranges r
        LEFT JOIN ranges p ON p.id = r.parent_id ORDER BY r.id")"
    assert_eq "nvtx: marks" "hello
mydomain::registered
start: async
end" "$(q "$TMP/nvtx.db" "SELECT Name FROM memscope_dump WHERE \"Event Type\" = 'Mark' ORDER BY ID")"
    assert_eq "nvtx: the 200-byte block is allocated inside mydomain::inner" "1" \
        "$(q "$TMP/nvtx.db" "SELECT count(*) FROM blocks b JOIN ranges r ON r.name = 'mydomain::inner'
            AND b.thread_id = r.thread_id AND b.alloc_ns BETWEEN r.start_ns AND r.end_ns WHERE b.size = 200")"
    assert_eq "nvtx memory extension: the heap is a pool region, regions its blocks" \
        "mydomain|pool:mydomain|3|1|2|131072|pool:mydomain:reserved|1|0|1048576" \
        "$(q "$TMP/nvtx.db" "SELECT p.name, a.name, sa.allocs, sa.frees, sa.live_blocks, sa.live_bytes,
            r.name, sr.allocs, sr.frees, sr.live_bytes FROM pools p
            JOIN layers a ON a.id = p.layer JOIN process_stats sa ON sa.layer = p.layer
            JOIN layers r ON r.id = p.reserve_layer JOIN process_stats sr ON sr.layer = p.reserve_layer")"
    out=$(NVTX_INJECTION64_PATH=/nonexistent/libother.so "$MEMSCOPE" run --format=db -o "$TMP/nvtx2.db" -- \
          "$CUDA_PROGS/nvtx_known" 2>&1)
    assert_match "nvtx: a user's injection is kept, and memscope says so" \
        "NVTX_INJECTION64_PATH is set \(/nonexistent/libother.so\)" "$out"
    assert_eq "nvtx: then no ranges in memscope" "0" "$(q "$TMP/nvtx2.db" "SELECT count(*) FROM ranges")"
else
    echo "skip: nvtx_known was not built (no nvtx3/nvToolsExt.h)"
fi

# a damaged PyTorch history beside a trace (<pid>.pta.pickle): a warning, the rest converts
LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run --format=db -q --format=trace -o "$TMP/hist" -- \
    "$CUDA_PROGS/cuda_known" dlsym >/dev/null 2>&1
t=$(ls "$TMP"/hist/*.mst | head -1)
printf '\x80\x04\x95garbage' > "${t%.*.mst}.pta.pickle"
out=$("$MEMSCOPE" import --format=db "$TMP/hist" -o "$TMP/hist.db" 2>&1; echo "rc=$?")
assert_match "damaged PyTorch history: a warning naming it, and the import succeeds" \
    "pta.pickle: PyTorch's allocator history is unreadable and left out.*rc=0" "${out//$'\n'/ }"
assert_eq "damaged PyTorch history: the driver rows are all there" "cuda:0|208" \
    "$(q "$TMP/hist.db" "SELECT l.name, s.allocs FROM process_stats s JOIN layers l ON l.id = s.layer WHERE l.name = 'cuda:0'")"

# the CSV export: Device Id and the CUDA rows
"$MEMSCOPE" export "$TMP/dlsym.db" --format=csv > "$TMP/k.csv"
assert_eq "CSV: OOM row" 'OOM_DETAIL,OOM_TRIGGER,N/A,1,N/A,"{func:cuMemAlloc,req_size:17179869184' \
    "$(grep -o 'OOM_DETAIL,OOM_TRIGGER,N/A,[0-9]*,[0-9]*,[0-9]*,1,N/A,"{func:cuMemAlloc,req_size:[0-9]*' "$TMP/k.csv" |
       sed -E 's/N\/A,[0-9]+,[0-9]+,[0-9]+,/N\/A,/')"
assert_eq "CSV: HAL rows on device 1" "408" "$(grep -c ',HAL,N/A,[0-9]*,[0-9]*,[0-9]*,1,0x' "$TMP/k.csv")"
assert_eq "CSV: no address-space rows (as memscope_dump)" "0" "$(grep -c ',VMM_' "$TMP/k.csv")"
assert_eq "CSV: as many rows as memscope_dump" "$(q "$TMP/dlsym.db" "SELECT count(*) + 1 FROM memscope_dump")" \
    "$(python3 -c 'import csv, sys; print(sum(1 for _ in csv.reader(open(sys.argv[1]))))' "$TMP/k.csv")"
# msMemScope's offline check_leaks (memscope.analyzer) on a CUDA run's CSV: HAL memory between
# the marks "iter" (cuda_marks.c): y (2 MiB, never freed) and q (5 MiB, freed after the third
# mark) are leaks; x and z were freed in the window, w came after it. Without the package (an
# ASan build): skipped.
PKG=$(dirname "$MEMSCOPE")/python
if ls "$PKG"/memscope/_native*.so >/dev/null 2>&1 && [ -x /usr/bin/python3 ]; then
    out=$(LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run -q --format=csv -o "$TMP/marks.csv" \
          -- "$CUDA_PROGS/cuda_marks" 2>"$TMP/marks.err")
    assert_eq "marks: program output" ok "$out"
    got=$(PYTHONPATH=$PKG /usr/bin/python3 -c "import memscope, sys
r = memscope.check_leaks(sys.argv[1], 'iter', 0)
print([(x['device'], x['size']) for x in r])" "$TMP/marks.csv" 2>&1)
    assert_eq "check_leaks: two leak lines" "Direct Hal memory leak of 2.000000 Mb(s)
Direct Hal memory leak of 5.000000 Mb(s)" "$(grep -o '^Direct Hal memory leak of [0-9.]* Mb(s)' <<<"$got")"
    assert_eq "check_leaks: y then q on device 0" "[('0', 2097152), ('0', 5242880)]" "$(tail -1 <<<"$got")"
    assert_eq "check_leaks: the Index is the CSV's ID of the MALLOC" \
        "$(grep -E '^[0-9]+,MALLOC,HAL,.*size:2097152[,}]' "$TMP/marks.csv" | cut -d, -f1)" \
        "$(grep -o 'Mb(s) at 0x[0-9a-f]* in Index [0-9]*' <<<"$got" | head -1 | awk '{print $NF}')"
    assert_match "check_leaks: too few marks after start_index 1" "need 3 from index 1" \
        "$(PYTHONPATH=$PKG /usr/bin/python3 -c "import memscope, sys
try:
    memscope.check_leaks(sys.argv[1], 'iter', 1)
except ValueError as e:
    print(e)" "$TMP/marks.csv" 2>&1)"
    assert_eq "check_leaks: no mark of that name" "ValueError" \
        "$(PYTHONPATH=$PKG /usr/bin/python3 -c "import memscope, sys
try:
    memscope.check_leaks(sys.argv[1], 'nosuch', 0)
except ValueError as e:
    print(type(e).__name__)" "$TMP/marks.csv" 2>&1)"
fi
done_testing
