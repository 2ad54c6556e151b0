#!/bin/bash
# test_cuda_budget.sh: memscope run's budgets on CUDA device memory (docs/ci.md), through the
# TEST DRIVER (ms_test_libcuda.c; no GPU). cuda_known_direct's known answers (test_cuda.sh):
# device 0 (cuda:0) peaks at 6291456 bytes (1, 2 and 3 MiB allocated together) and keeps
# 4286464 bytes at exit; device 1 (cuda:1) peaks at 4210688 bytes; the stream-ordered pool
# (cuda_pool:0) at 20480. A device budget that fails and one that holds, by family (cuda: every
# device), by device (cuda:1) and for the leak at exit.
# Environment: MEMSCOPE, CUDA_PROGS, CUDA_DRIVER_DIR.
. "$(dirname "$0")/../integration/lib.sh"
: "${CUDA_PROGS:?}" "${CUDA_DRIVER_DIR:?}"
SRC=$(dirname "$0")/cuda_known.c

out=$(LD_LIBRARY_PATH="$CUDA_DRIVER_DIR" "$MEMSCOPE" run -o "$TMP/c.db" \
    --max-peak=4MiB:cuda --max-peak=8MiB:cuda --max-peak=4MiB:cuda:1 --max-peak=5MiB:cuda_pool \
    --fail-on-leak=4MiB:cuda:0 --fail-on-leak=5MiB:cuda:0 --junit="$TMP/j.xml" \
    -- "$CUDA_PROGS/cuda_known_direct" direct 2>"$TMP/err")
rc=$?
assert_eq "program output" "ok" "$out"
assert_eq "a device budget failed: status 23" 23 "$rc"
assert_eq "which budgets failed and held" "failed --max-peak=4MiB:cuda 6291456 cuda:0
held --max-peak=8MiB:cuda 6291456 cuda:0
failed --max-peak=4MiB:cuda:1 4210688 cuda:1
held --max-peak=5MiB:cuda_pool 20480 cuda_pool:0
failed --fail-on-leak=4MiB:cuda:0 4286464
held --fail-on-leak=5MiB:cuda:0 4286464" \
    "$(sed -nE 's/^memscope: budget (failed|held): ([^ ]*): (peak )?([0-9]+) bytes.*(, (cuda[_a-z]*:[0-9]+)|live at exit).*/\1 \2 \4 \6/p' "$TMP/err" | sed 's/ $//')"
assert_eq "cuda:0's peak: the three blocks allocated together" "3145728 bytes in 1 block: main (cuda_known.c:$(grep_line "$SRC" 'OK(A.MemAlloc(&c, 3 << 20));'))
2097152 bytes in 1 block: main (cuda_known.c:$(grep_line "$SRC" 'OK(A.MemAlloc(&b, 2 << 20));'))
1048576 bytes in 1 block: main (cuda_known.c:$(grep_line "$SRC" 'OK(A.MemAlloc(&a, 1 << 20));'))" \
    "$(grep -A3 'budget failed: --max-peak=4MiB:cuda:' "$TMP/err" | sed -n '2,4p' |
        sed -E 's/^memscope: +//; s|\(/[^ ]*/|(|')"
assert_eq "JUnit: 6 cases, 3 failures (parsed as XML)" "6 3" "$(/usr/bin/python3 -c '
import sys, xml.etree.ElementTree as ET
s = ET.parse(sys.argv[1]).getroot().find("testsuite")
print(s.get("tests"), len([c for c in s.iter("testcase") if c.find("failure") is not None]))
' "$TMP/j.xml")"
done_testing
