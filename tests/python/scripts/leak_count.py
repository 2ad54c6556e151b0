"""Known answer for memscope.MemoryLeakDetector (tests/python/test_monitor.py): one call site
keeps every block it allocates (a leak), one frees each block at once (a temporary), one keeps
the last 50 (a bounded queue). Under `memscope run`, detect_memory_leaks() is exactly 1, the
keeping line. Writes {"leaks", "sites", "line", "note"} as JSON to argv[1]."""
import collections
import json
import os
import sys

import memscope

N = 20000
K, T, Q = 1000, 3000, 500  # names, not literals: the compiler folds b"k" * K
keep = []
queue = collections.deque(maxlen=50)
for i in range(N):
    keep.append(b"k" * K)  # the leak
    tmp = b"t" * T  # a temporary
    queue.append(b"q" * Q)  # a bounded queue
del tmp
det = memscope.MemoryLeakDetector()
n = det.detect_memory_leaks()
src = open(__file__).read().splitlines()
line = next(i + 1 for i, s in enumerate(src) if s.strip().startswith("keep.append("))
with open(sys.argv[1], "w") as f:
    json.dump({"leaks": n, "sites": det.get_leaks(), "note": det.last_error,
               "line": "%s:%d" % (os.path.basename(__file__), line)}, f)
