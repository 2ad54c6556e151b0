#!/bin/bash
# test_plot.sh: `memscope plot` on an_trend.c (20 steps, +100000 bytes each): the image is an
# SVG document that Python's XML parser reads, with one dashed line per step end (20; 300 steps
# are thinned to 200 lines that say 300), the trend series (101 points inside the frame, the
# last one the live bytes at exit) and the maximum that `analyze trend` reports; bad input
# (a PNG name, an unknown layer, not a database, an unwritable output) gets a clear error and
# leaves no file behind.
. "$(dirname "$0")/an_lib.sh"

DB=$TMP/plot.db
ms run run -q -o "$DB" -- "$PROGS/an_trend"
assert_eq "run exit status" 0 "$RC"
require_db "an_trend" "$DB"

ms plot plot "$DB" -o "$TMP/plot.svg"
assert_eq "plot exit status" 0 "$RC"
ms trendj analyze trend "$DB" --json
max=$(jq_py "$TMP/trendj.out" 'd["max_live_bytes"]')
final=$(jq_py "$TMP/trendj.out" 'd["final_live_bytes"]')

# svg_facts FILE: the facts the checks below compare, one per line, read with a real XML parser.
svg_facts() {
    "$PY" - "$1" <<'EOF'
import sys
import xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
w, h = int(root.get("width")), int(root.get("height"))
steps = root.find(f"{NS}g[@class='steps']")
lines = steps.findall(f"{NS}line[@class='step']")
pts = [tuple(map(float, p.split(","))) for p in
       root.find(f".//{NS}polyline[@class='live']").get("points").split()]
inside = all(0 <= x <= w and 0 <= y <= h for x, y in pts)
print(root.tag == NS + "svg")
print(steps.get("data-steps"), len(lines))
print(len(pts), inside)
print(root.find(f"{NS}g[@class='max']").get("data-bytes"))
print(pts[-1][1] < pts[0][1])   # the last point above the first: live bytes grew
EOF
}
svg_facts "$TMP/plot.svg" >"$TMP/facts" 2>&1
assert_eq "the image is an SVG document" True "$(sed -n 1p "$TMP/facts")"
assert_eq "20 step ends, 20 dashed lines" "20 20" "$(sed -n 2p "$TMP/facts")"
assert_eq "the series: 101 points inside the image" "101 True" "$(sed -n 3p "$TMP/facts")"
assert_eq "the maximum is analyze trend's" "$max" "$(sed -n 4p "$TMP/facts")"
assert_eq "live bytes grew over the run" True "$(sed -n 5p "$TMP/facts")"
assert_eq "the maximum is at least 20 steps of 100000 bytes" ok \
    "$(awk -v m="$max" -v f="$final" 'BEGIN { print (m >= 2000000 && m >= f) ? "ok" : "no" }')"
assert_eq "no temporary file left" "" "$(ls "$TMP" | grep 'plot.svg.tmp' || true)"

# To standard output, the same image; --layer names a layer; a title is escaped.
ms plotout plot "$DB" --layer heap --title 'a <b> & "c"'
assert_eq "plot to stdout exit status" 0 "$RC"
assert_eq "stdout: the escaped title" 1 \
    "$(grep -c '<title>a &lt;b&gt; &amp; &quot;c&quot;</title>' "$TMP/plotout.out")"

# Many steps: thinned to 200 lines, the count kept.
ms run300 run -q -o "$TMP/p300.db" -- "$PROGS/an_trend" 300
ms plot300 plot "$TMP/p300.db" -o "$TMP/p300.svg"
svg_facts "$TMP/p300.svg" >"$TMP/facts300" 2>&1
assert_eq "300 step ends: 200 lines that say 300" "300 200" "$(sed -n 2p "$TMP/facts300")"

# Bad input.
ms png plot "$DB" -o "$TMP/x.png"
assert_eq "a .png name: usage error" 2 "$RC"
assert_eq "a .png name: no file" "" "$(ls "$TMP" | grep 'x.png' || true)"
ms nolayer plot "$DB" --layer nosuch
assert_eq "an unknown layer: usage error" 2 "$RC"
assert_eq "an unknown layer: said" 1 "$(grep -c "no layer named 'nosuch'" "$TMP/nolayer.err")"
printf 'not a database\n' >"$TMP/text.db"
ms notdb plot "$TMP/text.db"
assert_eq "not a database: failure" 1 "$RC"
ms missing plot "$TMP/nosuch.db"
assert_eq "no such file: failure" 1 "$RC"
ms nodir plot "$DB" -o "$TMP/no/such/dir/p.svg"
assert_eq "an unwritable output: failure" 1 "$RC"
assert_eq "an unwritable output: said" 1 "$(grep -c 'cannot write' "$TMP/nodir.err")"
ms noarg plot
assert_eq "no database: usage error" 2 "$RC"
done_testing
