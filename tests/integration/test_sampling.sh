#!/bin/bash
# test_sampling.sh: sampling mode, `memscope run --sampling[=BYTES]` (docs/production.md,
# "Sampling"), on tests/progs/sample_skew.c (known sizes per site; blocks freed by another
# thread than the one that allocated them; a realloc; 3 blocks of 1 MiB leaked).
#
# The sampler's generator is seeded with MEMSCOPE_SAMPLING_SEED, so every run samples the same
# allocations; the bounds checked are also statistically safe for any seed: at 2 KiB the
# smallest site (16 B x 200000 = 3.2 MB) gets about 1560 samples, a relative standard error of
# 2.5%, and the bound per site is 10% (4 standard errors); the total (18 MB of blocks under
# 1 MiB sampled about 6400 times; the 1 MiB blocks always) is held to 3%.
. "$(dirname "$0")/lib.sh"

P=$PROGS/sample_skew

# Bad input: a clear error and exit status 2, nothing run.
for bad in 0 -1 abc 12XB "" 0KiB; do
    ms bad run --sampling="$bad" -o "$TMP/bad.db" -- "$P"
    assert_eq "--sampling=$bad: exit status" 2 "$RC"
    assert_match "--sampling=$bad: the error names the option" "^memscope.*--sampling: expected a size above 0" "$(cat "$TMP/bad.err")"
done
for bad in abc 10 -5; do
    ms badcap run --sampling --max-trace-size="$bad" -o "$TMP/bad.db" -- "$P"
    assert_eq "--max-trace-size=$bad: exit status" 2 "$RC"
    assert_match "--max-trace-size=$bad: the error" "--max-trace-size: expected a size of at least 1MiB" "$(cat "$TMP/badcap.err")"
done
ms sep run --sampling 64KiB -o "$TMP/bad.db" -- "$P"
assert_eq "--sampling SIZE (no '='): exit status" 2 "$RC"
assert_match "--sampling SIZE: the error says how" "--sampling takes its size after '=': --sampling=64KiB" "$(cat "$TMP/sep.err")"
[ -e "$TMP/bad.db" ] && fail "a database was written for bad input" || pass "no database for bad input"

# The exact run: the totals the sampled run's counters must give.
ms exact run --call-stack=c:0 -o "$TMP/x.db" -- "$P"
assert_eq "exact run: exit status" 0 "$RC"
stats="SELECT s.allocs, s.alloc_bytes, s.frees FROM process_stats s JOIN layers l ON l.id = s.layer
       WHERE l.event_type = 'HOST'"
exact=$(q "$TMP/x.db" "$stats")
assert_match "exact run: heap counts" "^30202[0-9]\|408[0-9]{5}\|30201[0-9]$" "$exact"

# A thread still running at exit: its counts are added too.
ms exact_alive run --call-stack=c:0 -o "$TMP/xa.db" -- "$P" 1 alive
ms alive run --sampling --call-stack=c:0 -o "$TMP/sa.db" -- "$P" 1 alive
assert_eq "thread running at exit: exact counts as in the exact run" \
    "$(q "$TMP/xa.db" "$stats")" \
    "$(q "$TMP/sa.db" "SELECT (SELECT value FROM meta WHERE key = 'heap_allocs_exact'),
                       (SELECT value FROM meta WHERE key = 'heap_alloc_bytes_exact'),
                       (SELECT value FROM meta WHERE key = 'heap_frees_exact')")"

# The sampled run.
export MEMSCOPE_SAMPLING_SEED=41
DB=$TMP/s.db
ms run run --sampling=2KiB --call-stack=c:16 --format=db -o "$DB" -- "$P"
assert_eq "sampled run: exit status" 0 "$RC"
assert_eq "program stdout untouched" "sample_skew done" "$(cat "$TMP/run.out")"
require_db "sampled run" "$DB"
assert_eq "meta sampling_bytes" 2048 "$(q "$DB" "SELECT value FROM meta WHERE key = 'sampling_bytes'")"
assert_eq "exact counters: allocations|bytes|frees as in the exact run" "$exact" \
    "$(q "$DB" "SELECT (SELECT value FROM meta WHERE key = 'heap_allocs_exact'),
                       (SELECT value FROM meta WHERE key = 'heap_alloc_bytes_exact'),
                       (SELECT value FROM meta WHERE key = 'heap_frees_exact')")"
