"""The environment names memscope's Python package reads live in one module (memscope._env), and
those the CLI sets are spelled as src/common/agent_api.h defines them (issue 43, item 4): a name
renamed on one side only, or spelled again in another module, fails here."""
import os
import re

import memscope
from memscope import _env

PKG = os.path.dirname(memscope.__file__)
SRC = os.path.join(os.path.dirname(__file__), "..", "..")

# set by `memscope run` (the CLI) for the traced program: each must be an agent_api.h define
FROM_CLI = ("TRACE_DIR", "EVENTS", "LEVEL", "WATCH", "STEP_ON", "ANALYSIS", "OUTPUT_DIR")


def _c_names():
    with open(os.path.join(SRC, "src", "common", "agent_api.h")) as f:
        return dict(re.findall(r'#define (MS_ENV_\w+) "(MEMSCOPE_\w+)"', f.read()))


def test_cli_names_match_agent_api():
    c = _c_names()
    assert len(c) >= 20  # the header was read
    for attr in FROM_CLI:
        assert c.get("MS_ENV_" + attr) == getattr(_env, attr), attr


def test_every_name_is_in_all():
    names = {v for k, v in vars(_env).items() if k.isupper() and isinstance(v, str)}
    assert names == set(_env.ALL)


def test_no_other_module_spells_a_name():
    spelled = []
    for root, _, files in os.walk(PKG):
        for name in files:
            if not name.endswith(".py") or name == "_env.py":
                continue
            path = os.path.join(root, name)
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    code = line.split("#", 1)[0]
                    if re.search(r'["\']MEMSCOPE(_\w+)?["\']', code):
                        spelled.append("%s:%d: %s" % (path, n, line.strip()))
    assert spelled == []


def test_get_reads_the_environment(monkeypatch):
    monkeypatch.setenv(_env.STEP_ON, "adam")
    assert _env.get(_env.STEP_ON, "auto") == "adam"
    monkeypatch.delenv(_env.STEP_ON)
    assert _env.get(_env.STEP_ON, "auto") == "auto"
