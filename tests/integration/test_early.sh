#!/bin/bash
# test_early.sh: recording starts at the first allocation of the process, whatever runs first
# (issue 14 item 2): a library constructor that allocates before the agent's constructor
# (tests/progs/ctor_main.c + ctor_lib.c), and libstdc++'s emergency pool in a C++ program. The
# agent keeps such events (static memory, then mapped chunks: no cap a program meets) and
# writes them when it starts. Issue 47: more early events than the static room (4,096) are all
# kept, and a frame-pointer walk through a frame whose rbp points at no frame keeps no made-up
# frame (before the agent started, and after it with --unwind=fp).
. "$(dirname "$0")/lib.sh"

ms ctor run --format=db -o "$TMP/c.db" -- "$PROGS/ctor_main"
assert_eq "exit status and output" "0 ctor ok" "$RC $(cat "$TMP/ctor.out")"
assert_eq "the constructor's three blocks: allocated and freed (matched)" "3|3" \
    "$(q "$TMP/c.db" "SELECT count(*), count(free_event_id) FROM blocks WHERE size = 12345")"
assert_eq "their stacks: the helper, then the constructor" "3" \
    "$(q "$TMP/c.db" "SELECT count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
        WHERE b.size = 12345 AND s.c_text LIKE 'ms_ctor_alloc (%ctor_lib.c:%)
ms_ctor_allocate (%ctor_lib.c:%'")"
assert_eq "they come first, before main's block" "1" \
    "$(q "$TMP/c.db" "SELECT max(alloc_ns) FILTER (WHERE size = 12345) < min(alloc_ns) FILTER (WHERE size = 54321) FROM blocks")"
assert_eq "no unmatched free in the program" "0" \
    "$(q "$TMP/c.db" "SELECT sum(unmatched_frees) FROM process_stats WHERE layer = 1")"
assert_eq "10,000 early blocks of 777 B: allocated and freed (matched); nothing lost" "10000|10000|0" \
    "$(q "$TMP/c.db" "SELECT count(*), count(free_event_id),
                             (SELECT coalesce(sum(lost_events), 0) FROM processes)
                      FROM blocks WHERE size = 777")"
assert_eq "a realloc before the agent: the old block freed by it, the new one by main (matched)" \
    "1111:1:malloc|300000:1:realloc" \
    "$(q "$TMP/c.db" "SELECT group_concat(x, '|') FROM (SELECT b.size || ':' || count(b.free_event_id)
                      || ':' || min(e.func) AS x FROM blocks b JOIN events e ON e.id = b.alloc_event_id
                      WHERE b.size IN (1111, 300000) GROUP BY b.size ORDER BY b.size)")"
# ms_ctor_fake_frame: rbp points at two "frames" whose return addresses are 0x8d0a7711716e4b00
# and 0xe; its caller's frame is lost with it (rbp is the walk's only way there)
FAKE="SELECT b.size || ':' || s.depth || ':' || replace(s.c_text, char(10), ' | ')
      FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.size IN (4321, 4322)
      ORDER BY b.size"
for mode in default fp; do
    db=$TMP/c.db
    if [ $mode = fp ]; then
        db=$TMP/f.db
        ms fp run --format=db --unwind=fp -o "$db" -- "$PROGS/ctor_main"
        assert_eq "--unwind=fp: exit status and output" "0 ctor ok" "$RC $(cat "$TMP/fp.out")"
    fi
    assert_match "$mode: a fake frame chain before the agent started, and after: one frame each" \
        "^4321:1:ms_ctor_fake_frame \([^|]*ctor_lib.c:[0-9]+\).4322:1:ms_ctor_fake_frame \([^|]*ctor_lib.c:[0-9]+\)$" \
        "$(q "$db" "$FAKE" | tr '\n' '.' | sed 's/\.$//')"
    assert_eq "$mode: no frame outside a module's code" "0|0" \
        "$(q "$db" "SELECT count(*) FILTER (WHERE module_id IS NULL),
                           (SELECT count(*) FROM stacks WHERE c_text LIKE '%?? (0x%')
                    FROM frames")"
done
# A real program whose libraries allocate before the agent: clang++ (libLLVM's constructors, about
# 4,500 events). Nothing lost, no unmatched free, no frame outside a module, and the heap peak
# that heaptrack measures for the same compile, to the byte (heaptrack's interpreted trace: "a"
# lines define (size, trace) pairs, "+"/"-" allocate and free one block of pair i, in hex).
if command -v clang++ >/dev/null; then
    cat >"$TMP/t.cpp" <<'CXXEOF'
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
template <typename T> struct Box { T t; std::vector<T> more; };
int main()
{
    std::map<std::string, std::vector<Box<std::string>>> m;
    m["a"].push_back({"x", {"y"}});
    std::vector<std::unique_ptr<int>> v;
    for (int i = 0; i < 10; i++)
        v.push_back(std::make_unique<int>(i));
    std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return *a > *b; });
    std::function<int()> f = [&] { return *v[0]; };
    return f() + (int)m.size();
}
CXXEOF
    ms clang run -q --call-stack=c:32 -o "$TMP/clang.db" -- clang++ -O1 -c "$TMP/t.cpp" -o "$TMP/t.o"
    assert_eq "clang++: exit status" 0 "$RC"
    assert_eq "clang++: nothing lost, no unmatched free of the heap, no frame outside a module" \
        "0|0|0" "$(q "$TMP/clang.db" "SELECT (SELECT sum(lost_events) FROM processes),
            (SELECT sum(unmatched_frees) FROM process_stats WHERE layer = 1),
            (SELECT count(*) FROM frames WHERE module_id IS NULL)")"
    if command -v heaptrack >/dev/null && command -v zstd >/dev/null; then
        # the same command in the same directory: clang's allocations depend on its paths
        heaptrack -o "$TMP/ht" clang++ -O1 -c "$TMP/t.cpp" -o "$TMP/t.o" >"$TMP/ht.out" 2>&1
        HT=$(ls "$TMP"/ht*.zst 2>/dev/null | head -1)
        if [ -n "$HT" ]; then
            assert_eq "clang++: the heap peak is heaptrack's" \
                "$(zstd -dc "$HT" | awk '
                    function hex(s, v, i) { v = 0; for (i = 1; i <= length(s); i++)
                        v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
                    $1 == "a" { sz[n++] = hex($2) }
                    $1 == "+" { cur += sz[hex($2)]; if (cur > peak) peak = cur }
                    $1 == "-" { cur -= sz[hex($2)] }
                    END { printf "%d\n", peak }')" \
                "$(q "$TMP/clang.db" "SELECT peak_bytes FROM process_stats WHERE layer = 1")"
        else
            fail "clang++: heaptrack wrote no trace ($(tail -1 "$TMP/ht.out"))"
        fi
    else
        echo "ok: (heaptrack or zstd missing: the comparison of clang++'s peak is skipped)"
    fi
else
    echo "ok: (clang++ not found: the real-program part is skipped)"
fi
if [ -x "$PROGS/cxx_new" ]; then
    ms cxx run --format=db -o "$TMP/x.db" -- "$PROGS/cxx_new"
    assert_eq "C++: libstdc++'s emergency pool is recorded (one block of 64 KiB or more)" 1 \
        "$(q "$TMP/x.db" "SELECT count(*) FROM blocks WHERE size >= 65536 AND size < 90001")"
fi
done_testing
