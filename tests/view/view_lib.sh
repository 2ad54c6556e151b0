# shellcheck shell=bash
# view_lib.sh: helpers for the tests/view scripts (sourced): tests/integration/lib.sh
# (assertions, $TMP, ms, q), the known run's database, and a viewer server started and stopped.
VIEW_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
. "$VIEW_SRC/../integration/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

# known_db: records view_known into $TMP/known.db (the default, compact database).
known_db() {
    ms known run -q -o "$TMP/known.db" -- "$PROGS/view_known"
    assert_eq "view_known: run exit status" 0 "$RC"
    require_db "view_known" "$TMP/known.db"
}

# view_start DB: starts memscope view DB --port 0 in the background; sets VIEW_PID, URL, BASE
# (http://127.0.0.1:PORT), TOKEN and PORT. Fails the test when no URL comes within 60 s.
view_start() {
    # emptied here, not only by the redirection below: that happens in the child, which may
    # not have run yet when the loop first reads the file (the last server's URL)
    : >"$TMP/view.out"
    "$MEMSCOPE" view "$1" --port 0 >"$TMP/view.out" 2>"$TMP/view.err" &
    VIEW_PID=$!
    local i
    for i in $(seq 600); do
        URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$TMP/view.out" 2>/dev/null)
        [ -n "$URL" ] && break
        kill -0 "$VIEW_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$URL" ]; then
        fail "memscope view printed no URL: $(cat "$TMP/view.out" "$TMP/view.err")"
        done_testing
    fi
    BASE=${URL%%/?token=*}
    TOKEN=${URL##*token=}
    PORT=${BASE##*:}
}

# view_stop: Ctrl-C to the server; sets VIEW_RC to its exit status.
view_stop() {
    kill -INT "$VIEW_PID" 2>/dev/null
    wait "$VIEW_PID"
    VIEW_RC=$?
}
