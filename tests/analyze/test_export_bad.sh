#!/bin/bash
# test_export_bad.sh: `memscope export` of pprof, collapsed, speedscope and perfetto given bad
# input: an unknown format, selectors that match nothing (process, step, device, an empty time
# window), bad values, an output that cannot be created: a clear message, a non-zero status,
# and no file written nor an existing one changed.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/ex.db
ms run run -q -o "$DB" -- "$PROGS/an_export"
assert_eq "run exit status" 0 "$RC"
mkdir -p "$TMP/out"
echo "old content" >"$TMP/out/keep.txt"

# bad STATUS MESSAGE ARGS...: export exits STATUS, says MESSAGE, and leaves $TMP/out as it was
bad() {
    local want=$1 msg=$2
    shift 2
    ms bad export "$DB" "$@"
    assert_eq "status of export $*" "$want" "$RC"
    assert_eq "message of export $*" 1 "$(grep -cF -e "$msg" "$TMP/bad.err")"
    assert_eq "nothing written by export $*" "keep.txt|old content" \
        "$(ls -A "$TMP/out")|$(cat "$TMP/out/keep.txt")"
}
O=$TMP/out/keep.txt
bad 2 "unknown format 'flame'" --format=flame -o "$O"
bad 1 "no process with pid 999999 in this run" --format=pprof --process=999999 -o "$O"
bad 1 "no step 9 in this run" --format=collapsed --step=9 -o "$O"
bad 1 "no layer of device 3 in this run" --format=speedscope --device=3 -o "$O"
bad 1 "nothing matches the selection" --format=perfetto --from=1 --to=2 -o "$O"
bad 2 "--to (1) is before --from (5)" --format=collapsed --from=5 --to=1 -o "$O"
bad 2 "no layer named 'nosuch'" --format=collapsed --layer=nosuch -o "$O"
bad 2 "--process needs a process id" --format=collapsed --process=abc -o "$O"
bad 2 "--device needs cpu or a CUDA ordinal" --format=collapsed --device=gpu -o "$O"
bad 2 "--what needs allocated, live-at-exit, peak or leaked" --format=collapsed --what=most -o "$O"
bad 2 "--what applies to --format=collapsed and speedscope" --format=pprof --what=peak -o "$O"
bad 2 "apply to --format=pprof, collapsed, speedscope and perfetto" --format=csv --step=1 -o "$O"
bad 2 "one window: --step, --at, or --from and --to" --format=collapsed --step=1 --at=5 -o "$O"
bad 2 "one window: --step, --at, or --from and --to" --format=collapsed --at=5 --to=9 -o "$O"
bad 1 "cannot create $TMP/out/keep.txt/x" --format=collapsed -o "$TMP/out/keep.txt/x"
bad 1 "cannot create /nonexistent" --format=pprof -o /nonexistent/x.pb.gz
ms nodb export "$TMP/none.db" --format=collapsed
assert_eq "a database that does not exist: status 1" 1 "$RC"

ms analyzesel analyze peak "$DB" --process=1
assert_eq "analyze refuses the export-only selectors" 2 "$RC"
done_testing
