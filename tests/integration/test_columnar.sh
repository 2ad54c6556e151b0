#!/usr/bin/env bash
# test_columnar.sh: a job's ranks as Parquet tables (docs/columnar.md): `memscope export
# --format=parquet` adds runs of tests/progs/peaks and tests/progs/annotate as ranks of one job
# directory, and DuckDB itself (the real Parquet reader, through `memscope sql`) reads them back
# with exact counts and bytes per rank; the refusals and the bad input. Skipped (77) when
# DuckDB's C library is not installed (scripts/setup-debian.sh installs it).
. "$(dirname "$0")/lib.sh"

# An ASan build of memscope: DuckDB's own allocations that live until exit are not memscope's.
printf 'leak:libduckdb.so\n' >"$TMP/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$TMP/lsan.supp"

ms peaks run -q -o "$TMP/peaks.db" -- "$PROGS/peaks"
ms annot run -q -o "$TMP/annot.db" -- "$PROGS/annotate"
require_db "peaks" "$TMP/peaks.db"
require_db "annotate" "$TMP/annot.db"

J=$TMP/job
ms exp0 export "$TMP/peaks.db" --format=parquet -o "$J" --host=nodeA --rank=0 --job=j42
if [ "$RC" -ne 0 ] && grep -q "DuckDB's C library is needed" "$TMP/exp0.err"; then
    skip "DuckDB's C library is not installed: $(head -c 300 "$TMP/exp0.err")"
fi
assert_eq "export rank 0: exit status" 0 "$RC"
ms exp1 export "$TMP/peaks.db" --format=parquet -o "$J" --host=nodeA --rank=1 --job=j42
assert_eq "export rank 1: exit status" 0 "$RC"
ms exp2 export "$TMP/annot.db" --format=parquet -o "$J" --host=nodeB --rank=2 --job=j42
assert_eq "export rank 2 (another host): exit status" 0 "$RC"

# sql JOB QUERY: CSV rows without the header
sql() { "$MEMSCOPE" sql "$J" "$1" --format=csv 2>&1 | tail -n +2; }

# a table with no rows in a run (peaks: no step, no event but its blocks') has no file there
assert_eq "the layout: TABLE/host=HOST/rank=RANK/data_0.parquet (usage: when sampled)" \
    "$(for t in blocks events processes rank_summary sites steps timeline; do
        case $t in events | steps) ;; *)
            printf '%s/host=nodeA/rank=0/data_0.parquet\n%s/host=nodeA/rank=1/data_0.parquet\n' "$t" "$t" ;;
        esac
        printf '%s/host=nodeB/rank=2/data_0.parquet\n' "$t"
    done)" \
    "$(cd "$J" && find . -name '*.parquet' | sed 's|^\./||' | grep -v '^usage/' | sort)"
assert_eq "timeline: peaks' heap, at most 1000 points, its highest and its end" "1000 312000 4096" \
    "$(sql "SELECT max(point) + 1, max(max_live_bytes), arg_max(live_bytes, point) FROM timeline
            WHERE rank = 0 AND layer = 'heap'" | tr , ' ')"
assert_eq "usage: the peaks runs' samples (one at exit at least)" "$(printf '0\n1')" \
    "$(sql "SELECT DISTINCT rank FROM usage WHERE rank < 2 AND exited = 1 ORDER BY rank")"
# peaks: 40 rounds of 300 blocks of 1000 + r bytes (r = 1..40): 12,000 blocks, 12,246,000 bytes
assert_eq "blocks per rank: peaks' 12,000 of 1001..1040 bytes, 12,246,000 bytes, on the heap" \
    "$(printf 'nodeA,0,12000,12246000\nnodeA,1,12000,12246000')" \
    "$(sql "SELECT host, rank, count(*), sum(size) FROM blocks WHERE layer = 'heap' AND size
            BETWEEN 1001 AND 1040 GROUP BY ALL ORDER BY rank")"
assert_eq "the 4 MiB mapping, once per peaks rank" "$(printf '0,1\n1,1')" \
    "$(sql "SELECT rank, count(*) FROM blocks WHERE layer = 'mmap' AND size = 4194304
            GROUP BY rank ORDER BY rank")"
