#!/bin/bash
# b_known.sh: known answers of compare, inefficient, decompose and fragmentation on programs run
# under memscope (b_steps, b_pool, b_ineff): golden text reports (diff -u, with the source
# directory and relative times masked), exact SQL checks, JSON keys, and the programs running
# plainly without the agent. Set B_UPDATE_GOLDEN=1 to rewrite the goldens.
set -u
: "${MEMSCOPE:?}" "${PROGS:?}" "${ANALYZE_SRC:?}"
PY=${PYTHON3:-/usr/bin/python3}
GOLD=$ANALYZE_SRC/golden
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The programs behave the same without the agent: exit 0, no output.
for p in b_steps b_pool b_ineff; do
    out=$("$PROGS/$p" 2>&1) || bad "$p without the agent exited $?"
    [ -z "$out" ] || bad "$p without the agent printed: $out"
done

run() { # db prog args...
    local db=$1
    shift
    "$MEMSCOPE" run -o "$T/$db" -- "$@" >"$T/$db.log" 2>&1 || { cat "$T/$db.log"; bad "memscope run $*"; }
}
run steps.db "$PROGS/b_steps"
run base.db "$PROGS/b_steps" base
run pool.db "$PROGS/b_pool"
run ineff.db "$PROGS/b_ineff"
[ "$fail" = 0 ] || exit 1

mask() { sed -e "s|$ANALYZE_SRC/||g" -e 's/+[0-9][0-9.]* ms/+T ms/g'; }

