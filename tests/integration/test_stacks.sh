#!/bin/bash
# test_stacks.sh: native stacks are symbolized after the run: the innermost frame names the
# allocating function with its source file:line (computed here from the source), the caller
# comes next, and --call-stack=c:N caps the depth (tests/progs/alloc_funcs.c, deep_stack.c).
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../progs" && pwd)

DB=$TMP/a.db
ms run run --format=db -o "$DB" -- "$PROGS/alloc_funcs"
assert_eq "exit status" 0 "$RC"
require_db "alloc_funcs" "$DB"
assert_eq "meta.call_stack_c (default)" 256 "$(q "$DB" "SELECT value FROM meta WHERE key = 'call_stack_c'")"

# first_frames FUNC SIZE: the first two lines of the C stack of the first MALLOC of that func
# and size, as memscope_dump shows it.
first_frames() {
    q "$DB" "SELECT \"Call Stack(C)\" FROM memscope_dump d JOIN events e ON e.id = d.ID
             WHERE d.Event = 'MALLOC' AND e.func = '$1' AND e.size = $2 ORDER BY d.ID LIMIT 1" | head -2
}

# Innermost frame: exact function and file:line; the file may carry a directory.
for site in malloc:10001 calloc:10017 realloc:10032 reallocarray:10043 posix_memalign:10051 \
    aligned_alloc:10112 memalign:10061 valloc:10071 pvalloc:10081; do
    fn=${site%%:*} size=${site#*:}
    line=$(grep_line "$SRC/alloc_funcs.c" "/* SITE:$fn */")
    frames=$(first_frames "$fn" "$size")
    assert_match "$fn: innermost frame is ms_progs_${fn}_site (alloc_funcs.c:$line)" \
        "^ms_progs_${fn}_site \((.*/)?alloc_funcs\.c:$line\)$" "$(head -1 <<<"$frames")"
done
caller=$(grep_line "$SRC/alloc_funcs.c" "v[i] = ms_progs_malloc_site(10001);")
assert_match "malloc: second frame is main (alloc_funcs.c:$caller)" \
    "^main \((.*/)?alloc_funcs\.c:$caller\)$" "$(first_frames malloc 10001 | sed -n 2p)"
assert_eq "stacks.c_text = memscope_dump's Call Stack(C)" 0 \
    "$(q "$DB" "SELECT count(*) FROM memscope_dump d JOIN events e ON e.id = d.ID
                JOIN stacks s ON s.id = e.stack_id WHERE d.\"Call Stack(C)\" != s.c_text")"
assert_eq "frames table agrees: function|line of the innermost frame of the 10001 stack" \
    "ms_progs_malloc_site|$(grep_line "$SRC/alloc_funcs.c" "/* SITE:malloc */")" \
    "$(q "$DB" "SELECT fs.text, f.line FROM events e JOIN stack_frames sf ON sf.stack_id = e.stack_id
                JOIN frames f ON f.id = sf.frame_id JOIN strings fs ON fs.id = f.function_id
                WHERE e.size = 10001 AND e.func = 'malloc' ORDER BY e.id, sf.position LIMIT 1")"
# The ten malloc(10001) calls share one call site: one deduplicated stack.
assert_eq "identical stacks deduplicated (10 calls, one stack id)" 1 \
    "$(q "$DB" "SELECT count(DISTINCT stack_id) FROM events WHERE size = 10001 AND func = 'malloc'")"
assert_eq "FREE events carry no stack" 0 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'FREE' AND e.stack_id IS NOT NULL")"

# Depth limits on a 60-deep recursion.
leaf=$(grep_line "$SRC/deep_stack.c" "/* SITE:deep_leaf */")
for n in 0 1 5 32 1000; do
    DB=$TMP/d$n.db
    ms "deep$n" run --format=db --call-stack=c:$n -o "$DB" -- "$PROGS/deep_stack" 60
    assert_eq "c:$n: exit status" 0 "$RC"
    require_db "c:$n" "$DB"
    assert_eq "c:$n: meta.call_stack_c" $n "$(q "$DB" "SELECT value FROM meta WHERE key = 'call_stack_c'")"
    depth=$(q "$DB" "SELECT coalesce(s.depth, 0) FROM events e LEFT JOIN stacks s ON s.id = e.stack_id
                     WHERE e.size = 15013 AND e.func = 'malloc'")
    text=$(q "$DB" "SELECT \"Call Stack(C)\" FROM memscope_dump WHERE Event = 'MALLOC'
                    AND json_extract(Attr, '$.size') = '15013'")
    case $n in
    0)
        assert_eq "c:0: no stack" "0|" "$depth|$text"
        assert_eq "c:0: no stacks at all" 0 "$(q "$DB" "SELECT count(*) FROM events WHERE stack_id IS NOT NULL")"
        ;;
    1000)
        # leaf + 61 recursive frames + main (+ libc start frames).
        assert_ge "c:1000: depth" 63 "$depth"
        assert_eq "c:1000: recursive frames" 61 "$(grep -c '^ms_progs_deep_recurse ' <<<"$text")"
        assert_match "c:1000: main is there" "^main \(" "$text"
        ;;
    *)
        assert_eq "c:$n: depth" "$n" "$depth"
        assert_eq "c:$n: lines in Call Stack(C)" "$n" "$(grep -c . <<<"$text")"
        assert_match "c:$n: innermost frame" "^ms_progs_deep_leaf \((.*/)?deep_stack\.c:$leaf\)" "$text"
        ;;
    esac
