#!/bin/bash
# test_view_server.sh: `memscope view`'s server, with curl. On view_known.c's run (peak exactly
# 11 MiB at activations(), 3 MiB in 3 blocks never freed from weights(), steps 1..4, owners
# "model@weight" and "model@activation", a 33-frame stack, a mark, two nested ranges): the queries' exact answers (blocks,
# events, filters and pages among them), compact database and full database alike; b_ineff.c's
# inefficient blocks by Insight's rules, as `analyze inefficient` finds them; the token (401 without, 403 wrong; no cookie), a
# foreign Host header (403), paths that try to leave the embedded assets (404), malformed and
# out-of-range parameters (400 with a JSON error), other methods (405); a file that is not a
# memscope database and a truncated database: a clear error and exit status 1 before anything
# listens; Ctrl-C: exit status 0.
. "$(dirname "$0")/view_lib.sh"
command -v curl >/dev/null || { echo "SKIP: curl missing"; exit 77; }
if "$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd"; then
    echo "SKIP: memscope built without libmicrohttpd"
    exit 77
fi
MIB=1048576
known_db

# get PATH: the body of GET BASE/PATH with the token; status in $TMP/status.
get() {
    local sep='?'
    [[ $1 == *\?* ]] && sep='&'
    rm -f "$TMP/body" # a failed request leaves no earlier answer to be read as its own
    curl -s -o "$TMP/body" -w '%{http_code}' "$BASE$1${sep}token=$TOKEN" >"$TMP/status"
    cat "$TMP/body"
}
status() { cat "$TMP/status"; }
js() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TMP/body" "$1"; }

