"""_env: the environment names memscope reads in Python, in one place.

`memscope run` and memscope.start() set these for the traced program (src/common/agent_api.h
defines the ones the CLI and the agent share: tests/python/test_env_names.py checks that each
name here spelled there is spelled the same). Everything else in the package reads the
environment through get()."""
import os

TRACE_DIR = "MEMSCOPE_TRACE_DIR"      # where the agent writes; set under `memscope run`
EVENTS = "MEMSCOPE_EVENTS"            # --events as given
LEVEL = "MEMSCOPE_LEVEL"              # --level
WATCH = "MEMSCOPE_WATCH"              # --watch
STEP_ON = "MEMSCOPE_STEP_ON"          # --step-on
ANALYSIS = "MEMSCOPE_ANALYSIS"        # --analysis
OUTPUT_DIR = "MEMSCOPE_OUTPUT_DIR"    # where watch_dump/ goes
OUTPUT = "MEMSCOPE_OUTPUT"            # a .db/.csv output path (the watcher's fallback)
PY_LINES = "MEMSCOPE_PY_LINES"        # 0: Python stacks without line events
PTA_MAX_ENTRIES = "MEMSCOPE_PTA_MAX_ENTRIES"  # the CUDA history's ring size
AGENT = "MEMSCOPE_AGENT"              # the agent library memscope.start() loads
BIN = "MEMSCOPE_BIN"                  # the memscope command memscope.start() runs
CLI = "MEMSCOPE"                      # the memscope command the analyzer and `-m memscope` run

ALL = (TRACE_DIR, EVENTS, LEVEL, WATCH, STEP_ON, ANALYSIS, OUTPUT_DIR, OUTPUT, PY_LINES,
       PTA_MAX_ENTRIES, AGENT, BIN, CLI)


def get(name, default=None):
    """The variable's value, else default."""
    return os.environ.get(name, default)
