"""Known allocations under the Python stack hook of lines mode argv[1] (2: the profile hook, 3:
the frame evaluation hook), installed by install() while frames run (test_stacks.py checks them):
  bytearray(1_000_000) in inner() line 24 < outer() line 28 < <module> line 90;
  bytearray(1_100_000) in catcher() line 41, after an exception went up through three frames;
  bytearray(1_200_000) in gen() line 46, resumed by drain() line 50 (<module> line 92);
  bytearray(1_300_000 + i) in Box.__getitem__ line 55 < the list comprehension and use() line
    69 (<module> line 93): a subscript CPython 3.11 runs without the frame evaluation hook once
    specialized;
  bytearray(1_400_000 + i) in Box2.__getitem__ line 61, which calls noop() first (line 94);
  bytearray(1_500_000) at module level line 95, after install() returned;
  bytearray(1_600_000) in late() line 78 < waiter() line 74 on a thread started before the hook,
  bytearray(1_700_000) the same on a thread started after it.
Then prints how many of 50 code objects compiled and run under the hook, then dropped, are
alive (and runs deep() and deep_install(), below)."""
import gc
import sys
import threading
import weakref

from memscope import _native


def inner():
    return bytearray(1_000_000)


def outer():
    return inner()


def thrower(n):
    if n == 0:
        raise ValueError("x")
    thrower(n - 1)


def catcher():
    try:
        thrower(2)
    except ValueError:
        return bytearray(1_100_000)


def gen():
    yield 1
    yield bytearray(1_200_000)


def drain():
    return list(gen())


class Box:
    def __getitem__(self, k):
        return bytearray(k)


class Box2:
    def __getitem__(self, k):
        noop()
        return bytearray(k)


def noop():
    pass


def use(box, n):
    return [box[n + i] for i in range(20)]


def waiter(go, n):
    go.wait()
    late(n)


def late(n):
    return bytearray(n)


def install():
    _native.set_python_stacks(False)
    _native.set_python_stacks(True, int(sys.argv[1]))


go = threading.Event()
before = threading.Thread(target=waiter, args=(go, 1_600_000))
before.start()
install()
a = outer()
b = catcher()
c = drain()
d = use(Box(), 1_300_000)
e = use(Box2(), 1_400_000)
f = bytearray(1_500_000)
after = threading.Thread(target=waiter, args=(go, 1_700_000))
after.start()
go.set()
before.join()
after.join()
refs = []
for i in range(50):
    ns = {}
    exec("def made_%d():\n    return bytearray(%d)\n" % (i, 10_000 + i), ns)
    fn = ns["made_%d" % i]
    fn()
    refs.append(weakref.ref(fn.__code__))
    del fn, ns
gc.collect()


# 150 frames deep: bytearray(1_800_000) in Box2.__getitem__ at the bottom of deep() and
# bytearray(1_810_000 + n) in deep(n) as they return; the hook installed again at the bottom
# of deep_install() and bytearray(1_900_000 + n) in deep_install(n) as they return (no call in
# between: frames the hook never saw return one after another).
def deep(n):
    if n == 0:
        return [Box2()[1_800_000]]
    r = deep(n - 1)
    r.append(bytearray(1_810_000 + n))
    return r


def deep_install(n):
    if n == 0:
        install()
        return []
    r = deep_install(n - 1)
    r.append(bytearray(1_900_000 + n))
    return r


g = deep(150)
h = deep_install(150)
print("alive", sum(r() is not None for r in refs))
