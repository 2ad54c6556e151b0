#!/bin/bash
# test_pools.sh: the analyses over many pools and a pool name that is not UTF-8 (issue 37 items
# 11 and 15). an_pools 80: 80 pools, one 1000-byte block live at exit in each, their reserved
# regions left out of every analysis; the heap holds 777 bytes at exit and a 333-byte temporary.
# With about 55 pools or more, leaks, peak and temporary failed with an SQL syntax error (the
# layer filter was cut at 256 bytes). an_pools 3 bad: the last pool is named "bad\xff\xfe\x01name";
# every --json output must be valid JSON (UTF-8, the bytes as U+FFFD), and the Python package's
# check_inefficient on that database must return the pool's idle block.
. "$(dirname "$0")/an_lib.sh"

ms run run -q -o "$TMP/p.db" -- "$PROGS/an_pools" 80
require_db "an_pools 80 (compact)" "$TMP/p.db"
ms export export --format=db "$TMP/p.db" -o "$TMP/full.db"
assert_eq "the full database" 0 "$RC"

jq_py() { "$PY" -c "import json, sys; d = json.load(sys.stdin); $1"; }
for db in p full; do
    f=$TMP/$db.db
    ms leaks analyze leaks "$f" --json
    assert_eq "$db: leaks: exit status" 0 "$RC"
    assert_eq "$db: leaks: live at exit, by layer kind: blocks and bytes" "heap 1 777|pool 80 80000" \
        "$(jq_py 'import collections
c = collections.defaultdict(lambda: [0, 0])
for g in d["live_at_exit"]:
    k = "reserved" if g["layer"].endswith(":reserved") else g["layer"].split(":")[0]
    c[k][0] += g["blocks"]; c[k][1] += g["bytes"]
print("|".join("%s %d %d" % (k, *v) for k, v in sorted(c.items())))' <"$TMP/leaks.out")"
    ms peak analyze peak "$f" --json
    assert_eq "$db: peak: exit status" 0 "$RC"
    assert_eq "$db: peak: one per layer, no reserved region" "heap 1110|pool 80 x 1000" \
        "$(jq_py 'p = d["peaks"]
pools = [x["peak_bytes"] for x in p if x["layer"].startswith("pool:")]
heap = [x["peak_bytes"] for x in p if x["layer"] == "heap"]
bad = [x["layer"] for x in p if x["layer"].endswith(":reserved")]
print("heap %d|pool %d x %s%s" % (heap[0], len(pools), "/".join(sorted(set(map(str, pools)))), bad or ""))' \
            <"$TMP/peak.out")"
    ms temporary analyze temporary "$f" --json
    assert_eq "$db: temporary: exit status" 0 "$RC"
    assert_eq "$db: temporary: allocations, temporaries, bytes" "82 1 333" \
        "$(jq_py 'print(d["allocations"], d["temporary"], d["temporary_bytes"])' <"$TMP/temporary.out")"
done

# 15: a pool name that is not UTF-8 (and a control character), in every JSON output
ms bad run -q -o "$TMP/bad.db" -- "$PROGS/an_pools" 3 bad
require_db "an_pools 3 bad" "$TMP/bad.db"
for a in leaks peak temporary fragmentation inefficient decompose trend; do
    "$MEMSCOPE" analyze "$a" "$TMP/bad.db" --json --idle-threshold 5 >"$TMP/j.out" 2>/dev/null ||
        "$MEMSCOPE" analyze "$a" "$TMP/bad.db" --json >"$TMP/j.out" 2>/dev/null
    assert_eq "analyze $a --json: valid JSON (strict UTF-8)" "ok" \
        "$("$PY" -c 'import json, sys
json.loads(sys.stdin.buffer.read().decode("utf-8", "strict")); print("ok")' <"$TMP/j.out" 2>&1 | tail -1)"
done
"$MEMSCOPE" analyze leaks "$TMP/bad.db" --json >"$TMP/j.out" 2>/dev/null
assert_eq "leaks --json: the name with U+FFFD for each byte that is not UTF-8" \
    "pool:bad\\ufffd\\ufffd\\u0001name" "$(grep -o 'pool:bad[^"]*' "$TMP/j.out" | head -1)"
"$MEMSCOPE" analyze inefficient "$TMP/bad.db" --json --idle-threshold 5 >"$TMP/j.out" 2>/dev/null
assert_eq "inefficient --json: the pool's idle block" \
    "1000 pool:bad\\ufffd\\ufffd\\u0001name temporary_idleness" \
    "$(jq_py 'b = d["blocks"][0]; print(b["size"], json.dumps(b["layer"]), *b["types"])' <"$TMP/j.out" | tr -d '"')"
# A failure writes nothing (analyze.h's contract): the pools' blocks unreadable, fragmentation
# exits 1 with its message and no half-written JSON document or table.
cp "$TMP/p.db" "$TMP/nob.db"
sqlite3 "$TMP/nob.db" "ALTER TABLE blocks RENAME TO blocks_gone" 2>/dev/null ||
    "$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('ALTER TABLE blocks RENAME TO blocks_gone'); c.commit()" "$TMP/nob.db"
for form in --json --text; do
    "$MEMSCOPE" analyze fragmentation "$TMP/nob.db" ${form/--text/} >"$TMP/f.out" 2>"$TMP/f.err"
    assert_eq "fragmentation $form on unreadable blocks: exit status" 1 "$?"
    assert_eq "fragmentation $form on unreadable blocks: nothing written" 0 "$(wc -c <"$TMP/f.out")"
    assert_match "fragmentation $form on unreadable blocks: the reason" "fragmentation: no such table: blocks" \
        "$(head -1 "$TMP/f.err")"
done
PKG=$(dirname "$MEMSCOPE")/python
if ls "$PKG"/memscope/_native*.so >/dev/null 2>&1; then
    assert_eq "check_inefficient(db): no UnicodeDecodeError, the pool's idle block" \
        "1000 'pool:bad\\ufffd\\ufffd\\x01name'" \
        "$(PYTHONPATH=$PKG MEMSCOPE=$MEMSCOPE "$PY" -c "import memscope
r = memscope.check_inefficient('$TMP/bad.db', idle_threshold=5)
print(r[0]['size'], ascii(r[0]['layer']))" 2>&1 | tail -1)"
else
    echo "SKIP (no Python package in $PKG): check_inefficient on the database"
fi
done_testing
