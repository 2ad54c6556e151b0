#!/bin/bash
# test_redis.sh: a real server with its own allocator, Debian's redis-server (jemalloc, no debug
# information, /usr/bin/redis-server a link to redis-check-rdb), as a user runs it under memscope:
# started, fed by redis-cli over a Unix socket, shut down. Known answer: SET of 1000 keys with
# 10,000-byte values makes 1000 blocks of 10,006 bytes (redis's sds string: 10,000 bytes, a
# 5-byte header, its terminating 0) that DEL frees again; the heap peak holds them, jemalloc's
# own arenas (the mappings that hold that heap) are not added to the mmap layer, the process is
# named as started (redis-server), and the call sites are redis's functions, not its allocator
# wrappers (zmalloc ...) or jemalloc's. Skipped where redis-server is not installed.
. "$(dirname "$0")/lib.sh"
REDIS=$(command -v redis-server) || skip "redis-server not installed"
command -v redis-cli >/dev/null || skip "redis-cli not installed"

SOCK=$TMP/redis.sock
DB=$TMP/redis.db
"$MEMSCOPE" run -q -o "$DB" -- "$REDIS" --port 0 --unixsocket "$SOCK" --save "" \
    --appendonly no --dir "$TMP" >"$TMP/redis.out" 2>&1 </dev/null &
server=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
if [ ! -S "$SOCK" ]; then
    kill "$server" 2>/dev/null
    wait "$server"
    fail "redis-server did not open its socket in 10 s: $(tail -3 "$TMP/redis.out")"
    done_testing
fi
value=$(printf 'x%.0s' $(seq 10000))
for i in $(seq 1000); do printf 'SET k%d %s\n' "$i" "$value"; done |
    redis-cli -s "$SOCK" >"$TMP/set.out"
assert_eq "redis-cli: 1000 SETs answered OK" 1000 "$(grep -c '^OK$' "$TMP/set.out")"
assert_eq "redis-cli: DBSIZE" 1000 "$(redis-cli -s "$SOCK" dbsize)"
for i in $(seq 1000); do printf 'DEL k%d\n' "$i"; done | redis-cli -s "$SOCK" >/dev/null
redis-cli -s "$SOCK" shutdown nosave >/dev/null 2>&1
wait "$server"
assert_eq "redis-server: exit status under memscope" 0 "$?"
assert_match "redis-server: its own last words" "ready to exit" "$(tail -1 "$TMP/redis.out")"
require_db redis "$DB"

assert_eq "the process is named as started" "redis-server" \
    "$(q "$DB" "SELECT replace(exe, rtrim(exe, replace(exe, '/', '')), '') FROM processes")"
assert_eq "the values: 1000 blocks of 10,006 bytes, all freed" "1000|1000" \
    "$(q "$DB" "SELECT count(*), sum(free_ns IS NOT NULL) FROM blocks WHERE size = 10006")"
# The two frees redis made of blocks never seen allocated were the C library's dlerror record
# of the agent's failed libcuda probe, freed by jemalloc's dlsym (agent_dl_forget_error).
assert_eq "no free of a block never seen allocated" 0 \
    "$(q "$DB" "SELECT sum(unmatched_frees) FROM process_stats")"
assert_eq "nothing lost" 0 "$(q "$DB" "SELECT sum(lost_events) FROM processes")"
assert_ge "heap peak holds the values" 10006000 \
    "$(q "$DB" "SELECT peak_bytes FROM process_stats WHERE layer = 1")"
assert_eq "jemalloc's arenas are not counted again in the mmap layer (peak under 1 MB)" 1 \
    "$(q "$DB" "SELECT coalesce(max(peak_bytes), 0) < 1000000 FROM process_stats WHERE layer = 2")"

ms peak analyze peak "$DB" --json --top 5
assert_eq "analyze peak: exit status" 0 "$RC"
top=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = [p for p in d["peaks"] if p["layer"] == "heap"][0]
for s in p["by_site"]:
    print(s["bytes"], s["site"])' "$TMP/peak.out")
assert_match "analyze peak: the values' site is redis's string constructor" \
    "^100[0-9]{5} _?sdsnewlen " "$(head -1 <<<"$top")"
assert_eq "analyze peak: no top site is an allocator wrapper or jemalloc" "" \
    "$(grep -E ' (zmalloc|ztrymalloc|zcalloc|zrealloc|je_|malloc|calloc|realloc)' <<<"$top")"
done_testing
