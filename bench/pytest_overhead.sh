#!/bin/bash
# pytest_overhead.sh: the cost of memscope.pytest_plugin (docs/ci.md): bench/pytest_suite (200
# tests of ordinary Python work, no markers) run plain and with --memscope, each 3 times; prints
# the wall times (the session as a whole, and pytest's own "in N s", which excludes the
# conversion and measurement after the last test). Usage: bench/pytest_overhead.sh [BUILD_DIR]
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$(cd "$BUILD" && pwd)/python PYTHONDONTWRITEBYTECODE=1
run() {
    local t0 t1 out
    t0=$(date +%s.%N)
    out=$(/usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" "$HERE/pytest_suite" 2>&1 | grep -E 'passed|failed' | tail -1)
    t1=$(date +%s.%N)
    printf '%-10s wall %.2f s   pytest: %s\n' "$label" "$(echo "$t1 - $t0" | bc)" "$out"
}
for i in 1 2 3; do
    label=plain run
    label=memscope run -p memscope.pytest_plugin --memscope
done
