"""In-process mode's usage monitor (docs/usage.md): memscope.start() in a plain python3; the
helper process (`memscope usage --into`) samples this process from /proc into the trace
directory. Holds 64 MiB written (a bytearray) until two samples of this process were written
after it (read from the trace directory's usage file: no timing), then stops, which writes
the database given as argv[1]."""
import os
import struct
import sys
import time

import memscope

memscope.config(output_path=sys.argv[1], call_stack="python:8")
memscope.start()
block = bytearray(64 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
since = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
path = os.path.join(memscope._state["trace_dir"], "usage-%d.msu" % os.getpid())
for _ in range(60000):
    n = 0
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        for at in range(16, len(data) - 95, 96):
            ts, pid = struct.unpack_from("<QI", data, at)
            n += ts >= since and pid == os.getpid()
    if n >= 2:
        break
    time.sleep(0.001)
else:
    sys.exit("no usage samples after 60 s")
db = memscope.stop()
print("usage_inprocess ok", db)
