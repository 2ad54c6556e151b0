#!/bin/bash
# test_site.sh: the call-site rule (docs/analyses.md, src/analyze/site.c) on an_site.cpp, a C++
# program built without debug information or frame pointers (as distribution packages are) and
# with it. The sites are the program's functions that asked for the memory, never operator
# new/new[] (plain, nothrow, aligned) nor libstdc++, with exact bytes and blocks from `analyze
# peak` and `analyze leaks`, one row per function without line information (a function's calls
# are one site); its own wrapper my_xmalloc is the site until --site-skip (or
# MEMSCOPE_SITE_SKIP, or a NAME* prefix) names it, then its callers are; the same functions and
# bytes with debug information; the viewer's "Sites at the peak" and "Never freed" tables
# (/api/summary) merge stacks by the same rule; bad --site-skip values are usage errors.
. "$(dirname "$0")/an_lib.sh"
[ -x "$PROGS/an_site_g0" ] || skip "an_site not built (no C++ compiler)"

# rows KIND FILE [FILTER]: "site bytes blocks" of the program's functions (site_*, my_xmalloc)
# in a JSON report: peak's by_site of the heap, leaks' sites.
rows() {
    jq_py "$2" 'import re
r = [p for p in d["peaks"] if p["layer"] == "heap"][0]["by_site"] if "'"$1"'" == "peak" else [p for p in d["live_at_exit"] if p["layer"] == "heap"][0]["sites"]
["%s %s %s" % (s["site"], s["bytes"], s["blocks"]) for s in r if re.match(r"(site_|my_xmalloc)", s["site"])]'
}
# no_new KIND FILE: the sites that name operator new or a runtime library, one per line.
no_new() {
    jq_py "$2" 'r = [p for p in d["peaks"] if p["layer"] == "heap"][0]["by_site"] if "'"$1"'" == "peak" else [p for p in d["live_at_exit"] if p["layer"] == "heap"][0]["sites"]
[s["site"] for s in r if "operator new" in s["site"] or "_Znw" in s["site"] or "_Zna" in s["site"]]'
}

G0=$TMP/g0.db
ms run_g0 run -q -o "$G0" -- "$PROGS/an_site_g0"
assert_eq "an_site_g0: run exit status" 0 "$RC"
require_db "an_site_g0" "$G0"
assert_eq "an_site_g0 has no line information" "0" \
    "$(q "$G0" "SELECT count(*) FROM frames f JOIN modules m ON m.id = f.module_id
                WHERE m.path LIKE '%an_site_g0' AND f.file_id IS NOT NULL")"

ms peak analyze peak "$G0" --json --top 50
assert_eq "peak: exit status" 0 "$RC"
assert_eq "peak (no debug info): the program's functions, operator new skipped" \
"site_new() (an_site_g0) 12288 3
site_new_array() (an_site_g0) 3800 7
my_xmalloc(unsigned long) (an_site_g0) 1600 6
site_aligned() (an_site_g0) 512 2" "$(rows peak "$TMP/peak.out")"
assert_eq "peak: no site is operator new" "" "$(no_new peak "$TMP/peak.out")"

ms leaks analyze leaks "$G0" --json --top 50
assert_eq "leaks: exit status" 0 "$RC"
assert_eq "leaks (no debug info): the program's functions" \
"site_new_array() (an_site_g0) 3800 7
my_xmalloc(unsigned long) (an_site_g0) 1600 6
site_aligned() (an_site_g0) 512 2" "$(rows leaks "$TMP/leaks.out")"
assert_eq "leaks: no site is operator new" "" "$(no_new leaks "$TMP/leaks.out")"

WRAPPED_PEAK="site_new() (an_site_g0) 12288 3
site_new_array() (an_site_g0) 3800 7
site_wrap_a() (an_site_g0) 1200 4
site_aligned() (an_site_g0) 512 2
site_wrap_b() (an_site_g0) 400 2"
WRAPPED_LEAKS="site_new_array() (an_site_g0) 3800 7
site_wrap_a() (an_site_g0) 1200 4
site_aligned() (an_site_g0) 512 2
site_wrap_b() (an_site_g0) 400 2"
ms peak_skip analyze peak "$G0" --json --top 50 --site-skip=my_xmalloc
assert_eq "peak --site-skip=my_xmalloc: its callers" "$WRAPPED_PEAK" "$(rows peak "$TMP/peak_skip.out")"
ms leaks_skip analyze leaks "$G0" --json --top 50 --site-skip my_xmalloc
assert_eq "leaks --site-skip my_xmalloc: its callers" "$WRAPPED_LEAKS" \
    "$(rows leaks "$TMP/leaks_skip.out")"
ms leaks_prefix analyze leaks "$G0" --json --top 50 --site-skip=nothing,my_x*
assert_eq "leaks --site-skip=nothing,my_x*: a prefix" "$WRAPPED_LEAKS" \
    "$(rows leaks "$TMP/leaks_prefix.out")"
