#!/bin/bash
# test_usage.sh: the usage monitor (docs/usage.md). memscope run samples every traced process
# from /proc into usage-<pid>.msu; the conversion stores the samples with the live bytes of the
# trace at each one (usage_samples); memscope analyze usage reports peaks, the retained bytes
# and the findings. Known answers from tests/progs/usage_kinds.c, which holds each state until
# the sampler has taken two samples of it (no timing in the expectations).
. "$(dirname "$0")/lib.sh"

MIB=1048576
# J FILE EXPR: a value of analyze usage's JSON (d: the document, p: its first process).
J() { python3 -c "import json,sys; d=json.load(open('$1')); p=(d['processes'] or [{}])[0]; print($2)"; }
run_kind() { # run_kind MODE [run options]: runs usage_kinds MODE, analyze usage --json into $TMP/MODE.json
    local m=$1
    shift
    ms "run_$m" run -q --usage-interval=0.02 "$@" -o "$TMP/$m.db" -- "$PROGS/usage_kinds" "$m"
    assert_eq "$m: exit status" 0 "$RC"
    ms "an_$m" analyze usage --json "$TMP/$m.db"
    assert_eq "$m: analyze usage exit status" 0 "$RC"
    cp "$TMP/an_$m.out" "$TMP/$m.json"
}

# Retention: 200 MiB of 1 KiB blocks, all but one in 64 freed; 4,915,200 bytes stay live.
run_kind retain
assert_ge "retain: samples" 2 "$(J "$TMP/retain.json" "p.get('samples', 0)")"
assert_eq "retain: peak live bytes (200 MiB of blocks + the 1600 KiB array)" 211353600 \
    "$(J "$TMP/retain.json" "p.get('peak_live_bytes')")"
assert_eq "retain: live bytes at the most retained sample" 4915200 \
    "$(J "$TMP/retain.json" "p.get('max_retained_live_bytes')")"
# the freed chunks (204800 - 3200 of 1040 bytes, glibc's chunk for 1024) plus the 16-byte
# headers of the kept ones: 200 MiB exactly; then the process's own anonymous pages (under 1 MiB)
assert_eq "retain: max_retained_bytes within [200 MiB, 201 MiB]" "True" \
    "$(J "$TMP/retain.json" "200*$MIB <= p.get('max_retained_bytes', 0) <= 201*$MIB")"
assert_eq "retain: findings" "allocator_retention" \
    "$(J "$TMP/retain.json" "' '.join(f['kind'] for f in d['findings'])")"
assert_eq "retain: the finding's bytes are max_retained_bytes" "True" \
    "$(J "$TMP/retain.json" "d['findings'][0]['bytes'] == p['max_retained_bytes']")"
assert_match "retain: the finding says what to try" "malloc_trim.*MALLOC_ARENA_MAX" \
    "$(J "$TMP/retain.json" "d['findings'][0]['message']")"
assert_eq "retain: copy-on-write not measured: null, no sites" "None []" \
    "$(J "$TMP/retain.json" "str(p.get('cow_private_bytes', 0)) + ' ' + str(p.get('cow_sites'))")"
assert_eq "retain: one exit sample, the process's last" "1|1" \
    "$(q "$TMP/retain.db" "SELECT count(*), max(ts_ns) = (SELECT max(ts_ns) FROM usage_samples)
                           FROM usage_samples WHERE exited = 1")"
assert_eq "retain: samples on the events' clock (within the run's first and last event)" 0 \
    "$(q "$TMP/retain.db" "SELECT count(*) FROM usage_samples WHERE exited = 0 AND
       (ts_ns < (SELECT min(first_ns) FROM threads) - 1000000000 OR
        ts_ns > (SELECT max(last_ns) FROM threads) + 1000000000)")"

