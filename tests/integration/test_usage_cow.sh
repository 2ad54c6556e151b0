#!/bin/bash
# test_usage_cow.sh: copy-on-write traced to the objects (docs/usage.md). memscope run walks the
# pagemap of each forked process for the pages it holds alone (usage-<pid>.msp); the conversion
# counts the parent's blocks live at the fork in them (usage_cow, usage_cow_stacks); analyze
# usage reports cow_private_bytes, cow_sites and the copy_on_write finding. Known answers from
# tests/progs/cow_fork.c: two workers, each writing every byte of one of its parent's two 32 MiB
# blocks (each worker holds until the sampler has walked it after its write: no timing).
. "$(dirname "$0")/lib.sh"

MIB=1048576
SRC=$(dirname "$0")/../progs/cow_fork.c
J() { python3 -c "import json,sys; d=json.load(open('$1')); $2"; }

ms run run -q --usage-interval=0.02 -o "$TMP/cow.db" -- "$PROGS/cow_fork"
assert_eq "exit status" 0 "$RC"
ms an analyze usage --json "$TMP/cow.db"
assert_eq "analyze usage exit status" 0 "$RC"
la=$(grep_line "$SRC" "static char *alloc_a(void)")
lb=$(grep_line "$SRC" "static char *alloc_b(void)")
# The workers as the analysis numbers them (usage_cow's fork_ns: each child's start). That is
# the order the children first ran in, which under load need not be the order they were forked
# in (NEEDSWORK: the parent's own fork time), so each worker's block is read from its answer,
# and the two must be one each.
W=$(q "$TMP/cow.db" "SELECT p.pid FROM usage_cow c JOIN processes p ON p.id = c.process_id ORDER BY c.fork_ns")
assert_eq "two forked processes walked" 2 "$(echo "$W" | grep -c .)"
w1=$(echo "$W" | sed -n 1p)
w2=$(echo "$W" | sed -n 2p)
# The blocks' bytes in private pages, not the pages': each block spans 8,193 pages (its chunk
# header shares the first), and counts exactly its 32 MiB.
fns=""
for w in 1 2; do
    pid=$([ $w = 1 ] && echo "$w1" || echo "$w2")
    fn=$(J "$TMP/an.out" "s=[p['cow_sites'] for p in d['processes'] if p['pid'] == $pid][0]; print(s[0]['site'].split(' (')[0] if s else '')")
    fns="$fns $fn"
    line=$([ "$fn" = alloc_a ] && echo "$la" || echo "$lb")
    assert_eq "worker $w: cow_private_bytes 32 MiB exactly" $((32 * MIB)) \
        "$(J "$TMP/an.out" "print([p['cow_private_bytes'] for p in d['processes'] if p['pid'] == $pid][0])")"
    assert_eq "worker $w: one site, $fn, with all of it" "1 $fn cow_fork.c:$((line + 2)) $((32 * MIB))" \
        "$(J "$TMP/an.out" "s=[p['cow_sites'] for p in d['processes'] if p['pid'] == $pid][0]; print(len(s), s[0]['site'].split(' (')[0], s[0]['site'].split(' (')[1].rstrip(')').split('/')[-1], s[0]['bytes'])")"
    assert_match "worker $w: the finding names the worker, the bytes and the site" \
        "^worker $w \\(pid $pid, forked by pid [0-9]+\\) copied 32\\.0 MiB of its parent's memory: 32\\.0 MiB in blocks allocated by $fn \\([^)]*cow_fork\\.c:$((line + 2))\\)\\." \
        "$(J "$TMP/an.out" "print([f['message'] for f in d['findings'] if f['kind'] == 'copy_on_write' and f['pid'] == $pid][0])")"
done
assert_eq "the two workers copied one block each: alloc_a's and alloc_b's" "alloc_a alloc_b" \
    "$(echo $fns | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')"
assert_eq "the parent: not forked, cow_private_bytes null, no sites" "None []" \
    "$(J "$TMP/an.out" "p=[p for p in d['processes'] if 'cow_fork' in p['command'] and p['pid'] not in ($w1, $w2)][0]; print(p['cow_private_bytes'], p['cow_sites'])")"
assert_eq "findings: copy_on_write for each worker" "copy_on_write copy_on_write" \
    "$(J "$TMP/an.out" "print(' '.join(sorted(f['kind'] for f in d['findings'])))")"
assert_eq "usage_cow: 32 MiB in one block each; the walk at least as many private bytes" "1|1|1" \
    "$(q "$TMP/cow.db" "SELECT min(blocks) = 1 AND max(blocks) = 1, min(private_bytes) >= $((32 * MIB)),
       count(DISTINCT parent_id) FROM usage_cow")"
assert_eq "usage_samples: the walks' private bytes in the workers' samples" "1" \
    "$(q "$TMP/cow.db" "SELECT max(private_anon) >= $((32 * MIB)) FROM usage_samples u
       JOIN processes p ON p.id = u.process_id WHERE p.pid = $w1")"
ms text analyze usage "$TMP/cow.db"
assert_match "text: the worker's copies and site" "copied 32\\.0 MiB of its parent's blocks" "$(cat "$TMP/text.out")"

# The expansion of the compact database has the same rows (the pages file is among its traces).
ms exp export "$TMP/cow.db" --format=db -o "$TMP/exp.db"
assert_eq "export --format=db: the same usage_cow rows" \
    "$(q "$TMP/cow.db" "SELECT * FROM usage_cow ORDER BY process_id")" \
    "$(q "$TMP/exp.db" "SELECT * FROM usage_cow ORDER BY process_id")"

# The pages file is hostile input: a damaged one is said, and the rest of the run converts.
ms tr run -q --usage-interval=0.02 --format=trace -o "$TMP/tr" -- "$PROGS/cow_fork"
P=$(ls "$TMP"/tr/usage-*.msp)
assert_eq "one pages file, named after the program's pid" 1 "$(echo "$P" | grep -c "/usage-[0-9]*\.msp$")"
printf 'NOTPAGES' | dd of="$P" conv=notrunc status=none
ms bad import "$TMP/tr" -o "$TMP/bad.db"
assert_eq "pages file with a wrong magic: import status" 0 "$RC"
assert_eq "pages file with a wrong magic: no usage_cow rows, the samples kept" "0|1" \
    "$(q "$TMP/bad.db" "SELECT count(*), (SELECT count(*) > 0 FROM usage_samples) FROM usage_cow")"
assert_match "pages file with a wrong magic: said" "usage-[0-9]+\.msp: malformed input; no copy-on-write figures" "$(cat "$TMP/bad.err")"
done_testing
