#!/bin/bash
# test_temporary.sh: `memscope analyze temporary` on an_temp.c: exact temporary counts per call
# site (per-thread rule, realloc, overlapping pairs that are not temporary); golden text; JSON
# keys; the program behaves the same without the agent.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/temp.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_temp"
assert_eq "run exit status" 0 "$RC"
require_db "an_temp" "$DB"

ms temp analyze temporary "$DB"
assert_eq "analyze temporary exit status" 0 "$RC"
golden temporary "$TMP/temp.out"

ms tempj analyze temporary "$DB" --json
J=$TMP/tempj.out
json_check temporary "$J"
l_malloc=$(grep -n '^    char \*p = malloc(16);$' "$ANALYZE_SRC/an_temp.c" | cut -d: -f1)
l_realloc=$(grep -n '^    p = realloc(p, 4096);$' "$ANALYZE_SRC/an_temp.c" | cut -d: -f1)
assert_eq "JSON: temporary per call site (site:line temporary allocations bytes)" \
"an_temp_thread 200 200 19200
an_temp_pair 100 100 6400
an_temp_realloc:$l_realloc 10 10 40960
an_temp_realloc:$l_malloc 10 10 160" \
    "$(jq_py "$J" '[("%s%s %d %d %d" % (s["site"].split()[0], ":" + s["site"].rsplit(":", 1)[1].rstrip(")") if s["site"].startswith("an_temp_realloc") else "", s["temporary"], s["allocations"], s["temporary_bytes"])) for s in d["groups"][0]["sites"]]')"
assert_eq "JSON: total temporary = the four sites" 320 "$(jq_py "$J" 'd["temporary"]')"
# an_temp_overlap: 100 allocations, none temporary, so it is not listed.
assert_eq "an_temp_overlap not listed" 0 "$(grep -c an_temp_overlap "$TMP/temp.out")"
assert_eq "allocations counted" "$(q "$DB" 'SELECT count(*) FROM events WHERE kind = 1 AND layer = 1')" \
    "$(jq_py "$J" 'd["allocations"]')"

same_without_agent "$PROGS/an_temp"
done_testing
