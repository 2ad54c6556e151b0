"""memscope.pytest_plugin found through its `pytest11` entry point (the install metadata beside
the package: memscope-VERSION.dist-info, python/CMakeLists.txt; docs/ci.md): with the package's
directory on PYTHONPATH, `pytest --memscope` without `-p` records and checks the markers; the
same package without the metadata leaves pytest without the option. Also through `-p` and
`pytest_plugins` at once: one plugin, not two."""
import glob
import os
import subprocess

from conftest import PYTHON, env

import memscope

SUITE = '''
import pytest

@pytest.mark.limit_memory("1 MB")
def test_over():
    b = bytearray(4 * 1024 * 1024)
    del b

@pytest.mark.limit_memory("8 MB")
def test_under():
    b = bytearray(1024 * 1024)
    del b
'''

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(memscope.__file__)))


def pytest_run(tmp_path, *args, pythonpath=PKG_DIR):
    (tmp_path / "ep_suite.py").write_text(SUITE)
    e = env()
    e["PYTHONPATH"] = pythonpath
    r = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
                        "ep_suite.py"], env=e, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    return r.returncode, r.stdout + r.stderr


def test_metadata_beside_the_package():
    infos = glob.glob(os.path.join(PKG_DIR, "memscope-*.dist-info"))
    assert len(infos) == 1, infos
    with open(os.path.join(infos[0], "entry_points.txt")) as f:
        assert f.read().split() == ["[pytest11]", "memscope.pytest_plugin", "=",
                                    "memscope.pytest_plugin"]


def test_memscope_without_p(tmp_path):
    rc, text = pytest_run(tmp_path, "--memscope")
    assert rc == 1, text
    assert "1 failed, 1 passed" in text, text
    assert "limit_memory('1 MB') exceeded" in text, text
    assert "=== memscope ===" in text.replace("=" * 10, "==="), text
    assert "Warning" not in text, text  # e.g. an import pytest cannot rewrite


def test_with_p_and_pytest_plugins_too(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["memscope.pytest_plugin"]\n')
    rc, text = pytest_run(tmp_path, "-p", "memscope.pytest_plugin", "--memscope")
    assert rc == 1, text
    assert "1 failed, 1 passed" in text, text


def test_not_without_the_metadata(tmp_path):
    # the same package in a directory without memscope-*.dist-info: no entry point
    bare = tmp_path / "bare"
    bare.mkdir()
    os.symlink(os.path.join(PKG_DIR, "memscope"), str(bare / "memscope"))
    rc, text = pytest_run(tmp_path, "--memscope", pythonpath=str(bare))
    assert rc == 4, text  # pytest's usage error
    assert "unrecognized arguments: --memscope" in text, text
