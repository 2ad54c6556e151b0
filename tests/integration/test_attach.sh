#!/usr/bin/env bash
# test_attach.sh: in-process collection without LD_PRELOAD (src/agent/attach.c), as the Python
# package's memscope.start()/stop() use it: tests/progs/attach_host dlopens the agent into
# itself, calls memscope__attach, allocates known blocks (directly, through a library loaded
# before attaching and through one dlopened after), detaches and stops. The trace directory is
# converted with `memscope import`; the known blocks must be there exactly, blocks allocated
# before attaching and freed after must be unmatched frees, and the program's output and status
# must be those of a run without the agent.
. "$(dirname "$0")/lib.sh"

AGENT=$(dirname "$MEMSCOPE")/libmemscope.so
[ -f "$AGENT" ] || skip "no agent next to $MEMSCOPE"
HOST=$PROGS/attach_host

"$HOST" - - >"$TMP/plain.out" 2>"$TMP/plain.err"
PLAIN_RC=$?
assert_eq "plain run: exit status" 0 "$PLAIN_RC"

# The known blocks: func|size|blocks|freed, as attach_host.c lists them.
KNOWN="malloc|21|1|1
calloc|3003|1|1
posix_memalign|5001|1|1
aligned_alloc|7040|1|1
reallocarray|8010|1|1
malloc|10001|2|1
malloc|12345|8|8
malloc|20001|1|1
malloc|30001|2|2
realloc|40001|1|1
malloc|50001|3|2
mmap|1048576|1|1"
SIZES="21, 3003, 5001, 7040, 8010, 10001, 12345, 20001, 30001, 40001, 50001, 1048576"

# attached_run NAME [global]: one run with the agent dlopened RTLD_LOCAL (or RTLD_GLOBAL).
attached_run() {
    local name=$1 dir=$TMP/$1.trace db=$TMP/$1.db
    mkdir -p "$dir"
    "$HOST" "$AGENT" "$dir" ${2:-} >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    assert_eq "$name: exit status as without the agent" "$PLAIN_RC" "$rc"
    assert_eq "$name: stdout as without the agent" "$(cat "$TMP/plain.out")" \
        "$(cat "$TMP/$name.out")"
    assert_eq "$name: the agent said nothing on stderr" "" "$(grep -v '^pre 0x' "$TMP/$name.err")"
    assert_eq "$name: one trace file" 1 "$(find "$dir" -name '*.mst' | wc -l)"
    ms "$name-import" import --format=db "$dir" -o "$db"
    assert_eq "$name: import status" 0 "$RC"
    require_db "$name" "$db"
    sanity "$db"
    assert_eq "$name: the known blocks (func|size|blocks|freed)" "$KNOWN" \
        "$(q "$db" "SELECT b.func, b.size, count(*), sum(b.free_ns IS NOT NULL) FROM blocks b
                    LEFT JOIN stacks s ON s.id = b.stack_id
                    WHERE b.size IN ($SIZES) AND (b.size != 21 OR s.c_text LIKE '%strdup%')
                    GROUP BY 1, 2 ORDER BY 2, 1")"
    assert_eq "$name: nothing before attach, after detach or after stop (1111, 60001, 70001)" 0 \
        "$(q "$db" "SELECT count(*) FROM events WHERE size IN (1111, 60001, 70001)")"
    local addrs
    addrs=$(sed -n 's/^pre 0x\([0-9a-f]*\)$/\1/p' "$TMP/$name.err" | tr 'a-f' 'A-F' |
        while read -r h; do echo "$((16#$h))"; done | paste -sd, -)
    assert_eq "$name: the 3 blocks allocated before attach, freed after, are unmatched frees" 3 \
        "$(q "$db" "SELECT count(*) FROM $EV WHERE k.name = 'FREE' AND e.allocation_id IS NULL
                    AND e.addr IN (${addrs:-0})")"
    assert_ge "$name: process_stats.unmatched_frees (heap)" 3 \
        "$(q "$db" "SELECT unmatched_frees FROM process_stats s JOIN layers l ON l.id = s.layer
                    WHERE l.event_type = 'HOST'")"
    assert_eq "$name: the late library's blocks have its stack" 3 \
        "$(q "$db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
                    WHERE b.size = 50001
                    AND s.c_text LIKE 'ms_attach_late_alloc (%attach_lib_late.c:%'")"
}

attached_run local
attached_run global global

# Under LD_PRELOAD (memscope run) the agent is already interposed: attach and detach do nothing,
# nothing is recorded twice, and what happens before attach and after detach is recorded too.
ms run run --format=db -o "$TMP/pre.db" -- "$HOST" "$AGENT" "$TMP/unused"
assert_eq "preloaded: exit status" 0 "$RC"
assert_eq "preloaded: stdout" "$(cat "$TMP/plain.out")" "$(cat "$TMP/run.out")"
require_db "preloaded" "$TMP/pre.db"
assert_eq "preloaded: blocks by size (1111 before attach, 70001 after detach, 60001 after stop)" \
    $'1111|3\n10001|2\n50001|3\n70001|1' \
    "$(q "$TMP/pre.db" "SELECT size, count(*) FROM blocks
                        WHERE size IN (1111, 10001, 50001, 60001, 70001) GROUP BY 1 ORDER BY 1")"
done_testing