# the heap peaks at round 40 (300 x 1040), the heap and mmap together at round 10 (4 MiB +
# 300 x 1010); at the end only stdout's buffer (4096 bytes) is live
assert_eq "rank_summary of rank 0: per layer and host, exact" \
    "$(printf 'heap,312000,4096,1,12250096,12001\nhost,4497304,4096,1,16444400,12002\nmmap,4194304,0,0,4194304,1')" \
    "$(sql "SELECT layer, peak_bytes, live_bytes, live_blocks, alloc_bytes, allocs FROM
            rank_summary WHERE rank = 0 ORDER BY layer")"
assert_eq "rank_summary's heap equals the run database's process_stats" \
    "$(q "$TMP/peaks.db" "SELECT peak_bytes || ',' || live_bytes || ',' || alloc_bytes || ',' ||
         allocs FROM process_stats WHERE layer = 1")" \
    "$(sql "SELECT peak_bytes, live_bytes, alloc_bytes, allocs FROM rank_summary WHERE rank = 1
            AND layer = 'heap'")"
assert_eq "peak time: that of the event reaching the peak in the run's database" \
    "$(q "$TMP/peaks.db" "SELECT peak_ns FROM process_stats WHERE layer = 1")" \
    "$(sql "SELECT peak_ns FROM rank_summary WHERE rank = 0 AND layer = 'heap'")"
# annotate: three steps; its blocks' allocation and free steps (tests/progs/annotate.c)
assert_eq "steps of rank 2" "$(printf '1\n2\n3')" "$(sql "SELECT step FROM steps ORDER BY step")"
assert_eq "annotate's blocks: layer, size, alloc step, free step" \
    "$(printf 'heap,100,1,1\nheap,200,2,2\nheap,300,3,3\nheap,1000,2,\npool:arena,64,1,3\npool:arena,64,2,\npool:arena,64,3,')" \
    "$(sql "SELECT layer, size, alloc_step, free_step FROM blocks WHERE rank = 2 AND size < 4096
            ORDER BY layer, size, alloc_step")"
assert_eq "a site's first frame" "ms_progs_annot_alloc" \
    "$(sql "SELECT DISTINCT split_part(s.first_frame, ' ', 1) FROM blocks b JOIN sites s
            ON s.site = b.site AND s.rank = b.rank WHERE b.rank = 2 AND b.size = 100")"
assert_eq "a site's frames: function, file, line, module of the innermost two" \
    "ms_progs_annot_alloc annotate.c 22 annotate|main annotate.c 32 annotate" \
    "$(sql "SELECT string_agg(concat_ws(' ', f.function, parse_filename(f.file), f.line,
                                       parse_filename(f.module)), '|')
            FROM (SELECT unnest(s.frames[1:2]) AS f FROM blocks b JOIN sites s
                  ON s.site = b.site AND s.rank = b.rank WHERE b.rank = 2 AND b.size = 100)")"
assert_eq "the job's heap peaks per rank (one query over all ranks)" \
    "$(printf '0,312000\n1,312000\n2,5096')" \
    "$(sql "SELECT rank, peak_bytes FROM rank_summary WHERE layer = 'heap' ORDER BY rank")"
nfiles=$(find "$J" -name '*.parquet' | wc -l)
assert_eq "every file says its schema version, table, host and job" "$nfiles|$nfiles|$nfiles|$nfiles" \
    "$(sql "SELECT count(*) FILTER (WHERE k = 'memscope_schema' AND v = '1'),
                   count(*) FILTER (WHERE k = 'memscope_table' AND file_name LIKE '%/' || v || '/%'),
                   count(*) FILTER (WHERE k = 'host' AND file_name LIKE '%host=' || v || '/%'),
                   count(*) FILTER (WHERE k = 'job' AND v = 'j42')
            FROM (SELECT file_name, decode(key) AS k, decode(value) AS v FROM
                  parquet_kv_metadata('$J/*/*/*/*.parquet'))" | tr , '|')"
ms json sql "$J" "SELECT rank, peak_bytes FROM rank_summary WHERE layer = 'host' AND rank < 2 ORDER BY rank" --format=json
assert_eq "--format=json" "$(printf '[\n{"rank": 0, "peak_bytes": 4497304},\n{"rank": 1, "peak_bytes": 4497304}\n]')" \
    "$(cat "$TMP/json.out")"

