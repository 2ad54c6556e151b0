#!/bin/bash
# test_bad_input.sh: bad command lines and bad files give a non-zero exit and a one-line message
# naming the problem; with a usage error nothing is run. Unknown options and bad values: exit 2.
. "$(dirname "$0")/lib.sh"

# The witness program: forker writes a file when it runs, so "nothing run" is observable.
W=$TMP/ran
witness() { echo "$PROGS/forker" "$W"; }

# usage_case NAME WORD-THE-MESSAGE-MUST-NAME ARGS...: exit 2, one line naming it, nothing run.
usage_case() {
    local name=$1 word=$2
    shift 2
    rm -f "$W"
    ms "$name" "$@"
    assert_eq "$name: exit status" 2 "$RC"
    assert_eq "$name: stderr lines" 1 "$(wc -l <"$TMP/$name.err")"
    assert_match "$name: message names $word" "$word" "$(cat "$TMP/$name.err")"
    if [ -e "$W" ]; then fail "$name: the program ran"; else pass "$name: nothing ran"; fi
}

usage_case unknown-run --bogus run --bogus -o "$TMP/u.db" -- $(witness)
usage_case unknown-ms --bogus --bogus -o "$TMP/u.db" $(witness)
usage_case unknown-short -Z run -Z -o "$TMP/u.db" -- $(witness)
usage_case depth-too-big call-stack run --call-stack=c:1001 -o "$TMP/u.db" -- $(witness)
usage_case depth-negative call-stack run --call-stack=c:-1 -o "$TMP/u.db" -- $(witness)
usage_case depth-not-number call-stack run --call-stack=c:abc -o "$TMP/u.db" -- $(witness)
usage_case stack-kind call-stack run --call-stack=x:3 -o "$TMP/u.db" -- $(witness)
usage_case python-depth call-stack run --call-stack=c:8,python:5000 -o "$TMP/u.db" -- $(witness)
usage_case format format run --format=xml -o "$TMP/u.db" -- $(witness)
usage_case events events run --events=alloc,bogus -o "$TMP/u.db" -- $(witness)
usage_case collect-mode collect-mode run --collect-mode=later -o "$TMP/u.db" -- $(witness)
usage_case log-level log-level run --log-level=loud -o "$TMP/u.db" -- $(witness)
usage_case output-no-value "output|-o|'o'" run --output-path
usage_case no-program "program" run -o "$TMP/u.db"
# A mistyped command that is no program on PATH (issue 47): a usage error naming the command
# meant, not a run of a program called "anaylze" (exit 127).
usage_case typo-analyze "did you mean analyze\?" anaylze "$TMP/u.db"
usage_case typo-report "did you mean report\?" reprot "$TMP/u.db"
usage_case typo-run "did you mean run\?" rnu -o "$TMP/u.db" -- $(witness)
usage_case typo-help "did you mean help\?" hlep
# The same words as programs: on PATH, or given as a path, they run (msMemScope's form).
mkdir -p "$TMP/bin"
printf '#!/bin/sh\necho "$0 ran" >"%s"\n' "$W" >"$TMP/bin/anaylze"
chmod 755 "$TMP/bin/anaylze"
for form in anaylze "$TMP/bin/anaylze"; do
    rm -f "$W"
    PATH="$TMP/bin:$PATH" "$MEMSCOPE" -q -o "$TMP/typo.db" "$form" >/dev/null 2>"$TMP/typo.err"
    assert_eq "a program called anaylze ($form): runs, exit 0" 0 "$?"
    assert_eq "... it ran" "$TMP/bin/anaylze ran" "$(cat "$W" 2>/dev/null)"
done
# A word far from every command is the program to run, as before.
ms farword memscope-no-such-command-anywhere
assert_eq "a word close to no command: run, status 127" 127 "$RC"

# A program that does not exist: a clear error naming it, non-zero exit.
ms missing run --format=db -o "$TMP/m.db" -- "$TMP/no/such/program"
assert_ne "missing program: exit status" 0 "$RC"
assert_match "missing program: message names it" "no/such/program" "$(cat "$TMP/missing.err")"
ms missing2 run --format=db -o "$TMP/m2.db" -- memscope-no-such-command-anywhere
assert_ne "program not on PATH: exit status" 0 "$RC"
assert_match "program not on PATH: message names it" "memscope-no-such-command-anywhere" \
    "$(cat "$TMP/missing2.err")"

