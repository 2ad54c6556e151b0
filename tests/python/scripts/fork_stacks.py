"""Python stacks in a forked child (test_stacks.py checks the lines): the child's trace file is
new, so the frames it uses must be described in it again.
  parent: bytearray(1_000_000) in before() line 13, from <module> line 28;
  child:  bytearray(2_000_000) in before() line 13, from outer() line 21, <module> line 29
          (before() ran in the parent; outer() and <module> were on the stack at the fork);
          bytearray(3_000_000) in outer.<locals>.inner() line 18, from outer() line 22 (first
          called in the child)."""
import os
import sys


def before(n):
    return bytearray(n)


def outer():
    def inner(n):
        return bytearray(n)
    pid = os.fork()
    if pid == 0:
        a = before(2_000_000)
        b = inner(3_000_000)
        sys.exit(0 if len(a) + len(b) == 5_000_000 else 1)
    _, status = os.waitpid(pid, 0)
    return status


x = before(1_000_000)
sys.exit(0 if outer() == 0 else 1)