check_known() { # WHAT [DB analyze leaks reads, default known.db]
    get "/api/summary" >/dev/null
    assert_eq "$1: summary 200" 200 "$(status)"
    assert_eq "$1: peak bytes" "$((11 * MIB))" "$(js 'd["peak_bytes"]')"
    assert_eq "$1: never freed: bytes, blocks" "$((3 * MIB)) 3" "$(js 'd["leaked_bytes"], d["leaked_blocks"]' | tr -d '(),')"
    assert_eq "$1: steps" "1 2 3 4" "$(js '" ".join(str(s["step"]) for s in d["steps"])')"
    assert_match "$1: the first site at the peak" "^activations \(.*view_known\.c:[0-9]+\) $((8 * MIB))$" \
        "$(js 'd["peak_sites"][0]["site"] + " " + str(d["peak_sites"][0]["bytes"])')"
    assert_match "$1: the site never freed" "^weights \(.*view_known\.c:[0-9]+\) $((3 * MIB)) 3$" \
        "$(js 'd["leak_sites"][0]["site"] + " " + str(d["leak_sites"][0]["bytes"]) + " " + str(d["leak_sites"][0]["blocks"])')"
    local peak
    peak=$(js 'd["peak_ns"]')
    get "/api/blocks?t=$peak&limit=2" >/dev/null
    assert_eq "$1: blocks live at the peak: count, bytes, the largest" "4 $((11 * MIB)) $((8 * MIB))" \
        "$(js 'd["count"], d["bytes"], d["blocks"][0]["size"]' | tr -d '(),')"
    local sid
    sid=$(js 'd["blocks"][0]["stack_id"]')
    get "/api/blocks?limit=3" >/dev/null
    assert_eq "$1: blocks alive at some time in the whole run: count, bytes, the three largest" \
        "5 $((11 * MIB + 4096)) $((8 * MIB)) $MIB $MIB" \
        "$(js '" ".join(map(str, [d["count"], d["bytes"]] + [b["size"] for b in d["blocks"]]))')"
    get "/api/stack?id=$sid" >/dev/null
    assert_match "$1: the largest block's stack: activations, then main" "^activations .*\|main " \
        "$(js '"|".join(d["c"])')"
    get "/api/flame?mode=peak" >/dev/null
    assert_eq "$1: flame at the peak: total" "$((11 * MIB))" "$(js 'd["total"]')"
    assert_eq "$1: flame at the peak: the activations node" "$((8 * MIB))" \
        "$(js 'sum(n["v"] for n in d["nodes"] if n["n"].startswith("activations"))')"
    get "/api/flame?mode=alloc" >/dev/null
    assert_eq "$1: flame of every allocation: 11 MiB and deep()'s 4 KiB" "$((11 * MIB + 4096))" "$(js 'd["total"]')"
    # the deepest chain: deep()'s whole stack (the default depth, 256, keeps it): the root, 41
    # frames of deep(), main, and the C library's __libc_start_call_main, __libc_start_main, _start
    assert_eq "$1: flame of every allocation: the deepest chain of nodes, root to leaf" 46 \
        "$(js 'max((lambda f: f(f, i))(lambda f, k: 1 if d["nodes"][k]["p"] < 0 else 1 + f(f, d["nodes"][k]["p"])) for i in range(len(d["nodes"])))')"
    get "/api/flame?mode=leaked" >/dev/null
    assert_eq "$1: flame of what was never freed" "$((3 * MIB))" "$(js 'd["total"]')"
    get "/api/series?n=50" >/dev/null
    assert_eq "$1: series: the total's maximum is the peak" "$((11 * MIB))" \
        "$(js 'max(d["tracks"][0]["max"])')"
    get "/api/owners?t=$peak" >/dev/null
    assert_eq "$1: owners at the peak: total, then owner=bytes/blocks" \
        "$((11 * MIB)) model@activation=$((8 * MIB))/1 model@weight=$((3 * MIB))/3" \
        "$(js '" ".join([str(d["total"])] + ["%s=%d/%d" % (o["owner"], o["bytes"], o["blocks"]) for o in d["owners"]])')"
    # filters, sort and paging over the run's five blocks (deep()'s 4 KiB, three 1 MiB weights,
    # the 8 MiB activations)
    local f
    for f in "min_size=2000000|1 8388608" "max_size=4096|1 4096" "owner=weig|3 3145728" \
        "site=deep|1 4096" "site=activations&owner=weight|0 0" "owner=nobody|0 0"; do
        get "/api/blocks?${f%%|*}" >/dev/null
        assert_eq "$1: blocks filtered by ${f%%|*}: count, bytes" "${f##*|}" "$(js 'd["count"], d["bytes"]' | tr -d '(),')"
    done
    for f in "sort=alloc&order=asc&limit=2|4096 $MIB" "sort=size&limit=2&offset=1|$MIB $MIB" \
        "sort=size&limit=2&offset=4|4096" "sort=size&limit=2&offset=5|" \
        "sort=life&limit=1|$MIB" "sort=free&order=asc&limit=2|4096 $((8 * MIB))"; do
        get "/api/blocks?${f%%|*}" >/dev/null
        assert_eq "$1: blocks in the order ${f%%|*}: sizes" "${f##*|}" "$(js '" ".join(str(b["size"]) for b in d["blocks"])')"
    done
    # a cursor move's one request: the answers of blocks, owners, the live flame graph and
    # (no pool here) null, each as its own query gives it
    local one
    for one in "blocks?t=$peak&limit=50" "owners?t=$peak" "flame?mode=live&t=$peak"; do
        get "/api/$one" >/dev/null
        cp "$TMP/body" "$TMP/one.${one%%\?*}"
    done
    get "/api/at?t=$peak&limit=50&mode=live" >/dev/null
    assert_eq "$1: /api/at: the blocks, owners and flame answers, then null" "True True True None" \
        "$(js '" ".join(str(x) for x in [d[0] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/one.blocks")), d[1] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/one.owners")), d[2] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/one.flame")), d[3]])')"
    # a zoom's one request: the series and the largest blocks of the window, as their own
    # queries give them
    get "/api/series?t0=100&t1=20000000&n=40" >/dev/null
    cp "$TMP/body" "$TMP/one.series"
    get "/api/blocks?t0=100&t1=20000000&limit=3&sites=map" >/dev/null
    cp "$TMP/body" "$TMP/one.blocks"
    assert_eq "$1: blocks with sites=map: no site in the blocks, each in the map" "False True" \
        "$(js '"site" in d["blocks"][0], all(str(b["stack_id"]) in d["sites"] for b in d["blocks"])' | tr -d '(),')"
    get "/api/window?t0=100&t1=20000000&n=40&limit=3&sites=map" >/dev/null
    assert_eq "$1: /api/window: the series and blocks answers" "True True" \
        "$(js '" ".join(str(x) for x in [d[0] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/one.series")), d[1] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/one.blocks"))])')"
    # the mark and the ranges: forward encloses layer1, which encloses the activations'
    # allocation
    get "/api/summary" >/dev/null
    assert_eq "$1: the user's mark only (not memscope's bookkeeping marks), the ranges counted" \
        "weights loaded|2" "$(js '"|".join(m["name"] for m in d["marks"]) + "|" + str(d["ranges"])')"
    get "/api/ranges" >/dev/null
    assert_eq "$1: ranges: name@depth in start order" "forward@0 layer1@1" \
        "$(js '" ".join("%s@%d" % (g["name"], g["depth"]) for g in d["ranges"])')"
    assert_eq "$1: ranges: layer1 inside forward, around the activations' allocation at the peak" True \
        "$(js 'd["ranges"][0]["start_ns"] <= d["ranges"][1]["start_ns"] <= '"$peak"' < d["ranges"][1]["end_ns"] <= d["ranges"][0]["end_ns"]')"
    get "/api/ranges?t0=$((peak + 1))&t1=$((peak + 2))" >/dev/null
    assert_eq "$1: ranges over one ns inside them: both" 2 "$(js 'd["count"]')"
    # the events: each block's allocation and free, in time order (deep()'s pair first, the
    # weights never freed), filtered and paged as the blocks are
    get "/api/events" >/dev/null
    assert_eq "$1: events: count, kinds and sizes in time order" \
        "7 alloc:4096 free:4096 alloc:$MIB alloc:$MIB alloc:$MIB alloc:$((8 * MIB)) free:$((8 * MIB))" \
        "$(js '" ".join([str(d["count"])] + ["%s:%d" % (e["kind"], e["size"]) for e in d["events"]])')"
    assert_eq "$1: events: times ascending, the layer named" "True heap" \
        "$(js 'all(a["ns"] <= b["ns"] for a, b in zip(d["events"], d["events"][1:])), d["events"][0]["layer"]' | tr -d "(),'")"
    local tfree
    tfree=$(js 'd["events"][1]["ns"]')
    for f in "kind=alloc|5" "kind=free|2" "kind=free&owner=activation|1" "min_size=$MIB&kind=alloc|4" \
        "t0=$tfree&t1=$((tfree + 1))|1" "site=weights|3" "kind=free&site=weights|0"; do
        get "/api/events?${f%%|*}" >/dev/null
        assert_eq "$1: events filtered by ${f%%|*}: count" "${f##*|}" "$(js 'd["count"]')"
    done
    get "/api/events?order=desc&limit=2&offset=1" >/dev/null
    assert_eq "$1: events, latest first, the second page of one: 8 MiB then 1 MiB allocated" \
        "alloc:$((8 * MIB)) alloc:$MIB" "$(js '" ".join("%s:%d" % (e["kind"], e["size"]) for e in d["events"])')"
    get "/api/blocks?t=$peak&limit=1" >/dev/null
    local addr
    addr=$(js 'd["blocks"][0]["addr"]')
    get "/api/blocks?addr=$addr" >/dev/null
    assert_eq "$1: blocks at the largest block's address ($addr): it alone" "1 $((8 * MIB))" \
        "$(js 'd["count"], d["bytes"]' | tr -d '(),')"
    get "/api/events?addr=$addr" >/dev/null
    assert_eq "$1: events at that address: its allocation and its free" "alloc free" \
        "$(js '" ".join(e["kind"] for e in d["events"])')"
    get "/api/analyses" >/dev/null
    assert_eq "$1: the analyses listed" "leaks peak compare inefficient decompose temporary trend fragmentation oom usage" \
        "$(js '" ".join(a["name"] for a in d["analyses"])')"
    get "/api/analysis?name=leaks" >/dev/null
    assert_eq "$1: analyze leaks' report, as memscope analyze leaks prints it" \
        "$("$MEMSCOPE" analyze leaks "${2:-$TMP/known.db}" 2>&1)" "$(js 'd["text"].rstrip("\n")')"
    get "/api/analysis?name=compare&steps=2,4" >/dev/null
    assert_eq "$1: compare of steps 2 and 4, as memscope analyze compare --steps 2,4 prints it" \
        "$("$MEMSCOPE" analyze compare "${2:-$TMP/known.db}" --steps 2,4 2>&1)" "$(js 'd["text"].rstrip("\n")')"
    get "/api/blocks?t=$peak&limit=1" >/dev/null
    assert_eq "$1: the largest block's owner" "model@activation" "$(js 'd["blocks"][0]["owner"]')"
}

