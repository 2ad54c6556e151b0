#!/bin/bash
# test_cuda_monitor.sh: the live monitor's device figures (docs/monitor.md) against the test
# driver (ms_test_libcuda.c) and the test NVML: cuda_known's raw trace read by memscope monitor
# --once gives, per device, the live bytes the database has at exit over the device's layers
# (cuda:N and its driver pools cuda_pool:N), and NVML's used bytes as the database's DEVICE_USAGE.
. "$(dirname "$0")/../integration/lib.sh"
: "${CUDA_PROGS:?}" "${CUDA_DRIVER_DIR:?}"

LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run -q --format=db --keep-trace --no-pack \
    -o "$TMP/out/c.db" -- "$CUDA_PROGS/cuda_known" dlsym >"$TMP/run.out" 2>&1
assert_eq "cuda_known under memscope" "ok" "$(cat "$TMP/run.out")"
TD=$(ls -d "$TMP"/out/.memscope-trace-* | head -1)
ms once monitor "$TD" --once
assert_eq "monitor --once: status" 0 "$RC"
for d in 0 1; do
    want=$(q "$TMP/out/c.db" "SELECT sum(CASE k.name WHEN 'MALLOC' THEN e.size WHEN 'FREE' THEN -e.size END)
        FROM events e JOIN layers l ON l.id = e.layer JOIN event_kinds k ON k.id = e.kind
        WHERE l.name IN ('cuda:$d', 'cuda_pool:$d')")
    got=$(sed -n "s/^memscope_live_bytes{.*layer=\"device\",device=\"cuda:$d\",gpu=\"$d\"} //p" "$TMP/once.out")
    assert_eq "cuda:$d live bytes at exit (the database's cuda:$d and cuda_pool:$d)" "$want" "$got"
    want=$(q "$TMP/out/c.db" "SELECT e.size FROM events e JOIN layers l ON l.id = e.layer
        JOIN event_kinds k ON k.id = e.kind WHERE l.name = 'cuda:$d' AND k.name = 'DEVICE_USAGE'")
    got=$(sed -n "s/^memscope_device_used_bytes{.*device=\"cuda:$d\",gpu=\"$d\"} //p" "$TMP/once.out")
    assert_eq "cuda:$d used bytes (NVML, the database's DEVICE_USAGE)" "$want" "$got"
    want=$(q "$TMP/out/c.db" "SELECT json_extract(e.attr, '$.device_total') FROM events e
        JOIN layers l ON l.id = e.layer JOIN event_kinds k ON k.id = e.kind
        WHERE l.name = 'cuda:$d' AND k.name = 'DEVICE_USAGE'")
    got=$(sed -n "s/^memscope_limit_bytes{.*device=\"cuda:$d\",gpu=\"$d\"} //p" "$TMP/once.out")
    assert_eq "cuda:$d forecast's capacity: the device's total (NVML)" "$want" "$got"
    got=$(sed -n "s/^memscope_oom_eta_seconds{.*device=\"cuda:$d\",gpu=\"$d\"} //p" "$TMP/once.out")
    assert_eq "cuda:$d forecast: not growing (one sample)" "+Inf" "$got"
done
assert_eq "cuda:1 allocations (the database's MALLOC rows)" \
    "$(q "$TMP/out/c.db" "SELECT count(*) FROM events e JOIN layers l ON l.id = e.layer
        JOIN event_kinds k ON k.id = e.kind WHERE l.name = 'cuda:1' AND k.name = 'MALLOC'")" \
    "$(sed -n 's/^memscope_allocations_total{.*device="cuda:1",gpu="1"} //p' "$TMP/once.out")"
done_testing
