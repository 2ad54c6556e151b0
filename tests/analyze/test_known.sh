#!/bin/bash
# test_known.sh: known answers of compare, inefficient, decompose and fragmentation on programs
# run under memscope (b_steps, b_pool, b_ineff): golden text reports (an_lib.sh's golden),
# exact answers from the JSON documents, the write-back of inefficient, and the programs
# running plainly without the agent. UPDATE_GOLDEN=1 rewrites the goldens.
. "$(dirname "$0")/an_lib.sh"

# The programs behave the same without the agent: exit 0, no output.
for p in b_steps b_pool b_ineff; do
    out=$("$PROGS/$p" 2>&1)
    assert_eq "$p without the agent: exit status" 0 "$?"
    assert_eq "$p without the agent: no output" "" "$out"
done

run() { # db prog args...
    local db=$1
    shift
    ms "run_$db" run -o "$TMP/$db" -- "$@"
    assert_eq "memscope run $* : exit status" 0 "$RC"
}
run steps.db "$PROGS/b_steps"
run base.db "$PROGS/b_steps" base
run pool.db "$PROGS/b_pool"
run ineff.db "$PROGS/b_ineff"
[ "$FAILS" = 0 ] || done_testing

# report NAME ARGS...: `memscope analyze ARGS` run in $TMP (the databases by their names),
# compared with golden/NAME.txt.
report() {
    local name=$1
    shift
    (cd "$TMP" && "$MEMSCOPE" analyze "$@") >"$TMP/$name.raw" 2>"$TMP/$name.err"
    assert_eq "analyze $*: exit status" 0 "$?"
    golden "$name" "$TMP/$name.raw"
}
INEFF_OPTS=(--idle-threshold 5 --lazy-used 100000000 --delayed-free 100000000
    --long-idle 100000000)
report compare_steps compare steps.db --steps 2,3 --csv ops.csv
golden compare_ops "$TMP/ops.csv"
report compare_with compare steps.db --with base.db
# Two steps without any op (step 1, and step 4 after the last memscope_step): the op sequences'
# edit script is empty (its reversal once wrapped around and crashed).
ms c14 analyze compare "$TMP/steps.db" --steps 1,4 --json
assert_eq "compare --steps 1,4 (no op on either side): exit status" 0 "$RC"
assert_match "compare --steps 1,4: a JSON report" '"analysis": *"compare"' "$(cat "$TMP/c14.out")"
report decompose_peak decompose steps.db
report decompose_step1 decompose steps.db --step 1
report fragmentation fragmentation pool.db
report inefficient inefficient ineff.db "${INEFF_OPTS[@]}"

# Exact answers straight from the JSON documents (independent of the text layout).
json() { # out kind db args...
    local out=$1 kind=$2
    shift 2
    (cd "$TMP" && "$MEMSCOPE" analyze "$kind" "$@" --json) >"$TMP/$out"
    assert_eq "analyze $kind $* --json: exit status" 0 "$?"
    json_check "$kind" "$TMP/$out"
}
json c.json compare steps.db --steps 2,3
json cw.json compare steps.db --with base.db
json d.json decompose steps.db
json ds.json decompose steps.db --step 3
json f.json fragmentation pool.db
json i.json inefficient ineff.db "${INEFF_OPTS[@]}"
T=$TMP
assert_eq "compare steps: the top site, its bytes and count" "b_alloc_extra 5000 1" \
    "$(jq_py "$T/c.json" 't = d["allocated"]["by_site"][0]; " ".join([t["site"].split(" ")[0], str(t["diff_bytes"]), str(t["diff_count"])])')"
assert_eq "compare steps: the top owner" "act@extra 5000" \
    "$(jq_py "$T/c.json" 'o = d["allocated"]["by_owner"][0]; "%s %s" % (o["owner"], o["diff_bytes"])')"
assert_eq "compare steps: total" 5000 "$(jq_py "$T/c.json" 'd["allocated"]["totals"]["diff_bytes"]')"
assert_eq "compare steps: the ops that differ" "extra_op None 5000|forward 1000 6000" \
    "$(jq_py "$T/c.json" '"|".join("%s %s %s" % (o["name"], o["a_bytes"], o["b_bytes"]) for o in d["ops"]["differ"])')"
assert_eq "compare --with: live at the end" -5000 \
    "$(jq_py "$T/cw.json" 'd["live_at_end"]["totals"]["diff_bytes"]')"
assert_eq "compare --with: allocated, the top owner" "act@extra" \
    "$(jq_py "$T/cw.json" 'd["allocated"]["by_owner"][0]["owner"]')"
assert_eq "decompose: the peak's heap and its owners" "heap 12144 act=6000 model=6144" \
    "$(jq_py "$T/d.json" 'h = d["tree"][0]["children"][0]; " ".join([h["name"], str(h["bytes"])] + sorted("%s=%s" % (k["name"], k["bytes"]) for k in h["children"]))')"
