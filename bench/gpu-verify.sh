#!/bin/bash
# gpu-verify.sh: what memscope's CUDA support gives on a real GPU (issue 12), checked against
# what PyTorch and the GPU themselves report. Run on a machine with an NVIDIA GPU, its driver and
# PyTorch with CUDA, from the repository root:  bench/gpu-verify.sh
# NOT YET RUN ON A GPU (no GPU was lent to the session that wrote it): the first run on one is
# its test. Each check prints ok/FAIL with the figures; write them into bench/RESULTS.md.
#   1. bench/gpu_train.py (MLP + AdamW, 20 steps, an induced OOM caught) under `memscope run`:
#      PTA live bytes at exit = torch.cuda.memory_allocated(); PTA segments = memory_reserved();
#      the driver layer (cuda:0) holds at least memory_reserved(); NVML's process_used at exit
#      against the driver layer; the OOM row and its report.
#   2. a cudart program (nvcc) with cudaMalloc / cudaFree / a kernel: HAL rows and KERNEL_LAUNCH.
#   3. the cost of a launch, recorded and not, against the real driver (an empty kernel).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-gpu}
PY=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/memscope-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
check() { if [ "$2" = "$3" ]; then echo "ok: $1 ($2)"; else echo "FAIL: $1: expected [$2], got [$3]"; fails=$((fails + 1)); fi; }
q() { sqlite3 -batch -noheader "$1" "$2"; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build "$build" -j >/dev/null || exit 1
MS=$build/memscope

# 1. PyTorch
"$MS" run -q --format=db --events=alloc,free,launch -o "$work/train.db" -- "$PY" "$root/bench/gpu_train.py" "$work/torch.json" || exit 1
alloc=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['allocated'])" "$work/torch.json")
reserved=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['reserved'])" "$work/torch.json")
check "PTA live bytes at exit = memory_allocated()" "$alloc" \
    "$(q "$work/train.db" "SELECT COALESCE(sum(s.live_bytes), 0) FROM process_stats s JOIN layers l ON l.id = s.layer WHERE l.name = 'pta:0'")"
check "PTA segments at exit = memory_reserved()" "$reserved" \
    "$(q "$work/train.db" "SELECT COALESCE(sum(s.live_bytes), 0) FROM process_stats s JOIN layers l ON l.id = s.layer WHERE l.name = 'pta_segment:0'")"
check "driver layer cuda:0 holds the reserved segments" "1" \
    "$(q "$work/train.db" "SELECT sum(s.live_bytes) >= $reserved FROM process_stats s JOIN layers l ON l.id = s.layer WHERE l.device = '0' AND l.event_type = 'HAL' AND l.name NOT LIKE 'pta%'")"
echo "figures: driver layers at exit by layer; NVML's last DEVICE_USAGE row:"
q "$work/train.db" "SELECT l.name, s.live_bytes, s.peak_bytes FROM process_stats s JOIN layers l ON l.id = s.layer WHERE l.device = '0'"
q "$work/train.db" "SELECT Attr FROM memscope_dump WHERE \"Event Type\" = 'DEVICE_USAGE' ORDER BY ID DESC LIMIT 1"
check "an OOM_TRIGGER row for the induced OOM" "1" \
    "$(q "$work/train.db" "SELECT count(*) >= 1 FROM memscope_dump WHERE \"Event Type\" = 'OOM_TRIGGER'")"
"$MS" analyze oom "$work/train.db" | head -20
check "kernel launches recorded" "1" "$(q "$work/train.db" "SELECT count(*) > 0 FROM events WHERE kind = 10")"
echo "figures: the most launched kernels:"
q "$work/train.db" "SELECT name, count(*) FROM events WHERE kind = 10 GROUP BY 1 ORDER BY 2 DESC LIMIT 5"

# 2. cudart
if command -v nvcc >/dev/null; then
    cat > "$work/rt.cu" <<'CU'
#include <cstdio>
__global__ void fill(int *p) { p[threadIdx.x] = threadIdx.x; }
int main() {
    int *a, *b;
    if (cudaMalloc(&a, 1 << 20) || cudaMalloc(&b, 2 << 20)) return 1;
    fill<<<1, 32>>>(a);
    cudaDeviceSynchronize();
    cudaFree(b);
    printf("ok\n");
    return 0;
}
CU
    nvcc -o "$work/rt" "$work/rt.cu" && "$MS" run -q --format=db --events=alloc,free,launch -o "$work/rt.db" -- "$work/rt" >/dev/null
    check "cudart: the 1 and 2 MiB blocks" "1048576|2097152" \
        "$(q "$work/rt.db" "SELECT group_concat(size, '|') FROM (SELECT size FROM blocks b JOIN layers l ON l.id = b.layer WHERE l.name = 'cuda:0' AND size IN (1048576, 2097152) ORDER BY size)")"
    check "cudart: the kernel launch" "1" "$(q "$work/rt.db" "SELECT count(*) FROM events WHERE kind = 10 AND name LIKE '%fill%'")"
fi

# 3. cost per launch against the real driver: an empty kernel launched 200000 times
if command -v nvcc >/dev/null; then
    cat > "$work/launch.cu" <<'CU'
#include <chrono>
#include <cstdio>
__global__ void empty() {}
int main() {
    empty<<<1, 1>>>();
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200000; i++) empty<<<1, 1>>>();
    cudaDeviceSynchronize();
    auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    printf("%.1f\n", ns / 200000);
    return 0;
}
CU
    if nvcc -O2 -o "$work/launch" "$work/launch.cu"; then
        for r in 1 2 3; do
            "$work/launch" >> "$work/plain.ns"
            "$MS" run -q --events=alloc,free,launch -o "$work/b$r.db" -- "$work/launch" >> "$work/rec.ns"
            "$MS" run -q -o "$work/c$r.db" -- "$work/launch" >> "$work/off.ns"
        done
        echo "figures: ns per launch (3 runs each): plain $(tr '\n' ' ' < "$work/plain.ns")," \
             "recorded $(tr '\n' ' ' < "$work/rec.ns"), not recorded $(tr '\n' ' ' < "$work/off.ns")"
    fi
fi
echo "$fails check(s) failed"
[ "$fails" -eq 0 ]
