#!/bin/bash
# test_monitor_prometheus.sh: many ranks through a real Prometheus (docs/monitor.md, "Many ranks,
# many nodes"): 4 processes with RANK=0..3, each under memscope run --metrics on its own port,
# holding 1, 2, 3 and 4 MiB (tests/progs/monitor_grow.c holdn); Debian's prometheus scrapes them
# every second, and its HTTP API must give sum by (rank) and sum of their live bytes exactly.
# Also the shipped examples/prometheus (promtool check config / check rules / test rules) and the
# Grafana dashboard (parses, names only exported metrics). Skipped without prometheus.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
EX="$SRC/examples/prometheus"
command -v promtool >/dev/null && command -v prometheus >/dev/null ||
    skip "prometheus and promtool are not installed (Debian: apt-get install prometheus)"
command -v curl >/dev/null || skip "curl is not installed"

# the examples
assert_match "promtool check config" "SUCCESS" "$(promtool check config "$EX/prometheus.yml" 2>&1)"
assert_match "promtool check rules" "SUCCESS: 9 rules found" "$(promtool check rules "$EX/memscope-rules.yml" 2>&1)"
(cd "$EX" && promtool test rules memscope-rules.test.yml) >"$TMP/rules-test.out" 2>&1
assert_eq "promtool test rules (the totals and the 10-minute alert)" 0 "$?"
EXPORTED=$(grep -o '"memscope_[a-z_]*"' "$SRC/src/cli/metrics.c" | tr -d '"' | sort -u | xargs)
assert_eq "the Grafana dashboard parses and names only exported metrics" "ok" \
    "$(python3 - "$EX/grafana-dashboard.json" "$EXPORTED" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
exported = set(sys.argv[2].split()) | {"DCGM_FI_DEV_FB_USED"}
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
named = set(n for e in exprs for n in re.findall(r"\b(memscope_[a-z_]+|DCGM_[A-Z_]+)\b", e))
bad = sorted(named - exported)
print("ok" if exprs and not bad else "unknown metrics: %s" % bad)
EOF
)"

wait_for() {
    for _ in $(seq 600); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 4 ranks
PIDS=()
for r in 0 1 2 3; do
    RANK=$r "$MEMSCOPE" run --metrics=127.0.0.1:0 -o "$TMP/rank$r.db" -- \
        "$PROGS/monitor_grow" holdn $((r + 1)) "$TMP/go" >"$TMP/rank$r.out" 2>"$TMP/rank$r.err" &
    PIDS+=($!)
done
TARGETS=""
for r in 0 1 2 3; do
    wait_for grep -q 'serving metrics on' "$TMP/rank$r.err"
    A=$(grep -o 'http://[^/]*/metrics' "$TMP/rank$r.err" | head -1 | sed 's|http://||; s|/metrics||')
    TARGETS="$TARGETS${TARGETS:+, }\"$A\""
done
assert_match "4 exporters listening" '^("127\.0\.0\.1:[0-9]+"(, )?){4}$' "$TARGETS"
PP=$(free_port)
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: memscope
    honor_labels: true
    static_configs:
      - targets: [$TARGETS]
EOF
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PP" >"$TMP/prometheus.log" 2>&1 &
PROM=$!
# query EXPR: the API's result as "labels=value" lines, sorted
query() {
    curl -sf --data-urlencode "query=$1" "http://127.0.0.1:$PP/api/v1/query" |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
for r in sorted(d["data"]["result"], key=lambda r: sorted(r["metric"].items())):
    print(",".join("%s=%s" % kv for kv in sorted(r["metric"].items())) + "=" + r["value"][1])' 2>/dev/null
}
BY_RANK='sum by (rank) (memscope_live_bytes{layer="heap"})'
EXPECT_BY_RANK=$'rank=0=1048576\nrank=1=2097152\nrank=2=3145728\nrank=3=4194304'
ranks_ready() { [ "$(query "$BY_RANK")" == "$EXPECT_BY_RANK" ]; }
wait_for ranks_ready
assert_eq "Prometheus: sum by (rank) of live heap bytes" "$EXPECT_BY_RANK" "$(query "$BY_RANK")"
assert_eq "Prometheus: sum of live heap bytes (10 MiB)" "=10485760" \
    "$(query 'sum(memscope_live_bytes{layer="heap"})')"
assert_eq "Prometheus: allocations by rank" $'rank=0=1\nrank=1=2\nrank=2=3\nrank=3=4' \
    "$(query 'sum by (rank) (memscope_allocations_total{layer="heap"})')"
assert_eq "Prometheus: one host" "=1" "$(query 'count(count by (host) (memscope_live_bytes))')"
kill "$PROM"
wait "$PROM" 2>/dev/null
# memscope top --targets shows the same: one line per rank and the job's total
ms top top --targets "$(echo "$TARGETS" | tr -d '" ')" --iterations 1
assert_eq "top --targets: ranks and their live bytes" $'0 1.0 MiB\n1 2.0 MiB\n2 3.0 MiB\n3 4.0 MiB\njob 10.0 MiB' \
    "$(awk '$1 ~ /^[0-9]+$/ {print $1, $3, $4} $1 == "job" {print $1, $3, $4}' "$TMP/top.out" | sort)"
touch "$TMP/go"
for r in 0 1 2 3; do
    wait "${PIDS[$r]}"
    assert_eq "rank $r: status" 0 "$?"
done

done_testing
