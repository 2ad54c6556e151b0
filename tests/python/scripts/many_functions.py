"""Creates, calls and drops 60,000 small functions compiled at run time (exec of a def), as
dataclasses, namedtuple, torch.fx and templating do. Each function's code object dies with it;
memscope's Python stack hook must not keep it alive (test_stacks.py checks this and the names):
  - fn_<i> is defined at line 2 of "<made>" and returns bytearray(n) at line 3;
  - every 10,000th function (i = 0, 10000, ..., 50000) makes a block of 100,001 bytes that is
    kept to the end; the others make a block of 41 bytes that dies at once;
  - make() calls them at line 25, main() calls make() at line 32.
Prints the number of sampled code objects still alive and the process's max RSS in KiB."""
import gc
import resource
import weakref

N = 60_000
SRC = "\ndef fn_%d(n):\n    return bytearray(n)\n"
kept = []
probes = []


def make(i):
    ns = {}
    exec(compile(SRC % i, "<made>", "exec"), ns)
    f = ns["fn_%d" % i]
    if i % 1000 == 0:
        probes.append(weakref.ref(f.__code__))
    b = f(100_000 if i % 10_000 == 0 else 40)
    if i % 10_000 == 0:
        kept.append(b)


def main():
    for i in range(N):
        make(i)
    gc.collect()
    alive = sum(1 for p in probes if p() is not None)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("alive %d of %d maxrss_kib %d" % (alive, len(probes), rss))


main()
