"""memscope.pytest_plugin on PyTorch CPU tests (scripts/budget_torch_suite.py, docs/ci.md):
exactly the tests over their budgets fail, the message names the tensor's line."""
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "..", "scripts", "budget_torch_suite.py")


def test_torch_cpu_budgets(tmp_path):
    pytest.importorskip("torch")
    xml = str(tmp_path / "junit.xml")
    e = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "memscope.pytest_plugin", "--memscope", "--junitxml=" + xml,
                        "--rootdir=" + os.path.dirname(SUITE), SUITE], env=e, capture_output=True, text=True, timeout=600,
                       cwd=str(tmp_path))
    text = r.stdout + r.stderr
    failed = {c.get("name") for c in ET.parse(xml).getroot().iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None}
    assert failed == {"test_tensor_over", "test_tensor_kept", "test_tensor_over_heap"}, text
    assert r.returncode == 1
    assert "limit_memory('8 MB') exceeded: peak of memory allocated during the test 167" in text
    assert "  budget_torch_suite.py:13: 167" in text  # torch.zeros(...): 16 MiB
    assert "  budget_torch_suite.py:26: 167" in text  # the kept tensor
