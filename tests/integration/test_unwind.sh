#!/usr/bin/env bash
# test_unwind.sh: the default unwinder (DWARF, src/agent/unwind.c) on code built as most code is,
# -O2 -g without frame pointers (tests/progs/nofp_main and its two libraries): exact chains of
# callers through the program, a library without frame pointers, the C library's qsort, a
# recursion 32 deep, a signal handler, a thread and a library with frame pointers calling back;
# no frame outside a module; and a real program (GCC's cc1) whose stacks reach its main.
. "$(dirname "$0")/lib.sh"

# the function names of a block's stack, one line: "f (file:line)" -> f, GCC's clone suffixes
# (.constprop.0, .part.0, .isra.0) and symbol versions (@@GLIBC_2.34) left out
names() { # db size
    q "$1" "SELECT s.c_text FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size = $2
            ORDER BY b.allocation_id LIMIT 1" |
        sed -e 's/ (.*//' -e 's/\.\(constprop\|part\|isra\|cold\)\.[0-9]*//g' -e 's/@@.*//' |
        tr '\n' ' ' | sed 's/ $//'
}
START="main __libc_start_call_main __libc_start_main _start"

ms run run --format=db --call-stack=c:40 -o "$TMP/n.db" -- "$PROGS/nofp_main"
assert_eq "nofp_main: output" "nofp ok" "$(cat "$TMP/run.out")"
D=$TMP/n.db
assert_eq "a chain of four functions" "nofp_leaf nofp_middle nofp_outer $START" "$(names "$D" 1001)"
assert_eq "through a library without frame pointers" "nofp_lib_alloc $START" "$(names "$D" 1002)"
assert_match "through the C library's qsort to a comparator" \
    "^nofp_cmp (msort_with_tmp )+qsort_r $START$" "$(names "$D" 1003)"
assert_eq "a recursion 32 deep" "$(printf 'nofp_rec %.0s' $(seq 32))$START" "$(names "$D" 1004)"
assert_match "a signal handler, through the kernel's signal frame to the interrupted code" \
    "^nofp_on_signal [^ ]+ .*raise $START$" "$(names "$D" 1005)"
assert_match "a thread" "^nofp_leaf2 nofp_thread start_thread" "$(names "$D" 1006)"
assert_eq "a library with frame pointers calling back into code without" \
    "nofp_callback nofp_fp_lib_alloc $START" "$(names "$D" 1007)"
# two callers whose frames lie at the same place, alternately: each block its own caller
assert_eq "blocks of nofp_via_a, nofp_via_b: 50 each, each with its own caller" "50|50|0" \
    "$(q "$D" "SELECT count(*) FILTER (WHERE b.size = 1008), count(*) FILTER (WHERE b.size = 1009),
                      count(*) FILTER (WHERE s.c_text NOT LIKE
                          'nofp_leaf3 %' || CASE b.size WHEN 1008 THEN 'nofp_via_a' ELSE 'nofp_via_b' END
                          || '%main %')
               FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size IN (1008, 1009)")"
# frames above found from rbp, which differs at a frame that lies at the same place
assert_eq "blocks of nofp_vla 3 and 2 deep: 50 each, each with its own number of frames" \
    "50|50|0" \
    "$(q "$D" "SELECT count(*) FILTER (WHERE b.size = 1010), count(*) FILTER (WHERE b.size = 1011),
                      count(*) FILTER (WHERE s.c_text NOT LIKE 'nofp_leaf4%main %'
                          OR (length(s.c_text) - length(replace(s.c_text, 'nofp_vla', ''))) / 8
                             != CASE b.size WHEN 1010 THEN 3 ELSE 2 END)
               FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size IN (1010, 1011)")"
assert_eq "every frame is in a module (no ?? (0xADDRESS) frame)" 0 \
    "$(q "$D" "SELECT count(*) FROM stacks WHERE c_text LIKE '%?? (0x%'")"

# The default is this unwinder; --unwind=fp (frame pointers) loses the callers here, as the
# documentation says.
ms def run --format=db -o "$TMP/d.db" -- "$PROGS/nofp_main"
assert_eq "the default options give the same stacks" "nofp_leaf nofp_middle nofp_outer $START" \
    "$(names "$TMP/d.db" 1001)"
ms fp run --format=db --unwind=fp -o "$TMP/f.db" -- "$PROGS/nofp_main"
assert_eq "--unwind=fp: one frame on code without frame pointers" "nofp_leaf" \
    "$(names "$TMP/f.db" 1001)"
