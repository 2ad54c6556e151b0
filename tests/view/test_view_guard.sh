#!/bin/bash
# test_view_guard.sh: `memscope view` against other local users and odd clients, with real
# sockets: it listens on ::1 as on 127.0.0.1 (a browser given localhost may try ::1 first) and
# refuses to start when another program holds ::1 on its port; 100 connections that trickle a
# header line a second neither keep the page's requests out nor hold their slots past the
# request deadline; exactly one Host header; %00 in a path; the run it serves stays the file
# it opened when another database is renamed over its path; a FIFO given as the run is refused.
. "$(dirname "$0")/view_lib.sh"
command -v curl >/dev/null || skip "curl missing"
"$MEMSCOPE" view 2>&1 | grep -q "built without libmicrohttpd" && skip "memscope built without libmicrohttpd"
known_db
cp "$TMP/known.db" "$TMP/served.db"
view_start "$TMP/served.db"

# both loopbacks, one port; the URL names 127.0.0.1
assert_match "the URL names 127.0.0.1" "^http://127\.0\.0\.1:[0-9]+/\?token=[0-9a-f]{32}$" "$URL"
if "$PY" -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    HAVE6=1
    assert_eq "[::1]:PORT answers too" 200 \
        "$(curl -s -g -o /dev/null -w '%{http_code}' "http://[::1]:$PORT/api/summary?token=$TOKEN")"
    assert_eq "Host [::1]:PORT: 200" 200 \
        "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: [::1]:$PORT" "$BASE/api/summary?token=$TOKEN")"
else
    HAVE6=0
    echo "note: this machine has no ::1: the IPv6 checks are left out"
fi

# raw REQUEST_LINES...: the status line of the answer to those header lines, sent as they are
raw() {
    local r
    exec 3<>"/dev/tcp/127.0.0.1/$PORT"
    printf '%s\r\n' "$@" "Connection: close" "" >&3
    IFS= read -r r <&3
    exec 3<&-
    printf '%s' "${r%$'\r'}"
}
assert_eq "two Host headers: 400" "HTTP/1.1 400 Bad Request" \
    "$(raw "GET /api/summary?token=$TOKEN HTTP/1.1" "Host: 127.0.0.1:$PORT" "Host: attacker.example:80")"
assert_eq "one Host header: 200" "HTTP/1.1 200 OK" \
    "$(raw "GET /api/summary?token=$TOKEN HTTP/1.1" "Host: 127.0.0.1:$PORT")"
for p in "/app.js%00.png" "/%00" "/api/summary%00"; do
    assert_eq "path $p: 400" 400 "$(curl -s --path-as-is -o /dev/null -w '%{http_code}' "$BASE$p?token=$TOKEN")"
done
assert_eq "a token cut by %00: 403" 403 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/summary?token=$TOKEN%00x")"

# slow clients: 100 connections trickling a header line a second for up to 25 s
"$PY" "$VIEW_SRC/slow_clients.py" "$PORT" 100 25 >"$TMP/slow.out" 2>&1 &
SLOW=$!
for _ in $(seq 300); do
    grep -q connected "$TMP/slow.out" && break
    kill -0 $SLOW 2>/dev/null || break
    sleep 0.1
done
assert_eq "100 slow connections open" "connected 100" "$(grep connected "$TMP/slow.out")"
# (-m: a bound against a server that never answers, not a measure)
assert_eq "the page's request while they trickle: 200" 200 \
    "$(curl -s -m 20 -o /dev/null -w '%{http_code}' "$BASE/api/summary?token=$TOKEN")"
assert_eq "the page while they trickle: 200" 200 "$(curl -s -m 20 -o /dev/null -w '%{http_code}' "$URL")"
wait $SLOW
assert_eq "every slow connection shut before its 25 header lines" "closed 100 of 100 by the server" \
    "$(grep closed "$TMP/slow.out")"

# the database renamed over: the findings still come from the file opened
ms other run -q -o "$TMP/other.db" -- "$PROGS/view_pool"
assert_eq "another run: exit status" 0 "$RC"
mv "$TMP/other.db" "$TMP/served.db"
get_text() { curl -s "$BASE/api/analysis?name=$1&token=$TOKEN" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["text"], end="")'; }
assert_eq "after a rename over its path: leaks of the run it opened" \
    "$("$MEMSCOPE" analyze leaks "$TMP/known.db" 2>&1)" "$(get_text leaks)"
assert_eq "after a rename over its path: peak of the run it opened" \
    "$("$MEMSCOPE" analyze peak "$TMP/known.db" 2>&1)" "$(get_text peak)"
view_stop
assert_eq "Ctrl-C: exit status 0" 0 "$VIEW_RC"

# another program on [::1]:PORT: memscope view refuses that port
if [ "$HAVE6" = 1 ]; then
    "$PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.bind(("::1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)' >"$TMP/squat.port" &
    SQUAT=$!
    for _ in $(seq 100); do [ -s "$TMP/squat.port" ] && break; sleep 0.1; done
    SPORT=$(cat "$TMP/squat.port")
    timeout 20 "$MEMSCOPE" view "$TMP/known.db" --port "$SPORT" >"$TMP/squat.out" 2>"$TMP/squat.err"
    assert_eq "[::1]:$SPORT taken: exit status 1" 1 "$?"
    assert_match "[::1]:$SPORT taken: says so" "\[::1\]:$SPORT is taken by another program" "$(cat "$TMP/squat.err")"
    assert_eq "[::1]:$SPORT taken: no URL printed" "" "$(cat "$TMP/squat.out")"
    kill $SQUAT
    wait $SQUAT 2>/dev/null
fi

# a FIFO given as the run: refused at once, never opened (its open would wait for a writer)
mkfifo "$TMP/fifo.db"
for cmd in view report; do
    RC=0
    timeout 20 "$MEMSCOPE" $cmd "$TMP/fifo.db" >"$TMP/fifo.out" 2>"$TMP/fifo.err" || RC=$?
    assert_eq "$cmd of a FIFO: exit status 1" 1 "$RC"
    assert_match "$cmd of a FIFO: says so" "is not a regular file or a directory" "$(cat "$TMP/fifo.err")"
done
done_testing
