#!/bin/bash
# unwind.sh: full native stacks on code built without frame pointers (issue 25), memscope against
# heaptrack and the program alone, side by side in each round.
#
#   bench/unwind.sh [-r ROUNDS] [-n OPS_PER_THREAD] [-k]
#
# cc1: GCC's own compiler proper (Debian's, built -O2 without frame pointers) compiling a
# generated C file (1500 structs and functions, about 8M allocations):
#   plain      cc1 -quiet -O2 gen.c -o gen.s
#   ms         memscope run -q -o X.db -- cc1 ...        (the default options: DWARF stacks of
#                                                          256 frames, run to the default output)
#   ms-32      memscope run -q --call-stack=c:32 -o X.db -- cc1 ...   (the default before issue 47)
#   ms-fp      memscope run -q --unwind=fp -o X.db -- ... (frame pointers: one frame here)
#   heaptrack  heaptrack -o OUT cc1 ...                    (recording; libunwind stacks)
# clang++ (when installed) compiling bench/templates.cpp (-std=c++17 -O1 -c), whose stacks are
# deep (median 57 frames): plain, memscope's defaults, --call-stack=c:32, heaptrack; with the
# output's size and the share of whole stacks (depth below the cap).
# churn (../shared/bench/churn.c, 2 threads, stacks 3 to 12 deep) built without frame pointers
# (-O2 -g) and with them:
#   ms-raw     memscope run -q --format=trace --no-pack -o DIR -- ./churn   (recording only,
#                                                                   the default unwinder)
#   ms-trace   memscope run -q --format=trace -o DIR -- ./churn   (recording and packing)
#   ms-trace-fp  the same with --unwind=fp, on the churn built with frame pointers
#   heaptrack  heaptrack -o OUT ./churn
# Prints medians, ratios and the stacks' mean depth in each database. -k keeps the work dir.
set -euo pipefail
BENCH=unwind.sh
. "$(dirname "$0")/lib.sh"

rounds=3 ops=2000000 threads=2 keep=0
bench_options "[-r ROUNDS] [-n OPS_PER_THREAD] [-k]" "r:n:k" "$@"
bench_memscope
bench_require heaptrack sqlite3 cc
CC1=$(cc -print-prog-name=cc1)
CLANG=$(command -v clang++ || true)
CHURN_C=${CHURN_C:-$root/../shared/bench/churn.c} # from a worktree: CHURN_C=/work/shared/...
[ -x "$CC1" ] || bench_die "cc1 not found (cc -print-prog-name=cc1)"
bench_workdir "$keep"
cc -O2 -g -pthread "$CHURN_C" -o "$work/churn_nofp"
cc -O2 -g -fno-omit-frame-pointer -pthread "$CHURN_C" -o "$work/churn_fp"
cd "$work"
bench_gen_c gen.c

for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    rm -rf htout* chtout* ms.db ms32.db msfp.db tr trfp
    bench_timed plain "$CC1" -quiet -O2 gen.c -o plain.s
    bench_timed ms "$MEMSCOPE" run -q -o ms.db -- "$CC1" -quiet -O2 gen.c -o ms.s
    bench_timed ms32 "$MEMSCOPE" run -q --call-stack=c:32 -o ms32.db -- "$CC1" -quiet -O2 gen.c \
        -o ms32.s
    bench_timed msfp "$MEMSCOPE" run -q --unwind=fp -o msfp.db -- "$CC1" -quiet -O2 gen.c -o fp.s
    bench_timed ht heaptrack -o htout "$CC1" -quiet -O2 gen.c -o ht.s
    rm -rf htout*
    bench_timed cms "$MEMSCOPE" run -q --format=trace -o tr -- ./churn_nofp "$ops" "$threads"
    rm -rf trraw
    bench_timed craw "$MEMSCOPE" run -q --format=trace --no-pack -o trraw -- ./churn_nofp \
        "$ops" "$threads"
    bench_timed cmsfp "$MEMSCOPE" run -q --format=trace --unwind=fp -o trfp -- ./churn_fp \
        "$ops" "$threads"
    bench_timed cht heaptrack -o chtout ./churn_nofp "$ops" "$threads"
    rm -rf chtout*
    if [ -n "$CLANG" ]; then
        rm -f xms.db xms32.db
        bench_timed xplain "$CLANG" -std=c++17 -O1 -c "$root/bench/templates.cpp" -o x.o
        bench_timed xms "$MEMSCOPE" run -q -o xms.db -- "$CLANG" -std=c++17 -O1 -c \
            "$root/bench/templates.cpp" -o x.o
        bench_timed xms32 "$MEMSCOPE" run -q --call-stack=c:32 -o xms32.db -- "$CLANG" \
            -std=c++17 -O1 -c "$root/bench/templates.cpp" -o x.o
        bench_timed xht heaptrack -o xhtout "$CLANG" -std=c++17 -O1 -c "$root/bench/templates.cpp" -o x.o
        rm -rf xhtout*
    fi
