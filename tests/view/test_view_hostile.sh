#!/bin/bash
# test_view_hostile.sh: names that are HTML, in a real browser: view_hostile.c's run, whose
# thread, owner, mark, range, pool and command line are "<!--<script>" (HTML's double-escaped
# script state: before report.c escaped '<' in its data, it swallowed the page's script) or a
# "</script>", served by memscope view (no cookie; the token in every request and across a
# reload) and written by memscope report: view_hostile.mjs checks each page. Skipped (77) only
# when chromium, node or the npm packages are missing; under CI=true that is a failure.
. "$(dirname "$0")/view_lib.sh"
missing=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium"
command -v node >/dev/null || missing="$missing node"
[ -d "$WEB/node_modules/playwright-core" ] || missing="$missing web/node_modules (npm ci)"
if [ -n "$missing" ]; then
    [ "${CI:-}" = true ] && { echo "FAIL: missing:$missing (scripts/setup-debian.sh installs them)"; exit 1; }
    skip "missing:$missing (scripts/setup-debian.sh installs them)"
fi
n=0
for h in '<!--<script>' '</script><!--<script>' '<script><!--'; do
    n=$((n + 1))
    ms hostile$n run -q -o "$TMP/h$n.db" -- "$PROGS/view_hostile" "$h"
    assert_eq "view_hostile '$h': run exit status" 0 "$RC"
    ms report$n report "$TMP/h$n.db" -o "$TMP/h$n.html"
    assert_eq "report '$h': exit status" 0 "$RC"
    if WEB=$WEB node "$VIEW_SRC/view_hostile.mjs" "file://$TMP/h$n.html" "$h" report >"$TMP/report$n.out" 2>&1; then
        pass "the report with '$h' in chromium"
    else
        fail "the report with '$h' in chromium"
    fi
    sed 's/^/  /' "$TMP/report$n.out"
done
if "$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd"; then
    echo "note: memscope built without libmicrohttpd: the served page is left out"
else
    view_start "$TMP/h1.db"
    if WEB=$WEB node "$VIEW_SRC/view_hostile.mjs" "$URL" '<!--<script>' view >"$TMP/view.out2" 2>&1; then
        pass "the served page with '<!--<script>' in chromium"
    else
        fail "the served page with '<!--<script>' in chromium"
    fi
    sed 's/^/  /' "$TMP/view.out2"
    view_stop
fi
done_testing