view_start "$TMP/known.db"
check_known "compact database"

# the page and its assets, with the token: no cookie (every port of 127.0.0.1 would receive
# it), the page's own references to its script and style carry the token
code=$(curl -s -o "$TMP/page" -D "$TMP/headers" -w '%{http_code}' "$URL")
assert_eq "page: 200" 200 "$code"
assert_match "page: the viewer's page" "<title>memscope</title>" "$(cat "$TMP/page")"
assert_eq "page: sets no cookie" "" "$(grep -i '^Set-Cookie' "$TMP/headers")"
assert_eq "page: no referrer sent from it" "Referrer-Policy: no-referrer" \
    "$(tr -d '\r' <"$TMP/headers" | grep -i '^Referrer-Policy')"
assert_eq "page: its script and style asked with the token" \
    "href=\"uplot.css?token=$TOKEN\" src=\"app.js?token=$TOKEN\"" \
    "$(grep -o 'href="uplot.css[^"]*"\|src="app.js[^"]*"' "$TMP/page" | tr '\n' ' ' | sed 's/ $//')"
assert_eq "the script with the token: 200" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/app.js?token=$TOKEN")"

# refusals
assert_eq "no token: 401" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/summary")"
assert_eq "the script without the token: 401" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/app.js")"
assert_eq "wrong token: 403" 403 "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/summary?token=0$TOKEN")"
assert_eq "a cookie is no token: 401" 401 \
    "$(curl -s -o /dev/null -w '%{http_code}' -b "memscope_token=$TOKEN" "$BASE/app.js")"