assert_eq "decompose --step 3: owners and their labels" \
    "act 5000 extra=5000|model 6144 grad=2048 weight=4096" \
    "$(jq_py "$T/ds.json" 'h = d["tree"][0]["children"][0]; "|".join(sorted(" ".join([k["name"], str(k["bytes"])] + sorted("%s=%s" % (g["name"], g["bytes"]) for g in k["children"])) for k in h["children"]))')"
assert_eq "decompose --step 3: the points" "step 1|step 2|step 3|end" \
    "$(jq_py "$T/ds.json" '"|".join(p["label"] for p in d["points"])')"
assert_eq "decompose --step 3: each owner's series" \
    "act=[0, 0, 0, 0] act@extra=[0, 0, 5000, 5000] model@grad=[2048, 2048, 2048, 2048] model@weight=[4096, 4096, 4096, 4096]" \
    "$(jq_py "$T/ds.json" '" ".join(sorted("%s=%s" % (o["owner"], o["live"]) for o in d["owners"]))')"
assert_eq "fragmentation: label reserved used free largest_free of each row" \
    "step 1 4096 2048 2048 2048|step 2 4096 1280 2816 2048|peak used 4096 2304 1792 1024|step 3 4096 2304 1792 1024|end 0 0 0 0" \
    "$(jq_py "$T/f.json" '"|".join(" ".join([r["label"]] + [str(r[k]) for k in ("reserved", "used", "free", "largest_free")]) for r in d["pools"][0]["rows"])')"
assert_eq "fragmentation at step 2: (free - largest free) / free" "$(/usr/bin/python3 -c 'print(round(768 / 2816, 6))')" \
    "$(jq_py "$T/f.json" 'round(d["pools"][0]["rows"][1]["fragmentation"], 6)')"
assert_eq "inefficient: size and types of each block" \
    "200 early_allocation|300 late_deallocation|500 temporary_idleness|600 lazy_used|700 delayed_free|800 long_idle" \
    "$(jq_py "$T/i.json" '"|".join("%s %s" % (s, " ".join(t)) for s, t in sorted((b["size"], b["types"]) for b in d["blocks"]))')"

# The idle threshold counts APIs: with 7 APIs between T's accesses, 6 flags it and 7 does not.
for n in 6 7; do
    "$MEMSCOPE" analyze inefficient "$T/ineff.db" --idle-threshold $n --json >"$T/i$n.json"
done
assert_eq "idle threshold 6 / 7: blocks flagged" "1 0" \
    "$(jq_py "$T/i6.json" 'd["counts"]["temporary_idleness"]["blocks"]') $(jq_py "$T/i7.json" 'd["counts"]["temporary_idleness"]["blocks"]')"

# Write-back: table inefficient holds one row per (block, type).
"$MEMSCOPE" analyze inefficient "$T/ineff.db" "${INEFF_OPTS[@]}" --write-back >/dev/null
assert_eq "inefficient --write-back: exit status" 0 "$?"
want=$'200:early_allocation\n300:late_deallocation\n500:temporary_idleness\n600:lazy_used\n700:delayed_free\n800:long_idle'
assert_eq "inefficient --write-back: the table's rows" "$want" \
    "$(q "$T/ineff.db" "SELECT b.size || ':' || i.type FROM inefficient i
        JOIN blocks b USING (allocation_id) ORDER BY b.size")"
# A second run replaces the rows (here: only the API-count rules).
"$MEMSCOPE" analyze inefficient "$T/ineff.db" --idle-threshold 5 --write-back >/dev/null
assert_eq "a second --write-back replaces the rows" 3 "$(q "$T/ineff.db" 'SELECT COUNT(*) FROM inefficient')"

# memscope_dump (a table in the full database) shows the findings in the MALLOC rows' Attr:
# carried over by an expansion, then rewritten by each --write-back on the full database.
dump_ineff() { # db: size:types of the MALLOC rows that have inefficient_type
    q "$1" "SELECT json_extract(Attr, '\$.size') || ':' || json_extract(Attr,
      '\$.inefficient_type') FROM memscope_dump WHERE Event = 'MALLOC' AND
      json_extract(Attr, '\$.inefficient_type') IS NOT NULL ORDER BY ID"
}
three=$'200:early_allocation\n300:late_deallocation\n500:temporary_idleness'
"$MEMSCOPE" export "$T/ineff.db" --format=db -o "$T/ineff_full.db"
assert_eq "export --format=db: exit status" 0 "$?"
assert_eq "the expanded memscope_dump's inefficient_type" "$three" "$(dump_ineff "$T/ineff_full.db")"
"$MEMSCOPE" analyze inefficient "$T/ineff_full.db" "${INEFF_OPTS[@]}" --write-back >/dev/null
assert_eq "inefficient --write-back on the full database: exit status" 0 "$?"
assert_eq "memscope_dump after --write-back" "$want" "$(dump_ineff "$T/ineff_full.db" | sort -n)"
"$MEMSCOPE" analyze inefficient "$T/ineff_full.db" --idle-threshold 5 --write-back >/dev/null
assert_eq "memscope_dump after a second --write-back" "$three" "$(dump_ineff "$T/ineff_full.db")"

done_testing
