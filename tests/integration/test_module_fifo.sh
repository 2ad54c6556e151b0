#!/bin/bash
# test_module_fifo.sh: a trace whose module path names a FIFO (the program replaced by one after
# its run, as another local user could do in a shared directory), and a module whose debug link
# names a FIFO: `memscope import` and `memscope view DIR` finish (libdw used to open the FIFO
# and wait for a writer for ever); the frames of that module keep their addresses, the others
# are symbolized. Each memscope call runs under `timeout` so that a regression fails instead of
# hanging. (The frames of the module: "?? (app+0x...)", or its symbol without file and line.)
. "$(dirname "$0")/lib.sh"
command -v cc >/dev/null || skip "no C compiler"
command -v objcopy >/dev/null || skip "no objcopy"
mkdir -p "$TMP/bin"
cat >"$TMP/bin/app.c" <<'C'
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) static void *grab(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
int main(void) { void *p = grab(123457); free(p); return 0; }
C
cc -g -O0 -o "$TMP/bin/app" "$TMP/bin/app.c" || skip "cannot build the test program"

# 1. the program itself replaced by a FIFO after the run
ms run run --format=trace -o "$TMP/tr" -- "$TMP/bin/app"
assert_eq "run: exit status" 0 "$RC"
rm "$TMP/bin/app"
mkfifo "$TMP/bin/app"
RC=0
timeout 60 "$MEMSCOPE" import --format=db "$TMP/tr" -o "$TMP/i.db" >"$TMP/import.out" 2>"$TMP/import.err" || RC=$?
assert_eq "import with the module a FIFO: exit status" 0 "$RC"
assert_eq "its allocation and free are there" 2 "$(q "$TMP/i.db" "SELECT count(*) FROM events WHERE size = 123457")"
assert_match "its frame in the FIFO keeps its address" "^\?\? \(app\+0x[0-9a-f]+\)$" \
    "$(q "$TMP/i.db" "SELECT s.c_text FROM events e JOIN stacks s ON s.id = e.stack_id WHERE e.size = 123457 LIMIT 1" | head -1)"

if "$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd"; then
    echo "note: memscope built without libmicrohttpd: view DIR is left out"
else
    timeout 60 "$MEMSCOPE" view "$TMP/tr" --port 0 >"$TMP/view.out" 2>"$TMP/view.err" &
    VPID=$!
    for _ in $(seq 600); do
        grep -q "http://127" "$TMP/view.out" && break
        kill -0 $VPID 2>/dev/null || break
        sleep 0.1
    done
    assert_match "view DIR with the module a FIFO: serves" "open http://127\.0\.0\.1:[0-9]+/" "$(cat "$TMP/view.out")"
    kill -INT $VPID 2>/dev/null
    wait $VPID
    assert_eq "view DIR: Ctrl-C, exit status 0" 0 "$?"
fi

# 2. the program regular, its debug information in app.debug by its debug link, a FIFO
cc -g -O0 -o "$TMP/bin/app2" "$TMP/bin/app.c"
objcopy --only-keep-debug "$TMP/bin/app2" "$TMP/bin/app2.debug"
objcopy --strip-debug --add-gnu-debuglink="$TMP/bin/app2.debug" "$TMP/bin/app2"
ms run2 run --format=trace -o "$TMP/tr2" -- "$TMP/bin/app2"
assert_eq "run of the stripped program: exit status" 0 "$RC"
rm "$TMP/bin/app2.debug"
mkfifo "$TMP/bin/app2.debug"
RC=0
timeout 60 "$MEMSCOPE" import --format=db "$TMP/tr2" -o "$TMP/i2.db" >"$TMP/import2.out" 2>"$TMP/import2.err" || RC=$?
assert_eq "import with the debug link a FIFO: exit status" 0 "$RC"
assert_match "its frame named by the symbol table, without a line" "^grab \(app2\+0x[0-9a-f]+\)$" \
    "$(q "$TMP/i2.db" "SELECT s.c_text FROM events e JOIN stacks s ON s.id = e.stack_id WHERE e.size = 123457 LIMIT 1" | head -1)"
done_testing
