#!/bin/bash
# test_view_bundle.sh: the committed front end (web/dist, which the build embeds) is what
# web/src builds to: esbuild (web/node_modules, the lockfile's version) bundles web/src/main.js
# again and the result must equal web/dist/app.js byte for byte; the page and the style too.
# A change to web/src without `npm run build` in web/ fails here. And web/src's modules import
# each other without a cycle (view_imports.mjs: each view imports only what lies below it,
# and asks what lies above through events.js).
. "$(dirname "$0")/view_lib.sh"
ESBUILD=$WEB/node_modules/.bin/esbuild
if [ ! -x "$ESBUILD" ]; then
    [ "${CI:-}" = true ] && { echo "FAIL: $ESBUILD missing (scripts/setup-debian.sh installs it)"; exit 1; }
    skip "$ESBUILD missing (scripts/setup-debian.sh installs it)"
fi
(cd "$WEB" && "$ESBUILD" src/main.js --bundle --minify --format=iife --target=es2020 \
    --legal-comments=none --outfile="$TMP/app.js" --log-level=error)
assert_eq "esbuild: exit status" 0 "$?"
assert_eq "web/dist/app.js is web/src/main.js bundled" "" "$(cmp "$TMP/app.js" "$WEB/dist/app.js" 2>&1)"
assert_eq "web/dist/index.html is web/src/index.html" "" "$(cmp "$WEB/src/index.html" "$WEB/dist/index.html" 2>&1)"
assert_eq "web/dist/uplot.css is uPlot's" "" \
    "$(cmp "$WEB/node_modules/uplot/dist/uPlot.min.css" "$WEB/dist/uplot.css" 2>&1)"
assert_match "the build script says the same" "--legal-comments=none --outfile=dist/app.js" \
    "$(grep '"build"' "$WEB/package.json")"
imports=$(node "$(dirname "$0")/view_imports.mjs" "$WEB/src" 2>&1)
assert_match "web/src's imports: no cycle" "no cycle: " "$imports"
done_testing
