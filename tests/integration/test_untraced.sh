#!/bin/bash
# test_untraced.sh: programs the traced program starts that run without the agent (issue 37
# item 16; item 17 for a sanitized child): a wrapper that drops memscope's LD_PRELOAD or
# MEMSCOPE_TRACE_DIR, a static program, a child whose agent cannot create its trace after a
# change of user, a program built with AddressSanitizer (started without the agent, so that it
# runs instead of aborting). Each is a row of table untraced (its pid, path and why) and a line
# of run's summary; programs that are traced, an exec that fails and --no-follow give none.
. "$(dirname "$0")/lib.sh"

# untraced DB: "pid|path|reason" rows
untraced() { q "$1" "SELECT pid, path, reason FROM untraced ORDER BY id"; }
child_pid() { sed -n 's/^exec_child pid //p' "$TMP/$1.out"; }

ms env run --format=db -o "$TMP/env.db" -- env LD_PRELOAD= "$PROGS/exec_child"
assert_eq "LD_PRELOAD dropped: the child's status" 7 "$RC"
pid=$(child_pid env)
assert_eq "LD_PRELOAD dropped: the row" \
    "$pid|$PROGS/exec_child|its environment did not carry memscope's LD_PRELOAD (a wrapper replaced or removed it)" \
    "$(untraced "$TMP/env.db")"
assert_match "LD_PRELOAD dropped: said in the summary" \
    "^memscope: 1 program started by the program ran untraced \(not in the database; table untraced\):
  $PROGS/exec_child \(pid $pid\): its environment did not carry memscope's LD_PRELOAD" \
    "$(grep -A1 'ran untraced' "$TMP/env.err")"
assert_eq "LD_PRELOAD dropped: the row's process is env's image" "1" \
    "$(q "$TMP/env.db" "SELECT count(*) FROM untraced u JOIN processes p ON p.id = u.process_id
                         WHERE p.exe LIKE '%/env'")"

# the default (compact) database has them too
ms dir run -o "$TMP/dir.db" -- env -u MEMSCOPE_TRACE_DIR "$PROGS/exec_child"
assert_eq "MEMSCOPE_TRACE_DIR dropped (compact database): the row" \
    "$(child_pid dir)|$PROGS/exec_child|its environment did not carry MEMSCOPE_TRACE_DIR" \
    "$(untraced "$TMP/dir.db")"

printf '#include <stdio.h>\nint main(void) { puts("static child"); return 4; }\n' >"$TMP/st.c"
if cc -static -o "$TMP/st" "$TMP/st.c" 2>/dev/null; then
    ms static run --format=db -o "$TMP/static.db" -- sh -c "exec '$TMP/st'"
    assert_eq "static child: output and status" "static child
rc=4" "$(cat "$TMP/static.out"; echo "rc=$RC")"
    assert_match "static child: the row" "^[0-9]+\|$TMP/st\|it is statically linked: no dynamic loader" \
        "$(untraced "$TMP/static.db")"
else
    echo "  (static child skipped: no static C library)"
fi

# AddressSanitizer: started without the agent, so it runs (it aborted at start before)
printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { char *p = malloc(8); p[0] = 5; printf("asan child %%d\\n", p[0]); free(p); return 6; }\n' >"$TMP/a.c"
if gcc -fsanitize=address -o "$TMP/asan" "$TMP/a.c" 2>/dev/null; then
    for opts in "" verify_asan_link_order=0; do
        n=asan${opts:+_nolinkorder}
        ASAN_OPTIONS=$opts timeout 60 "$MEMSCOPE" run --format=db -o "$TMP/$n.db" -- sh -c "'$TMP/asan'" \
            >"$TMP/$n.out" 2>"$TMP/$n.err" </dev/null
        RC=$?
        assert_eq "$n child: runs, its status (not an abort, not a spin)" "asan child 5
rc=6" "$(cat "$TMP/$n.out"; echo "rc=$RC")"
        assert_eq "$n child: no ASan complaint" "" "$(grep -a 'does not come first' "$TMP/$n.err")"
        assert_match "$n child: the row" \
            "^[0-9]+\|$TMP/asan\|it is built with AddressSanitizer" "$(untraced "$TMP/$n.db")"
    done
fi

# A change of user: the child's agent cannot create its trace in the run's 0700 directory.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
    chmod 755 "$TMP"
    ms su run --format=db -o "$TMP/su.db" -- \
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$PROGS/exec_child"
    assert_eq "user change: the child's status" 7 "$RC"
    assert_eq "user change: the row" \
        "$(child_pid su)|$PROGS/exec_child|it wrote no trace: its agent did not start or could not create its trace file (after a change of user, or LD_PRELOAD removed by the program itself)" \
        "$(untraced "$TMP/su.db")"
else
    echo "  (change of user skipped: needs root, setpriv and the user nobody)"
fi

# No row: a traced exec, an exec that fails, --no-follow.
ms traced run --format=db -o "$TMP/traced.db" -- "$PROGS/exec_parent" "$PROGS/exec_child"
assert_eq "traced exec: both images" 2 "$(q "$TMP/traced.db" 'SELECT count(*) FROM processes')"
assert_eq "traced exec: no row" 0 "$(q "$TMP/traced.db" 'SELECT count(*) FROM untraced')"
assert_eq "traced exec: nothing said" "" "$(grep 'ran untraced' "$TMP/traced.err")"
ms failed run --format=db -o "$TMP/failed.db" -- "$PROGS/exec_parent" "$TMP/no-such-program"
assert_eq "failed exec: status" 127 "$RC"
assert_eq "failed exec: no row" 0 "$(q "$TMP/failed.db" 'SELECT count(*) FROM untraced')"
# posix_spawn (its record is written once the child runs) and vfork + exec, all traced
ms spawn run --format=db -o "$TMP/spawn.db" -- "$PROGS/odd" spawn
assert_eq "posix_spawn x20: 21 traced processes" 21 "$(q "$TMP/spawn.db" 'SELECT count(*) FROM processes')"
assert_eq "posix_spawn x20: no row" 0 "$(q "$TMP/spawn.db" 'SELECT count(*) FROM untraced')"
ms vfork run --format=db -o "$TMP/vfork.db" -- "$PROGS/odd" vfork
assert_eq "vfork + exec: no row" 0 "$(q "$TMP/vfork.db" 'SELECT count(*) FROM untraced')"
# a shell's two children that each drop the agent (env -i): one row each, with its own pid
ms spawnenv run --format=db -o "$TMP/spawnenv.db" -- sh -c "env -i /bin/true; env -i /bin/true"
assert_eq "env -i twice: two rows" "2|/bin/true" \
    "$(q "$TMP/spawnenv.db" "SELECT count(DISTINCT pid), min(path) FROM untraced")"
ms nofollow run --format=db --no-follow -o "$TMP/nofollow.db" -- env LD_PRELOAD= "$PROGS/exec_child"
assert_eq "--no-follow: no row" 0 "$(q "$TMP/nofollow.db" 'SELECT count(*) FROM untraced')"
done_testing
