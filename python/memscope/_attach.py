"""memscope._attach: the Python side of `memscope attach PID` (docs/production.md, "Attach").

The agent that `memscope attach` loads into a running Python process has the interpreter run
start() when a session begins and stop() when it ends (Py_AddPendingCall, in the main thread
between two bytecodes): start() binds this package's extension to the agent and installs the
Python stack hook on every thread, so that allocations carry Python stacks from then on;
stop() removes the hook. Neither leaves a name in the program's modules but this one.
"""
import sys

from . import _native


def _say(msg_file, what, err):
    """A failure goes to the agent's message file, which memscope prints: never to the
    program's own stderr."""
    try:
        with open(msg_file, "a") as f:
            f.write("memscope agent: Python stacks: %s: %s\n" % (what, err))
    except OSError:
        pass


def start(agent_path, lines, msg_file):
    try:
        _native.quiet(1)
        if not _native.bind_agent(agent_path):
            _say(msg_file, "cannot bind to the agent", agent_path)
            return
        _native._after_fork_child()  # a new trace: every frame is described again
        _native.set_python_stacks(True, bool(lines))
    except Exception as e:  # never into the program
        _say(msg_file, "cannot install the hook", e)
    finally:
        _native.quiet(-1)


def stop():
    try:
        _native.set_python_stacks(False)
    except Exception:
        pass
