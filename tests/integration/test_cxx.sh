#!/bin/bash
# test_cxx.sh: C++ new/delete are seen as the malloc/free they call (tests/progs/cxx_new.cpp);
# libstdc++'s emergency pool is not reported live at exit (issue 47).
. "$(dirname "$0")/lib.sh"
[ -x "$PROGS/cxx_new" ] || skip "no C++ compiler: cxx_new not built"

DB=$TMP/c.db
ms run run --format=db -o "$DB" -- "$PROGS/cxx_new"
assert_eq "exit status" 0 "$RC"
assert_eq "program stdout untouched" "cxx_new ok" "$(cat "$TMP/run.out")"
require_db "cxx_new" "$DB"
sanity "$DB"
assert_eq "MALLOC events (func|size|count)" "malloc|90001|4
malloc|90017|2" "$(q "$DB" "SELECT e.func, e.size, count(*) FROM $EV WHERE k.name = 'MALLOC'
                           AND e.size IN (90001, 90017) GROUP BY e.size ORDER BY e.size")"
assert_eq "FREE events (delete[] and delete)" "4|2" \
    "$(count_freed "$DB" HOST 90001)|$(count_freed "$DB" HOST 90017)"
assert_match "stack of new[] names the allocating function" "ms_progs_cxx_new_array" \
    "$(q "$DB" "SELECT \"Call Stack(C)\" FROM memscope_dump WHERE Event = 'MALLOC'
                AND json_extract(Attr, '$.size') = '90001' LIMIT 1")"
# C++ names are demangled in stacks (issue 14 item 4); the linkage name stays in the database.
assert_match "stack: operator new demangled, the helper with its parameters" \
    "operator new\(unsigned long\) \(libstdc\+\+[^)]*\).ms_progs_cxx_new_array\(unsigned long\) \(" \
    "$(q "$DB" "SELECT replace(\"Call Stack(C)\", char(10), '|') FROM memscope_dump WHERE Event = 'MALLOC'
                AND json_extract(Attr, '$.size') = '90001' LIMIT 1")"
assert_eq "frames keep the linkage name beside the readable one" "_Znwm|_Z22ms_progs_cxx_new_arraym" \
    "$(q "$DB" "SELECT group_concat(l.text, '|') FROM (SELECT DISTINCT f.linkage_id FROM frames f
        JOIN strings s ON s.id = f.function_id WHERE s.text IN ('operator new(unsigned long)',
        'ms_progs_cxx_new_array(unsigned long)') ORDER BY f.linkage_id) x JOIN strings l ON l.id = x.linkage_id")"
# libstdc++'s emergency exception pool (72,704 B, allocated by its constructor) is handed back
# at exit (__gnu_cxx::__freeres, as valgrind and heaptrack do): live at exit is what the program
# leaked, new char[33333], and the C library's stdout buffer (puts; never freed by glibc).
assert_eq "the emergency pool: recorded, freed at exit" "1|1" \
    "$(q "$DB" "SELECT count(*), count(free_ns) FROM blocks WHERE size >= 65536 AND size < 90001")"
assert_eq "live at exit, besides stdout's buffer: the leaked block" "33333|1" \
    "$(q "$DB" "SELECT sum(b.size), count(*) FROM blocks b JOIN stacks s ON s.id = b.stack_id
                WHERE b.free_ns IS NULL AND b.layer = 1 AND s.c_text NOT LIKE '_IO_file_doallocate %'")"

# Inlined frames (issue 14 item 3): cxx_inline, built -O2 -g, where std::vector::push_back puts
# allocator code several levels deep into main. For every return address of the program in its
# stacks, the chain memscope stored (frames rows, inline_depth 1, 2, ... then 0) is the one
# binutils' addr2line -i -f -C prints for the same address: functions, files and lines.
if [ -x "$PROGS/cxx_inline" ] && command -v addr2line >/dev/null; then
    ms inl run --format=db -o "$TMP/i.db" -- "$PROGS/cxx_inline"
    assert_eq "cxx_inline: output" "cxx_inline ok 100" "$(cat "$TMP/inl.out")"
    assert_eq "every inline chain of cxx_inline's addresses is addr2line -i's" "ok" \
        "$(/usr/bin/python3 - "$TMP/i.db" "$PROGS/cxx_inline" <<'PYEOF'
import os, sqlite3, subprocess, sys
db, exe = sys.argv[1], sys.argv[2]
c = sqlite3.connect(db)
rows = c.execute("""SELECT f.pc - 1 - m.bias, f.inline_depth, fn.text, fl.text, f.line
    FROM frames f JOIN modules m ON m.id = f.module_id LEFT JOIN strings fn ON fn.id = f.function_id
    LEFT JOIN strings fl ON fl.id = f.file_id WHERE m.path LIKE '%/cxx_inline'""").fetchall()
chains = {}
for off, depth, fn, fl, line in rows:
    chains.setdefault(off, {})[depth] = (fn, os.path.basename(fl or '??'), line or 0)
bad, inlined = [], 0
for off, levels in sorted(chains.items()):
    mine = [levels[d] for d in sorted(d for d in levels if d > 0)] + [levels[0]]
    out = subprocess.run(['addr2line', '-i', '-f', '-C', '-e', exe, hex(off)],
                         capture_output=True, text=True).stdout.split('\n')[:-1]
    theirs = []
    for fn, loc in zip(out[0::2], out[1::2]):
        path, _, line = loc.rpartition(':')
        line = line.split(' ')[0]
        theirs.append((fn, os.path.basename(path), int(line) if line.isdigit() else 0))
    inlined += len(mine) > 1
    if [(f, p, l) for f, p, l in mine] != theirs:
        bad.append('%s: %s vs %s' % (hex(off), mine, theirs))
print('\n'.join(bad[:3]) if bad else ('ok' if inlined else 'no inlined frame found'))
PYEOF
)"
else
    echo "ok: (addr2line or cxx_inline missing: the inline check is skipped)"
fi
done_testing
