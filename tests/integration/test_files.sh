#!/bin/bash
# test_files.sh: the files memscope creates, replaces and removes (issue 24 items 4-6, 12, 13;
# docs/cli.md "Files"): never through a planted symbolic link, never removing what it did not
# create, one run at a time per output, a directory named like an output refused before the
# program runs, and every file readable by its owner only.
. "$(dirname "$0")/lib.sh"
umask 022

# 13: private files and directories
"$MEMSCOPE" run --format=db -q -o "$TMP/out/r.db" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
assert_eq "the database is 0600" "600" "$(stat -c %a "$TMP/out/r.db")"
assert_eq "an output directory memscope creates is 0700" "700" "$(stat -c %a "$TMP/out")"
"$MEMSCOPE" run -q -o "$TMP/outdir" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
assert_eq "a directory output: the run's folder is 0700" "700" \
    "$(stat -c %a "$TMP"/outdir/memscope_* 2>&1)"
"$MEMSCOPE" run --format=db -q --format=trace -o "$TMP/tr" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
assert_eq "trace files are 0600" "600" "$(stat -c %a "$TMP"/tr/*.mst | sort -u)"
"$MEMSCOPE" export "$TMP/out/r.db" -o "$TMP/r.csv"
assert_eq "an exported CSV is 0600" "600" "$(stat -c %a "$TMP/r.csv")"