# The cgroup's charge: in every sample where this machine's cgroup (v2, else v1) is readable.
cg=$(sed -n 's/^0::\(.*\)/\/sys\/fs\/cgroup\1\/memory.current/p' /proc/self/cgroup)
[ -r "$cg" ] || cg=$(sed -n 's/^[0-9]*:memory:\(.*\)/\/sys\/fs\/cgroup\/memory\1\/memory.usage_in_bytes/p' /proc/self/cgroup)
if [ -r "$cg" ]; then
    assert_eq "retain: the cgroup's charge in every sample ($cg), at least the process's RSS" "0" \
        "$(q "$TMP/retain.db" "SELECT count(*) FROM usage_samples WHERE exited = 0 AND
           (cgroup_current IS NULL OR cgroup_current < rss_anon)")"
else
    echo "  info: no readable memory cgroup here: cgroup_current is NULL"
fi

# Stack: 96 frames of 64 KiB.
run_kind stack
assert_eq "stack: peak_stack_bytes within [6 MiB, 6 MiB + 256 KiB]" "True" \
    "$(J "$TMP/stack.json" "6*$MIB <= p.get('peak_stack_bytes', 0) <= 6*$MIB + 262144")"
assert_eq "stack: findings" "stack" "$(J "$TMP/stack.json" "' '.join(f['kind'] for f in d['findings'])")"
assert_eq "stack: nothing retained beyond the process's own pages (< 1 MiB)" "True" \
    "$(J "$TMP/stack.json" "p.get('max_retained_bytes', $MIB) < $MIB")"

# Shared memory: a 32 MiB POSIX shared memory object, written.
run_kind shm
assert_eq "shm: peak_shmem_bytes within [32 MiB, 33 MiB]" "True" \
    "$(J "$TMP/shm.json" "32*$MIB <= p.get('peak_shmem_bytes', 0) <= 33*$MIB")"
assert_eq "shm: PSS and USS count it" "True" \
    "$(J "$TMP/shm.json" "p.get('peak_pss_bytes', 0) >= 32*$MIB and p.get('peak_uss_bytes', 0) >= 32*$MIB")"
assert_eq "shm: findings" "shared_memory" "$(J "$TMP/shm.json" "' '.join(f['kind'] for f in d['findings'])")"
assert_eq "shm: not in anonymous RSS (< 1 MiB)" "True" \
    "$(J "$TMP/shm.json" "p.get('peak_rss_anon_bytes', $MIB) < $MIB")"

# A grandchild: sh runs usage_kinds as its child; its samples are its own process's.
ms run_sh run -q --usage-interval=0.02 -o "$TMP/sh.db" -- /bin/sh -c "$PROGS/usage_kinds shm; true"
assert_eq "sh -c: exit status" 0 "$RC"
ms an_sh analyze usage --json "$TMP/sh.db"
assert_eq "sh -c: usage_kinds's process has the 32 MiB, with the finding" "True True" \
    "$(J "$TMP/an_sh.out" "' '.join(str(any(32*$MIB <= q['peak_shmem_bytes'] and 'usage_kinds shm' in q['command'] for q in d['processes']) if k == 0 else [f['kind'] for f in d['findings']] == ['shared_memory']) for k in (0, 1))")"
assert_ge "sh -c: two processes sampled" 2 \
    "$(q "$TMP/sh.db" "SELECT count(DISTINCT process_id) FROM usage_samples")"

# The full database (--format=db) and the expansion of a compact one have the same rows.
ms full run -q --usage-interval=0.02 --format=db -o "$TMP/full.db" -- "$PROGS/usage_kinds" shm
assert_ge "full database: samples" 3 "$(q "$TMP/full.db" "SELECT count(*) FROM usage_samples")"
ms exp export "$TMP/shm.db" --format=db -o "$TMP/exp.db"
assert_eq "export --format=db: the compact database's samples" \
    "$(q "$TMP/shm.db" "SELECT * FROM usage_samples ORDER BY ts_ns")" \
    "$(q "$TMP/exp.db" "SELECT * FROM usage_samples ORDER BY ts_ns")"