assert_eq "foreign Host header (DNS rebinding): 403" 403 \
    "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: attacker.example:80' "$URL")"
assert_eq "Host with another port: 403" 403 \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: 127.0.0.1:$((PORT + 1))" "$URL")"
assert_eq "localhost with our port: 200" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: localhost:$PORT" "$URL")"
for p in "/../../../../etc/passwd" "/%2e%2e/%2e%2e/etc/passwd" "/app.js/../../../etc/passwd" \
    "//etc/passwd" "/api/../index.html" "/index.html/"; do
    c=$(curl -s --path-as-is -o "$TMP/trav" -w '%{http_code}' "$BASE$p?token=$TOKEN")
    assert_eq "path $p: 404, nothing from the file system" "404" "$c"
    assert_ne "path $p: no passwd line" "yes" "$(grep -q '^root:' "$TMP/trav" && echo yes)"
done
assert_eq "POST: 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/api/summary?token=$TOKEN")"
for qs in "series?n=abc" "series?n=0" "series?n=99999999" "series?t0=1e9" "series?t0=" \
    "blocks?limit=-1" "blocks?track=999" "flame?mode=nonsense" "stack?id=x" "stack" \
    "blocks?t=99999999999999999999999" "series?n=5x" "analysis?name=bogus" "analysis" \
    "blocks?sort=bogus" "blocks?order=up" "blocks?offset=-1" "blocks?offset=2000000" "blocks?min_size=x" \
    "events?kind=bogus" "events?order=up" "events?limit=0" "blocks?addr=zz" "blocks?addr=-1" \
    "blocks?lazy=abc" "blocks?idle=150%" "blocks?delayed=-5" "blocks?lazy=%25" "blocks?ineff=2" "at" "at?t=1&mode=x" \
    "window?n=0" "blocks?sites=list" "window?ranges=2" "ranges?n=0" "ranges?t0=x" \
    "analysis?name=compare&steps=2" "analysis?name=compare&steps=2,2" "analysis?name=leaks&steps=1,2" \
    "analysis?name=compare&steps=0,1" "analysis?name=compare&steps=1,2x"; do
    get "/api/$qs" >/dev/null
    assert_eq "malformed /api/$qs: 400" 400 "$(status)"
    assert_match "malformed /api/$qs: a JSON error naming the parameter" '^\{"error":"parameter' "$(cat "$TMP/body")"
