#!/bin/bash
# test_view_browser.sh: the viewer in a real browser: view_browser.mjs (Debian's chromium driven
# by playwright-core from web/node_modules) on view_known.c's run, served by memscope view and
# written as one file by memscope report; screenshots are kept in
# $PROGS/screenshots. Skipped (77) only when chromium, node or the npm packages are missing,
# which scripts/setup-debian.sh installs; under CI=true that is a failure instead.
. "$(dirname "$0")/view_lib.sh"
missing=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium"
command -v node >/dev/null || missing="$missing node"
[ -d "$WEB/node_modules/playwright-core" ] || missing="$missing web/node_modules (npm ci)"
"$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd" && missing="$missing libmicrohttpd"
if [ -n "$missing" ]; then
    [ "${CI:-}" = true ] && { echo "FAIL: missing:$missing (scripts/setup-debian.sh installs them)"; exit 1; }
    skip "missing:$missing (scripts/setup-debian.sh installs them)"
fi
known_db
view_start "$TMP/known.db"
mkdir -p "$PROGS/screenshots"
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "$URL" "$PROGS/screenshots" >"$TMP/browser.out" 2>&1; then
    pass "the page in chromium: $(tail -1 "$TMP/browser.out")"
else
    fail "the page in chromium"
fi
sed 's/^/  /' "$TMP/browser.out"
view_stop
assert_eq "Ctrl-C: exit status 0" 0 "$VIEW_RC"

# inefficient blocks: b_ineff.c (tests/analyze), MindStudio Insight's three time rules
ms ineff run -q -o "$TMP/ineff.db" -- "$INEFF_PROG"
view_start "$TMP/ineff.db"
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "$URL" "$PROGS/screenshots" ineff >"$TMP/ineff.out" 2>&1; then
    pass "inefficient blocks in chromium: $(tail -1 "$TMP/ineff.out")"
else
    fail "inefficient blocks in chromium"
fi
sed 's/^/  /' "$TMP/ineff.out"
view_stop

# two memory layers (tests/progs/mmap_anon.c: heap and mmap), split and stacked
ms mmap run -q -o "$TMP/mmap.db" -- "$MMAP_PROG"
view_start "$TMP/mmap.db"
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "$URL" "$PROGS/screenshots" stacked >"$TMP/stacked.out" 2>&1; then
    pass "layers split and stacked in chromium: $(tail -1 "$TMP/stacked.out")"
else
    fail "layers split and stacked in chromium"
fi
sed 's/^/  /' "$TMP/stacked.out"
view_stop

# the usage monitor's series (tests/progs/usage_kinds.c: a 32 MiB shared memory object)
ms usage run -q --usage-interval=0.02 -o "$TMP/usage.db" -- "$USAGE_PROG" shm
view_start "$TMP/usage.db"
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "$URL" "$PROGS/screenshots" usage >"$TMP/usage.out" 2>&1; then
    pass "RSS, PSS and USS in chromium: $(tail -1 "$TMP/usage.out")"
else
    fail "RSS, PSS and USS in chromium"
fi
sed 's/^/  /' "$TMP/usage.out"
view_stop

# the same page as one file (memscope report), opened from disk: no server, no network; the
# run's command line carries a </script> that must stay text
ms known2 run -q -o "$TMP/known2.db" -- "$PROGS/view_known" '</script><script>alert(1)</script>'
assert_eq "view_known with an argument: run exit status" 0 "$RC"
ms report report "$TMP/known2.db" -o "$TMP/known2.html"
assert_eq "report: exit status" 0 "$RC"
if WEB=$WEB node "$VIEW_SRC/view_browser.mjs" "file://$TMP/known2.html" "$PROGS/screenshots" report \
    >"$TMP/report.out" 2>&1; then
    pass "the report in chromium: $(tail -1 "$TMP/report.out")"
else
    fail "the report in chromium"
fi
sed 's/^/  /' "$TMP/report.out"
done_testing