done

# A library loaded with dlopen after start and unloaded before the end: its frames are
# symbolized from the module map the agent recorded.
DB=$TMP/dl.db
ms dl run --format=db -o "$DB" -- "$PROGS/dl_main" "$PROGS/libms_progs_dl.so"
assert_eq "dlopen: exit status" 0 "$RC"
require_db "dlopen" "$DB"
assert_eq "dlopen: MALLOC events through the plugin" 3 "$(count_ev "$DB" MALLOC HOST 17011)"
line=$(grep_line "$SRC/dl_lib.c" "/* SITE:dl_alloc */")
assert_match "dlopen: innermost frame is ms_progs_dl_alloc (dl_lib.c:$line)" \
    "^ms_progs_dl_alloc \((.*/)?dl_lib\.c:$line\)$" \
    "$(q "$DB" "SELECT s.c_text FROM events e JOIN stacks s ON s.id = e.stack_id
                WHERE e.size = 17011 LIMIT 1" | head -1)"
assert_match "dlopen: the plugin is in the module map" "libms_progs_dl\.so" \
    "$(q "$DB" "SELECT path FROM modules")"
# The agent's own failed probe at start (dlopen of libcuda.so.1 with RTLD_NOLOAD) left the C
# library's error record, which the program's first dlopen freed: two frees of blocks never
# seen allocated, in every program that calls dlopen or dlsym.
assert_eq "dlopen: no free of a block never seen allocated" 0 \
    "$(q "$DB" "SELECT sum(unmatched_frees) FROM process_stats")"
# Many distinct stacks from racing threads (tests/progs/many_stacks.c): 4 threads walk the same
# 2^14 call paths at once, so the agent's stack table grows from its first 1,024 slots while
# threads add the same new stacks. Every allocation keeps its own path's stack: one stack per
# size, 4 allocations each, and the frames spell the path (bit j of i: right, else left).
DB=$TMP/many.db
ms many run --format=db -o "$DB" -- "$PROGS/many_stacks" 4 14
assert_eq "many_stacks: exit status" 0 "$RC"
require_db "many_stacks" "$DB"
assert_eq "many_stacks: allocations, none without a stack" "65536|0" \
    "$(q "$DB" "SELECT count(*), sum(stack_id IS NULL) FROM blocks WHERE size BETWEEN 100000 AND 116383")"
assert_eq "many_stacks: sizes with one stack and 4 allocations" 16384 \
    "$(q "$DB" "SELECT count(*) FROM (SELECT size FROM blocks WHERE size BETWEEN 100000 AND 116383
                GROUP BY size HAVING count(DISTINCT stack_id) = 1 AND count(*) = 4)")"
assert_eq "many_stacks: distinct stacks" 16384 \
    "$(q "$DB" "SELECT count(DISTINCT stack_id) FROM blocks WHERE size BETWEEN 100000 AND 116383")"
for i in 0 5 9000 16383; do
    want=step
    for ((level = 13; level >= 0; level--)); do
        if (((i >> level) & 1)); then want="$want right"; else want="$want left"; fi
        want="$want step"
    done
    got=$(q "$DB" "SELECT group_concat(name, ' ') FROM (SELECT fs.text AS name FROM blocks b
                   JOIN stack_frames sf ON sf.stack_id = b.stack_id JOIN frames f ON f.id = sf.frame_id
                   JOIN strings fs ON fs.id = f.function_id WHERE b.size = 100000 + $i
                   AND b.thread_id = (SELECT min(thread_id) FROM blocks WHERE size = 100000 + $i)
                   ORDER BY sf.position LIMIT 29)")
    assert_eq "many_stacks: path $i" "$want" "$got"
done
done_testing