done
get "/api/nothing" >/dev/null
assert_eq "unknown query: 404" 404 "$(status)"
get "/api/stack?id=4000000000" >/dev/null
assert_eq "a stack that does not exist: 200, empty" "200 0 0" "$(status) $(js 'len(d["c"]), len(d["py"])' | tr -d '(),')"
view_stop
assert_eq "Ctrl-C: exit status 0" 0 "$VIEW_RC"

# the full database of the same run answers the same
ms export export "$TMP/known.db" --format=db -o "$TMP/full.db"
assert_eq "export to a full database" 0 "$RC"
view_start "$TMP/full.db"
check_known "full database"
view_stop

# the Python call trace and Python stacks: pystack_sim (tests/progs: a test double of the
# Python extension) traces main calling forward; its allocations have Python stacks
ms pysim run -q --call-stack=c:8,python:8 -o "$TMP/py.db" -- "$PYSTACK_SIM"
assert_eq "pystack_sim: run exit status" 0 "$RC"
view_start "$TMP/py.db"
get "/api/summary" >/dev/null
assert_eq "Python call trace: its calls counted" 2 "$(js 'd["python_calls"]')"
get "/api/pytrace" >/dev/null
assert_eq "Python call trace: main, forward inside it, main's time the total" \
    "all>train.py(1): main>model.py(10): forward True True" \
    "$(js '" ".join(map(str, [">".join(n["n"] for n in d["nodes"]), d["nodes"][1]["v"] == d["total"], 0 < d["nodes"][2]["v"] < d["nodes"][1]["v"]]))')"
get "/api/summary" >/dev/null
th=$(js '"%d %d %d" % (d["python_threads"][0]["pid"], d["python_threads"][0]["tid"], d["python_threads"][0]["calls"])')
assert_eq "Python call trace: one thread, its 2 calls" 2 "${th##* }"
set -- $th
get "/api/pytrace?pid=$1&tid=$2" >/dev/null
assert_eq "Python call trace of that thread: its 2 calls" 2 "$(js 'd["calls"]')"
get "/api/pytrace?pid=$1&tid=$(($2 + 1))" >/dev/null
assert_eq "Python call trace of a thread without calls: none" "0 0" "$(js 'd["calls"], d["total"]' | tr -d '(),')"
get "/api/pytrace?pid=$1" >/dev/null
assert_eq "Python call trace: pid without tid: 400" 400 "$(status)"
get "/api/flame?mode=alloc" >/dev/null
# each leaf's bytes and its path: the Python frames first (outermost first), then native ones
assert_eq "flame of every allocation: 222 bytes under forward, under main's line 7" \
    "train.py(7): main>model.py(12): forward" \
    "$(js '(lambda n: ">".join(x for x in (lambda f, i: f(f, i))(lambda f, i: [] if i < 0 else f(f, n[i]["p"]) + [n[i]["n"]], [i for i, x in enumerate(n) if x["v"] == 222 and not any(y["p"] == i for y in n)][0])[1:3]))(d["nodes"])')"
