#!/bin/bash
# test_outputs.sh: how the outputs of report, analyze, export and plot are written (issue 37
# items 1, 2 and its low items; docs/cli.md "Files"): through a new file with a name no one can
# guess, renamed over the target; a symbolic link at the target is replaced, never followed, even
# when another user planted it towards a device; only a device or FIFO the user named directly
# (or /dev/stdout) is written in place. The loop-device case runs as root only (said when
# skipped); the cross-user case creates a user and removes it.
. "$(dirname "$0")/lib.sh"
umask 022

LOOP="" USER2=""
cleanup() {
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    [ -n "$USER2" ] && userdel "$USER2" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

"$MEMSCOPE" run -q -o "$TMP/r.db" -- "$PROGS/alloc_funcs" >/dev/null 2>&1
require_db "the run to read from" "$TMP/r.db"

# the commands under test, each writing OUT (named like what it writes)
outputs() { # DIR: runs each command with -o DIR/out.<ext>; the statuses on one line
    local d=$1 s=""
    timeout 60 "$MEMSCOPE" report "$TMP/r.db" -o "$d/out.html" >/dev/null 2>&1; s="$s $?"
    timeout 60 "$MEMSCOPE" analyze leaks "$TMP/r.db" -o "$d/out.txt" >/dev/null 2>&1; s="$s $?"
    timeout 60 "$MEMSCOPE" export "$TMP/r.db" -o "$d/out.csv" >/dev/null 2>&1; s="$s $?"
    timeout 60 "$MEMSCOPE" plot "$TMP/r.db" -o "$d/out.svg" >/dev/null 2>&1; s="$s $?"
    echo "${s# }"
}
NAMES="out.html out.txt out.csv out.svg"

# fifo_read FIFO FILE: a reader that copies FIFO into FILE in the background (it holds the FIFO
# open for writing too, so it never sees an end and a writer's open never blocks); READER is its
# pid. fifo_done FIFO FILE: writes END through the FIFO, waits until the reader copied it (at
# most 20 s), and ends the reader.
fifo_read() {
    bash -c 'exec 3<>"$1"; exec cat <&3 >"$2"' _ "$1" "$2" &
    READER=$!
}
fifo_done() {
    echo END > "$1"
    for _ in $(seq 200); do [ "$(tail -n 1 "$2" 2>/dev/null)" = END ] && break; sleep 0.1; done
    kill "$READER" 2>/dev/null
    wait "$READER" 2>/dev/null
}

# 1 (no root needed): links to a FIFO another process reads are replaced, not written through
mkdir "$TMP/fifo" && mkfifo "$TMP/fifo/pipe"
for n in $NAMES; do ln -s "$TMP/fifo/pipe" "$TMP/fifo/$n"; done
fifo_read "$TMP/fifo/pipe" "$TMP/fifo.got"
st=$(outputs "$TMP/fifo")
fifo_done "$TMP/fifo/pipe" "$TMP/fifo.got"
assert_eq "links to a FIFO: every command succeeds" "0 0 0 0" "$st"
assert_eq "links to a FIFO: nothing went through the links" "END" "$(cat "$TMP/fifo.got")"
for n in $NAMES; do
    assert_eq "links to a FIFO: $n is now a regular file of its own" "regular file 600" \
        "$(stat -c '%F %a' "$TMP/fifo/$n")"
done
assert_eq "no temporary file left" "" "$(ls "$TMP/fifo" | grep tmp || true)"

# 1: named directly, a FIFO and /dev/stdout are written in place
mkfifo "$TMP/direct.fifo"
fifo_read "$TMP/direct.fifo" "$TMP/direct.got"
timeout 60 "$MEMSCOPE" analyze leaks "$TMP/r.db" -o "$TMP/direct.fifo" >/dev/null 2>&1
st=$?
fifo_done "$TMP/direct.fifo" "$TMP/direct.got"
assert_eq "a FIFO named directly: written in place" "0 $("$MEMSCOPE" analyze leaks "$TMP/r.db" | wc -l)" \
    "$st $(grep -vc '^END$' "$TMP/direct.got")"
assert_eq "... and it is still a FIFO" "fifo" "$(stat -c %F "$TMP/direct.fifo")"
direct=$("$MEMSCOPE" analyze leaks "$TMP/r.db" -o /dev/stdout 2>/dev/null | md5sum)
assert_eq "-o /dev/stdout: the report on standard output (its md5)" \
    "$("$MEMSCOPE" analyze leaks "$TMP/r.db" 2>/dev/null | md5sum)" "$direct"
# standard output redirected to a file: written there, at its offset (memscope before issue 37
# renamed a new file over the name; /dev/fd/1 here, since for /dev/stdout that replaced the
# system's link, as root)
{ echo "first line"; "$MEMSCOPE" export "$TMP/r.db" -o /dev/fd/1; } > "$TMP/stdout.csv" 2>/dev/null
assert_eq "export -o /dev/fd/1 into a redirected file: appended to what was written" \
    "first line|$("$MEMSCOPE" export "$TMP/r.db" -o /dev/stdout 2>/dev/null | head -1)" \
    "$(head -2 "$TMP/stdout.csv" | paste -sd '|')"
assert_eq "/dev/stdout is still the system's link" "symbolic link" "$(stat -c %F /dev/stdout)"

# 2: a link planted at the temporary name a pid would give (plot wrote OUT.tmp.<pid>): the
# pid of `exec` is the shell's, so the planted names are exact
echo "precious" > "$TMP/victim" && chmod 600 "$TMP/victim"
sh -c 'for t in "" .0 .1; do ln -s "$2" "$1.tmp.$$$t"; done; exec "$3" plot "$4" -o "$1"' _ \
    "$TMP/p.svg" "$TMP/victim" "$MEMSCOPE" "$TMP/r.db" >/dev/null 2>&1
assert_eq "plot: the planted link's target is untouched" "precious" "$(cat "$TMP/victim")"
assert_eq "plot: the image is written, owner-only (0600)" "regular file 600" \
    "$(stat -c '%F %a' "$TMP/p.svg")"
"$MEMSCOPE" plot "$TMP/r.db" -o "$TMP/p.png" >/dev/null 2>&1
assert_eq "plot: a PNG is 0600 too" "600" "$(stat -c %a "$TMP/p.png")"

# low: an output path SQLite cannot open (over 512 bytes with the temporary name) is refused
# before the program runs (it failed after the run); a long one it can open works
long=$TMP/$(printf 'd%.0s' $(seq 200))/$(printf 'e%.0s' $(seq 200))
mkdir -p "$long"
"$MEMSCOPE" run -q -o "$long/$(printf 'f%.0s' $(seq 100)).db" -- /bin/sh -c "touch '$TMP/long-ran'" \
    >/dev/null 2>"$TMP/long.err"
assert_eq "a database path too long for SQLite: exit status 1, the program not started" "1 no" \
    "$? $([ -e "$TMP/long-ran" ] && echo yes || echo no)"
assert_match "... saying why" "the path is too long .*the program was not started" "$(cat "$TMP/long.err")"
"$MEMSCOPE" run -q --format=csv -o "$long/$(printf 'f%.0s' $(seq 80)).csv" -- /bin/sh -c \
    "touch '$TMP/long-ran'" >/dev/null 2>"$TMP/long.err"
assert_eq "a CSV whose database's path is too long: refused before the program too" "1 no" \
    "$? $([ -e "$TMP/long-ran" ] && echo yes || echo no)"
"$MEMSCOPE" run -q -o "$long/short.db" -- /bin/true >/dev/null 2>&1
assert_eq "a long path SQLite opens ($(( ${#long} + 9 )) bytes): written" "0 regular file" \
    "$? $(stat -c %F "$long/short.db" 2>&1)"
assert_eq "... and nothing else left beside it" "short.db" "$(ls -A "$long")"

# low: names a spreadsheet would take for formulas are exported as text: one single quote in
# front (after any quotes already there, so that readers can take one off again)
"$MEMSCOPE" run -q --format=csv -o "$TMP/names.csv" -- "$PROGS/names" "=1+2" "+cmd" "-2" \
    "@SUM(A1)" "'=x" "plain" "$(printf '\tTab')" "a,=b" >/dev/null 2>&1
assert_eq "CSV export: formula-like names defused, others as they are" \
    "'=1+2|'+cmd|'-2|'@SUM(A1)|''=x|plain|'\tTab|a,=b" \
    "$(/usr/bin/python3 -c 'import csv, sys
names = [r["Name"] for r in csv.DictReader(open(sys.argv[1], newline="")) if r["Event Type"] == "Mark"]
print("|".join(n.replace("\t", "\\t") for n in names))' "$TMP/names.csv")"

# low: TMPDIR naming a missing directory: said when memscope starts, and /tmp used instead
# (export of a compact database expands it in a temporary directory: it failed)
TMPDIR=$TMP/no-such-dir "$MEMSCOPE" export "$TMP/r.db" -o "$TMP/tmpdir.csv" >/dev/null 2>"$TMP/tmpdir.err"
assert_eq "TMPDIR missing: export still works" "0 regular file" \
    "$? $(stat -c %F "$TMP/tmpdir.csv" 2>&1)"
assert_match "... and says so first" "^memscope \[warning\]: TMPDIR '.*/no-such-dir' is not a directory memscope can write; its temporary directories go to /tmp" \
    "$(head -1 "$TMP/tmpdir.err")"

# 1, as root: another user plants links in a shared (sticky) directory towards a block device
# (a loop device over a file of ours standing in for a disk); root's outputs replace the links
if [ "$(id -u)" != 0 ]; then
    echo "SKIP (not root): the loop-device and second-user cases"
elif ! command -v losetup >/dev/null || ! command -v useradd >/dev/null; then
    echo "SKIP (no losetup or useradd): the loop-device and second-user cases"
else
    head -c 1048576 /dev/zero | tr '\0' 'D' > "$TMP/disk.img"
    LOOP=$(losetup -f --show "$TMP/disk.img" 2>/dev/null) || LOOP=""
    USER2=ms37o$$
    useradd -M -N -s /usr/sbin/nologin "$USER2" 2>/dev/null || USER2=""
    if [ -z "$LOOP" ] || [ -z "$USER2" ]; then
        echo "SKIP (no loop device or cannot add a user): the loop-device and second-user cases"
    else
        chmod 711 "$TMP"
        mkdir -m 1777 "$TMP/shared"
        for n in $NAMES; do runuser -u "$USER2" -- ln -s "$LOOP" "$TMP/shared/$n"; done
        assert_eq "the planted links are the other user's" "$USER2" \
            "$(stat -c %U "$TMP"/shared/* | sort -u)"
        st=$(outputs "$TMP/shared")
        assert_eq "root's outputs through another user's links: every command succeeds" \
            "0 0 0 0" "$st"
        assert_eq "the device is untouched (every byte still D)" "1048576" \
            "$(head -c 1048576 "$LOOP" | tr -cd 'D' | wc -c)"
        for n in $NAMES; do
            assert_eq "$n: root's own regular file, 0600" "regular file root 600" \
                "$(stat -c '%F %U %a' "$TMP/shared/$n")"
        done
        # the other user's outputs in the same directory, towards root's link: refused (a
        # sticky directory), and the device is still untouched
        rm -f "$TMP/shared/out.txt" && ln -s "$LOOP" "$TMP/shared/out.txt"
        cp "$TMP/r.db" "$TMP/shared/u.db" && chown "$USER2" "$TMP/shared/u.db"
        runuser -u "$USER2" -- "$MEMSCOPE" analyze leaks "$TMP/shared/u.db" \
            -o "$TMP/shared/out.txt" >/dev/null 2>"$TMP/u.err"
        assert_eq "another user's output over root's link in a sticky directory: refused" \
            "1" "$?"
        assert_match "... saying why" "cannot .*out.txt" "$(cat "$TMP/u.err")"
        assert_eq "... the device is untouched" "1048576" \
            "$(head -c 1048576 "$LOOP" | tr -cd 'D' | wc -c)"
        assert_eq "... and no temporary file is left" "" "$(ls -a "$TMP/shared" | grep tmp || true)"
        # a block device named directly is the user's choice: written in place
        "$MEMSCOPE" analyze leaks "$TMP/r.db" -o "$LOOP" >/dev/null 2>&1
        assert_eq "a device named directly: written in place" "0 yes" \
            "$? $([ "$(head -c 1048576 "$LOOP" | tr -cd 'D' | wc -c)" -lt 1048576 ] && echo yes || echo no)"
        assert_eq "... and still a block device" "block special file" "$(stat -c %F "$LOOP")"
    fi
fi
done_testing
