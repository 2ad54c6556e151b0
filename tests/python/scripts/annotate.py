"""The msMemScope-compatible API under `memscope run`: start/stop, step, describer (context
manager, decorator, after the fact), RecordFunction, take_snapshot, tracer."""
import memscope as msmemscope
from memscope import describe

msmemscope.start()
with describe.describer(owner="model"):
    with describe.describer(owner="encoder"):
        a = bytearray(1_000_001)


@describe.describer(owner="head")
def head():
    return bytearray(1_000_002)


b = head()
with msmemscope.RecordFunction("forward"):
    c = bytearray(1_000_003)
msmemscope.step()
msmemscope.step()
describe.describer(12345678, owner="kv")
msmemscope.take_snapshot(name="after steps")


def traced_child():
    return bytearray(1_000_004)


def traced_parent():
    return traced_child()


msmemscope.tracer.start()
d = traced_parent()
msmemscope.tracer.stop()
msmemscope.stop()
e = bytearray(1_000_005)  # after stop: not recorded
print("annotate ok")
