#!/bin/sh
# setup-debian.sh: installs what memscope needs to build and test on Debian 12 (run as root).
# Idempotent: packages already present are left alone, so a second run takes seconds.
set -eu
pkgs="build-essential cmake pkg-config libsqlite3-dev sqlite3 libdw-dev clang clang-format libclang-rt-14-dev
      heaptrack zstd python3 python3-dev python3-torch python3-pytest git time
      libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "setup: all build and test dependencies are installed"