# the same host and rank again: refused, the job unchanged; --replace replaces it
before=$(cd "$J" && find . -type f | sort | xargs md5sum)
ms again export "$TMP/annot.db" --format=parquet -o "$J" --host=nodeA --rank=1
assert_eq "host nodeA rank 1 again: refused" 1 "$RC"
assert_match "... saying so" "already holds host nodeA rank 1.*--replace" "$(cat "$TMP/again.err")"
assert_eq "... the job unchanged" "$before" "$(cd "$J" && find . -type f | sort | xargs md5sum)"
ms replace export "$TMP/annot.db" --format=parquet -o "$J" --host=nodeA --rank=1 --replace
assert_eq "--replace: exit status" 0 "$RC"
assert_eq "... rank 1 is now annotate's run, once" "5696" \
    "$(sql "SELECT sum(size) FROM blocks WHERE rank = 1 AND layer = 'heap'")"
assert_eq "... no private directory left in JOB" "" "$(cd "$J" && ls -A | grep '^\.')"

# memscope ranks: three runs of peaks and one of annotate; annotate's rank is the outlier (its
# host peak, 5,096 bytes, against the median 4,497,304: MAD 0, so the threshold is 10% of the
# median), and at its peak it lacks peaks' mapping (4 MiB) and round 10's 300 x 1010 bytes
J3=$TMP/job3
for r in 0 1 2; do
    ms "r$r" export "$TMP/peaks.db" --format=parquet -o "$J3" --host=n1 --rank=$r
done
ms r3 export "$TMP/annot.db" --format=parquet -o "$J3" --host=n2 --rank=3
ms ranks ranks "$J3" --json
assert_eq "ranks --json: exit status" 0 "$RC"
assert_eq "ranks: the job's figures" \
    '{"layer": "host", "ranks_count": 4, "total_peak_bytes": 13497008, "median_peak_bytes": 4497304, "mad_bytes": 0, "threshold_bytes": 449730, "imbalance": 1.000,' \
    "$(head -1 "$TMP/ranks.out")"
assert_eq "ranks: rank, host, peak, step, leaked, outlier per rank" \
    "$(printf '0 n1 4497304 1 4096 false\n1 n1 4497304 1 4096 false\n2 n1 4497304 1 4096 false\n3 n2 5096 3 5096 true')" \
    "$(sed -n 's/.*"rank": \([0-9]*\), "host": "\([^"]*\)", "peak_bytes": \([0-9]*\), "peak_ns": [0-9]*, "peak_step": \([0-9]*\), "leaked_bytes": \([0-9]*\), "outlier": \([a-z]*\).*/\1 \2 \3 \4 \5 \6/p' "$TMP/ranks.out")"
assert_eq "ranks: the outlier's sites against the median rank, largest first" \
    "$(printf 'ms_progs_peaks_map -4194304\nms_progs_peaks_alloc -303000\n_IO_file_doallocate 4096\nms_progs_annot_alloc 1000')" \
    "$(grep -o '"site": "[^ ]*[^}]*}' "$TMP/ranks.out" | sed 's/"site": "\([^ ]*\) .*"bytes": \(-*[0-9]*\)}/\1 \2/')"
ms ranks_heap ranks "$J3" --layer=heap
assert_match "ranks --layer=heap: the heap's median and the outlier" \
    "layer heap: sum of peaks 941096 bytes, median peak 312000.*3 +n2 +5096 .*OUTLIER" \
    "$(tr '\n' ' ' <"$TMP/ranks_heap.out")"
ms ranks_nolayer ranks "$J3" --layer=nosuch
assert_match "ranks: a layer no rank has: exit 1, said" "1 .*no rank has layer 'nosuch'" \
    "$RC $(cat "$TMP/ranks_nolayer.err")"

# the rank a launcher gave (torchrun's RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID) is recorded in the
# run's meta, and is the export's rank and job when no --rank or --job is given
RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 TORCHELASTIC_RUN_ID=job-abc ms ranked run -q -o "$TMP/ranked.db" -- "$PROGS/annotate"
assert_eq "the run's meta: rank, local_rank, world_size, job" "5|1|8|job-abc" \
    "$(q "$TMP/ranked.db" "SELECT group_concat(value, '|') FROM (SELECT value FROM meta WHERE key IN
       ('rank', 'local_rank', 'world_size', 'job') ORDER BY CASE key WHEN 'rank' THEN 1
       WHEN 'local_rank' THEN 2 WHEN 'world_size' THEN 3 ELSE 4 END)")"
ms ranked_exp export "$TMP/ranked.db" --format=parquet -o "$TMP/job5" --host=h
assert_eq "... exported as rank 5 without --rank" "h/rank=5" \
    "$(cd "$TMP/job5/rank_summary" && echo host=*/rank=* | sed 's/host=//')"