view_stop
# memscope's own Python frames (its import hook under `import torch`) are not drawn: with
# pystack_sim's frame 2 memscope's, the 222 bytes hang under main's line 7, then native frames
ms pysimown run -q --call-stack=c:8,python:8 -o "$TMP/pyown.db" -- "$PYSTACK_SIM" own
assert_eq "pystack_sim own: run exit status" 0 "$RC"
assert_eq "pystack_sim own: the database keeps memscope's frame" 1 \
    "$(sqlite3 "$TMP/pyown.db" "SELECT count(*) > 0 FROM frames f JOIN strings fl ON fl.id = f.file_id
        JOIN strings fn ON fn.id = f.function_id WHERE f.module_id IS NULL AND f.line = 12
        AND fl.text LIKE '%/memscope/torch/__init__.py' AND fn.text = '_TorchFinder.exec_module'")"
view_start "$TMP/pyown.db"
get "/api/flame?mode=alloc" >/dev/null
assert_eq "flame: memscope's own frame left out, 222 bytes under main's line 7 then native frames" \
    "0 train.py(7): main False" \
    "$(js '(lambda n: " ".join(map(str, [sum("/memscope/" in x["n"] for x in n)] + (lambda p: [p[1], ".py(" in p[2]])((lambda f, i: f(f, i))(lambda f, i: [] if i < 0 else f(f, n[i]["p"]) + [n[i]["n"]], [i for i, x in enumerate(n) if x["v"] == 222 and not any(y["p"] == i for y in n)][0])))))(d["nodes"])')"
view_stop

# inefficient blocks: b_ineff.c (tests/analyze) makes one block of each of MindStudio Insight's
# time rules (Z 600 B lazy used, D 700 B delayed free, G 800 B long idle, 300 ms each); with
# thresholds of 100 ms exactly those three are flagged, as `analyze inefficient` flags them
ms ineff run -q -o "$TMP/ineff.db" -- "$INEFF_PROG"
assert_eq "b_ineff: run exit status" 0 "$RC"
view_start "$TMP/ineff.db"
get "/api/summary" >/dev/null
assert_eq "b_ineff: the accessed blocks counted" 7 "$(js 'd["accessed_blocks"]')"
TH="lazy=100000000&delayed=100000000&idle=100000000"
get "/api/blocks?ineff=1&$TH&sort=size&order=asc" >/dev/null
assert_eq "b_ineff: inefficient blocks at 100 ms: size=flags (1 lazy, 2 delayed, 4 long idle)" \
    "600=1 700=2 800=4" "$(js '" ".join("%d=%d" % (b["size"], b["ineff"]) for b in d["blocks"])')"
assert_eq "b_ineff: the long idle block's longest gap is the 300 ms nap" True \
    "$(js '300000000 <= d["blocks"][2]["access"]["max_gap_ns"] < 1000000000')"
ms ineffan analyze inefficient "$TMP/ineff.db" --json --lazy-used=100000000 --delayed-free=100000000 \
    --long-idle=100000000
assert_eq "b_ineff: analyze inefficient flags the same blocks by Insight's rules" "600 700 800" \
    "$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(str(b["size"]) for b in sorted(d["blocks"], key=lambda b: b["size"]) if set(b["types"]) & {"lazy_used", "delayed_free", "long_idle"}))' "$TMP/ineffan.out")"
get "/api/blocks?ineff=1&lazy=100%&delayed=100%&idle=100%" >/dev/null
assert_eq "b_ineff: every rule off (0 ns, 100%): none" 0 "$(js 'd["count"]')"
get "/api/events?ineff=1&$TH&kind=free" >/dev/null
assert_eq "b_ineff: the frees of the inefficient blocks" 3 "$(js 'd["count"]')"
view_stop

# what the recording says went wrong is a warning of the summary (the columns set by hand here:
# test_cannot_record.sh makes real ones)
cp "$TMP/known.db" "$TMP/warn.db"
q "$TMP/warn.db" "UPDATE processes SET lost_events = 5, stopped_errno = 9"
pid=$(q "$TMP/warn.db" "SELECT pid FROM processes")
view_start "$TMP/warn.db"
get "/api/summary" >/dev/null
assert_match "warnings: lost events and the stop, named" \
    "^\['process $pid \(.*view_known\); 5 events not recorded; recording stopped: Bad file descriptor'\]$" \
    "$(js 'd["warnings"]')"
view_stop
view_start "$TMP/known.db"
get "/api/summary" >/dev/null
assert_eq "no warning for a clean run" "[]" "$(js 'd["warnings"]')"
view_stop

# a trace directory: converted first (into a temporary directory, removed when it stops)
ms traces run -q --format=trace -o "$TMP/traces" -- "$PROGS/view_known"
assert_eq "run --format=trace: exit status" 0 "$RC"
before=$(ls "${TMPDIR:-/tmp}" | grep -c '^memscope-view-' || true)
ms traces_db import "$TMP/traces" -o "$TMP/traces.db"
view_start "$TMP/traces"
check_known "trace directory" "$TMP/traces.db"
view_stop
assert_eq "trace directory: its temporary database removed at Ctrl-C" "$before" \
    "$(ls "${TMPDIR:-/tmp}" | grep -c '^memscope-view-' || true)"

# a real PyTorch snapshot (shared/data/snapshots): imported first; its peak is analyze peak's
SNAP=$VIEW_SRC/../../../shared/data/snapshots/04_cs336_bcrafton_torch2.10plus.pickle
if [ -f "$SNAP" ]; then
    ms snapdb snapshot "$SNAP" -o "$TMP/snap.db"
    ms snappeak analyze peak "$TMP/snap.db" --json
    want=$("$PY" -c 'import json,sys; p=json.load(open(sys.argv[1]))["peaks"][0]; print(p["peak_bytes"], p["offset_ns"])' "$TMP/snappeak.out")
    view_start "$SNAP"
    get "/api/summary" >/dev/null
    assert_eq "snapshot: the peak and when, as analyze peak says" "$want" "$(js 'd["peak_bytes"], d["peak_ns"]' | tr -d '(),')"
    assert_eq "snapshot: the segments are a reserved track" "PTA_SEGMENT True" \
        "$(js '[(t["layer_name"], t["reserve"]) for t in d["tracks"] if t["reserve"]][0]' | tr -d "(),'")"
    view_stop
else
    echo "note: $SNAP missing: the snapshot case is not run"
fi
# bad databases: a clear error, exit status 1, nothing listens
seq 1 1000 >"$TMP/notdb.db"
ms notdb view "$TMP/notdb.db"
assert_eq "not a database: exit status 1" 1 "$RC"
assert_match "not a database: says what it is" \
    "is not a memscope database, trace directory or PyTorch memory snapshot: it is a text file" \
    "$(cat "$TMP/notdb.err")"
head -c 20000 "$TMP/known.db" >"$TMP/trunc.db"
ms trunc view "$TMP/trunc.db"
assert_eq "truncated database: exit status 1" 1 "$RC"
assert_match "truncated database: one error line" "^memscope: view: " "$(head -1 "$TMP/trunc.err")"
assert_match "truncated database: says so" "trunc\.db' is damaged: truncated to 20000 of its" \
    "$(cat "$TMP/trunc.err")"
ms missing view "$TMP/none.db"
assert_eq "no such file: exit status 1" 1 "$RC"
ms badport view "$TMP/known.db" --port 70000
assert_eq "--port 70000: usage error" 2 "$RC"

done_testing
