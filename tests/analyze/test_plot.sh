#!/bin/bash
# test_plot.sh: `memscope plot` on an_trend.c (20 steps, +100000 bytes each): the image is an
# SVG document that Python's XML parser reads, with one dashed line per step end (20; 300 steps
# are thinned to 200 lines that say 300), the trend series (101 points inside the frame, the
# last one the live bytes at exit) and the maximum that `analyze trend` reports. The PNG image
# (-o FILE.png, --png) is read by Debian's Pillow and checked by pngcheck: 1600x640, 20 dashed
# step lines, the series's pixels where the SVG's points are (x2), the maximum's line above it.
# Bad input (a .jpg name, an unknown layer, not a database, an unwritable output) gets a clear
# error and leaves no file behind.
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

# PNG: the same picture at twice the size, read by a real decoder (Pillow: chunk CRCs, zlib
# stream and Adler-32) and checked by pngcheck.
ms png plot "$DB" -o "$TMP/plot.png"
assert_eq "png exit status" 0 "$RC"
if command -v pngcheck >/dev/null; then
    assert_eq "pngcheck: a valid PNG" 0 "$(pngcheck -q "$TMP/plot.png" >/dev/null; echo $?)"
fi
"$PY" - "$TMP/plot.png" "$TMP/plot.svg" >"$TMP/pngfacts" 2>&1 <<'EOF' || true
import sys
import xml.etree.ElementTree as ET
from PIL import Image
im = Image.open(sys.argv[1])
im.load()
px = im.load()
w, h = im.size
print(im.format, im.mode, w, h)
NS = "{http://www.w3.org/2000/svg}"
svg = ET.parse(sys.argv[2]).getroot()
pts = [tuple(map(float, p.split(","))) for p in
       svg.find(f".//{NS}polyline[@class='live']").get("points").split()]
bottom = int(float(svg.find(f"{NS}g[@class='steps']/{NS}line").get("y2")) * 2)
# step lines: runs of columns with the step grey in a band (a dash period high) above the axis
runs, prev = 0, False
for x in range(w):
    on = any(px[x, y] == (0x99, 0x99, 0x99) for y in range(bottom - 16, bottom - 3))
    runs += on and not prev
    prev = on
print("steps", runs)
# the series: a pixel of its blue within 3 px of every SVG point (x2)
LIVE = (0x1f, 0x6f, 0xbf)
def near(x, y):
    return any(px[min(max(int(x * 2) + dx, 0), w - 1), min(max(int(y * 2) + dy, 0), h - 1)] == LIVE
               for dx in range(-3, 4) for dy in range(-3, 4))
print("series", sum(near(x, y) for x, y in pts), len(pts))
# the maximum: a dashed red row, no series pixel above it
MAXC = (0xc0, 0x39, 0x2b)
reds = [sum(px[x, y] == MAXC for x in range(w)) for y in range(h)]
ym = max(range(h), key=lambda y: reds[y])
top_live = min(y for y in range(h) for x in range(0, w, 2) if px[x, y] == LIVE)
print("max", reds[ym] > w // 2, top_live >= ym - 3)
EOF
assert_eq "png: 1600x640 RGB" "PNG RGB 1600 640" "$(sed -n 1p "$TMP/pngfacts")"
assert_eq "png: 20 dashed step lines" "steps 20" "$(sed -n 2p "$TMP/pngfacts")"
assert_eq "png: the series where the SVG's points are" "series 101 101" "$(sed -n 3p "$TMP/pngfacts")"
assert_eq "png: the maximum's line, nothing above it" "max True True" "$(sed -n 4p "$TMP/pngfacts")"
"$MEMSCOPE" plot "$DB" --png >"$TMP/stdout.png" 2>"$TMP/pngout.err"
assert_eq "--png to stdout: the same image" "" "$(cmp "$TMP/stdout.png" "$TMP/plot.png" 2>&1)"

# Bad input.
ms jpg plot "$DB" -o "$TMP/x.jpg"
assert_eq "a .jpg name: usage error" 2 "$RC"
assert_eq "a .jpg name: no file" "" "$(ls "$TMP" | grep 'x.jpg' || true)"
ms pngsvg plot "$DB" --png -o "$TMP/x.svg"
assert_eq "--png with an .svg name: usage error" 2 "$RC"
assert_eq "--png with an .svg name: said, no file" "1 " \
    "$(grep -c 'name the output FILE.png' "$TMP/pngsvg.err") $(ls "$TMP" | grep 'x.svg' || true)"

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
