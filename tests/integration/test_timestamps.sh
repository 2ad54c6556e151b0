#!/bin/bash
# test_timestamps.sh: extreme timestamps (issue 37, low: UBSan found signed overflows). A trace
# whose header or chunks claim times near 2^63 or 2^64 converts to a database whose times are in
# [0, 2^62) (common/ns.h); a database whose time columns hold INT64_MIN and INT64_MAX (damaged,
# or made by hand) goes through every analysis, report, plot and export without overflowing:
# the sanitizer build (make check-asan) aborts on any signed overflow, so there this test fails
# on the tree before the fix; in the plain build the range of the converted times fails it.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "no python3 to damage the trace"

"$MEMSCOPE" run -q --format=trace --no-pack -o "$TMP/raw" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
[ -n "$(ls "$TMP"/raw/*.mst 2>/dev/null)" ] || { fail "no raw trace"; done_testing; }

# damage SRC DST BASE MONO REAL: every chunk's base_ns, the header's start_mono_ns and
# start_real_ns set (-1: left as they are)
damage() {
    "$PY" - "$@" <<'EOF'
import glob, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
base, mono, real = (int(v, 0) for v in sys.argv[3:6])
shutil.copytree(src, dst)
for f in glob.glob(dst + "/*.mst"):
    b = bytearray(open(f, "rb").read())
    if mono >= 0:
        struct.pack_into("<Q", b, 40, mono)
    if real >= 0:
        struct.pack_into("<Q", b, 48, real)
    off = 4096
    while off + 32 <= len(b):
        size = struct.unpack_from("<I", b, off + 4)[0]
        if b[off:off + 4] != b"MSCK" or size == 0:
            off += 4096
            continue
        if base >= 0:
            struct.pack_into("<Q", b, off + 24, base)
        off += size
    open(f, "wb").write(bytes(b))
EOF
}
i=0
for args in "0xfffffffffffffff0 -1 -1" "0x7ffffffffffffff0 0 0xffffffffffffffff" \
    "0 0xffffffffffffffff 0x8000000000000000" "-1 -1 0x7fffffffffffffff"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    damage "$TMP/raw" "$TMP/d$i" $args
    ms import$i import --format=db "$TMP/d$i" -o "$TMP/d$i.db"
    assert_eq "damaged times $i ($args): imported" 0 "$RC"
    assert_eq "... every time in [0, 2^62)" "0" \
        "$(q "$TMP/d$i.db" "SELECT count(*) FROM events WHERE ts_ns < 0 OR ts_ns >= 4611686018427387904")"
    for a in leaks peak temporary trend inefficient decompose; do
        ms an analyze "$a" "$TMP/d$i.db"
        [ "$RC" = 0 ] || fail "damaged times $i: analyze $a: status $RC: $(head -c 300 "$TMP/an.err")"
    done
done
pass "damaged traces: every analysis ran"

# a database with extreme times in every time column, in a third of the rows each way
"$MEMSCOPE" run -q -o "$TMP/c.db" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
"$MEMSCOPE" export "$TMP/c.db" --format=db -o "$TMP/f.db" >/dev/null 2>&1
for db in c f; do
    cp "$TMP/$db.db" "$TMP/x$db.db"
    q "$TMP/x$db.db" "SELECT m.name || '|' || p.name FROM sqlite_master m, pragma_table_info(m.name) p
                      WHERE m.type = 'table' AND p.name LIKE '%\_ns' ESCAPE '\\'" |
        while IFS='|' read -r t c; do
            q "$TMP/x$db.db" "UPDATE \"$t\" SET \"$c\" = CASE rowid % 3 WHEN 0 THEN -9223372036854775808
                              WHEN 1 THEN 9223372036854775807 ELSE \"$c\" END" >/dev/null
        done
    for a in leaks peak temporary trend inefficient decompose fragmentation; do
        ms an analyze "$a" "$TMP/x$db.db" --json
        [ "$RC" -lt 124 ] && ! grep -q 'runtime error' "$TMP/an.err" ||
            fail "extreme times ($db): analyze $a: status $RC: $(head -c 300 "$TMP/an.err")"
    done
    for cmd in "report $TMP/x$db.db -o $TMP/r.html" "plot $TMP/x$db.db -o $TMP/p.svg" \
        "export $TMP/x$db.db -o $TMP/e.csv"; do
        # shellcheck disable=SC2086
        ms cmd $cmd
        [ "$RC" -lt 124 ] && ! grep -q 'runtime error' "$TMP/cmd.err" ||
            fail "extreme times ($db): $cmd: status $RC: $(head -c 300 "$TMP/cmd.err")"
    done
done
pass "databases with extreme times: every command ended without a crash"
done_testing
