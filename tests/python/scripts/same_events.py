"""The same workload recorded in-process (memscope.config + start/stop, no CLI) or under
`memscope run` (argv[1] = "run"): test_inprocess.py compares the MALLOCs >= 1000 bytes made by
work() per Python line.

    python3 same_events.py inprocess OUT.db
    memscope run --call-stack=c:8,python:32 -o OUT.db -- python3 same_events.py run"""
import sys

import memscope

mode = sys.argv[1]
if mode == "inprocess":
    memscope.config(output_path=sys.argv[2], call_stack="c:8,python:32")


def work():
    keep = []
    for i in range(20):
        keep.append(bytearray(4096 + i))
        tmp = bytearray(100_000)
        del tmp
    big = [bytes(2000) for _ in range(10)]
    return keep, big


memscope.start()
r = work()
memscope.step()
memscope.stop()
print("same_events ok", memscope.mode())