# Unwritable output (a path under a regular file: unwritable even for root). The run must not
# be silently lost: non-zero exit and a message naming the path.
: >"$TMP/afile"
for o in "$TMP/afile/x.db" "$TMP/afile/dir"; do
    rm -f "$W"
    ms unwritable run --format=db -o "$o" -- $(witness)
    assert_ne "unwritable -o $o: exit status" 0 "$RC"
    assert_match "unwritable -o $o: message names the path" "afile" "$(cat "$TMP/unwritable.err")"
    echo "  info: with -o $o the program $([ -e "$W" ] && echo ran || echo did not run)"
done

# memscope import: corrupt traces.
mkdir -p "$TMP/garbage"
head -c 100000 /dev/urandom >"$TMP/garbage/1234.0.mst"
ms garbage import --format=db "$TMP/garbage" -o "$TMP/g.db"
assert_ne "import of a random-bytes trace: exit status" 0 "$RC"
assert_eq "import of a random-bytes trace: stderr lines" 1 "$(wc -l <"$TMP/garbage.err")"
assert_match "import of a random-bytes trace: message names the file" "1234\.0\.mst" "$(cat "$TMP/garbage.err")"
ms noimportdir import --format=db "$TMP/no-such-dir" -o "$TMP/g2.db"
assert_ne "import of a missing directory: exit status" 0 "$RC"
assert_match "import of a missing directory: message names it" "no-such-dir" "$(cat "$TMP/noimportdir.err")"
mkdir -p "$TMP/empty"
ms emptydir import --format=db "$TMP/empty" -o "$TMP/g3.db"
assert_ne "import of a directory without traces: exit status" 0 "$RC"

