"""python3 -m memscope.torch SCRIPT [ARGS...]: run a script with memscope.torch's automatic
start (MEMSCOPE_EVENTS / MEMSCOPE_LEVEL / MEMSCOPE_WATCH, see memscope/torch/__init__.py),
for programs that do not import memscope themselves."""
import runpy
import sys

from . import _autostart

if len(sys.argv) < 2:
    sys.stderr.write("usage: python3 -m memscope.torch SCRIPT [ARGS...]\n")
    sys.exit(2)
_autostart()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