n=$(q "$DB" "SELECT count(*) FROM events WHERE kind = 1 AND layer = 1")
assert_ge "sampled allocations recorded" 4000 "$n"
[ "$n" -lt 100000 ] && pass "only a sample recorded ($n of 302024)" || fail "$n allocations recorded"
assert_eq "no free recorded without its block (unsampled frees dropped)" 0 \
    "$(q "$DB" "SELECT count(*) FROM events WHERE kind = 2 AND layer = 1 AND allocation_id IS NULL")"

# within WHAT EXPECTED ACTUAL PERCENT
within() {
    if awk -v e="$2" -v a="$3" -v p="$4" 'BEGIN {d = a - e; if (d < 0) d = -d; exit !(a != "" && d <= e * p / 100)}'; then
        pass "$1: $3 within $4% of $2"
    else
        fail "$1: $3 not within $4% of $2"
    fi
}
total_x=$(echo "$exact" | cut -d'|' -f2)
within "estimated total heap bytes" "$total_x" \
    "$(q "$DB" "SELECT sum(size) FROM events WHERE kind = 1 AND layer = 1")" 3
SITE="(SELECT t.text FROM stacks s JOIN stack_nodes n ON n.id = s.node_id
       JOIN frames f ON f.id = n.frame_id JOIN strings t ON t.id = f.function_id
       WHERE s.id = b.stack_id)"
site_bytes() { q "$DB" "SELECT sum(b.size) FROM blocks b WHERE b.layer = 1 AND $SITE = '$1'"; }
within "site_tiny (200000 x 16 B)" 3200000 "$(site_bytes site_tiny)" 10
within "site_small (100000 x 64 B)" 6400000 "$(site_bytes site_small)" 10
within "site_page (2000 x 4 KiB)" 8192000 "$(site_bytes site_page)" 10
# 1 MiB at 2 KiB: sampled with probability 1 - exp(-512), weight 1: exact.
assert_eq "site_big: every block, unweighted" "20|20971520" \
    "$(q "$DB" "SELECT count(*), sum(b.size) FROM blocks b WHERE b.layer = 1 AND $SITE = 'site_big'")"
# Frees of sampled blocks are recorded, those made by another thread too (main frees 17 of the
# blocks its thread allocated); the 3 leaked ones are live at exit.
assert_eq "site_big: frees recorded (freed|live)" "17|3" \
    "$(q "$DB" "SELECT sum(free_ns IS NOT NULL), sum(free_ns IS NULL) FROM blocks b
                WHERE b.layer = 1 AND $SITE = 'site_big'")"
assert_eq "site_big: freed by another thread than the allocating one" 17 \
    "$(q "$DB" "SELECT count(*) FROM blocks b JOIN events f ON f.allocation_id = b.allocation_id
                AND f.kind = 2 JOIN events a ON a.allocation_id = b.allocation_id AND a.kind = 1
                WHERE b.layer = 1 AND $SITE = 'site_big' AND f.thread_id != a.thread_id")"
assert_eq "every sampled block of the churning sites freed" 0 \
    "$(q "$DB" "SELECT count(*) FROM blocks b WHERE b.layer = 1 AND b.free_ns IS NULL
                AND $SITE IN ('site_tiny', 'site_small', 'site_page')")"
assert_eq "site_grow: the realloc'd 2 MiB block, freed" "2097152|1" \
    "$(q "$DB" "SELECT b.size, b.free_ns IS NOT NULL FROM blocks b WHERE b.layer = 1
                AND $SITE = 'site_grow' AND b.size = 2097152")"

# The leak is found, and every report says it holds estimates.
assert_match "summary: sampled, estimates" "sampled at 2 KiB: figures per site are estimates" "$(cat "$TMP/run.err")"
assert_match "summary: exact heap counts" "heap exactly: $(echo "$exact" | cut -d'|' -f1) allocations" "$(cat "$TMP/run.err")"
assert_match "summary: the leaked blocks' site" "3072.0 KiB in +3 blocks +site_big" "$(cat "$TMP/run.err")"
for a in leaks peak temporary trend fragmentation decompose; do
    ms "an_$a" analyze "$a" "$DB"
    assert_eq "analyze $a: exit status" 0 "$RC"
    assert_eq "analyze $a: the note first" \
        "note: sampled at 2 KiB: figures per site are estimates (weighted bytes)" \
        "$(head -1 "$TMP/an_$a.out")"
done
ms json analyze peak --json "$DB"
assert_eq "analyze peak --json: sampling member" "2048 True 302024" \
    "$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["sampling"]; print(s["bytes"], s["estimates"], s["heap_allocs_exact"] // 1 if s["heap_allocs_exact"] else 0)' "$TMP/json.out" | sed 's/ 30202[0-9]$/ 302024/')"