golden() { # name command...
    local name=$1
    shift
    if ! (cd "$T" && "$@") >"$T/$name.raw" 2>"$T/$name.err"; then
        cat "$T/$name.err"
        bad "$name: $* exited non-zero"
        return
    fi
    mask <"$T/$name.raw" >"$T/$name"
    if [ "${B_UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$T/$name" "$GOLD/$name"
    elif ! diff -u "$GOLD/$name" "$T/$name"; then
        bad "$name differs from its golden"
    fi
}

INEFF_OPTS=(--idle-threshold 5 --lazy-used 100000000 --delayed-free 100000000
            --long-idle 100000000)
golden compare_steps.txt "$MEMSCOPE" analyze compare steps.db --steps 2,3 --csv ops.csv
cp "$T/ops.csv" "$T/compare_ops.csv.raw"
mask <"$T/compare_ops.csv.raw" >"$T/compare_ops.csv"
if [ "${B_UPDATE_GOLDEN:-}" = 1 ]; then cp "$T/compare_ops.csv" "$GOLD/"; else
    diff -u "$GOLD/compare_ops.csv" "$T/compare_ops.csv" || bad "compare_ops.csv differs"
fi
golden compare_with.txt "$MEMSCOPE" analyze compare steps.db --with base.db
# two steps without any op (step 1, and step 4 after the last memscope_step): the op sequences'
# edit script is empty (its reversal once wrapped around and crashed)
"$MEMSCOPE" analyze compare "$T/steps.db" --steps 1,4 --json >"$T/c14.json" 2>"$T/c14.err" ||
    bad "compare --steps 1,4 (no op on either side) failed: $(cat "$T/c14.err")"
grep -q '"analysis": *"compare"' "$T/c14.json" || bad "compare --steps 1,4: no JSON report"
golden decompose_peak.txt "$MEMSCOPE" analyze decompose steps.db
golden decompose_step1.txt "$MEMSCOPE" analyze decompose steps.db --step 1
golden fragmentation.txt "$MEMSCOPE" analyze fragmentation pool.db
golden inefficient.txt "$MEMSCOPE" analyze inefficient ineff.db "${INEFF_OPTS[@]}"

# Exact answers straight from the JSON documents (independent of the text layout).
json() { # out kind db args...
    local out=$1 kind=$2
    shift 2
    (cd "$T" && "$MEMSCOPE" analyze "$kind" "$@" --json) >"$T/$out" || bad "$kind --json $*"
    "$PY" "$ANALYZE_SRC/check_json.py" "$kind" "$T/$out" || bad "$out: JSON keys"
}
json c.json compare steps.db --steps 2,3
json cw.json compare steps.db --with base.db
json d.json decompose steps.db
json ds.json decompose steps.db --step 3
json f.json fragmentation pool.db
json i.json inefficient ineff.db "${INEFF_OPTS[@]}"
"$PY" - "$T" <<'PYEOF' || bad "JSON known answers"
import json, sys, os
t = sys.argv[1]
ld = lambda n: json.load(open(os.path.join(t, n)))
errs = []
def eq(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")
c = ld("c.json")
top = c["allocated"]["by_site"][0]
eq("compare steps top site", (top["site"].split(" ")[0], top["diff_bytes"], top["diff_count"]),
   ("b_alloc_extra", 5000, 1))
eq("compare steps top owner", (c["allocated"]["by_owner"][0]["owner"],
   c["allocated"]["by_owner"][0]["diff_bytes"]), ("act@extra", 5000))
eq("compare steps totals", c["allocated"]["totals"]["diff_bytes"], 5000)
eq("compare ops", [(d["name"], d["a_bytes"], d["b_bytes"]) for d in c["ops"]["differ"]],
   [("extra_op", None, 5000), ("forward", 1000, 6000)])
cw = ld("cw.json")
eq("compare with live", cw["live_at_end"]["totals"]["diff_bytes"], -5000)
eq("compare with allocated", cw["allocated"]["by_owner"][0]["owner"], "act@extra")
d = ld("d.json")
heap = d["tree"][0]["children"][0]
eq("decompose peak", (heap["name"], heap["bytes"]), ("heap", 12144))
eq("decompose peak owners", {k["name"]: k["bytes"] for k in heap["children"]},
   {"model": 6144, "act": 6000})
ds = ld("ds.json")
heap = ds["tree"][0]["children"][0]
kids = {k["name"]: (k["bytes"], {g["name"]: g["bytes"] for g in k["children"]})
        for k in heap["children"]}
eq("decompose step 3", kids, {"model": (6144, {"weight": 4096, "grad": 2048}),
                               "act": (5000, {"extra": 5000})})
eq("decompose points", [p["label"] for p in ds["points"]], ["step 1", "step 2", "step 3", "end"])
eq("decompose series", {o["owner"]: o["live"] for o in ds["owners"]},
   {"act@extra": [0, 0, 5000, 5000], "model@weight": [4096] * 4,
    "model@grad": [2048] * 4, "act": [0, 0, 0, 0]})
f = ld("f.json")["pools"][0]
eq("fragmentation rows", [(r["label"], r["reserved"], r["used"], r["free"], r["largest_free"])
                          for r in f["rows"]],
   [("step 1", 4096, 2048, 2048, 2048), ("step 2", 4096, 1280, 2816, 2048),
    ("peak used", 4096, 2304, 1792, 1024), ("step 3", 4096, 2304, 1792, 1024),
    ("end", 0, 0, 0, 0)])
eq("fragmentation step 2", round(f["rows"][1]["fragmentation"], 6), round(768 / 2816, 6))
i = ld("i.json")
eq("inefficient", sorted((b["size"], b["types"]) for b in i["blocks"]),
   [(200, ["early_allocation"]), (300, ["late_deallocation"]), (500, ["temporary_idleness"]),
    (600, ["lazy_used"]), (700, ["delayed_free"]), (800, ["long_idle"])])
for e in errs:
    print(e)
sys.exit(1 if errs else 0)
PYEOF

# The idle threshold counts APIs: with 7 APIs between T's accesses, 6 flags it and 7 does not.
n6=$("$MEMSCOPE" analyze inefficient "$T/ineff.db" --idle-threshold 6 --json |
     "$PY" -c 'import json,sys; print(json.load(sys.stdin)["counts"]["temporary_idleness"]["blocks"])')
n7=$("$MEMSCOPE" analyze inefficient "$T/ineff.db" --idle-threshold 7 --json |
     "$PY" -c 'import json,sys; print(json.load(sys.stdin)["counts"]["temporary_idleness"]["blocks"])')
[ "$n6:$n7" = "1:0" ] || bad "idle threshold 6/7 flagged $n6/$n7 blocks, want 1/0"

# Write-back: table inefficient holds one row per (block, type).
"$MEMSCOPE" analyze inefficient "$T/ineff.db" "${INEFF_OPTS[@]}" --write-back >/dev/null ||
    bad "inefficient --write-back"
got=$(sqlite3 "$T/ineff.db" "SELECT b.size || ':' || i.type FROM inefficient i
      JOIN blocks b USING (allocation_id) ORDER BY b.size")
want=$'200:early_allocation\n300:late_deallocation\n500:temporary_idleness\n600:lazy_used\n700:delayed_free\n800:long_idle'
[ "$got" = "$want" ] || bad "inefficient table: $got"
# A second run replaces the rows (here: only the API-count rules).
"$MEMSCOPE" analyze inefficient "$T/ineff.db" --idle-threshold 5 --write-back >/dev/null
[ "$(sqlite3 "$T/ineff.db" 'SELECT COUNT(*) FROM inefficient')" = 3 ] ||
    bad "a second --write-back did not replace the rows"

# memscope_dump (a table in the full database) shows the findings in the MALLOC rows' Attr:
# carried over by an expansion, then rewritten by each --write-back on the full database.
dump_ineff() { # db: size:types of the MALLOC rows that have inefficient_type
    sqlite3 "$1" "SELECT json_extract(Attr, '\$.size') || ':' || json_extract(Attr,
      '\$.inefficient_type') FROM memscope_dump WHERE Event = 'MALLOC' AND
      json_extract(Attr, '\$.inefficient_type') IS NOT NULL ORDER BY ID"
}
"$MEMSCOPE" export "$T/ineff.db" --format=db -o "$T/ineff_full.db" || bad "export --format=db"
[ "$(dump_ineff "$T/ineff_full.db")" = $'200:early_allocation\n300:late_deallocation\n500:temporary_idleness' ] ||
    bad "expanded memscope_dump inefficient_type: $(dump_ineff "$T/ineff_full.db")"
"$MEMSCOPE" analyze inefficient "$T/ineff_full.db" "${INEFF_OPTS[@]}" --write-back >/dev/null ||
    bad "inefficient --write-back on the full database"
[ "$(dump_ineff "$T/ineff_full.db" | sort -n)" = "$want" ] ||
    bad "memscope_dump after --write-back: $(dump_ineff "$T/ineff_full.db")"
"$MEMSCOPE" analyze inefficient "$T/ineff_full.db" --idle-threshold 5 --write-back >/dev/null
[ "$(dump_ineff "$T/ineff_full.db")" = $'200:early_allocation\n300:late_deallocation\n500:temporary_idleness' ] ||
    bad "memscope_dump after a second --write-back: $(dump_ineff "$T/ineff_full.db")"

exit $fail
