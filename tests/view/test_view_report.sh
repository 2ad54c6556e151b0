#!/bin/bash
# test_view_report.sh: `memscope report` on view_known.c's run: one HTML file (the default name
# beside the database, or -o) that names no outside resource (no src or href but inline data),
# holds the page's script and its answers (the peak's time first among the cursor times), and
# stays under 5 MB; bad input (not a database, a missing one, an unwritable output) exits 1
# with one error line and leaves an existing output as it was. The page itself is checked in
# chromium by test_view_browser.sh.
. "$(dirname "$0")/view_lib.sh"
known_db
cp "$TMP/known.db" "$TMP/run.db"
ms report report "$TMP/run.db"
assert_eq "report: exit status" 0 "$RC"
assert_eq "report: RUN.html beside the database" yes "$([ -s "$TMP/run.html" ] && echo yes)"
size=$(stat -c %s "$TMP/run.html")
assert_eq "report: under 5 MB ($size bytes)" yes "$([ "$size" -lt 5000000 ] && echo yes)"
assert_eq "report: no src or href to anything outside the file" "" \
    "$(grep -oE '(src|href)="[^"#d][^"]*"' "$TMP/run.html" | grep -v '^href="data:' || true)"
assert_eq "report: one inline data script and the page's script" 2 \
    "$(grep -o '<script>' "$TMP/run.html" | wc -l)"
# the data: parse it back with Python's JSON reader
"$PY" - "$TMP/run.html" >"$TMP/facts" <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
m = re.search(r"<script>window\.MEMSCOPE_REPORT=(.*?);</script>", html, re.S)
d = json.loads(m.group(1).replace("<\\/", "</"))
s = d["summary"]
print(s["peak_bytes"], s["leaked_bytes"], len(d["times"]), s["peak_ns"] in d["times"],
      all(str(t) in d["at"] for t in d["times"]), d["flame_leaked"]["total"],
      all(str(b["stack_id"]) in d["stacks"] for t in d["at"] for b in d["at"][t]["blocks"]["blocks"]),
      " ".join(a["name"] for a in d["analyses"]), "weights (" in d["analyses"][0]["text"])
PY
assert_eq "report data: peak, never freed, times, the peak among them, answers at each, leaked flame, every block's stack, the analyses, leaks' report" \
    "11534336 3145728 128 True True 3145728 True leaks peak inefficient decompose temporary trend fragmentation oom usage True" \
    "$(cat "$TMP/facts")"

ms report_o report "$TMP/known.db" -o "$TMP/out.html"
assert_eq "report -o: exit status" 0 "$RC"
assert_eq "report -o: the same page" "$(sed 's/"origin_ns":"[0-9]*"//' "$TMP/run.html" | wc -c)" \
    "$(sed 's/"origin_ns":"[0-9]*"//' "$TMP/out.html" | wc -c)"

# bad input: exit 1, one line, an existing output untouched
echo "keep me" >"$TMP/keep.html"
seq 1 1000 >"$TMP/notdb.db"
ms notdb report "$TMP/notdb.db" -o "$TMP/keep.html"
assert_eq "not a database: exit status 1" 1 "$RC"
assert_eq "not a database: one error line" 1 "$(wc -l <"$TMP/notdb.err")"
assert_eq "not a database: the existing output is unchanged" "keep me" "$(cat "$TMP/keep.html")"
ms missing report "$TMP/none.db" -o "$TMP/keep.html"
assert_eq "no such database: exit status 1" 1 "$RC"
ms unwritable report "$TMP/known.db" -o "$TMP/no/such/dir/x.html"
assert_eq "unwritable output: exit status 1" 1 "$RC"
assert_match "unwritable output: says so" "cannot write" "$(cat "$TMP/unwritable.err")"
ms full report "$TMP/known.db" -o /dev/full
assert_eq "a full device: exit status 1" 1 "$RC"
ms usage report
assert_eq "no database: usage error 2" 2 "$RC"
done_testing
