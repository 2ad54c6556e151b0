#!/bin/bash
# test_cuda_usage.sh: analyze usage's device part (docs/usage.md): what NVML reports for the
# process beside what the hooked CUDA calls explain, and the device_unattributed finding. Against
# the test driver and the TEST NVML (tests/cuda/ms_test_libnvml.c), which with
# MS_TEST_NVML_CONTEXT_BYTES=N reports N bytes more for the process than its driver calls
# allocated (a CUDA context's): the finding's bytes are exactly N. tests/cuda/cuda_oom.c holds
# 6, 12 and 20 MiB on device 0 at its two steps and its exit.
. "$(dirname "$0")/../integration/lib.sh"
[ -n "$CUDA_DRIVER_DIR" ] || skip "CUDA_DRIVER_DIR (the test driver's directory) is not set"

MIB=1048576
J() { python3 -c "import json,sys; d=json.load(open('$1')); $2"; }
run_oom() { # run_oom NAME LIB_DIR [env...]: cuda_oom under memscope, analyze usage --json
    local name=$1 dir=$2
    shift 2
    env "$@" MEMSCOPE_TEST_CUDA_CAPACITY=67108864 LD_LIBRARY_PATH="$dir" "$MEMSCOPE" run -q \
        -o "$TMP/$name.db" -- "$CUDA_PROGS/cuda_oom" >/dev/null 2>"$TMP/$name.runerr"
    assert_eq "$name: memscope run's status" 0 "$?"
    ms "$name" analyze usage --json "$TMP/$name.db"
    assert_eq "$name: analyze usage's status" 0 "$RC"
}

# X - Y: NVML says 40 MiB more than the hooked allocations at every moment
run_oom ctx "$CUDA_DRIVER_DIR" MS_TEST_NVML_CONTEXT_BYTES=$((40 * MIB))
assert_eq "context: rows at both steps and the exit, hooked bytes 6, 12, 20 MiB" \
    "$((46 * MIB))|$((6 * MIB))
$((52 * MIB))|$((12 * MIB))
$((60 * MIB))|$((20 * MIB))" \
    "$(q "$TMP/ctx.db" "SELECT process_used, hooked_bytes FROM usage_devices WHERE device = 0 ORDER BY ts_ns")"
assert_eq "context: the finding, its bytes X - Y = 40 MiB" "device_unattributed $((40 * MIB))" \
    "$(J "$TMP/ctx.out" "print(' '.join('%s %d' % (f['kind'], f['bytes']) for f in d['findings'] if f['kind'] == 'device_unattributed'))")"
assert_match "context: the message gives both figures" \
    "NVML reported 60\\.0 MiB of CUDA device 0 for it while the CUDA calls memscope hooks had 20\\.0 MiB live there: 40\\.0 MiB" \
    "$(J "$TMP/ctx.out" "print([f['message'] for f in d['findings'] if f['kind'] == 'device_unattributed'][0])")"
assert_eq "context: the process's device 0" "0 $((60 * MIB)) $((64 * MIB)) $((40 * MIB))" \
    "$(J "$TMP/ctx.out" "v=[x for p in d['processes'] for x in p['devices'] if x['device'] == 0][0]; print(v['device'], v['peak_process_used_bytes'], v['total_bytes'], v['max_unattributed_bytes'])")"

# X = Y: every byte explained, no finding
run_oom same "$CUDA_DRIVER_DIR"
assert_eq "no context: max_unattributed 0, no device finding" "0 0" \
    "$(J "$TMP/same.out" "v=[x for p in d['processes'] for x in p['devices'] if x['device'] == 0][0]; print(v['max_unattributed_bytes'], sum(f['kind'] == 'device_unattributed' for f in d['findings']))")"

# No NVML: no device figures, said so; the rest as before
mkdir -p "$TMP/nonvml" && ln -sf "$CUDA_DRIVER_DIR/libcuda.so.1" "$TMP/nonvml/libcuda.so.1"
run_oom nonvml "$TMP/nonvml" MS_TEST_NVML_CONTEXT_BYTES=$((40 * MIB))
assert_eq "no NVML: no devices, said so, no device finding" "[] 1 0" \
    "$(J "$TMP/nonvml.out" "print([x for p in d['processes'] for x in p['devices']], int(d['devices'].startswith('not sampled')), sum(f['kind'] == 'device_unattributed' for f in d['findings']))")"