MEMSCOPE_SITE_SKIP=my_xmalloc "$MEMSCOPE" analyze leaks "$G0" --json --top 50 >"$TMP/leaks_env.out"
assert_eq "leaks with MEMSCOPE_SITE_SKIP=my_xmalloc: its callers" "$WRAPPED_LEAKS" \
    "$(rows leaks "$TMP/leaks_env.out")"
ms leaks_text analyze leaks "$G0" --top 50 --site-skip=my_xmalloc
assert_match "leaks, text: site_wrap_a's row" "^ +1200 +4  site_wrap_a\(\) \(an_site_g0\)$" \
    "$(grep site_wrap_a "$TMP/leaks_text.out" | head -1)"

# With debug information: the same functions and bytes, by line.
G=$TMP/g.db
ms run_g run -q -o "$G" -- "$PROGS/an_site_g"
assert_eq "an_site_g: run exit status" 0 "$RC"
ms peak_g analyze peak "$G" --json --top 50
assert_eq "peak (debug info): each site a line of the program's functions" \
"site_new() (an_site.cpp) 12288 3
site_new_array() (an_site.cpp) 3500 5
my_xmalloc(unsigned long) (an_site.cpp) 1600 6
site_aligned() (an_site.cpp) 512 2
site_new_array() (an_site.cpp) 300 2" \
    "$(rows peak "$TMP/peak_g.out" | sed -E 's|\([^()]*/(an_site\.cpp):[0-9]+\)|(\1)|')"

# Bad values: usage errors.
for bad in "" "a,,b" "*" "x,"; do
    ms bad analyze leaks "$G0" "--site-skip=$bad"
    assert_eq "--site-skip='$bad': usage error" 2 "$RC"
    assert_match "--site-skip='$bad': says why" "bad function name" "$(cat "$TMP/bad.err")"
done
MEMSCOPE_SITE_SKIP="a,,b" "$MEMSCOPE" analyze leaks "$G0" >/dev/null 2>"$TMP/env.err"
assert_eq "MEMSCOPE_SITE_SKIP=a,,b: usage error" "2" "$?"
assert_match "MEMSCOPE_SITE_SKIP=a,,b: says so" "MEMSCOPE_SITE_SKIP: bad function name" \
    "$(cat "$TMP/env.err")"

# The viewer's site tables: one row per site, as the analyses.
if command -v curl >/dev/null && ! "$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd"; then
    # summary DB [OPTIONS]: /api/summary of `memscope view DB OPTIONS` into $TMP/summary.json
    summary() {
        local db=$1 url="" i
        shift
        : >"$TMP/view.out"
        "$MEMSCOPE" view "$db" --port 0 "$@" >"$TMP/view.out" 2>"$TMP/view.err" &
        local pid=$!
        for i in $(seq 600); do
            url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$TMP/view.out")
            [ -n "$url" ] && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        curl -s -o "$TMP/summary.json" "${url%%/?token=*}/api/summary?token=${url##*token=}"
        kill -INT "$pid"
        wait "$pid"
    }
    # vrows KEY: "site bytes blocks stacks" of the program's functions in KEY (peak_sites...)
    vrows() {
        jq_py "$TMP/summary.json" 'import re
["%s %s %s %s" % (s["site"], s["bytes"], s["blocks"], s["stacks"]) for s in d["'"$1"'"] if re.match(r"(site_|my_xmalloc)", s["site"])]'
    }
    summary "$G0"
    assert_eq "viewer: sites at the peak, merged by site (stacks per site)" \
"site_new() (an_site_g0) 12288 3 1
site_new_array() (an_site_g0) 3800 7 3
my_xmalloc(unsigned long) (an_site_g0) 1600 6 3
site_aligned() (an_site_g0) 512 2 2" "$(vrows peak_sites)"
    assert_eq "viewer: never freed, merged by site" \
"site_new_array() (an_site_g0) 3800 7 3
my_xmalloc(unsigned long) (an_site_g0) 1600 6 3
site_aligned() (an_site_g0) 512 2 2" "$(vrows leak_sites)"
    assert_eq "viewer: each site once" "" \
        "$(jq_py "$TMP/summary.json" '[s for s in set(r["site"] for r in d["leak_sites"]) if sum(r["site"] == s for r in d["leak_sites"]) > 1]')"
    summary "$G0" --site-skip=my_xmalloc
    assert_eq "viewer --site-skip=my_xmalloc: never freed, by the wrapper's callers" \
        "$(printf '%s\n' "$WRAPPED_LEAKS" | sed -e 's/3800 7$/3800 7 3/' -e 's/512 2$/512 2 2/' \
            -e 's/1200 4$/1200 4 1/' -e 's/400 2$/400 2 2/')" \
        "$(vrows leak_sites)"
fi

same_without_agent "$PROGS/an_site_g0"
done_testing
