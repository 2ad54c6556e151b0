#!/bin/bash
# test_timed_allocs.sh: every timestamp is CLOCK_MONOTONIC to within a microsecond, with
# the TSC clock (the default where the agent trusts the TSC) and with MEMSCOPE_NO_TSC=1
# (clock_gettime for every event). tests/progs/timed_allocs.c brackets each checked event with
# two clock_gettime reads, across sleeps, a malloc/free hand-off between two threads and
# allocations in a signal handler; this test checks the database against those brackets.
. "$(dirname "$0")/lib.sh"

# Slack of the timestamps against their brackets (ns). The TSC clock is off by tens of ns at
# most (10 ns measured); a rate off by 0.5% already puts a timestamp 5 us off, a stale anchor
# or a torn read far more.
EPS=1000

check_run() {
    local tag=$1 db=$TMP/$1.db csv=$TMP/$1.csv
    shift
    ms "$tag" run --format=db -o "$db" -- "$PROGS/timed_allocs" "$csv"
    assert_eq "$tag: exit status" 0 "$RC"
    read -r word ok handoffs signals <"$TMP/$tag.out"
    assert_eq "$tag: program stdout" "timed_allocs ok 2000" "$word $ok $handoffs"
    require_db "$tag" "$db"
    sanity "$db"
    assert_eq "$tag: lost events" 0 "$(q "$db" 'SELECT coalesce(sum(lost_events), 0) FROM processes')"
    assert_ge "$tag: signals handled" 20 "$signals"

    sqlite3 -batch "$db" "CREATE TABLE bounds (kind TEXT, size INTEGER, nth INTEGER, b INTEGER,
                          a INTEGER)" ".import --csv $csv bounds" "CREATE INDEX bounds_k ON
                          bounds (kind, size, nth)"
    # Each checked event: its kind, block size and rank among events of that kind and size in
    # the database's (time) order, which must be the program's order.
    local ev="ev AS (SELECT k.name AS kind, bl.size AS size, e.ts_ns AS ts, e.thread_id AS tid,
                row_number() OVER (PARTITION BY k.name, bl.size ORDER BY e.id) AS nth
              FROM events e JOIN event_kinds k ON k.id = e.kind JOIN layers l ON l.id = e.layer
              JOIN blocks bl ON bl.allocation_id = e.allocation_id
              WHERE l.event_type = 'HOST' AND k.name IN ('MALLOC', 'FREE')
                AND bl.size IN (SELECT DISTINCT size FROM bounds)),
             m AS (SELECT ev.*, bounds.b, bounds.a FROM ev JOIN bounds USING (kind, size, nth))"
    assert_eq "$tag: bracketed events found in the database" "$(q "$db" 'SELECT count(*) FROM bounds')" \
        "$(q "$db" "WITH $ev SELECT count(*) FROM m")"
    # epoch = mono + one offset per process: each event says offset in [ts - a, ts - b]; all
    # those ranges must meet (up to EPS).
    local spread
    spread=$(q "$db" "WITH $ev SELECT max(ts - a) - min(ts - b) FROM m")
    if [[ "$spread" =~ ^-?[0-9]+$ ]] && [ "$spread" -le "$EPS" ]; then
        pass "$tag: every timestamp within its clock_gettime bracket (spread $spread ns <= $EPS)"
    else
        fail "$tag: timestamps off their brackets by up to [$spread] ns (> $EPS); worst:"
        q "$db" "WITH $ev, o AS (SELECT min(ts - b) AS off FROM m)
                 SELECT kind, size, nth, ts - off - a FROM m, o ORDER BY ts - off - a DESC
                 LIMIT 5" | sed 's/^/  /' >&2
    fi
    # Part 1: the gap across each sleep is at least the sleep (and not much more).
    assert_eq "$tag: gaps across the 3 ms and 30 ms sleeps" "" \
        "$(q "$db" "WITH $ev SELECT s.size, s.ts - f.ts FROM ev s JOIN ev f
                    ON f.kind = 'FREE' AND f.size = s.size - 1
                    WHERE s.kind = 'MALLOC' AND s.size BETWEEN 20002 AND 20039 AND s.size % 2 = 0
                    AND (s.ts - f.ts < CASE WHEN s.size % 10 = 0 THEN 30000000 ELSE 3000000 END
                    OR s.ts - f.ts > CASE WHEN s.size % 10 = 0 THEN 30000000 ELSE 3000000 END
                                     + 50000000)")"
    # Part 2: B mallocs, A frees; no two blocks of the process share an address at any time.
    assert_eq "$tag: hand-off blocks: count|allocating threads|freeing threads|freed" "2000|1|1|2000" \
        "$(q "$db" "SELECT count(*), count(DISTINCT b.thread_id), count(DISTINCT f.thread_id),
                    count(b.free_ns) FROM blocks b LEFT JOIN events f ON f.id = b.free_event_id
                    WHERE b.size = 5000")"
    assert_eq "$tag: hand-off frees on another thread than the mallocs" 0 \
        "$(q "$db" "SELECT count(*) FROM blocks b JOIN events f ON f.id = b.free_event_id
                    WHERE b.size = 5000 AND f.thread_id = b.thread_id")"
    local addrs
    addrs=$(q "$db" "SELECT count(DISTINCT addr) FROM blocks WHERE size = 5000")
    if [[ "$addrs" =~ ^[0-9]+$ ]] && [ "$addrs" -le 1000 ]; then
        pass "$tag: hand-off reuses addresses ($addrs distinct for 2000 blocks)"
    else
        fail "$tag: hand-off: expected the allocator to reuse addresses, got [$addrs] distinct"
    fi
    # Per address, in allocation order, each block starts after the one before it ended.
    assert_eq "$tag: blocks of one address whose lifetimes overlap" 0 \
        "$(q "$db" "SELECT count(*) FROM (SELECT alloc_ns, lag(free_ns) OVER w AS prev_free,
                    lag(allocation_id) OVER w AS prev FROM blocks
                    WINDOW w AS (PARTITION BY process_id, layer, addr
                                 ORDER BY alloc_ns, allocation_id))
                    WHERE prev IS NOT NULL AND (prev_free IS NULL OR alloc_ns < prev_free)")"
    # Part 3: the handler's events, on the main thread.
    assert_eq "$tag: handler MALLOC events (777 bytes; + the warm-up)" $((signals + 1)) \
        "$(count_ev "$db" MALLOC HOST 777)"
    assert_eq "$tag: handler events on the main thread" 0 \
        "$(q "$db" "SELECT count(*) FROM blocks b JOIN threads t ON t.id = b.thread_id
                    JOIN processes p ON p.id = b.process_id WHERE b.size = 777 AND t.tid != p.pid")"
}

check_run tsc
MEMSCOPE_NO_TSC=1 check_run notsc
done_testing
