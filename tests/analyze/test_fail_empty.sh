#!/bin/bash
# test_fail_empty.sh: a failing analysis writes nothing (analyze.h's contract: a result computed
# first, rendered after). Each analysis gets a database damaged where it reads, and must exit 1
# with its reason on stderr and nothing on stdout, in text and in JSON; before each analysis
# computed its result first, these damages gave a wrong report with exit status 0 (a query's
# error taken for its last row) or a report cut short.
. "$(dirname "$0")/an_lib.sh"

ms run_steps run -q -o "$TMP/steps.db" -- "$PROGS/b_steps"
require_db "b_steps" "$TMP/steps.db"
ms full export --format=db "$TMP/steps.db" -o "$TMP/full.db"
assert_eq "the full database: exit status" 0 "$RC"

# fails NAME DB REASON ARGS...: `memscope analyze ARGS DB` in text and JSON: exit status 1,
# nothing on stdout, REASON (a regular expression) on stderr.
fails() {
    local name=$1 db=$2 reason=$3 form
    shift 3
    for form in --text --json; do
        "$MEMSCOPE" analyze "$@" "$db" ${form/--text/} >"$TMP/f.out" 2>"$TMP/f.err"
        assert_eq "$name $form: exit status" 1 "$?"
        assert_eq "$name $form: nothing written" 0 "$(wc -c <"$TMP/f.out")"
        assert_match "$name $form: the reason" "$reason" "$(head -1 "$TMP/f.err")"
    done
}

# oom: an OOM_TRIGGER row whose attributes are not JSON (json_extract fails on the row): the
# report said "no OOM recorded".
cp "$TMP/full.db" "$TMP/oom.db"
q "$TMP/oom.db" "INSERT INTO events (id, ts_ns, kind, layer, process_id, thread_id, size, func,
  attr) SELECT MAX(id) + 1, MAX(ts_ns), 9, 1, 1, 1, 4096, 'cuMemAlloc', '{bad' FROM events"
fails "oom on an unreadable OOM row" "$TMP/oom.db" "oom: malformed JSON" oom

# inefficient: the stacks of the flagged blocks unreadable (table stacks gone): the report named
# every flagged block's site "(no stack)".
ms run_ineff run -q -o "$TMP/ineff.db" -- "$PROGS/b_ineff"
require_db "b_ineff" "$TMP/ineff.db"
q "$TMP/ineff.db" "ALTER TABLE stacks RENAME TO stacks_gone"
fails "inefficient without stacks" "$TMP/ineff.db" \
    "inefficient: cannot describe a flagged block: no such table: stacks" inefficient \
    --idle-threshold 5 --lazy-used 100000000 --delayed-free 100000000 --long-idle 100000000

# compare: the call sites unreadable (table stacks gone): every row's site said "(no stack)".
cp "$TMP/steps.db" "$TMP/nostacks.db"
q "$TMP/nostacks.db" "ALTER TABLE stacks RENAME TO stacks_gone"
fails "compare --steps without stacks" "$TMP/nostacks.db" "compare: no such table: stacks" \
    compare --steps 2,3
fails "compare --with without stacks" "$TMP/steps.db" "compare: no such table: stacks" \
    compare --with "$TMP/nostacks.db"

# decompose: the owners' peaks computed by the conversion unreadable (a row that fails: table
# owner_peaks replaced by a view whose value overflows): the report said "(no memory)".
cp "$TMP/steps.db" "$TMP/peaks.db"
q "$TMP/peaks.db" "ALTER TABLE owner_peaks RENAME TO owner_peaks_gone;
  CREATE VIEW owner_peaks AS SELECT owner_id, abs(-9223372036854775807 - 1) AS peak_bytes
  FROM owner_peaks_gone"
fails "decompose on unreadable owner peaks" "$TMP/peaks.db" "decompose: integer overflow" decompose

# Allocation failures (only in the failure-injection build, make check-asan): for about 40
# values of N, failing the Nth allocation of each analysis either changes nothing (exit 0, the
# same report) or fails it with nothing written. A failure inside SQLite, which a query can
# take for its last row, counts too: decompose printed its tree and then failed.
if MEMSCOPE_FAIL_ALLOC=count "$MEMSCOPE" --version 2>&1 | grep -q "failalloc"; then
    sweep() { # name args...: the analysis on steps.db
        local name=$1 total n bad=0 failed=0 tried=0
        shift
        "$MEMSCOPE" analyze "$@" >"$TMP/ref.out" 2>/dev/null
        total=$(MEMSCOPE_FAIL_ALLOC=count "$MEMSCOPE" analyze "$@" 2>&1 >/dev/null |
            sed -n 's/^memscope: failalloc: \([0-9]*\) allocations$/\1/p')
        for ((n = 1; n <= total; n += total / 40 + 1)); do
            MEMSCOPE_FAIL_ALLOC=$n "$MEMSCOPE" analyze "$@" >"$TMP/s.out" 2>"$TMP/s.err"
            local rc=$?
            tried=$((tried + 1))
            if [ "$rc" -eq 0 ]; then
                cmp -s "$TMP/s.out" "$TMP/ref.out" || { bad=$((bad + 1)); echo "  N=$n: exit 0, another report" >&2; }
            else
                failed=$((failed + 1))
                [ -s "$TMP/s.out" ] && { bad=$((bad + 1)); echo "  N=$n: exit $rc after writing" >&2; }
            fi
        done
        assert_eq "$name: $tried values of N of $total allocations ($failed failed): each the same report or nothing" 0 "$bad"
    }
    cp "$TMP/steps.db" "$TMP/s.db"
    sweep "decompose" decompose "$TMP/s.db"
    sweep "compare --steps" compare "$TMP/s.db" --steps 2,3
    sweep "inefficient" inefficient "$TMP/s.db" --idle-threshold 1
    sweep "oom" oom "$TMP/full.db"
else
    echo "SKIP (not the failure-injection build): the allocation failure sweep"
fi

done_testing