# A real trace, damaged: truncated in the middle of its records, then with its records
# overwritten by random bytes. Read up to the damage with a clear message; never a crash.
ms trace run --format=db --format=trace -o "$TMP/tr" -- "$PROGS/threads" 2 20000
assert_eq "--format=trace run: exit status" 0 "$RC"
mst=$(ls "$TMP/tr"/*.mst 2>/dev/null | head -1)
if [ -z "$mst" ]; then
    fail "--format=trace wrote no .mst file in $TMP/tr"
else
    size=$(stat -c %s "$mst")
    mkdir -p "$TMP/trunc" "$TMP/noise"
    head -c $((size / 2 + 777)) "$mst" >"$TMP/trunc/$(basename "$mst")"
    ms trunc import --format=db "$TMP/trunc" -o "$TMP/t.db"
    assert_eq "import of a truncated trace: exit status" 0 "$RC"
    assert_match "import of a truncated trace: says where it is damaged" "$(basename "$mst")" \
        "$(cat "$TMP/trunc.err")"
    if [ -s "$TMP/t.db" ]; then
        assert_ge "truncated trace: events kept up to the damage" 1000 \
            "$(q "$TMP/t.db" "SELECT count(*) FROM events WHERE size IN (3001, 3003)")"
        assert_ne "truncated trace: processes.damage" "" \
            "$(q "$TMP/t.db" "SELECT group_concat(damage) FROM processes")"
    fi
    cp "$mst" "$TMP/noise/"
    dd if=/dev/urandom of="$TMP/noise/$(basename "$mst")" bs=4096 seek=2 count=4 conv=notrunc 2>/dev/null
    ms noise import --format=db "$TMP/noise" -o "$TMP/n.db"
    assert_ne "import of a trace with random pages: no crash" 1 $((RC >= 128))
    assert_match "import of a trace with random pages: a message" "." "$(cat "$TMP/noise.err")"
fi

# memscope export of something that is not a database.
echo "not a database" >"$TMP/not.db"
ms badexport export "$TMP/not.db" --format=csv -o "$TMP/x.csv"
assert_ne "export of a non-database: exit status" 0 "$RC"
assert_eq "export of a non-database: stderr lines" 1 "$(wc -l <"$TMP/badexport.err")"
ms badexport2 export "$TMP/no-such.db" --format=csv
assert_ne "export of a missing file: exit status" 0 "$RC"
assert_match "export of a missing file: message names it" "no-such\.db" "$(cat "$TMP/badexport2.err")"
ms badexport3 export "$TMP/not.db" --format=xml
assert_eq "export --format=xml: exit status" 2 "$RC"
# A damaged database says so, and a file that never was one says what it is (issue 47): each
# command that reads a database, one line, status 1.
# one_line_error NAME REGEX ARGS...: memscope ARGS fails with status 1 and one line matching REGEX.
one_line_error() {
    local name=$1 re=$2
    shift 2
    ms "$name" "$@"
    assert_eq "$name: exit status" 1 "$RC"
    assert_eq "$name: stderr lines" 1 "$(wc -l <"$TMP/$name.err")"
    assert_match "$name: message" "$re" "$(cat "$TMP/$name.err")"
}
ms good run -q -o "$TMP/good.db" -- "$PROGS/live_at_exit"
size=$(stat -c %s "$TMP/good.db")
head -c 30000 "$TMP/good.db" >"$TMP/cut.db"
cut_re="'$TMP/cut\.db' is damaged: truncated to 30000 of its $size bytes"
one_line_error cut-analyze "$cut_re" analyze leaks "$TMP/cut.db"
one_line_error cut-export "$cut_re" export "$TMP/cut.db" --format=csv -o "$TMP/cut.csv"
one_line_error cut-export-db "$cut_re" export "$TMP/cut.db" --format=db -o "$TMP/cutfull.db"
one_line_error cut-report "$cut_re" report "$TMP/cut.db" -o "$TMP/cut.html"
one_line_error cut-plot "$cut_re" plot "$TMP/cut.db" -o "$TMP/cut.svg"
head -c 50 "$TMP/good.db" >"$TMP/cut50.db"
one_line_error cut-header "damaged: truncated to 50 bytes, inside its header" \
    analyze leaks "$TMP/cut50.db"
# the right size, its pages after the first zeroed
cp "$TMP/good.db" "$TMP/zero.db"
page=$(od -An -tu1 -j16 -N2 "$TMP/good.db" | awk '{print $1 * 256 + $2}')
dd if=/dev/zero of="$TMP/zero.db" bs="$page" seek=1 count=$((size / page - 1)) conv=notrunc \
    2>/dev/null
one_line_error zeroed "'$TMP/zero\.db' is damaged \(SQLite: database disk image is malformed\)" \
    analyze leaks "$TMP/zero.db"
sqlite3 "$TMP/other.db" "CREATE TABLE t(x)"
one_line_error other-sqlite "is not a memscope database: it is an SQLite database without memscope's meta table" \
    analyze leaks "$TMP/other.db"
printf 'some notes\n' >"$TMP/notes.txt"
text_re="'$TMP/notes\.txt' is not a memscope database, trace directory or PyTorch memory snapshot: it is a text file$"
one_line_error text-report "$text_re" report "$TMP/notes.txt" -o "$TMP/notes.html"
one_line_error text-view "$text_re" view "$TMP/notes.txt" --port 0
one_line_error text-analyze "'$TMP/notes\.txt' is not a memscope database: it is a text file$" \
    analyze leaks "$TMP/notes.txt"
one_line_error text-export "not a memscope database: it is a text file$" \
    export "$TMP/notes.txt" --format=csv -o "$TMP/notes.csv"
if "$MEMSCOPE" --help | grep -q "memscope snapshot"; then
    one_line_error text-snapshot "'$TMP/notes\.txt' is not a PyTorch memory snapshot: it is a text file$" \
        snapshot "$TMP/notes.txt"
    one_line_error db-snapshot "'$TMP/good\.db' is not a PyTorch memory snapshot: it is an SQLite database \(a memscope database is read by" \
        snapshot "$TMP/good.db"
fi
mkdir -p "$TMP/textpack"
cp "$TMP/notes.txt" "$TMP/textpack/1.0.mst"
one_line_error text-pack "'$TMP/textpack/1\.0\.mst' is not a memscope trace: it is a text file$" \
    pack "$TMP/textpack"
printf '\x80\x04K\x01.' >"$TMP/int.pickle"
one_line_error pickle-report "'$TMP/int\.pickle' is a pickle, but not a PyTorch memory snapshot memscope reads: " \
    report "$TMP/int.pickle" -o "$TMP/int.html"
done_testing
