#!/bin/bash
# pytest_overhead.sh: the cost of memscope.pytest_plugin (docs/ci.md): bench/pytest_suite (200
# tests of ordinary Python work, no markers) run plain and with --memscope, each 3 times; prints
# the wall time and the CPU time (user + system: steadier than the wall time on a loaded
# machine) of the whole session. Usage: bench/pytest_overhead.sh [BUILD_DIR]
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$(cd "$BUILD" && pwd)/python PYTHONDONTWRITEBYTECODE=1
run() {
    local tf
    tf=$(mktemp)
    /usr/bin/time -o "$tf" -f "%e %U %S" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" \
        "$HERE/pytest_suite" >/dev/null 2>&1
    set -- $(tail -1 "$tf")
    rm -f "$tf"
    printf '%-10s wall %5.2f s   cpu %5.2f s\n' "$label" "$1" "$(echo "$2 + $3" | bc)"
}
for i in 1 2 3; do
    label=plain run
    label=memscope run -p memscope.pytest_plugin --memscope
done
