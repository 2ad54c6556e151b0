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
done_testing
