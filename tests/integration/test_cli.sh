#!/bin/bash
# test_cli.sh: memscope run's command line: both forms (subcommand and msMemScope's), output
# path logic, options recorded in meta, program output and status passed through, --help and
# --version.
. "$(dirname "$0")/lib.sh"

ms version -V
assert_eq "-V: exit status" 0 "$RC"
assert_match "-V: prints the version" "^memscope version [0-9]+\.[0-9]+" "$(cat "$TMP/version.out")"
ms version2 --version
assert_eq "--version = -V" "$(cat "$TMP/version.out")" "$(cat "$TMP/version2.out")"
ms help --help
assert_eq "--help: exit status" 0 "$RC"
assert_match "--help: shows usage" "memscope run" "$(cat "$TMP/help.out")"
ms runhelp run --format=db --help
assert_eq "run --help: exit status" 0 "$RC"
for opt in --call-stack --format --output-path --events --collect-mode --no-follow --log-level; do
    assert_match "run --help mentions $opt" "$opt" "$(cat "$TMP/runhelp.out" "$TMP/runhelp.err")"
done

# Subcommand form, -o FILE.db; program stdout and stderr untouched, stdin passed.
printf 'some input\n' >"$TMP/in.txt"
"$MEMSCOPE" run --format=db -o "$TMP/a.db" -- /bin/sh -c 'cat; echo to-stderr >&2; exit 42' \
    <"$TMP/in.txt" >"$TMP/sh.out" 2>"$TMP/sh.err"
assert_eq "exit status passed through" 42 "$?"
assert_eq "stdin reaches the program, stdout untouched" "some input" "$(cat "$TMP/sh.out")"
assert_match "program stderr kept" "^to-stderr$" "$(cat "$TMP/sh.err")"
require_db "sh" "$TMP/a.db"
assert_eq "meta.exit_status" 42 "$(q "$TMP/a.db" "SELECT value FROM meta WHERE key = 'exit_status'")"
assert_eq "meta.command_line (JSON argv)" '["/bin/sh","-c","cat; echo to-stderr >&2; exit 42"]' \
    "$(q "$TMP/a.db" "SELECT json(value) FROM meta WHERE key = 'command_line'")"
assert_eq "meta.events" "alloc,free" "$(q "$TMP/a.db" "SELECT value FROM meta WHERE key = 'events'")"
assert_eq "meta.memscope_version = --version" "$(sed 's/^memscope version //' "$TMP/version.out")" \
    "$(q "$TMP/a.db" "SELECT value FROM meta WHERE key = 'memscope_version'")"
assert_eq "meta.cwd" "$PWD" "$(q "$TMP/a.db" "SELECT value FROM meta WHERE key = 'cwd'")"
# /bin/sh forks cat: two processes, both traced.
assert_ge "processes traced (sh and cat)" 2 "$(q "$TMP/a.db" "SELECT count(*) FROM processes")"

# msMemScope form: options, then the program (no "run", no "--").
ms msform --call-stack=c:7 -o "$TMP/b.db" "$PROGS/live_at_exit"
assert_eq "msMemScope form: exit status" 0 "$RC"
assert_eq "msMemScope form: program stdout" "live_at_exit ok" "$(cat "$TMP/msform.out")"
require_db "msMemScope form" "$TMP/b.db"
assert_eq "msMemScope form: meta.call_stack_c" 7 \
    "$(q "$TMP/b.db" "SELECT value FROM meta WHERE key = 'call_stack_c'")"
assert_eq "msMemScope form: leaked blocks" 8 \
    "$(q "$TMP/b.db" "SELECT count(*) FROM blocks WHERE size IN (20011, 20021) AND free_ns IS NULL")"
# Program arguments that look like options belong to the program.
ms progopts -o "$TMP/c.db" "$PROGS/threads" 2 10
assert_eq "program args after the program are not memscope's" "threads ok 2 10" "$(cat "$TMP/progopts.out")"

# -o DIR: created if needed, receives msMemScope's layout: a folder of the run holding
# memscope_dump_<YYYYmmddHHMMSS>.db (the name Insight imports; compact: memscope_<stamp>.db).
ms dir run --format=db -o "$TMP/new/sub" -- "$PROGS/live_at_exit"
assert_eq "-o DIR: exit status" 0 "$RC"
files=$(cd "$TMP/new/sub" 2>/dev/null && find . -type f | sort)
assert_match "-o DIR: one file memscope_<pid>_<stamp>/memscope_dump_<stamp>.db" \
    "^\./memscope_[0-9]+_(20[0-9]{12})/memscope_dump_\1\.db$" "$files"
