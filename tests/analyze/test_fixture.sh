#!/bin/bash
# test_fixture.sh: the analyses on a hand-made database (docs/database.md rows written with
# SQL), for cases a real program cannot produce on demand: a block replaced without a FREE
# event (peak and trend must end it at the replacing MALLOC, as process_stats does), two
# processes (the leak lines name the pid), a process with steps beside one without.
. "$(dirname "$0")/an_lib.sh"

# The schema: a real run's database with its rows taken out (same DDL as the converter's).
DB=$TMP/fx.db
ms run run --format=db -q -o "$DB" -- "$PROGS/an_peak"
require_db "schema donor" "$DB"
sqlite3 "$DB" <<'SQL' || fail "fixture SQL"
DELETE FROM events; DELETE FROM blocks; DELETE FROM process_stats; DELETE FROM steps;
DELETE FROM processes; DELETE FROM threads; DELETE FROM owners;
-- what the conversion computed from the donor's events (docs/database.md): a database made by
-- hand has none, and the analyses then compute from the rows below
DELETE FROM site_stats; DELETE FROM live_samples; DELETE FROM step_live;
DELETE FROM decompose_points; DELETE FROM decompose_live; DELETE FROM owner_peaks;
DELETE FROM host_peaks;
DELETE FROM meta WHERE key IN ('max_live_bytes', 'final_live_bytes', 'all_peak_event_id',
  'all_peak_ns', 'all_peak_bytes', 'retagged');
INSERT INTO processes (id, pid, ppid, image_seq, exe, cmdline, start_ns, end_ns)
  VALUES (1, 100, 1, 0, '/bin/fx_one', 'fx_one', 1000, 5000),
         (2, 200, 100, 0, '/bin/fx_two', 'fx_two', 5500, 5900);
INSERT INTO threads (id, process_id, tid, first_ns, last_ns, events)
  VALUES (1, 1, 100, 1000, 5000, 5), (2, 2, 200, 5500, 5900, 5);
INSERT INTO owners (id, label) VALUES (1, 'net'), (2, 'net@conv');
-- Process 1: block 1 (0x1000) is replaced by block 2 at event 2 without a FREE. Counting
-- block 1 as live would make the peak 470 bytes; it is 370 (blocks 2 and 4 at event 5).
INSERT INTO events (id, ts_ns, kind, layer, process_id, thread_id, addr, size, func, stack_id, allocation_id, name, flags) VALUES
  (1, 1000, 1, 1, 1, 1, 4096, 100, 'malloc', NULL, 1, NULL, NULL),
  (2, 2000, 1, 1, 1, 1, 4096, 50, 'malloc', NULL, 2, NULL, NULL),
  (3, 3000, 1, 1, 1, 1, 8192, 300, 'malloc', NULL, 3, NULL, NULL),
  (4, 4000, 2, 1, 1, 1, 8192, 300, 'free', NULL, 3, NULL, NULL),
  (5, 5000, 1, 1, 1, 1, 12288, 320, 'malloc', NULL, 4, NULL, NULL),
-- Process 2: steps; block 6 (step 2) is still live at the end of step 3.
  (6, 5500, 1, 1, 2, 2, 36864, 1000, 'malloc', NULL, 5, NULL, NULL),
  (7, 5600, 4, 0, 2, 2, NULL, NULL, NULL, NULL, NULL, '1', NULL),
  (8, 5700, 1, 1, 2, 2, 40960, 2000, 'malloc', NULL, 6, NULL, NULL),
  (9, 5800, 4, 0, 2, 2, NULL, NULL, NULL, NULL, NULL, '2', NULL),
  (10, 5900, 4, 0, 2, 2, NULL, NULL, NULL, NULL, NULL, '3', NULL);
INSERT INTO blocks (allocation_id, layer, process_id, thread_id, addr, size, func, alloc_ns, free_ns, alloc_event_id, free_event_id, stack_id, owner_id, step) VALUES
  (1, 1, 1, 1, 4096, 100, 'malloc', 1000, 2000, 1, NULL, NULL, NULL, 1),
  (2, 1, 1, 1, 4096, 50, 'malloc', 2000, NULL, 2, NULL, NULL, NULL, 1),
  (3, 1, 1, 1, 8192, 300, 'malloc', 3000, 4000, 3, 4, NULL, NULL, 1),
  (4, 1, 1, 1, 12288, 320, 'malloc', 5000, NULL, 5, NULL, NULL, NULL, 1),
  (5, 1, 2, 2, 36864, 1000, 'malloc', 5500, NULL, 6, NULL, NULL, 1, 1),
  (6, 1, 2, 2, 40960, 2000, 'malloc', 5700, NULL, 8, NULL, NULL, 2, 2);
INSERT INTO steps (process_id, step, start_ns, end_ns, end_event_id) VALUES
  (2, 1, 5500, 5600, 7), (2, 2, 5600, 5800, 9), (2, 3, 5800, 5900, 10), (2, 4, 5900, 5900, NULL);
