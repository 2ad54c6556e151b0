# shellcheck shell=bash
# lib.sh: shared helpers for the integration tests (sourced, not run).
#
# Each test_<feature>.sh sources this file, runs programs under memscope and asserts exact
# numbers from the database with the sqlite3 CLI. The environment gives MEMSCOPE (the memscope
# binary) and PROGS (the directory of the tests/progs programs). A test keeps going after a
# failed check so one run reports all of them, and exits 1 if any failed (0 only when at least
# one check ran), or 77 (ctest SKIP) through skip().
set -u
: "${MEMSCOPE:?set MEMSCOPE to the memscope binary}"
: "${PROGS:?set PROGS to the directory of the tests/progs programs}"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/memscope-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
FAILS=0
CHECKS=0

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); CHECKS=$((CHECKS + 1)); }
pass() { echo "ok: $*"; CHECKS=$((CHECKS + 1)); }

# assert_eq WHAT EXPECTED ACTUAL: multi-line values are shown as a diff.
assert_eq() {
    if [ "$2" == "$3" ]; then
        pass "$1 = [${2//$'\n'/ | }]"
    elif [[ "$2" == *$'\n'* || "$3" == *$'\n'* ]]; then
        fail "$1: expected (-) vs got (+):"
        diff -u <(printf '%s\n' "$2") <(printf '%s\n' "$3") | tail -n +3 >&2
    else
        fail "$1: expected [$2], got [$3]"
    fi
}

# assert_ne WHAT UNEXPECTED ACTUAL
assert_ne() {
    if [ "$2" != "$3" ]; then pass "$1 is not [$2] (it is [$3])"; else fail "$1: got [$3]"; fi
}

# assert_match WHAT EXTENDED_REGEX ACTUAL
assert_match() {
    if printf '%s' "$3" | grep -Eq -- "$2"; then
        pass "$1 matches /$2/"
    else
        fail "$1: expected to match /$2/, got [$3]"
    fi
}

# assert_ge WHAT MIN ACTUAL (integers)
assert_ge() {
    if [[ "$3" =~ ^-?[0-9]+$ ]] && [ "$3" -ge "$2" ]; then
        pass "$1 = $3 >= $2"
    else
        fail "$1: expected >= $2, got [$3]"
    fi
}

# assert_file WHAT PATH
assert_file() {
    if [ -f "$2" ]; then pass "$1 exists"; else fail "$1: no file $2"; fi
}

# skip REASON: the whole test is skipped (ctest SKIP_RETURN_CODE 77).
skip() { echo "SKIP: $*"; exit 77; }

# done_testing: the last line of every test.
done_testing() {
    if [ "$CHECKS" -eq 0 ]; then
        echo "FAIL: no check ran" >&2
        exit 1
    fi
    echo "$((CHECKS - FAILS))/$CHECKS checks passed"
    [ "$FAILS" -eq 0 ] || exit 1
    exit 0
}

# ms NAME ARGS...: runs memscope ARGS with stdout in $TMP/NAME.out and stderr in $TMP/NAME.err;
# RC receives the exit status. Never fails the test by itself.
ms() {
    local name=$1
    shift
    "$MEMSCOPE" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
    RC=$?
    echo "  ran: memscope $* (status $RC)"
    if [ "$RC" -ge 124 ] && [ "$RC" -ne 134 ] && [ "$RC" -ne 139 ] && [ "$RC" -ne 137 ]; then
        sed 's/^/  stderr: /' "$TMP/$name.err" | head -20 >&2
    fi
}

# q DB SQL: one sqlite3 query, rows on lines, columns joined by '|'.
q() { sqlite3 -batch -noheader -separator '|' "$1" "$2" 2>&1; }

