#!/bin/bash
# test_sampling_cost.sh: what an unsampled allocation costs in sampling mode (issue 41: <= 10 ns;
# docs/production.md, "Sampling"), counted in instructions, which do not depend on the machine's
# load: tests/progs/alloc_loop.c (malloc(16) and free, N times, a block of 64 MiB kept meanwhile)
# under callgrind, plain and with the agent at --sampling=4MiB (the 64 MiB block is sampled, so
# that frees have a set of sampled addresses to be told from; MEMSCOPE_SAMPLING_SEED: none of
# the small blocks is, and were one sampled its stack would add 0.2 instructions a pair), each
# at two N; the difference of the two runs' totals over the difference of N is the cost of
# one malloc + free pair, start and exit cancelled out. The agent's part is its cost minus the
# plain run's.
#
# The bound, 40 instructions for malloc + free together (the interposers, the byte countdown and
# the free's look at the filter of sampled addresses: 35 with gcc 12 -O2, malloc 14 and free 22,
# both without a frame, ending in a jump to the C library's; the tree before took 65, with
# frames, three loads to test the mode and a test that the C library's functions were known; the tree before the filter and the out-of-line
# recording halves took 112, 27 of them the free's lookup in the set), is an instruction count,
# not a time: bench/sampling.sh measures the time (bench/RESULTS.md).
. "$(dirname "$0")/lib.sh"

command -v valgrind >/dev/null || skip "valgrind is not installed (scripts/setup-debian.sh installs it)"
AGENT=$(dirname "$MEMSCOPE")/libmemscope.so
[ -f "$AGENT" ] || skip "no agent beside $MEMSCOPE"
P=$PROGS/alloc_loop
SMALL=2000 BIG=22000

# irefs NAME N [ENV...]: the instructions callgrind counts for alloc_loop N under env ENV.
irefs() {
    local name=$1 n=$2
    shift 2
    env "$@" valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.cg" "$P" "$n" 16 $((64 << 20)) \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$TMP/$name.err"
}

mkdir -p "$TMP/t"
agent_env=(LD_PRELOAD="$AGENT" MEMSCOPE_TRACE_DIR="$TMP/t" MEMSCOPE_DEPTH=32
    MEMSCOPE_SAMPLING=$((4 << 20)) MEMSCOPE_SAMPLING_SEED=7)
p1=$(irefs plain1 $SMALL)
p2=$(irefs plain2 $BIG)
a1=$(irefs agent1 $SMALL "${agent_env[@]}")
a2=$(irefs agent2 $BIG "${agent_env[@]}")
for v in p1 p2 a1 a2; do
    assert_match "callgrind's count ($v)" "^[0-9]+$" "${!v}"
done
assert_eq "the agent ran (alloc_loop's output)" "alloc_loop ok $BIG" "$(cat "$TMP/agent2.out")"
assert_match "the agent wrote a trace" "\.mst$" "$(ls "$TMP/t")"

if [[ "$p1$p2$a1$a2" =~ ^[0-9]+$ ]]; then
    per_pair=$(((a2 - a1 - (p2 - p1)) / (BIG - SMALL)))
    echo "agent: $per_pair instructions per unsampled malloc + free (plain: $(((p2 - p1) / (BIG - SMALL))))"
    if [ "$per_pair" -le 40 ]; then
        pass "unsampled malloc + free: $per_pair instructions <= 40"
    else
        fail "unsampled malloc + free: $per_pair instructions, over 40"
    fi
fi
done_testing