ms jall analyze all --json "$DB"
assert_eq "analyze all --json: every analysis's document has it" "ok" \
    "$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
bad=[k for k,v in d.items() if isinstance(v,dict) and "error" not in v and "skipped" not in v and v.get("sampling",{}).get("bytes")!=2048]
print("ok" if not bad else bad)' "$TMP/jall.out")"
# The same on the default (compact) output.
ms compact run --sampling=2KiB --call-stack=c:16 -o "$TMP/c.db" -- "$P"
ms cpeak analyze peak "$TMP/c.db"
assert_eq "compact database: the note" \
    "note: sampled at 2 KiB: figures per site are estimates (weighted bytes)" "$(head -1 "$TMP/cpeak.out")"
assert_eq "compact database: same estimate as the full one (same seed)" \
    "$(q "$DB" "SELECT sum(size) FROM events WHERE kind = 1 AND layer = 1")" \
    "$(q "$TMP/c.db" "SELECT s.alloc_bytes FROM process_stats s WHERE s.layer = 1")"
ms call analyze all --json "$TMP/c.db"
assert_eq "compact database, analyze all --json (some expand it): every document has it" "ok" \
    "$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
bad=[k for k,v in d.items() if isinstance(v,dict) and "error" not in v and "skipped" not in v and v.get("sampling",{}).get("bytes")!=2048]
print("ok" if not bad and len(d) > 5 else (bad, list(d)))' "$TMP/call.out")"
# The exports say it too (the sizes they sum are the converter's estimates).
ms cexp export "$TMP/c.db" --format=collapsed -o "$TMP/c.folded"
assert_eq "export: exit status" 0 "$RC"
assert_match "export of a sampled run: the note" \
    "^memscope \\[info\\]: sampled at 2 KiB: figures per site are estimates .*object counts are samples" \
    "$(cat "$TMP/cexp.err")"
# An exact run has no note.
ms xpeak analyze peak "$TMP/x.db"
assert_ne "exact run: no note" "note: sampled" "$(head -1 "$TMP/xpeak.out" | cut -c1-13)"
ms xexp export "$TMP/x.db" --format=collapsed -o "$TMP/x.folded"
assert_eq "export of an exact run: no note" "" "$(cat "$TMP/xexp.err")"
unset MEMSCOPE_SAMPLING_SEED

# Every block sampled (1 byte: a block of S bytes with probability 1 - exp(-S)), 8 threads
# allocating and freeing at once: the set of sampled addresses is written, emptied and rebuilt
# (its tombstones dropped) about 200 times while other threads look up their frees; every free
# must be found (a block is live at exit only when it was not freed).
ms thr run --sampling=1 --call-stack=c:0 --format=db -o "$TMP/t.db" -- "$PROGS/threads" 8 20000
assert_eq "threads, every block sampled: exit status" 0 "$RC"
expected=$(for t in 0 1 2 3 4 5 6 7; do echo "$((3001 + 2 * t))|20000|20000"; done)
assert_eq "threads: per size, allocations|frees matched (as recorded exactly)" "$expected" \
    "$(q "$TMP/t.db" "SELECT b.size, count(*), sum(b.free_ns IS NOT NULL) FROM blocks b
                      WHERE b.layer = 1 AND b.size BETWEEN 3001 AND 3015 GROUP BY b.size
                      ORDER BY b.size")"

# A signal handler that allocates while its thread is in the sampler (every allocation
# sampled: the set's lock is taken at each one): no deadlock, every count exact, and each
# recorded block of the main loop freed (tests/progs/signal_alloc.c; 200 signals, at most
# 1000000 rounds).
timeout 120 "$MEMSCOPE" run -q --sampling=1 --call-stack=c:0 -o "$TMP/sig.db" -- \
    "$PROGS/signal_alloc" 200 >"$TMP/sig.out" 2>"$TMP/sig.err"
assert_eq "signal handler allocating: exit status (124: a deadlock)" 0 "$?"
loops=$(cut -d' ' -f2 "$TMP/sig.out")
assert_eq "signal_alloc: the handler ran 200 times" 200 "$(cut -d' ' -f3 "$TMP/sig.out")"
sig_stats=$(q "$TMP/sig.db" "SELECT allocs, frees, live_blocks FROM process_stats WHERE layer = 1")
assert_ge "signal_alloc: blocks recorded (main loop and warm-up at least)" "$((loops + 1))" \
    "$(echo "$sig_stats" | cut -d'|' -f1)"
