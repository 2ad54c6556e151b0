#!/bin/bash
# test_cuda_view.sh: what NVML reports in the pictures, in Debian's chromium (view_browser.mjs,
# playwright-core from web/node_modules). The viewer's memory chart of cuda_oom.c's run against
# the test driver and the TEST NVML (tests/cuda/ms_test_libnvml.c; 40 MiB of context beside its
# 20 MiB allocated at the exit): a series of each device's memory used, device 0's at 60 MiB, the
# peak usage_devices holds. And `memscope usage --devices --plot`'s picture (the test NVML's
# devices: 1000 MiB used of 4 GiB on device 0, none on device 1) opened from disk: chromium
# parses it and draws its five series inside the frame. Skipped (77) when chromium, node or
# the npm packages are missing (scripts/setup-debian.sh installs them); under CI=true that fails.
. "$(dirname "$0")/../view/view_lib.sh"
[ -n "$CUDA_DRIVER_DIR" ] || skip "CUDA_DRIVER_DIR (the test driver's directory) is not set"
missing=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium"
command -v node >/dev/null || missing="$missing node"
[ -d "$WEB/node_modules/playwright-core" ] || missing="$missing web/node_modules (npm ci)"
"$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd" && missing="$missing libmicrohttpd"
if [ -n "$missing" ]; then
    [ "${CI:-}" = true ] && { echo "FAIL: missing:$missing (scripts/setup-debian.sh installs them)"; exit 1; }
    skip "missing:$missing (scripts/setup-debian.sh installs them)"
fi
MIB=1048576
mkdir -p "$CUDA_PROGS/screenshots"

# The viewer: each device's memory used beside live bytes and the process's RSS, PSS and USS.
MS_TEST_NVML_CONTEXT_BYTES=$((40 * MIB)) MEMSCOPE_TEST_CUDA_CAPACITY=67108864 \
    LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run -q --usage-interval=0.02 \
    -o "$TMP/oom.db" -- "$CUDA_PROGS/cuda_oom" >/dev/null 2>"$TMP/oom.err"
assert_eq "cuda_oom under memscope run: exit status" 0 "$?"
assert_eq "usage_devices: device 0's memory used at most 60 MiB, NVML's" "$((60 * MIB))" \
    "$(q "$TMP/oom.db" "SELECT max(device_used) FROM usage_devices WHERE device = 0")"
view_start "$TMP/oom.db"
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "$URL" "$CUDA_PROGS/screenshots" device >"$TMP/device.out" 2>&1; then
    pass "each device's memory used in chromium: $(tail -1 "$TMP/device.out")"
else
    fail "each device's memory used in chromium"
fi
sed 's/^/  /' "$TMP/device.out"
view_stop

# memscope usage --plot's picture, opened from disk.
sleep 30 &
SP=$!
MS_TEST_NVML_DEVICES=$((1000 * MIB)):$((4096 * MIB)),0:$((4096 * MIB)) MS_TEST_NVML_PID=$SP \
    LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" usage --pid $SP --devices 0 1 --interval 0.02 \
    --duration 0.3 -o "$TMP/dev.json" --plot "$TMP/dev.svg" 2>"$TMP/dev.err"
assert_eq "usage --devices --plot: exit status" 0 "$?"
kill $SP 2>/dev/null
wait $SP 2>/dev/null
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "file://$TMP/dev.svg" "$CUDA_PROGS/screenshots" svg 5 \
    >"$TMP/svg.out" 2>&1; then
    pass "usage --plot's picture in chromium: $(tail -1 "$TMP/svg.out")"
else
    fail "usage --plot's picture in chromium"
fi
sed 's/^/  /' "$TMP/svg.out"
done_testing