ms nonvml_text analyze usage "$TMP/nonvml.db"
assert_match "no NVML: the text says so" "device memory: not sampled" "$(cat "$TMP/nonvml_text.out")"
assert_eq "no NVML: no usage_devices rows; the usage samples still written" "0|1" \
    "$(q "$TMP/nonvml.db" "SELECT count(*), (SELECT count(*) > 0 FROM usage_samples) FROM usage_devices")"

# memscope usage --pid ... --devices: the devices' part in Tiny-Torch's report shape, through the
# test NVML (MS_TEST_NVML_DEVICES: device 0 uses 1000 MiB of 4 GiB, all by the sampled process)
sleep 30 &
SP=$!
MS_TEST_NVML_DEVICES=$((1000 * MIB)):$((4096 * MIB)),0:$((4096 * MIB)) MS_TEST_NVML_PID=$SP \
    LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" usage --pid $SP --devices 0 1 --duration 0.3 \
    -o "$TMP/dev.json" --plot "$TMP/dev.svg" 2>"$TMP/dev.err"
assert_eq "usage --devices: status" 0 "$?"
assert_eq "usage --devices: device 0's current usage and statistics" \
    "$((1000 * MIB)) $((3096 * MIB)) $((4096 * MIB)) 24.4140625 24.4140625 24.4140625 True" \
    "$(J "$TMP/dev.json" "v=d['devices']['0']; c=v['current_usage']; s=v['statistics']; print(c['allocated'], c['free'], c['total'], c['utilization_percent'], s['avg_utilization'], s['max_utilization'], s['samples_count'] >= 2)")"
assert_eq "usage --devices: the process's share of device 0, none of device 1" "$((1000 * MIB)) 0 2" \
    "$(J "$TMP/dev.json" "print(d['devices']['0']['processes']['$SP']['current_bytes'], d['devices']['1']['processes']['$SP']['peak_bytes'], d['summary']['devices'])")"
# --plot: each device's memory used is a series beside the process's RSS, PSS and USS, its
# extent and samples the report's (1000 MiB on device 0, nothing on device 1)
assert_eq "usage --devices --plot: the series, the devices' extents and samples" \
    "pid $SP RSS|pid $SP PSS|pid $SP USS|device 0 used|device 1 used $((1000 * MIB)) 0 True" \
    "$(python3 - "$TMP/dev.svg" "$TMP/dev.json" <<'EOF'
import json, sys
import xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
g = [e for e in ET.parse(sys.argv[1]).getroot().iter(NS + "g") if e.get("class") == "series"]
d = json.load(open(sys.argv[2]))["devices"]
dev = [e for e in g if e.get("data-kind") == "device_used"]
print("|".join(e.get("data-name") for e in g), dev[0].get("data-max-bytes"),
      dev[1].get("data-max-bytes"),
      all(int(e.get("data-samples")) == d[e.get("data-id")]["statistics"]["samples_count"] for e in dev))
EOF
)"
MS_TEST_NVML_DEVICES=1:2 LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" usage --pid $SP \
    --devices 0 5 --duration 0.1 -o "$TMP/dev5.json" 2>"$TMP/dev5.err"
assert_eq "usage --devices 5 of 1: status 1, said, device 0 still reported" "1 1 ['0']" \
    "$? $(grep -c 'no CUDA device 5 (NVML lists 1)' "$TMP/dev5.err") $(J "$TMP/dev5.json" "print(list(d['devices']))")"
LD_LIBRARY_PATH="$TMP/nonvml" "$MEMSCOPE" usage --pid $SP --devices 0 --duration 0.1 \
    -o "$TMP/nodev.json" 2>"$TMP/nodev.err"
assert_eq "usage --devices without NVML: status 0, no devices part, said" "0 False 1" \
    "$? $(J "$TMP/nodev.json" "print('devices' in d)") $(grep -c 'devices not sampled: libnvidia-ml.so.1 not found' "$TMP/nodev.err")"
kill $SP 2>/dev/null
wait $SP 2>/dev/null
done_testing