# 5: a link planted where the packer writes is not followed (the pid of `exec` is the shell's)
echo "precious" > "$TMP/victim"
cp "$TMP"/tr/*.mst "$TMP/raw.mst"
"$MEMSCOPE" run --format=db -q --format=trace --no-pack -o "$TMP/raw" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
t=$(ls "$TMP"/raw/*.mst | head -1)
sh -c 'ln -s "$2" "$1.packing"; ln -s "$2" "$1.packing.$$.0"; exec "$3" pack "$1"' _ "$t" \
    "$TMP/victim" "$MEMSCOPE" >/dev/null 2>&1
assert_eq "pack: the planted link's target is untouched" "precious" "$(cat "$TMP/victim")"
assert_eq "pack: the trace was packed all the same (version 2)" "2" \
    "$(od -An -tu4 -j8 -N4 "$t" | tr -d ' ')"

# 6: a failed export leaves the target as it was; a device is never removed
echo "old,content" > "$TMP/keep.csv"
"$MEMSCOPE" export "$TMP/no-such.db" -o "$TMP/keep.csv" 2>/dev/null
assert_eq "export from a missing database: exit status" "1" "$?"
assert_eq "export failed: the existing file is unchanged" "old,content" "$(cat "$TMP/keep.csv")"
# (a node of our own with /dev/full's numbers: the system's is never put at risk)
if mknod "$TMP/full" c 1 7 2>/dev/null; then
    "$MEMSCOPE" export "$TMP/out/r.db" -o "$TMP/full" 2>/dev/null
    assert_eq "export into a full device fails" "1" "$?"
    assert_eq "and the device node is still there" "character special file" \
        "$(stat -c %F "$TMP/full" 2>&1)"
fi
assert_eq "no temporary file left beside the CSV" "" "$(ls "$TMP" | grep -F 'keep.csv.tmp' || true)"

# 4: two runs writing one database: the second refuses before running its program
"$MEMSCOPE" run --format=db -q -o "$TMP/same.db" -- /bin/sh -c 'sleep 2; echo first' > "$TMP/a.out" 2>&1 &
a=$!
sleep 0.5
"$MEMSCOPE" run --format=db -q -o "$TMP/same.db" -- /bin/sh -c "touch '$TMP/second-ran'" > "$TMP/b.out" 2>&1
assert_eq "second run: exit status 1" "1" "$?"
assert_match "second run: says the output is being written" "being written by another memscope run" \
    "$(cat "$TMP/b.out")"
assert_eq "second run: its program did not run" "no" "$([ -e "$TMP/second-ran" ] && echo yes || echo no)"
wait $a
assert_eq "first run: exit status and output" "0 first" "$? $(cat "$TMP/a.out")"
assert_eq "first run: its database" "1" "$(q "$TMP/same.db" "SELECT count(*) > 0 FROM processes")"
assert_eq "the lock file is gone after the run" "no" "$([ -e "$TMP/same.db.lock" ] && echo yes || echo no)"

# 12: -o NAME.db that is a directory: refused before the program runs
mkdir "$TMP/dir.db"
"$MEMSCOPE" run --format=db -q -o "$TMP/dir.db" -- /bin/sh -c "touch '$TMP/dir-ran'" > "$TMP/d.out" 2>&1
assert_eq "-o a directory named .db: exit status 1" "1" "$?"
assert_match "-o a directory: says so" "is a directory" "$(cat "$TMP/d.out")"
assert_eq "-o a directory: the program did not run" "no" "$([ -e "$TMP/dir-ran" ] && echo yes || echo no)"
# 12: two --format=trace runs into one directory at once: each packs only its own traces,
# without false errors, and every trace reads
mkdir -p "$TMP/both"
"$MEMSCOPE" run --format=db --format=trace -o "$TMP/both" -- "$PROGS/threads" 2 300000 >/dev/null 2>"$TMP/both1.err" &
first=$!
sleep 0.2
"$MEMSCOPE" run --format=db --format=trace -o "$TMP/both" -- "$PROGS/threads" 2 100000 >/dev/null 2>"$TMP/both2.err"
second=$?
wait $first
assert_eq "two trace runs into one directory: both exit 0" "0 0" "$? $second"
assert_eq "two trace runs into one directory: no error or warning" "" \
    "$(cat "$TMP/both1.err" "$TMP/both2.err" | grep -v 'traces kept in' || true)"
"$MEMSCOPE" import --format=db "$TMP/both" -o "$TMP/both.db" >/dev/null 2>&1
assert_eq "two trace runs into one directory: all their allocations read back" "800000" \
    "$(q "$TMP/both.db" "SELECT count(*) FROM events WHERE kind = 1 AND size BETWEEN 3001 AND 3003")"

# 9: a FIFO (or any non-regular file) named like a trace: skipped and said, never opened
mkdir -p "$TMP/fifo" && cp "$TMP"/tr/*.mst "$TMP/fifo/" && mkfifo "$TMP/fifo/99999.0.mst"
out=$(timeout 20 "$MEMSCOPE" import --format=db "$TMP/fifo" -o "$TMP/fifo.db" 2>&1; echo "rc=$?")
assert_match "import with a FIFO among the traces: done, and it says what it skipped" \
    "99999.0.mst: not a regular file; skipped.*rc=0" "${out//$'\n'/ }"
out=$(timeout 20 "$MEMSCOPE" pack "$TMP/fifo" 2>&1; echo "rc=$?")
assert_match "pack with a FIFO among the traces: done, and it says what it skipped" \
    "99999.0.mst: not a regular file; skipped.*rc=0" "${out//$'\n'/ }"
# A program that deletes the output directory it runs into (issue 24 item 12): memscope says
# what is gone instead of naming a trace directory that no longer exists as kept.
mkdir -p "$TMP/gone"
"$MEMSCOPE" run -o "$TMP/gone/sub/x.db" -- /bin/sh -c "rm -rf '$TMP/gone/sub'" >/dev/null \
    2>"$TMP/gone.err" </dev/null
assert_eq "output directory removed by the program: status 1" 1 "$?"
assert_match "... says the traces and the output directory are gone" \
    "trace directory .*/gone/sub/\.memscope-trace-[^ ]* was removed while the program ran, and the output directory .*/gone/sub; nothing recorded remains" \
    "$(cat "$TMP/gone.err")"
assert_eq "... and does not claim them kept" "" "$(grep 'kept in' "$TMP/gone.err")"
done_testing