INSERT INTO process_stats (process_id, layer, allocs, frees, alloc_bytes, peak_bytes, peak_ns, live_bytes, live_blocks, unmatched_frees) VALUES
  (1, 1, 4, 1, 770, 370, 5000, 370, 2, 0), (1, 2, 0, 0, 0, 0, NULL, 0, 0, 0),
  (2, 1, 2, 0, 3000, 3000, 5700, 3000, 2, 0), (2, 2, 0, 0, 0, 0, NULL, 0, 0, 0);
UPDATE meta SET value = '1000' WHERE key = 'start_time_ns';
SQL

ms peak analyze peak "$DB" --json
assert_eq "peak: status" 0 "$RC"
json_check peak "$TMP/peak.out"
assert_eq "peak per process (replaced block ended at its replacement)" "1 370 2 5 370
2 3000 2 8 3000" \
    "$(jq_py "$TMP/peak.out" '["%s %s %s %s %s" % (p["process_id"], p["peak_bytes"], p["peak_blocks"], p["event_id"], p["process_stats_peak_bytes"]) for p in d["peaks"]]')"
assert_eq "peak of process 2: step and owners" "2 net@conv 2000 net 1000" \
    "$(jq_py "$TMP/peak.out" 'p = d["peaks"][1]; "%s %s %s %s %s" % (p["step"], p["by_owner"][0]["owner"], p["by_owner"][0]["bytes"], p["by_owner"][1]["owner"], p["by_owner"][1]["bytes"])')"

ms leaks analyze leaks "$DB" --rule=msmemscope
assert_eq "leaks: status" 0 "$RC"
assert_eq "leaks: one flagged block, with its pid (two processes)" \
    "Direct heap leak of 0.001907 Mb(s) at 0xa000 at step 2. (pid 200)" \
    "$(grep '^Direct ' "$TMP/leaks.out")"
ms leaksj analyze leaks "$DB" --json
json_check leaks "$TMP/leaksj.out"
assert_eq "leaks: live at exit per process" "1 370 2
2 3000 2" "$(jq_py "$TMP/leaksj.out" '["%s %s %s" % (g["process_id"], g["bytes"], g["blocks"]) for g in d["live_at_exit"]]')"
assert_eq "leaks: growth by owner in process 2" "net@conv [0, 2000, 2000]
net [1000, 1000, 1000]" \
    "$(jq_py "$TMP/leaksj.out" '["%s %s" % (o["owner"], o["live"]) for o in d["growth"][0]["by_owner"]]')"

ms trend analyze trend "$DB" --json --limit 4000
json_check trend "$TMP/trend.out"
assert_eq "trend: final and maximum live bytes" "3370 3370" \
    "$(jq_py "$TMP/trend.out" '"%s %s" % (d["final_live_bytes"], d["max_live_bytes"])')"
assert_eq "trend: step ends of process 2" "1:1000 2:3000 3:3000" \
    "$(jq_py "$TMP/trend.out" '" ".join("%s:%s" % (e["step"], e["live_bytes"]) for e in d["steps"][0]["ends"])')"

ms temp analyze temporary "$DB" --json
json_check temporary "$TMP/temp.out"
assert_eq "temporary: one (block 3: allocated, then freed at once)" "1 6" "$(jq_py "$TMP/temp.out" '"%s %s" % (d["temporary"], d["allocations"])')"

# process_stats placing the peak at the wrong moment: the analysis replays the events and
# still finds event 5 (370 bytes at 5000 ns).
cp "$DB" "$TMP/wrong_ns.db"
sqlite3 "$TMP/wrong_ns.db" 'UPDATE process_stats SET peak_ns = 2000 WHERE process_id = 1 AND layer = 1'
ms wrong_ns analyze peak "$TMP/wrong_ns.db" --json
assert_eq "wrong peak_ns in process_stats: replayed" "370 5 5000 2" \
    "$(jq_py "$TMP/wrong_ns.out" 'p = d["peaks"][0]; "%s %s %s %s" % (p["peak_bytes"], p["event_id"], p["peak_ns"], p["peak_blocks"])')"
# process_stats disagreeing on the value: replayed, and the text says so.
cp "$DB" "$TMP/wrong_bytes.db"
sqlite3 "$TMP/wrong_bytes.db" 'UPDATE process_stats SET peak_bytes = 999 WHERE process_id = 1 AND layer = 1'
ms wrong_bytes analyze peak "$TMP/wrong_bytes.db"
assert_match "wrong peak_bytes: the replayed value" "process 1 fx_one \(pid 100\), heap: peak 370 bytes" \
    "$(cat "$TMP/wrong_bytes.out")"
assert_match "wrong peak_bytes: a note" "note: process_stats says 999 bytes" "$(cat "$TMP/wrong_bytes.out")"
done_testing