# require_db WHAT DB: fails and ends the test when DB does not exist or is not a database with
# an events table; everything after would only repeat the failure.
require_db() {
    if [ ! -s "$2" ] || ! q "$2" 'SELECT count(*) FROM events' >/dev/null 2>&1 ||
        [[ "$(q "$2" 'SELECT count(*) FROM events')" == *rror* ]]; then
        fail "$1: no usable database at $2"
        for f in "$TMP"/*.err; do
            [ -f "$f" ] && sed "s|^|  $(basename "$f"): |" "$f" | head -20 >&2
        done
        done_testing
    fi
    pass "$1: database $2 opens"
}

# Query fragments. EV joins events with their kind (k.name MALLOC/FREE), layer (l.event_type
# HOST/MMAP) and process (p.pid).
EV="events e JOIN event_kinds k ON k.id = e.kind JOIN layers l ON l.id = e.layer
    JOIN processes p ON p.id = e.process_id"

# count_ev DB KIND EVENT_TYPE SIZE: events of that kind and layer with that size.
count_ev() {
    q "$1" "SELECT count(*) FROM $EV WHERE k.name = '$2' AND l.event_type = '$3' AND e.size = $4"
}

# count_freed DB EVENT_TYPE SIZE: FREE events that end a block of that size.
count_freed() {
    q "$1" "SELECT count(*) FROM $EV JOIN blocks b ON b.allocation_id = e.allocation_id
            WHERE k.name = 'FREE' AND l.event_type = '$2' AND b.size = $3"
}

# sanity DB: structural checks every database must pass, whatever ran.
sanity() {
    local db=$1
    assert_eq "sanity: integrity_check" "ok" "$(q "$db" 'PRAGMA integrity_check')"
    assert_eq "sanity: meta.format_version" "2" \
        "$(q "$db" "SELECT value FROM meta WHERE key = 'format_version'")"
    assert_ge "sanity: events" 1 "$(q "$db" 'SELECT count(*) FROM events')"
    # (reserved address space, layer 6, stays out of it: docs/database.md)
    assert_eq "sanity: memscope_dump rows = events rows" \
        "$(q "$db" 'SELECT count(*) FROM events WHERE layer != 6')" \
        "$(q "$db" 'SELECT count(*) FROM memscope_dump')"
    assert_eq "sanity: MALLOC events without addr or size" 0 \
        "$(q "$db" "SELECT count(*) FROM $EV WHERE k.name = 'MALLOC' AND (e.addr IS NULL OR e.size IS NULL)")"
    assert_eq "sanity: events of unknown process or thread" 0 \
        "$(q "$db" 'SELECT count(*) FROM events e WHERE e.process_id NOT IN (SELECT id FROM processes)
                    OR e.thread_id NOT IN (SELECT id FROM threads)')"
    assert_eq "sanity: events whose stack is missing" 0 \
        "$(q "$db" 'SELECT count(*) FROM events WHERE stack_id IS NOT NULL AND stack_id NOT IN (SELECT id FROM stacks)')"
    assert_eq "sanity: events out of time order (id vs ts_ns)" 0 \
        "$(q "$db" 'SELECT count(*) FROM events a JOIN events b ON b.id = a.id + 1 WHERE b.ts_ns < a.ts_ns')"
    assert_eq "sanity: blocks freed before allocated" 0 \
        "$(q "$db" 'SELECT count(*) FROM blocks WHERE free_ns < alloc_ns OR free_event_id < alloc_event_id')"
    assert_eq "sanity: FREE events naming no block" 0 \
        "$(q "$db" "SELECT count(*) FROM $EV WHERE k.name = 'FREE' AND e.allocation_id IS NOT NULL
                    AND e.allocation_id NOT IN (SELECT allocation_id FROM blocks)")"
    assert_eq "sanity: blocks whose alloc event differs in addr/size/process" 0 \
        "$(q "$db" 'SELECT count(*) FROM blocks b JOIN events e ON e.id = b.alloc_event_id
                    WHERE e.addr != b.addr OR e.size != b.size OR e.process_id != b.process_id
                    OR e.allocation_id != b.allocation_id')"
    assert_eq "sanity: process_stats.allocs = MALLOC events per process and layer" "" \
        "$(q "$db" "SELECT s.process_id, s.layer, s.allocs, (SELECT count(*) FROM events e
                    JOIN event_kinds k ON k.id = e.kind WHERE k.name = 'MALLOC'
                    AND e.process_id = s.process_id AND e.layer = s.layer) AS n
                    FROM process_stats s WHERE s.allocs != n")"
    assert_eq "sanity: timestamps are epoch ns within the run (meta start/end)" 0 \
        "$(q "$db" "SELECT count(*) FROM events WHERE ts_ns < 1600000000000000000
                    OR ts_ns < (SELECT value - 1000000000 FROM meta WHERE key = 'start_time_ns')
                    OR ts_ns > (SELECT value + 1000000000 FROM meta WHERE key = 'end_time_ns')")"
}

# grep_line FILE PATTERN: the line number of the only line of FILE containing PATTERN.
grep_line() {
    local n
    n=$(grep -nF -- "$2" "$1" | cut -d: -f1)
    if [ -z "$n" ] || [[ "$n" == *$'\n'* ]]; then
        echo "grep_line: [$2] is not on exactly one line of $1" >&2
        echo 0
    else
        echo "$n"
    fi
}
