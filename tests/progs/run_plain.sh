#!/bin/bash
# run_plain.sh: runs one known-answer program without memscope and checks its exit status and
# first stdout line, so a broken fixture is told apart from a broken tracer.
#   run_plain.sh EXPECTED_STATUS EXPECTED_STDOUT_PREFIX PROGRAM [ARGS...]
# EXPECTED_STATUS is the shell's $? (128+N for a death by signal N).
want_status=$1 want_out=$2
shift 2
out=$("$@" 2>/dev/null)
status=$?
first=${out%%$'\n'*}
if [ "$status" != "$want_status" ]; then
    echo "FAIL: $*: exit status: expected $want_status, got $status" >&2
    exit 1
fi
case "$first" in
"$want_out"*) ;;
*)
    echo "FAIL: $*: stdout: expected a line starting [$want_out], got [$first]" >&2
    exit 1
    ;;
esac
echo "ok: $* (status $status, stdout [$first])"