done
depth() { sqlite3 "$1" "SELECT printf('%.1f', avg(depth)) FROM stacks"; }
# whole DB CAP: the share of distinct stacks shorter than the cap (so not cut), in percent
whole() { sqlite3 "$1" "SELECT printf('%.1f', 100.0 * avg(depth < $2)) FROM stacks"; }
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN {printf "%.1f", b / 1e6}'; }
"$MEMSCOPE" import tr -o churn.db >/dev/null 2>&1
p=$(median plain.times) m=$(median ms.times) m32=$(median ms32.times) mf=$(median msfp.times) h=$(median ht.times)
c=$(median cms.times) cf=$(median cmsfp.times) ch=$(median cht.times) cr=$(median craw.times)
cat <<EOT
Workloads: cc1 of $(cc --version | head -1) on a generated file; churn $ops $threads; $(bench_machine).
memscope: \`$("$MEMSCOPE" --version)\`; heaptrack: \`$(heaptrack --version 2>&1 | head -1)\`; $rounds rounds, medians.

| cc1, about 8M allocations | seconds | / plain | mean stack depth |
|---|---:|---:|---:|
| plain | $p | 1.00 | |
| memscope, default options (DWARF, depth 256), run to its default output | $m | $(r "$m" "$p") | $(depth ms.db) |
| memscope --call-stack=c:32 (the default before issue 47) | $m32 | $(r "$m32" "$p") | $(depth ms32.db) |
| memscope --unwind=fp | $mf | $(r "$mf" "$p") | $(depth msfp.db) |
| heaptrack (recording) | $h | $(r "$h" "$p") | |

| churn | seconds | / heaptrack |
|---|---:|---:|
| memscope recording only (\`--no-pack\`), default unwinder, churn without frame pointers | $cr | $(r "$cr" "$ch") |
| memscope recording and packing (\`--format=trace\`), default unwinder, the same | $c | $(r "$c" "$ch") |
| memscope recording, --unwind=fp, churn with frame pointers | $cf | $(r "$cf" "$ch") |
| heaptrack, churn without frame pointers | $ch | 1.00 |

churn without frame pointers, memscope's stacks: mean depth $(depth churn.db).
Raw wall times (s): plain $(tr '\n' ' ' <plain.times)/ ms $(tr '\n' ' ' <ms.times)/ ms-32 $(tr '\n' ' ' <ms32.times)/ ms-fp $(tr '\n' ' ' <msfp.times)/ heaptrack $(tr '\n' ' ' <ht.times)/ churn ms $(tr '\n' ' ' <cms.times)/ churn ms raw $(tr '\n' ' ' <craw.times)/ churn ms-fp $(tr '\n' ' ' <cmsfp.times)/ churn heaptrack $(tr '\n' ' ' <cht.times)
EOT
if [ -n "$CLANG" ]; then
    xp=$(median xplain.times) xm=$(median xms.times) xm32=$(median xms32.times)
    xh=$(median xht.times)
    cat <<EOT

| $("$CLANG" --version | head -1) -std=c++17 -O1 -c bench/templates.cpp | seconds | / plain | mean stack depth | stacks not cut | output MB |
|---|---:|---:|---:|---:|---:|
| plain | $xp | 1.00 | | | |
| memscope, default options (depth 256) | $xm | $(r "$xm" "$xp") | $(depth xms.db) | $(whole xms.db 256)% | $(mb xms.db) |
| memscope --call-stack=c:32 | $xm32 | $(r "$xm32" "$xp") | $(depth xms32.db) | $(whole xms32.db 32)% | $(mb xms32.db) |
| heaptrack (recording) | $xh | $(r "$xh" "$xp") | | | |

Raw wall times (s): plain $(tr '\n' ' ' <xplain.times)/ ms $(tr '\n' ' ' <xms.times)/ ms-32 $(tr '\n' ' ' <xms32.times)/ heaptrack $(tr '\n' ' ' <xht.times)
EOT
fi
