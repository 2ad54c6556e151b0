#!/bin/sh
# setup-debian.sh: installs what memscope needs to build and test on Debian 12 (run as root).
# Idempotent: packages already present are left alone, so a second run takes seconds.
set -eu
pkgs="build-essential cmake pkg-config libsqlite3-dev sqlite3 libdw-dev clang clang-format libclang-rt-14-dev
      heaptrack zstd python3 python3-dev python3-torch python3-pytest git time
      libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 libmicrohttpd-dev chromium curl
      python3-pil pngcheck redis-server
      zlib1g-dev golang-go protobuf-compiler
      prometheus tmux valgrind clickhouse-server"
# Node.js for the viewer's browser tests (playwright-core from npm drives Debian's chromium) and
# for rebuilding its front end; a machine that has node already (another distribution's) keeps it.
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    # Servers the tests start themselves (redis-server, prometheus, clickhouse-server) must not be started as
    # services by their packages: a policy that denies every start, for this install only,
    # where the machine has none of its own (containers usually have one).
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
    [ -z "$policy" ] || rm -f "$policy"
fi
echo "setup: all build and test dependencies are installed"
# The viewer's npm packages (web/package-lock.json: esbuild, uPlot, playwright-core; never a
# browser download: the tests point playwright-core at /usr/bin/chromium), and the speedscope
# export's checker (speedscope's file format schema, ajv: tests/analyze/test_export.sh).
web=$(cd "$(dirname "$0")/../web" && pwd)
if [ ! -d "$web/node_modules/playwright-core" ] || [ ! -d "$web/node_modules/uplot" ] ||
    [ ! -d "$web/node_modules/speedscope" ] || [ ! -d "$web/node_modules/ajv" ]; then
    echo "setup: installing the viewer's npm packages (web/)"
    (cd "$web" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup: the viewer's npm packages are installed"
# DuckDB's C library and header for the Parquet tables of a job (docs/columnar.md): npm
# packages pinned in third_party/duckdb/package-lock.json (libduckdb.so from the Node bindings'
# platform package, duckdb.h from the duckdb package's sources, same version); --ignore-scripts:
# nothing is built or downloaded beyond the tarballs. memscope builds without them.
duck=$(cd "$(dirname "$0")/../third_party/duckdb" && pwd)
if [ ! -f "$duck/node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so" ] ||
    [ ! -f "$duck/node_modules/duckdb/src/duckdb/src/include/duckdb.h" ]; then
    echo "setup: installing DuckDB's C library (third_party/duckdb)"
    (cd "$duck" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
echo "setup: DuckDB's C library is installed"