files=$(cd "$TMP/new/sub" 2>/dev/null && find . -type f)
if [ -f "$TMP/new/sub/$files" ]; then
    assert_eq "-o DIR: the database has the run" 8 \
        "$(q "$TMP/new/sub/$files" "SELECT count(*) FROM blocks WHERE size IN (20011, 20021) AND free_ns IS NULL")"
fi

# -q: nothing from memscope on stderr; the program's stderr still there.
ms quiet run --format=db -q -o "$TMP/q.db" -- /bin/sh -c 'echo only-this >&2'
assert_eq "-q: exit status" 0 "$RC"
assert_eq "-q: stderr holds only the program's" "only-this" "$(cat "$TMP/quiet.err")"
for lvl in debug info warning error; do
    ms "log$lvl" run --format=db --log-level=$lvl -o "$TMP/log$lvl.db" -- "$PROGS/live_at_exit"
    assert_eq "--log-level=$lvl: exit status" 0 "$RC"
done
ms verbose run --format=db -v -o "$TMP/v.db" -- "$PROGS/live_at_exit"
assert_eq "-v: exit status" 0 "$RC"

# Options given explicitly with their default values change nothing.
ms explicit run --format=db --events=alloc,free --collect-mode=immediate --format=db --call-stack=c:32 \
    --output-path="$TMP/x.db" -- "$PROGS/live_at_exit"
assert_eq "explicit defaults: exit status" 0 "$RC"
require_db "explicit defaults" "$TMP/x.db"
assert_eq "explicit defaults: leaked blocks" 8 \
    "$(q "$TMP/x.db" "SELECT count(*) FROM blocks WHERE size IN (20011, 20021) AND free_ns IS NULL")"

# Deferred collection: nothing is recorded until the program calls memscope_start().
ms deferred run --format=db --collect-mode=deferred -o "$TMP/d.db" -- "$PROGS/live_at_exit"
assert_eq "--collect-mode=deferred: exit status" 0 "$RC"
require_db "deferred" "$TMP/d.db"
assert_eq "--collect-mode=deferred: no event before memscope_start()" 0 \
    "$(q "$TMP/d.db" "SELECT count(*) FROM events WHERE size IN (20011, 20021)")"
# Output that cannot be written fails the command, even --help and --version (issue 24 item 12).
if [ -c /dev/full ]; then
    "$MEMSCOPE" --help >/dev/full 2>/dev/null
    assert_eq "--help into /dev/full: status 1" 1 "$?"
    "$MEMSCOPE" --version >/dev/full 2>/dev/null
    assert_eq "--version into /dev/full: status 1" 1 "$?"
fi
# `memscope analyze list`: the analyses of this build, as docs/cli.md says.
assert_match "analyze list names every analysis" "^leaks .*oom " \
    "$("$MEMSCOPE" analyze list | awk '{printf "%s ", $1}')"
# -o dir/ (issue 14 item 8): the message names dir/file, not dir//file.
out=$("$MEMSCOPE" run --format=db -o "$TMP/slash/" -- "$PROGS/alloc_funcs" 2>&1 >/dev/null)
assert_match "-o dir/: one slash in the database's path" \
    "written to $TMP/slash/memscope_[0-9]+_[0-9]+/memscope_dump_[0-9]+\.db" "$out"
# The summary's call sites (issue 14 item 8): one line for a site live in several processes.
out=$("$MEMSCOPE" run --format=db -o "$TMP/two.db" -- /bin/sh -c "'$PROGS/live_at_exit'; '$PROGS/live_at_exit'" 2>&1 >/dev/null)
assert_eq "summary: the leak site of two processes is one line, naming them" "1" \
    "$(printf '%s\n' "$out" | grep -c 'ms_progs_leak_site (.*live_at_exit.c:[0-9]*)  (2 processes)')"
# The default (compact) output's closing lines point to the full database's name pattern.
"$MEMSCOPE" run -o "$TMP/hint.db" -- "$PROGS/alloc_funcs" >/dev/null 2>"$TMP/hint.err"
assert_match "compact output: the hint names memscope_dump_<stamp>.db and the export command" \
    "memscope_dump_<stamp>\.db beside it\): memscope export .*/hint\.db --format=db" \
    "$(cat "$TMP/hint.err")"