# --usage-interval=0: no sampling, no rows; analyze says so.
ms off run -q --usage-interval=0 --format=trace -o "$TMP/off" -- "$PROGS/live_at_exit"
assert_eq "--usage-interval=0: no usage file" "" "$(cd "$TMP/off" && ls -- usage-*.msu 2>/dev/null)"
ms off_imp import "$TMP/off" -o "$TMP/off.db"
assert_eq "--usage-interval=0: no rows" 0 "$(q "$TMP/off.db" "SELECT count(*) FROM usage_samples")"
ms off_an analyze usage "$TMP/off.db"
assert_match "--usage-interval=0: analyze says there are no samples" "^no usage samples" "$(cat "$TMP/off_an.out")"
ms bad_opt run --usage-interval=fast -- "$PROGS/live_at_exit"
assert_eq "--usage-interval=fast: usage error" 2 "$RC"

# The usage file is hostile input: a record cut short is dropped, a wrong magic is refused with
# a warning, and the conversion goes on.
ms tr run -q --usage-interval=0.02 --format=trace -o "$TMP/tr" -- "$PROGS/usage_kinds" shm
U=$(ls "$TMP"/tr/usage-*.msu)
assert_eq "one usage file, named after the program's pid" "1" "$(echo "$U" | grep -c "/usage-[0-9]*\.msu$")"
size=$(stat -c %s "$U")
records=$(((size - 16) / 96))
truncate -s $((size - 40)) "$U"
ms cut import "$TMP/tr" -o "$TMP/cut.db"
assert_eq "usage file cut mid-record: import status" 0 "$RC"
assert_eq "usage file cut mid-record: the whole records" $((records - 1)) \
    "$(q "$TMP/cut.db" "SELECT count(*) FROM usage_samples")"
printf 'NOTUSAGE' | dd of="$U" conv=notrunc status=none
ms badmagic import "$TMP/tr" -o "$TMP/bad.db"
assert_eq "usage file with a wrong magic: import status" 0 "$RC"
assert_eq "usage file with a wrong magic: no rows" 0 "$(q "$TMP/bad.db" "SELECT count(*) FROM usage_samples")"
assert_match "usage file with a wrong magic: said" "usage-[0-9]+\.msu: malformed input; no usage samples" "$(cat "$TMP/badmagic.err")"
# A file size limit: the sampler stops writing at it (never SIGXFSZ, which would end memscope).
(
    ulimit -f 4
    "$MEMSCOPE" run -q --usage-interval=0.001 --format=trace -o "$TMP/lim" -- sleep 0.3 \
        >"$TMP/lim.out" 2>"$TMP/lim.err" </dev/null
)
assert_eq "ulimit -f 4 (KiB): memscope run's exit status (the program's)" 0 "$?"
assert_eq "ulimit -f 4: the usage file stops at the limit, whole records" "True" \
    "$(python3 -c "import os, glob; n = os.path.getsize(glob.glob('$TMP/lim/usage-*.msu')[0]); print(n <= 4096 and (n - 16) % 96 == 0)")"

# The trace directory is listed again only when it may have changed (usage_sampler.c,
# dir_changed; one fstat a tick otherwise), and the processes' /proc files stay open between
# samples. A shell that starts its second child 2.5 s after the first: both are sampled (the
# second's trace changes the directory), and the ticks of the quiet seconds list nothing.
ms idle run --log-level=debug --usage-interval=0.02 -o "$TMP/idle.db" -- sh -c 'sleep 2.5; sleep 1.5; true'
assert_eq "idle: exit status" 0 "$RC"
line=$(grep "usage sampler:" "$TMP/idle.err")
ticks=$(echo "$line" | sed -n 's/.* samples in \([0-9]*\) ticks.*/\1/p')
listings=$(echo "$line" | sed -n 's/.* \([0-9]*\) directory listings.*/\1/p')
assert_eq "idle: the directory listed at some ticks, not at all ($line)" "True" \
    "$(python3 -c "print(2 <= int('0$listings') < int('0$ticks'))")"
assert_eq "idle: every traced process sampled, the later child too" \
    "$(q "$TMP/idle.db" "SELECT count(DISTINCT pid) FROM processes")" \
    "$(q "$TMP/idle.db" "SELECT count(DISTINCT p.pid) FROM usage_samples u JOIN processes p ON p.id = u.process_id")"
assert_ge "idle: three processes or more (the shell and its sleeps)" 3 \
    "$(q "$TMP/idle.db" "SELECT count(DISTINCT pid) FROM processes")"
done_testing