# rbp of code without frame pointers holds anything: a word read as a return address that is
# not in a module's code ends the walk (issue 47: nofp_cmp's stack had "?? (0x100000000)")
assert_eq "--unwind=fp: no frame outside a module's code" "0|0" \
    "$(q "$TMP/f.db" "SELECT count(*) FILTER (WHERE module_id IS NULL),
                             (SELECT count(*) FROM stacks WHERE c_text LIKE '%?? (0x%')
                      FROM frames")"
ms dw run --format=db --unwind=dwarf --call-stack=c:40 -o "$TMP/w.db" -- "$PROGS/nofp_main"
assert_eq "--unwind=dwarf is the default unwinder" "$(names "$D" 1003)" "$(names "$TMP/w.db" 1003)"

# A real program built without frame pointers: GCC's cc1 compiling a generated file. Every
# allocation's stack reaches cc1's main (toplev::main) or, for static constructors, the C
# library's start (call_init).
CC1=$(cc -print-prog-name=cc1 2>/dev/null)
if [ -x "$CC1" ]; then
    for i in $(seq 200); do
        echo "struct s$i { int a[$i]; }; int f$i(struct s$i *p, int x) { for (int k = 0; k < x; k++) p->a[k % $i] += k * $i; return p->a[0]; }"
    done >"$TMP/gen.c"
    ms cc1 run --format=db --call-stack=c:256 -o "$TMP/cc1.db" -- "$CC1" -quiet -O2 "$TMP/gen.c" \
        -o "$TMP/gen.s"
    assert_eq "cc1: exit status" 0 "$RC"
    assert_eq "cc1: every stack reaches toplev::main or the C library's start, none has a frame outside a module" \
        "0|0" "$(q "$TMP/cc1.db" "SELECT count(*) FILTER (WHERE c_text NOT LIKE '%toplev::main%' AND c_text NOT LIKE '%call_init%'), count(*) FILTER (WHERE c_text LIKE '%?? (0x%') FROM stacks")"
    assert_ge "cc1: stacks deeper than one frame (frame pointers alone give one)" 8 \
        "$(q "$TMP/cc1.db" "SELECT CAST(avg(depth) AS INTEGER) FROM stacks")"
    # The walk takes the callers of the thread's last walk when their saved words still hold
    # (unwind.c, struct walk), for depths up to 256 (the default): at depth 32 each allocation's
    # return addresses must be the first 32 of a walk 512 deep, which never does. Addresses
    # fixed (setarch -R): the same allocations at the same addresses in both runs.
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        FIRST32="WITH t AS (SELECT sf.stack_id AS sid, f.pc AS pc, sf.position AS pos
                            FROM stack_frames sf JOIN frames f ON f.id = sf.frame_id
                            WHERE f.inline_depth = 0),
                  r AS (SELECT sid, pc, row_number() OVER (PARTITION BY sid ORDER BY pos) AS k FROM t),
                  s AS (SELECT sid, group_concat(pc, ' ') AS pcs
                        FROM (SELECT * FROM r WHERE k <= 32 ORDER BY sid, k) GROUP BY sid)
             SELECT b.allocation_id, b.size, coalesce(s.pcs, '') FROM blocks b
             LEFT JOIN s ON s.sid = b.stack_id ORDER BY b.allocation_id"
        for d in 32 512; do
            setarch "$(uname -m)" -R "$MEMSCOPE" run -q --format=db --call-stack=c:$d \
                -o "$TMP/cc1_$d.db" -- "$CC1" -quiet -O2 "$TMP/gen.c" -o "$TMP/gen.s" ||
                fail "cc1 at depth $d, addresses fixed: memscope failed"
            q "$TMP/cc1_$d.db" "$FIRST32" >"$TMP/cc1_$d.first32"
        done
        assert_ge "cc1 at depth 32: allocations" 100000 "$(wc -l <"$TMP/cc1_32.first32")"
        assert_eq "cc1 at depth 32: each allocation's return addresses are the first 32 of the walk 512 deep" \
            "" "$(diff "$TMP/cc1_32.first32" "$TMP/cc1_512.first32" | head -5)"
    else
        echo "ok: (setarch -R refused here: the depth comparison on cc1 is skipped)"
    fi
else
    echo "ok: (cc1 not found: the real-program part is skipped)"
fi
done_testing
