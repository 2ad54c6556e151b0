#!/usr/bin/env bash
# test_clickhouse.sh: the same tables in a cluster engine (docs/columnar.md, examples/clickhouse):
# two clickhouse-server processes on 127.0.0.1 as the shards of one cluster, a Distributed table
# over both, four ranks loaded through `memscope export --format=jsonl`, and the per-rank peak
# and leaked bytes examples/clickhouse/ranks.sql computes there equal to `memscope ranks --json`.
# Skipped (77) without clickhouse-server (scripts/setup-debian.sh installs it) or DuckDB's library.
. "$(dirname "$0")/lib.sh"

EX=$(cd "$(dirname "$0")/../../examples/clickhouse" && pwd)
command -v clickhouse-server >/dev/null 2>&1 || skip "clickhouse-server is not installed"
[ -r /etc/clickhouse-server/users.xml ] || skip "no /etc/clickhouse-server/users.xml"
printf 'leak:libduckdb.so\n' >"$TMP/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$TMP/lsan.supp"

ms peaks run -q -o "$TMP/peaks.db" -- "$PROGS/peaks"
ms annot run -q -o "$TMP/annot.db" -- "$PROGS/annotate"
require_db "peaks" "$TMP/peaks.db"
require_db "annotate" "$TMP/annot.db"
load() { # load DB HOST RANK: its blocks and rank_summary as JSON lines, and into a job
    ms "b$3" export "$1" --format=jsonl --table=blocks -o "$TMP/b$3.jsonl" --host="$2" --rank="$3"
    ms "r$3" export "$1" --format=jsonl --table=rank_summary -o "$TMP/r$3.jsonl" --host="$2" --rank="$3"
    ms "p$3" export "$1" --format=parquet -o "$TMP/job" --host="$2" --rank="$3"
}
load "$TMP/peaks.db" n1 0
if [ "$RC" -ne 0 ] && grep -q "DuckDB's C library is needed" "$TMP/p0.err"; then
    skip "DuckDB's C library is not installed"
fi
load "$TMP/peaks.db" n1 1
load "$TMP/annot.db" n2 2
load "$TMP/peaks.db" n2 3
ms ranks ranks "$TMP/job" --json
expected=$(sed -n 's/.*"rank": \([0-9]*\), "host": "\([^"]*\)", "peak_bytes": \([0-9]*\), .*"leaked_bytes": \([0-9]*\),.*/\2\t\1\t\3\t\4/p' "$TMP/ranks.out")
assert_eq "memscope ranks --json: the four ranks' peaks and leaked bytes" \
    "$(printf 'n1\t0\t4497304\t4096\nn1\t1\t4497304\t4096\nn2\t2\t5096\t5096\nn2\t3\t4497304\t4096')" "$expected"

# two shards: ports from a random base, so that two runs of this test on one machine differ
base=$((20000 + RANDOM % 20000))
PIDS=()
stop_servers() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do # a server takes seconds to exit: wait before its files go
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
    done
}
trap 'stop_servers; rm -rf "$TMP"' EXIT
for s in 1 2; do
    d=$TMP/shard$s
    mkdir -p "$d/data" "$d/tmp" "$d/user_files"
    sed -e "s|@DIR@|$d|g" -e "s|@HTTP@|$((base + 10 * s))|" -e "s|@TCP@|$((base + 10 * s + 1))|" \
        -e "s|@INTER@|$((base + 10 * s + 2))|" -e "s|@TCP1@|$((base + 11))|" \
        -e "s|@TCP2@|$((base + 21))|" "$EX/shard.xml.in" >"$d/config.xml"
    clickhouse-server --config-file="$d/config.xml" >"$d/out.log" 2>&1 &
    PIDS+=($!)
done
H1=http://127.0.0.1:$((base + 10))/
H2=http://127.0.0.1:$((base + 20))/
up=0
for _ in $(seq 1 150); do # about 2 s on this machine; 30 s at most
    if curl -s --max-time 2 "$H1?query=SELECT%201" >/dev/null &&
        curl -s --max-time 2 "$H2?query=SELECT%201" >/dev/null; then
        up=1
        break
    fi
    sleep 0.2
done
if [ "$up" -ne 1 ]; then
    fail "the two servers did not answer: $(tail -5 "$TMP"/shard*/out.log "$TMP"/shard*/error.log 2>/dev/null)"
    done_testing
fi
pass "two clickhouse-server shards answer on 127.0.0.1"
ch() { curl -sS --max-time 60 "$1" --data-binary "$2" 2>&1; }
ddl_ok=1
for h in "$H1" "$H2"; do
    while IFS= read -r l; do
        [ -n "$l" ] && out=$(ch "$h" "$l") && [ -n "$out" ] && { ddl_ok=0; echo "  $out" >&2; }
    done <"$EX/local.sql"
done
while IFS= read -r l; do
    [ -n "$l" ] && out=$(ch "$H1" "$l") && [ -n "$out" ] && { ddl_ok=0; echo "  $out" >&2; }
done <"$EX/distributed.sql"
assert_eq "examples/clickhouse: the local and Distributed tables are created" 1 "$ddl_ok"
ins="query=INSERT%20INTO%20TABLE%20FORMAT%20JSONEachRow&input_format_skip_unknown_fields=1&insert_distributed_sync=1"
for r in 0 1 2 3; do
    ch "$H1?${ins/TABLE/blocks}" "@$TMP/b$r.jsonl"
    ch "$H1?${ins/TABLE/rank_summary}" "@$TMP/r$r.jsonl"
done
assert_eq "the blocks rows of each rank, through the Distributed table" \
    "$(printf '0\t12002\n1\t12002\n2\t9\n3\t12002')" \
    "$(ch "$H1" "SELECT rank, count() FROM blocks GROUP BY rank ORDER BY rank")"
assert_eq "... spread over both shards by rank" "2 2" \
    "$(ch "$H1" "SELECT count() FROM (SELECT DISTINCT rank FROM blocks_local)") $(ch "$H2" "SELECT count() FROM (SELECT DISTINCT rank FROM blocks_local)")"
queries=$(grep -v '^--' "$EX/ranks.sql")
assert_eq "ranks.sql from the blocks: the peaks and leaked bytes of memscope ranks --json" \
    "$expected" "$(ch "$H1" "$(sed -n 1p <<<"$queries")")"
assert_eq "ranks.sql from rank_summary: the same" "$expected" "$(ch "$H1" "$(sed -n 2p <<<"$queries")")"
assert_eq "ranks.sql: the median peak and MAD" "$(printf '4497304\t0')" "$(ch "$H1" "$(sed -n 3p <<<"$queries")")"
done_testing
