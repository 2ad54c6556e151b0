#!/bin/bash
# test_pack.sh: packed traces end to end. `memscope run --format=trace` and `--keep-trace` keep
# packed traces (format version 2), `--no-pack` raw ones (version 1); `memscope pack` packs raw
# traces in place and leaves packed ones alone; `memscope import` of a raw trace and of the same
# trace packed gives the same database, timestamps included; a damaged packed trace imports up
# to the damage. Known answers from tests/progs/threads.c (thread t: PAIRS malloc/free pairs of
# 3001 + 2t bytes) and, for the record kinds threads.c lacks, annotate, pystack_sim, mmap_anon
# and forker. The traces of a process that still runs after the program are left raw.
. "$(dirname "$0")/lib.sh"

THREADS=4
PAIRS=20000
SIZES="3001, 3003, 3005, 3007"

# version FILE: the version field of a trace header (bytes 8..11, little-endian).
version() { od -An -tu4 -j8 -N4 "$1" 2>/dev/null | tr -d ' '; }

# versions DIR: "name:version" of each trace in DIR, one a line.
versions() {
    local f
    for f in "$1"/*.mst; do
        [ -e "$f" ] && echo "$(basename "$f"):$(version "$f")"
    done
}

# others DIR: the names in DIR (hidden ones too) that are neither traces nor the usage monitor's
# samples (usage-PID.msu, which a trace directory keeps: docs/usage.md).
others() {
    local f
    for f in "$1"/* "$1"/.[!.]*; do
        [ -e "$f" ] && [[ "$f" != *.mst ]] && [[ "$(basename "$f")" != usage-*.msu ]] &&
            basename "$f"
    done
}

# total_bytes DIR: the size of the traces in DIR.
total_bytes() { cat "$1"/*.mst 2>/dev/null | wc -c; }

# digest DB SQL: row count and SHA-256 of the query's output (tables too big to show).
digest() {
    echo "$(q "$1" "SELECT count(*) FROM ($2)") rows, $(q "$1" "$2" | sha256sum | cut -c1-16)"
}

# same_db WHAT DB1 DB2: every table the conversion fills is the same in both, row for row
# (processes without its trace_file column: the traces' paths differ).
same_db() {
    local t
    for t in events blocks; do
        assert_eq "$1: select * from $t" "$(digest "$2" "SELECT * FROM $t ORDER BY 1")" \
            "$(digest "$3" "SELECT * FROM $t ORDER BY 1")"
    done
    for t in stacks stack_frames frames modules threads owners pools ranges steps strings \
        python_trace process_stats; do
        assert_eq "$1: table $t" "$(digest "$2" "SELECT * FROM $t ORDER BY 1")" \
            "$(digest "$3" "SELECT * FROM $t ORDER BY 1")"
    done
    local cols="id, pid, ppid, image_seq, exe, cmdline, start_ns, end_ns, lost_events,
                stopped_errno, damage"
    assert_eq "$1: table processes" "$(q "$2" "SELECT $cols FROM processes ORDER BY 1")" \
        "$(q "$3" "SELECT $cols FROM processes ORDER BY 1")"
}

# known_counts WHAT DB: threads.c's exact MALLOC and FREE counts per block size.
known_counts() {
    local s expected=""
    for s in ${SIZES//,/}; do expected+="$s|$PAIRS|$PAIRS|1"$'\n'; done
    assert_eq "$1: size|MALLOC|FREE|threads" "${expected%$'\n'}" \
        "$(q "$2" "SELECT e.size, count(*), (SELECT count(*) FROM blocks b WHERE b.size = e.size
                    AND b.free_event_id IS NOT NULL), count(DISTINCT e.thread_id)
                    FROM $EV WHERE k.name = 'MALLOC' AND l.event_type = 'HOST'
                    AND e.size IN ($SIZES) GROUP BY e.size ORDER BY e.size")"
}

# --- run --format=trace: packed by default, raw with --no-pack --------------------------------
ms packed run --format=db --format=trace -o "$TMP/p" -- "$PROGS/threads" $THREADS $PAIRS
assert_eq "run (packed): exit status" 0 "$RC"
assert_eq "run (packed): program stdout" "threads ok $THREADS $PAIRS" "$(cat "$TMP/packed.out")"
ms raw run --format=db --format=trace --no-pack -o "$TMP/r" -- "$PROGS/threads" $THREADS $PAIRS
assert_eq "run --no-pack: exit status" 0 "$RC"
assert_match "packed trace: version 2" "^[0-9]+\.0\.mst:2$" "$(versions "$TMP/p")"
assert_match "--no-pack trace: version 1" "^[0-9]+\.0\.mst:1$" "$(versions "$TMP/r")"
assert_eq "packed trace: magic" "MSTRACE" "$(head -c 7 "$TMP"/p/*.mst 2>&1)"
assert_eq "no temporary files left by packing" "" \
    "$(others "$TMP/p")"
P_BYTES=$(total_bytes "$TMP/p")
R_BYTES=$(total_bytes "$TMP/r")
if [ "$P_BYTES" -gt 0 ] && [ "$P_BYTES" -lt "$R_BYTES" ]; then
    pass "the packed trace is smaller ($P_BYTES < $R_BYTES bytes)"
else
    fail "the packed trace is not smaller: $P_BYTES vs $R_BYTES bytes"
fi

ms import_p import --format=db "$TMP/p" -o "$TMP/p.db"
assert_eq "import (packed): exit status" 0 "$RC"
assert_eq "import (packed): no warning" "" "$(grep -i warn "$TMP/import_p.err")"
require_db "import (packed)" "$TMP/p.db"
sanity "$TMP/p.db"
known_counts "import (packed)" "$TMP/p.db"
ms import_r import --format=db "$TMP/r" -o "$TMP/r.db"
assert_eq "import (raw): exit status" 0 "$RC"
require_db "import (raw)" "$TMP/r.db"
known_counts "import (raw)" "$TMP/r.db"

# --- memscope pack: in place, once ---------------------------------------------------------------
cp -r "$TMP/r" "$TMP/c"
ms pack pack "$TMP/c"
assert_eq "pack DIR: exit status" 0 "$RC"
assert_eq "pack DIR: the same file names, now version 2" \
    "$(versions "$TMP/r" | sed 's/:1$/:2/')" "$(versions "$TMP/c")"
assert_eq "pack DIR: nothing else left in the directory" "" \
    "$(others "$TMP/c")"
C_BYTES=$(total_bytes "$TMP/c")
if [ "$C_BYTES" -gt 0 ] && [ "$C_BYTES" -lt "$((R_BYTES / 3))" ]; then
    pass "pack DIR: under a third of the raw bytes ($C_BYTES vs $R_BYTES)"
else
    fail "pack DIR: $C_BYTES bytes from $R_BYTES"
fi
SUM1=$(cat "$TMP"/c/*.mst | sha256sum)
ms pack2 pack "$TMP/c"
assert_eq "pack again: exit status" 0 "$RC"
assert_eq "pack again: the packed traces are left as they are" "$SUM1" \
    "$(cat "$TMP"/c/*.mst | sha256sum)"
ms pack_file pack "$TMP"/c/*.mst
assert_eq "pack FILE (already packed): exit status" 0 "$RC"
assert_eq "pack FILE (already packed): unchanged" "$SUM1" "$(cat "$TMP"/c/*.mst | sha256sum)"

ms import_c import --format=db "$TMP/c" -o "$TMP/c.db"
assert_eq "import (packed in place): exit status" 0 "$RC"
require_db "import (packed in place)" "$TMP/c.db"
same_db "raw vs the same trace packed" "$TMP/r.db" "$TMP/c.db"

# --- two packers of one directory: the one that finds a trace locked leaves it to the other -----
# (two runs writing one directory pack it as they end: flock(1) here stands for the other packer,
# holding the lock memscope takes on a trace it packs)
cp -r "$TMP/r" "$TMP/l"
LOCKED=$(ls "$TMP"/l/*.mst | head -1)
flock "$LOCKED" sleep 5 &
HOLDER=$!
sleep 0.3
ms locked pack "$TMP/l"
assert_eq "trace locked by another packer: exit status" 0 "$RC"
assert_eq "trace locked by another packer: no warning or error" "" "$(cat "$TMP/locked.err")"
assert_eq "trace locked by another packer: left raw" 1 "$(version "$LOCKED")"
kill $HOLDER 2>/dev/null
wait $HOLDER 2>/dev/null

# --- what pack refuses -------------------------------------------------------------------------
seq 1 200 >"$TMP/notes.txt"
cp "$TMP/notes.txt" "$TMP/notes.orig"
ms notrace pack "$TMP/notes.txt"
assert_ne "pack of a non-trace file: exit status" 0 "$RC"
assert_eq "pack of a non-trace file: one line of error" 1 "$(wc -l <"$TMP/notrace.err")"
assert_match "pack of a non-trace file: the message names the file" "notes\.txt" \
    "$(cat "$TMP/notrace.err")"
assert_eq "pack of a non-trace file: the file is untouched" "" \
    "$(cmp "$TMP/notes.txt" "$TMP/notes.orig" 2>&1)"
printf 'MSTR' >"$TMP/tiny.mst"
ms tiny pack "$TMP/tiny.mst"
assert_ne "pack of a 4-byte file: exit status" 0 "$RC"
assert_eq "pack of a 4-byte file: one line naming it" "1 1" \
    "$(wc -l <"$TMP/tiny.err") $(grep -c 'tiny\.mst' "$TMP/tiny.err")"
mkdir "$TMP/mixed"
cp "$TMP"/r/*.mst "$TMP/mixed/"
cp "$TMP/notes.txt" "$TMP/mixed/bad.mst"
ms mixed pack "$TMP/mixed"
assert_ne "pack of a directory with one bad trace: exit status" 0 "$RC"
assert_eq "pack of a directory with one bad trace: one error line, naming it" "1 1" \
    "$(grep -vc '\[info\]' "$TMP/mixed.err") $(grep -c 'bad\.mst' "$TMP/mixed.err")"
assert_eq "pack of a directory with one bad trace: the good one is packed" \
    "$( (versions "$TMP/c"; echo "bad.mst:") | sort)" \
    "$(versions "$TMP/mixed" | sed 's/^bad\.mst:.*/bad.mst:/' | sort)"
ms missing pack "$TMP/no-such-trace.mst"
assert_ne "pack of a missing file: exit status" 0 "$RC"
assert_match "pack of a missing file: names it" "no-such-trace\.mst" "$(cat "$TMP/missing.err")"

# --- --keep-trace: packed traces beside the database --------------------------------------------
mkdir "$TMP/k"
ms keep run --format=db --keep-trace -o "$TMP/k/k.db" -- "$PROGS/threads" $THREADS $PAIRS
assert_eq "run --keep-trace: exit status" 0 "$RC"
KDIR=$(find "$TMP/k" -maxdepth 1 -name '.memscope-trace-*' | head -1)
assert_match "run --keep-trace: a trace directory beside the database" "/k/\.memscope-trace-" \
    "$KDIR"
assert_match "run --keep-trace: its traces are packed" "^[0-9]+\.0\.mst:2$" "$(versions "$KDIR")"
require_db "run --keep-trace" "$TMP/k/k.db"
known_counts "run --keep-trace" "$TMP/k/k.db"
ms import_k import --format=db "$KDIR" -o "$TMP/k2.db"
assert_eq "import of the kept trace: exit status" 0 "$RC"
same_db "the run's database vs an import of its kept packed trace" "$TMP/k/k.db" "$TMP/k2.db"
mkdir "$TMP/kr"
ms keep_raw run --format=db --keep-trace --no-pack -o "$TMP/kr/k.db" -- "$PROGS/threads" 2 100
assert_match "run --keep-trace --no-pack: raw traces kept" "^[0-9]+\.0\.mst:1$" \
    "$(versions "$(find "$TMP/kr" -maxdepth 1 -name '.memscope-trace-*' | head -1)")"

# --- damage: a packed trace cut in half --------------------------------------------------------
cp -r "$TMP/p" "$TMP/h"
for f in "$TMP"/h/*.mst; do truncate -s $(($(stat -c %s "$f") / 2)) "$f"; done
ms import_h import --format=db "$TMP/h" -o "$TMP/h.db"
assert_eq "import of a packed trace cut in half: exit status" 0 "$RC"
assert_match "import of a packed trace cut in half: warns" "warning.*(damage|truncated)" \
    "$(cat "$TMP/import_h.err")"
require_db "import of a packed trace cut in half" "$TMP/h.db"
FULL=$(q "$TMP/p.db" 'SELECT count(*) FROM events')
HALF=$(q "$TMP/h.db" 'SELECT count(*) FROM events')
if [ "$HALF" -gt 0 ] && [ "$HALF" -lt "$FULL" ]; then
    pass "import of a packed trace cut in half: fewer events ($HALF of $FULL)"
else
    fail "import of a packed trace cut in half: $HALF events of $FULL"
fi
assert_eq "import of a packed trace cut in half: its events are the full trace's" 0 \
    "$(sqlite3 -batch -noheader "$TMP/h.db" "ATTACH '$TMP/p.db' AS f;
        SELECT count(*) FROM (SELECT ts_ns, kind, layer, addr, size, func FROM main.events
        EXCEPT SELECT ts_ns, kind, layer, addr, size, func FROM f.events)" 2>&1)"

# --- the other record kinds: raw and packed imports agree -----------------------------------------
# run_both NAME RUN_ARGS... -- PROGRAM ARGS...: records raw, packs a copy, imports both.
run_both() {
    local name=$1
    shift
    ms "run_$name" run --format=db --format=trace --no-pack -o "$TMP/$name.raw" "$@"
    assert_eq "$name: exit status" 0 "$RC"
    cp -r "$TMP/$name.raw" "$TMP/$name.pk"
    ms "pack_$name" pack "$TMP/$name.pk"
    assert_eq "$name: pack exit status" 0 "$RC"
    assert_match "$name: packed" "^([0-9]+\.0\.mst:2 ?)+$" \
        "$(versions "$TMP/$name.pk" | tr '\n' ' ' | sed 's/ $//')"
    ms "imraw_$name" import --format=db "$TMP/$name.raw" -o "$TMP/$name.raw.db"
    local rc_raw=$RC
    ms "impk_$name" import --format=db "$TMP/$name.pk" -o "$TMP/$name.pk.db"
    assert_eq "$name: import exit statuses (raw, packed)" "0 0" "$rc_raw $RC"
    same_db "$name: raw vs packed" "$TMP/$name.raw.db" "$TMP/$name.pk.db"
}
run_both annotate -- "$PROGS/annotate"
assert_ge "annotate: annotation events in the packed import" 10 \
    "$(q "$TMP/annotate.pk.db" 'SELECT count(*) FROM events WHERE kind >= 4')"
run_both pystack --call-stack=c:8,python:8 -- "$PROGS/pystack_sim"
assert_eq "pystack: Python stacks in the packed import" \
    "$(printf '%s\n' '111|train.py(5): main' '222|model.py(12): forward' 'train.py(7): main' \
        '333|train.py(9): main')" \
    "$(q "$TMP/pystack.pk.db" "SELECT b.size, s.py_text FROM blocks b JOIN stacks s
                               ON s.id = b.stack_id WHERE b.size IN (111, 222, 333)
                               ORDER BY b.size")"
run_both mmap -- "$PROGS/mmap_anon"
run_both fork -- "$PROGS/forker" "$TMP/pids"

# --- a file-size limit (ulimit -f) below the packed size: an error, the raw trace kept ---------
ms efbig_run run --format=db --format=trace --no-pack -o "$TMP/efbig" -- "$PROGS/threads" 2 20000
assert_eq "file-size limit: recording exit status" 0 "$RC"
before=$(cat "$TMP"/efbig/*.mst | sha256sum)
(
    ulimit -f 4 # 4 KiB (bash counts 1024-byte blocks): the packed trace needs more
    "$MEMSCOPE" pack "$TMP/efbig" >"$TMP/efbig.out" 2>"$TMP/efbig.err" </dev/null
)
RC=$?
assert_eq "file-size limit: memscope pack fails with status 1 (not killed by SIGXFSZ)" 1 "$RC"
assert_match "file-size limit: one line names the file and keeps the raw trace" \
    "^memscope: pack: .*\.mst: File too large \(the raw trace is unchanged\)$" \
    "$(cat "$TMP/efbig.err")"
assert_eq "file-size limit: the raw trace is byte for byte what it was" "$before" \
    "$(cat "$TMP"/efbig/*.mst | sha256sum)"
assert_eq "file-size limit: no partial file left" "" "$(others "$TMP/efbig")"

# --- a process still running when the program ends: its traces are left raw --------------------
# sh starts a child (fork image n=0, then sleep after exec, n=1) and exits half a second later
# (time for the child to create its traces); packing would replace a file that the running
# child still writes to.
ms linger run --format=db --format=trace -o "$TMP/linger" -- /bin/sh -c 'sleep 3 & sleep 0.5; echo started'
assert_eq "lingering child: exit status" 0 "$RC"
assert_match "lingering child: a message names the running process" \
    "process [0-9]+ is still running and may be writing it; left raw" "$(cat "$TMP/linger.err")"
# The running image's trace is raw (the process holds it open); its fork image's trace, which
# the exec ended (nobody writes it any more), is packed like the shell's and `sleep 0.5`'s.
assert_eq "lingering child: the running image's trace left raw" 1 \
    "$(for f in "$TMP"/linger/*.mst; do version "$f"; done | grep -c '^1$')"
assert_ge "lingering child: the others packed" 1 \
    "$(for f in "$TMP"/linger/*.mst; do version "$f"; done | grep -c '^2$')"
ms linger_force pack --force "$TMP/linger"
assert_eq "lingering child: pack --force: exit status" 0 "$RC"
assert_eq "lingering child: pack --force packs them all" 0 \
    "$(for f in "$TMP"/linger/*.mst; do version "$f"; done | grep -vc '^2$')"

done_testing