assert_eq "... its files say job job-abc" "job-abc" \
    "$("$MEMSCOPE" sql "$TMP/job5" "SELECT DISTINCT decode(value) FROM parquet_kv_metadata('$TMP/job5/*/*/*/*.parquet') WHERE decode(key) = 'job'" --format=csv | tail -n +2)"
ms unranked run -q -o "$TMP/unranked.db" -- "$PROGS/annotate"
assert_eq "a run without a launcher's rank: no rank in its meta" "0" \
    "$(q "$TMP/unranked.db" "SELECT count(*) FROM meta WHERE key IN ('rank', 'local_rank', 'world_size', 'job')")"

# one table as JSON lines (for engines that ingest rows: tests/integration/test_clickhouse.sh)
ms jsonl export "$TMP/annot.db" --format=jsonl --table=rank_summary -o "$TMP/rs.jsonl" --host=n2 --rank=3
assert_eq "jsonl: rank_summary's rows with the Parquet names, host and rank" \
    '{"layer":"heap","peak_bytes":5096,"live_bytes":5096,"host":"n2","rank":3}' \
    "$(grep '"layer":"heap"' "$TMP/rs.jsonl" | sed 's/"peak_ns":[0-9]*,"peak_step":[0-9]*,"peak_event":[0-9]*,//; s/"live_blocks":[0-9]*,"alloc_bytes":[0-9]*,"allocs":[0-9]*,//')"
ms jsonl_bad export "$TMP/annot.db" --format=jsonl --table=nosuch -o "$TMP/x.jsonl"
assert_eq "jsonl: an unknown table: usage error, nothing written" "2 no" \
    "$RC $([ -e "$TMP/x.jsonl" ] && echo yes || echo no)"

# bad input
ms nojob sql "$TMP/nosuch" "SELECT 1"
assert_eq "sql: a job that does not exist: exit 1" 1 "$RC"
assert_match "... named" "cannot open job directory .*nosuch" "$(cat "$TMP/nojob.err")"
mkdir "$TMP/empty"
ms empty sql "$TMP/empty" "SELECT 1"
assert_match "sql: a job with no table: exit 1, said" "1 .*holds no table" "$RC $(cat "$TMP/empty.err")"
ms sqlerr sql "$J" "SELECT nosuch FROM blocks"
assert_match "sql: an SQL error: exit 1 with DuckDB's message" '1 .*"nosuch" not found' \
    "$RC $(cat "$TMP/sqlerr.err")"
cp -r "$J" "$TMP/damaged"
f=$TMP/damaged/blocks/host=nodeA/rank=0/data_0.parquet
head -c 1000 "$f" >"$f.part" && mv "$f.part" "$f"
ms damaged sql "$TMP/damaged" "SELECT count(*) FROM blocks"
assert_match "sql: a truncated Parquet file: exit 1, the file named" \
    "1 .*blocks/host=nodeA/rank=0/data_0.parquet" "$RC $(cat "$TMP/damaged.err")"
mkdir -p "$TMP/newer/blocks/host=h/rank=0"
ms mknewer sql "$J" "COPY (SELECT 1 AS size) TO '$TMP/newer/blocks/host=h/rank=0/data_0.parquet'
                     (FORMAT parquet, KV_METADATA {memscope_schema: '99'})"
ms newer sql "$TMP/newer" "SELECT count(*) FROM blocks"
assert_match "sql: a file of a newer schema: exit 1, said" \
    "1 .*data_0.parquet: written with memscope's columnar schema 99" "$RC $(cat "$TMP/newer.err")"
ms badhost export "$TMP/peaks.db" --format=parquet -o "$TMP/j2" --host=../x
assert_match "export: a host that is no directory name: exit 1" "1 .*cannot be a partition" \
    "$RC $(cat "$TMP/badhost.err")"
assert_eq "... nothing written" "no" "$([ -e "$TMP/j2" ] && echo yes || echo no)"
ms norank export "$TMP/peaks.db" --format=parquet -o "$TMP/j2" --rank=-1
assert_eq "export: a negative rank: usage error" 2 "$RC"
ms nodb export "$TMP/nosuch.db" --format=parquet -o "$TMP/j2"
assert_eq "export: a database that does not exist: exit 1" 1 "$RC"
MEMSCOPE_DUCKDB=$TMP/nosuch/libduckdb.so ms nolib sql "$J" "SELECT 1"
assert_match "no DuckDB library: exit 1, saying how to get it" \
    "1 .*cannot load .*nosuch/libduckdb.so.*setup-debian.sh" "$RC $(cat "$TMP/nolib.err")"
done_testing
