#!/bin/bash
# test_real_programs.sh: real programs behave the same under memscope (same stdout, same exit
# status, same files written) and give sane databases: python3 -c, sqlite3 running a workload,
# git (which forks and execs helpers) and gcc (which runs cc1, as and collect2/ld).
. "$(dirname "$0")/lib.sh"

# same NAME DIR CMD...: runs CMD in DIR plainly and under memscope (-o $TMP/NAME.db), compares
# stdout and status; leaves the database in DB.
same() {
    local name=$1 dir=$2
    shift 2
    (cd "$dir" && "$@") >"$TMP/$name.plain" 2>/dev/null </dev/null
    local want=$?
    (cd "$dir" && "$MEMSCOPE" run --format=db -q -o "$TMP/$name.db" -- "$@") >"$TMP/$name.out" \
        2>"$TMP/$name.err" </dev/null
    local got=$?
    assert_eq "$name: exit status as without memscope" "$want" "$got"
    assert_eq "$name: stdout as without memscope" "$(cat "$TMP/$name.plain")" "$(cat "$TMP/$name.out")"
    DB=$TMP/$name.db
}

# python3: a workload with many allocations and frees, exit status 5.
PYTHON=/usr/bin/python3
[ -x $PYTHON ] || PYTHON=$(command -v python3)
same python "$TMP" $PYTHON -c '
import json, sys
# Objects over 512 bytes bypass pymalloc: each bytes() below is one malloc and one free.
blobs = [bytes(1000 + i % 50) for i in range(20000)]
d = [{"k": i, "s": "x" * (i % 100)} for i in range(20000)]
s = json.dumps(d)
print(len(s), sum(x["k"] for x in json.loads(s)), sum(map(len, blobs)))
del blobs
sys.exit(5)'
require_db python "$DB"
sanity "$DB"
assert_ge "python: MALLOC events" 20000 "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC'")"
assert_ge "python: FREE events" 20000 "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'FREE'")"
assert_eq "python: meta.exit_status" 5 "$(q "$DB" "SELECT value FROM meta WHERE key = 'exit_status'")"
assert_ge "python: MALLOCs of the 20000 bytes objects (sizes 1033..1082 with the object header)" 20000 \
    "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND e.size BETWEEN 1033 AND 1082")"
# A Python interpreter gets Python stacks by default when the Python package is beside memscope
# (docs/cli.md, --call-stack); builds without it (the sanitizer build) keep native stacks.
if [ -d "$(dirname "$MEMSCOPE")/python/memscope" ]; then
    assert_eq "python: the blobs' Python stack by default (line 4, in the list comprehension)" \
        "20000|<string>(4): <listcomp> / <string>(4): <module>" \
        "$(q "$DB" "SELECT count(*), replace(s.py_text, char(10), ' / ') FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size BETWEEN 1033 AND 1082 AND s.py_text LIKE '<string>(4): <listcomp>%' GROUP BY s.id")"
    assert_eq "python: no native frames by default" 0 \
        "$(q "$DB" "SELECT count(*) FROM stacks WHERE depth > 0")"
else
    assert_eq "python without the Python package: native stacks by default" 0 \
        "$(q "$DB" "SELECT count(*) FROM stacks WHERE py_text IS NOT NULL")"
    assert_ge "python without the Python package: native frames" 1 \
        "$(q "$DB" "SELECT count(*) FROM stacks WHERE depth > 0")"
fi
"$MEMSCOPE" run --format=db -q --call-stack=c:16 -o "$TMP/pyc.db" -- $PYTHON -c 'print(len(bytes(5000)))' \
    >/dev/null 2>&1
assert_match "python --call-stack=c:16: stacks name CPython functions" "Py|_Py" \
    "$(q "$TMP/pyc.db" "SELECT c_text FROM stacks ORDER BY id LIMIT 200")"

# sqlite3: build and query a table in a fresh database file.
SQL="CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000)
INSERT INTO t SELECT x, printf('%08d-%s', x, hex(x * 7919)) FROM c;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(a), max(b) FROM t WHERE b LIKE '%7%';"
rm -f "$TMP/w1.sqlite" "$TMP/w2.sqlite"
sqlite3 "$TMP/w1.sqlite" "$SQL" >"$TMP/sqlite.plain"
"$MEMSCOPE" run --format=db -q -o "$TMP/sqlite.db" -- sqlite3 "$TMP/w2.sqlite" "$SQL" >"$TMP/sqlite.out" 2>"$TMP/sqlite.err"
assert_eq "sqlite3: exit status" 0 "$?"
assert_eq "sqlite3: stdout as without memscope" "$(cat "$TMP/sqlite.plain")" "$(cat "$TMP/sqlite.out")"
assert_eq "sqlite3: the database it wrote has the same content" \
    "$(sqlite3 "$TMP/w1.sqlite" 'SELECT count(*), sum(length(b)), sum(a) FROM t')" \
    "$(sqlite3 "$TMP/w2.sqlite" 'SELECT count(*), sum(length(b)), sum(a) FROM t')"
DB=$TMP/sqlite.db
require_db sqlite3 "$DB"
sanity "$DB"
assert_ge "sqlite3: MALLOC events" 1000 "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC'")"

# git: init, commit, log in a scratch repository (git runs helpers: fork + exec).
if command -v git >/dev/null; then
    mkdir -p "$TMP/repo"
    (cd "$TMP/repo" && git init -q && printf 'hello\n' >f && git add f &&
        GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z' \
        git -c user.name=t -c user.email=t@e -c commit.gpgsign=false commit -qm first) ||
        fail "git: could not set up the scratch repository"
    same git "$TMP/repo" git log --format='%H %s' --stat
    require_db git "$DB"
    sanity "$DB"
    assert_ge "git: MALLOC events" 100 "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC'")"
    same gitstatus "$TMP/repo" git status --porcelain=v1 --untracked-files=all
    require_db "git status" "$DB"
fi

# gcc: compile and link a small program; the driver execs cc1, as and collect2/ld.
if command -v gcc >/dev/null; then
    printf '#include <stdio.h>\nint main(void) { puts("built"); return 3; }\n' >"$TMP/hello.c"
    mkdir -p "$TMP/plain" "$TMP/traced"
    gcc -O1 -o "$TMP/plain/hello" "$TMP/hello.c"
    "$MEMSCOPE" run --format=db -q -o "$TMP/gcc.db" -- gcc -O1 -o "$TMP/traced/hello" "$TMP/hello.c" \
        >"$TMP/gcc.out" 2>"$TMP/gcc.err"
    assert_eq "gcc: exit status" 0 "$?"
    assert_eq "gcc: the program it built runs" "built|3" "$("$TMP/traced/hello" | tr -d "\n"; echo "|${PIPESTATUS[0]}")"
    assert_eq "gcc: same object code as without memscope" \
        "$(objdump -d --no-show-raw-insn "$TMP/plain/hello" 2>&1 | tail -n +3 | md5sum)" \
        "$(objdump -d --no-show-raw-insn "$TMP/traced/hello" 2>&1 | tail -n +3 | md5sum)"
    DB=$TMP/gcc.db
    require_db gcc "$DB"
    sanity "$DB"
    assert_match "gcc: the exec'd compiler passes are traced" "cc1" \
        "$(q "$DB" 'SELECT exe FROM processes')"
    assert_ge "gcc: processes traced (gcc, cc1, as, collect2, ld)" 4 \
        "$(q "$DB" 'SELECT count(*) FROM processes')"
    assert_ge "gcc: cc1 allocates" 1000 \
        "$(q "$DB" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND p.exe LIKE '%cc1'")"
fi
done_testing