assert_eq "signal_alloc: every recorded block but the C library's few freed" 1 \
    "$(echo "$sig_stats" | awk -F'|' '{print ($1 - $2 == $3 && $3 <= 4)}')"
assert_ge "signal_alloc: exact allocations counted (loop, handler, warm-up)" "$((loops + 201))" \
    "$(q "$TMP/sig.db" "SELECT value FROM meta WHERE key = 'heap_allocs_exact'")"

# Every block sampled (--sampling=1: a block of S bytes is sampled with probability
# 1 - exp(-S), 1 for these sizes): the run must be the exact run's, every free of 8 threads'
# 160,000 blocks recorded; the counting filter of sampled addresses that frees read first
# (agent.h, sample_marks) holds thousands of live addresses at once here, many sharing a counter.
ms every_x run --call-stack=c:4 --format=db -o "$TMP/ex.db" -- "$PROGS/threads" 8 20000
ms every_s run --sampling=1 --call-stack=c:4 --format=db -o "$TMP/es.db" -- "$PROGS/threads" 8 20000
counts="SELECT (SELECT count(*) FROM events WHERE kind = 1 AND layer = 1) || ' ' ||
  (SELECT count(*) FROM events WHERE kind = 2 AND layer = 1) || ' ' ||
  (SELECT count(*) FROM blocks WHERE free_ns IS NULL)"
assert_eq "every block sampled: allocations, frees and blocks live at exit as the exact run's" \
    "$(q "$TMP/ex.db" "$counts")" "$(q "$TMP/es.db" "$counts")"
assert_eq "every block sampled: the exact run's counts (8 x 20000 + 9, frees, 5 live)" \
    "160009 160004 5" "$(q "$TMP/es.db" "$counts")"

# --sampling without a value: 512 KiB.
ms dflt run --sampling --call-stack=c:0 --format=db -o "$TMP/d.db" -- "$P"
assert_eq "--sampling: 512 KiB" 524288 "$(q "$TMP/d.db" "SELECT value FROM meta WHERE key = 'sampling_bytes'")"

# --max-trace-size: the trace stops growing at the cap, the program runs on, and says so.
ms cap run --max-trace-size=1MiB --call-stack=c:16 --format=trace --no-pack -o "$TMP/cap" -- "$P" 3
assert_eq "capped run: exit status" 0 "$RC"
assert_eq "capped run: program output" "sample_skew done" "$(cat "$TMP/cap.out")"
size=$(cat "$TMP"/cap/*.mst | wc -c)
[ "$size" -le 1048576 ] && pass "trace within its cap ($size bytes)" || fail "trace of $size bytes over 1 MiB"
assert_match "capped run: said" "size cap" "$(cat "$TMP/cap.err")"

# Bounded for days (docs/production.md): over 10M allocations and frees, about 300,000 of them
# sampled, the process's resident memory (the agent's included) is the same at the end as after
# a fifth of the loop, with the trace capped (recording stops at 1 MiB: the exact counts go on)
# and without a cap (recording all along).
L=$PROGS/alloc_loop
n=10000000
for cap in 1MiB none; do
    ms long_$cap run --sampling=512 --max-trace-size=$cap --call-stack=c:16 --format=db \
        -o "$TMP/long_$cap.db" -- "$L" $n 16 0 rss
    assert_eq "long run ($cap): exit status" 0 "$RC"
    read -r _ early late < <(sed -n 2p "$TMP/long_$cap.out")
    if [[ "$early$late" =~ ^[0-9]+$ ]] && [ $((late - early)) -le 256 ]; then
        pass "long run ($cap): resident memory constant (${early} KiB after a fifth, ${late} KiB at the end)"
    else
        fail "long run ($cap): resident memory ${early:-?} KiB after a fifth, ${late:-?} KiB at the end (over 256 KiB more)"
    fi
    allocs=$(q "$TMP/long_$cap.db" "SELECT value FROM meta WHERE key = 'heap_allocs_exact'")
    [[ "$allocs" =~ ^[0-9]+$ ]] && [ "$allocs" -ge $n ] && [ "$allocs" -le $((n + 10)) ] &&
        pass "long run ($cap): every allocation counted ($allocs: $n and stdio's)" ||
        fail "long run ($cap): $allocs allocations counted, not $n and stdio's few"
done
assert_eq "long run (1MiB): recording stopped at the cap" 27 \
    "$(q "$TMP/long_1MiB.db" "SELECT stopped_errno FROM processes")"
assert_eq "long run (none): recording did not stop" 0 \
    "$(q "$TMP/long_none.db" "SELECT coalesce(stopped_errno, 0) FROM processes")"
done_testing