# Exit status rows of docs/cli.md not checked elsewhere: a program that cannot be started is
# 127; a conversion that fails after a program that exited 0 is 1.
"$MEMSCOPE" run -o "$TMP/none.db" -- "$TMP/no-such-program" >/dev/null 2>"$TMP/none.err"
assert_eq "a program that cannot be started: status 127" 127 "$?"
assert_match "... says why" "cannot run '.*no-such-program': No such file" "$(cat "$TMP/none.err")"
# A failed start (issue 47): a clear error, status 127, and nothing left of what memscope made
# for it (the default memscopeDumpResults/, its run folder, -o's new directories, the lock);
# an output directory that was there before stays.
mkdir -p "$TMP/fs" "$TMP/fs-kept"
printf 'not a program\n' >"$TMP/fs-text"
chmod 644 "$TMP/fs-text"
for prog in "$TMP/no-such-program" "$TMP/fs-text" "$TMP" memscope-no-such-command-anywhere; do
    for out in "" "-o $TMP/fs/new/sub" "-o $TMP/fs/new2/x.db" "--format=trace -o $TMP/fs/new3" \
        "-o $TMP/fs-kept"; do
        (cd "$TMP/fs" && "$MEMSCOPE" run $out -- "$prog" >/dev/null 2>"$TMP/fs.err")
        assert_eq "failed start of $prog ${out:-(default output)}: status 127" 127 "$?"
        assert_eq "... one line on stderr" 1 "$(wc -l <"$TMP/fs.err")"
        assert_eq "... nothing left in the working directory" "" "$(ls -A "$TMP/fs")"
        assert_eq "... the existing output directory stays, empty" "" "$(ls -A "$TMP/fs-kept")"
    done
done
# ... and never a directory that was there, even when reached through one it made
mkdir -p "$TMP/fs2/kept"
"$MEMSCOPE" run -o "$TMP/fs2/made/../kept" -- "$TMP/no-such-program" 2>/dev/null
assert_eq "-o made/../kept: the existing directory stays" yes "$([ -d "$TMP/fs2/kept" ] && echo yes)"
assert_match "a file without execute permission: says so" "fs-text': it is not executable" \
    "$("$MEMSCOPE" run -o "$TMP/fs/x.db" -- "$TMP/fs-text" 2>&1)"
assert_match "a directory: says so" "cannot run '$TMP': it is a directory" \
    "$("$MEMSCOPE" run -o "$TMP/fs/x.db" -- "$TMP" 2>&1)"
assert_match "not on PATH: says so" "no such program on PATH" \
    "$("$MEMSCOPE" run -o "$TMP/fs/x.db" -- memscope-no-such-command-anywhere 2>&1)"
# A program started through a symbolic link (redis-server -> redis-check-rdb) is named by the
# link, as it was started (issue 47): processes.exe, the analyses; its stacks still symbolized.
mkdir -p "$TMP/lnk"
ln -s "$PROGS/live_at_exit" "$TMP/lnk/linked_name"
(cd "$TMP/lnk" && "$MEMSCOPE" run -q -o "$TMP/lnk1.db" -- ./linked_name >/dev/null)
PATH="$TMP/lnk:$PATH" "$MEMSCOPE" -q -o "$TMP/lnk2.db" linked_name >/dev/null
for db in lnk1 lnk2; do
    assert_eq "started as a link ($db): processes.exe is the link" "$TMP/lnk/linked_name" \
        "$(q "$TMP/$db.db" "SELECT exe FROM processes")"
    "$MEMSCOPE" analyze leaks "$TMP/$db.db" >"$TMP/$db.leaks"
    assert_match "... the analyses name it" "^  process 1 linked_name \(pid [0-9]+\), heap" \
        "$(cat "$TMP/$db.leaks")"
    assert_match "... its stacks are symbolized" \
        "^ +160118 +8  ms_progs_leak_site \(.*live_at_exit\.c:[0-9]+\)" "$(cat "$TMP/$db.leaks")"
done
MEMSCOPE_FAULT_CONVERT=1 "$MEMSCOPE" run -o "$TMP/fault.db" -- "$PROGS/alloc_funcs" \
    >/dev/null 2>"$TMP/fault.err"
assert_eq "a failed conversion after a program that exited 0: status 1" 1 "$?"
rm -rf "$TMP"/.memscope-trace-* 2>/dev/null
done_testing
