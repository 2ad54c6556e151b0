"""Known allocations with known Python stacks (line numbers are checked by test_stacks.py):
  bytearray(10_000_000) in inner() line 10, called from outer() line 14, from <module> line 34;
  bytearray(7_000_000) in worker() line 18 on a new thread (started after import memscope);
  bytearray(3_000_000) in gen() line 23, a generator resumed by consume() line 27 (<module> line 39);
  bytearray(5_000_000) by bytecode-free C code: b"x" * 5_000_000 in mul() line 31 (<module> line 40)."""
import threading


def inner():
    return bytearray(10_000_000)


def outer():
    return inner()


def worker(out):
    out.append(bytearray(7_000_000))


def gen():
    yield 1
    yield bytearray(3_000_000)


def consume():
    return list(gen())


def mul():
    return b"x" * 5_000_000


a = outer()
out = []
t = threading.Thread(target=worker, args=(out,))
t.start()
t.join()
g = consume()
m = mul()
print("alloc_known ok")
