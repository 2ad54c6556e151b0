"""Known answer for memscope.OOMDetector (tests/python/test_monitor.py): this process grows by
CHUNK bytes every STEP seconds (50 MiB/s) against a 300 MiB limit, with a detector watching.
It stops at the first high or critical warning (or at 280 MiB) and writes, as JSON to argv[1],
the warning, the growth rate it really had, and the line that allocates. With argv[2] a
directory, it traces itself in-process (memscope.start() writing there) instead of running
under `memscope run`."""
import json
import os
import sys
import time

import memscope

CHUNK = 5 << 20
STEP = 0.1
LIMIT = "300 MiB"
if len(sys.argv) > 2:
    memscope.config(output_path=sys.argv[2], call_stack="python:16")
    memscope.start()

got = []
det = memscope.OOMDetector(threshold=85.0, limit=LIMIT, warning_callback=got.append)
det.start_monitoring()
time.sleep(0.3)  # a flat start
hold = []
t0 = time.monotonic()
nxt = t0
while not got and len(hold) * CHUNK < 280 << 20:
    hold.append(b"\1" * CHUNK)  # the growing line
    nxt += STEP
    time.sleep(max(0.0, nxt - time.monotonic()))
t1 = time.monotonic()
det.stop_monitoring()
src = open(__file__).read().splitlines()
line = next(i + 1 for i, s in enumerate(src) if s.strip().startswith("hold.append("))
out = {"grown_bytes": len(hold) * CHUNK, "seconds": t1 - t0,
       "line": "%s:%d" % (os.path.basename(__file__), line),
       "traced": memscope.monitor.trace_file() is not None,
       "warning": got[0].as_dict() if got else None,
       "why": got[0].why() if got else None}
out["warning"]["risk_level"] = got[0].risk_level.value if got else None
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
if len(sys.argv) > 2:
    memscope.stop()
