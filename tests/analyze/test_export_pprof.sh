#!/bin/bash
# test_export_pprof.sh: `memscope export --format=pprof` on an_export.c, read by Go's own
# reader (`go tool pprof`: -top for each sample type, -traces, -raw) and by protoc's raw
# decoder: exact bytes and objects per call site, the inlined function as a second line of
# its caller's location, the module's build id as readelf reads it, a selector.
. "$(dirname "$0")/an_lib.sh"

command -v go >/dev/null || skip "go is not installed (Debian's golang-go: scripts/setup-debian.sh)"
export GOCACHE=$TMP/gocache GOPATH=$TMP/gopath GOFLAGS=-mod=mod HOME=$TMP

DB=$TMP/ex.db
ms run run -q -o "$DB" -- "$PROGS/an_export"
assert_eq "run exit status" 0 "$RC"
P=$TMP/ex.pb.gz
ms pp export "$DB" --format=pprof -o "$P"
assert_eq "pprof exit status" 0 "$RC"
assert_eq "gzip'd" "1f8b" "$(od -An -tx1 -N2 "$P" | tr -d ' ')"

# top INDEX: "function flat" of an_export's sites in `go tool pprof -top`
top() {
    local unit=
    case $1 in *_space) unit=-unit=B ;; esac
    go tool pprof -top $unit -nodecount=1000 -sample_index="$1" "$P" 2>"$TMP/top.err" |
        awk '$NF ~ /^an_export_/ || ($(NF-1) ~ /^an_export_/ && $NF == "(inline)") {
            print ($NF == "(inline)" ? $(NF-1) : $NF), $1 }' | grep -v ' 0$' | sort
}
assert_eq "alloc_space" \
"an_export_child 2222B
an_export_churn 20480B
an_export_inl 777B
an_export_keep 3000B" "$(top alloc_space)"
assert_eq "alloc_objects" \
"an_export_child 1
an_export_churn 5
an_export_inl 1
an_export_keep 3" "$(top alloc_objects)"
assert_eq "inuse_space (live at exit)" \
"an_export_child 2222B
an_export_inl 777B
an_export_keep 3000B" "$(top inuse_space)"
assert_eq "inuse_objects" \
"an_export_child 1
an_export_inl 1
an_export_keep 3" "$(top inuse_objects)"
total=$(go tool pprof -top -unit=B -sample_index=alloc_space "$P" 2>/dev/null |
    sed -nE 's/.*Total samples = ([0-9]+)B.*/\1/p')
assert_eq "total alloc_space = the run's allocated bytes" \
    "$(q "$DB" 'SELECT sum(alloc_bytes) FROM process_stats WHERE layer IN (1, 2)')" "$total"
assert_eq "sample types" "alloc_objects alloc_space inuse_objects inuse_space" \
    "$(go tool pprof -raw "$P" 2>/dev/null | sed -n '/^Samples:/{n;p}' | tr -s ' ' |
        sed -E 's/\/(count|bytes)//g; s/^ //; s/ $//')"

go tool pprof -traces -unit=B -sample_index=alloc_space "$P" >"$TMP/traces.out" 2>&1
assert_eq "-traces: the inlined call, then its caller, then main" 1 \
    "$(grep -A2 -E '^ +777B +an_export_inl \(inline\)$' "$TMP/traces.out" | tr -s ' ' |
        tr '\n' '|' | grep -cE 'an_export_inl \(inline\)\| an_export_outer\| main\|')"
assert_eq "-traces: labels pid and layer" 1 \
    "$(grep -B3 -E '^ +2222B +an_export_child' "$TMP/traces.out" | tr -s ' ' | tr '\n' '|' |
        grep -cE "layer: heap\| pid: $(q "$DB" 'SELECT pid FROM processes WHERE id = 2')\|")"

go tool pprof -raw "$P" >"$TMP/raw.out" 2>&1
assert_eq "one location, two lines: an_export_inl inlined into an_export_outer" 1 \
    "$(grep -A1 -E '^ +[0-9]+: 0x[0-9a-f]+ M=[0-9]+ an_export_inl ' "$TMP/raw.out" |
        grep -cE '^ +an_export_outer .*an_export.c:[0-9]+ s=0$')"
want=$(readelf -n "$PROGS/an_export" 2>/dev/null | sed -n 's/.*Build ID: //p')
if [ -n "$want" ]; then
    assert_eq "the program's mapping carries its build id" 1 \
        "$(grep -cE "^[0-9]+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ $PROGS/an_export $want " "$TMP/raw.out")"
fi

child=$(q "$DB" "SELECT pid FROM processes WHERE id = 2")
ms ppc export "$DB" --format=pprof --process="$child" -o "$TMP/child.pb.gz"
assert_eq "--process=the child: its 2222 bytes only" "2222" \
    "$(go tool pprof -top -unit=B -sample_index=alloc_space "$TMP/child.pb.gz" 2>/dev/null |
        sed -nE 's/.*Total samples = ([0-9]+)B.*/\1/p')"

if command -v protoc >/dev/null; then
    zcat "$P" | protoc --decode_raw >"$TMP/decoded.txt" 2>&1
    assert_eq "protoc --decode_raw reads it" 0 "$?"
    # the string table (field 6) starts with "" and names the four sample types
    assert_eq "string table: \"\", then the sample types" \
'6: ""
6: "alloc_objects"
6: "count"
6: "alloc_space"
6: "bytes"' "$(grep -E '^6: ' "$TMP/decoded.txt" | head -5)"
else
    echo "note: no protoc (protobuf-compiler): --decode_raw not checked"
fi
done_testing
