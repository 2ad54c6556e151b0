"""budget_torch_suite.py: PyTorch CPU tests with known memory, for
tests/python/torch/test_torch_pytest_plugin.py (memscope.pytest_plugin's markers on tensors:
the CPU allocator's memory is the heap layer). Tensors of 16 MiB (4 Mi float32), far from the
limits."""
import pytest
import torch

kept = []


@pytest.mark.limit_memory("8 MB")
def test_tensor_over():
    x = torch.zeros(4 * 1024 * 1024)  # 16 MiB
    assert float(x.sum()) == 0


@pytest.mark.limit_memory("64 MB")
def test_tensor_under():
    x = torch.ones(4 * 1024 * 1024)
    y = x * 2  # 32 MiB at once
    assert float(y[0]) == 2


@pytest.mark.limit_leaks("1 MB")
def test_tensor_kept():
    kept.append(torch.empty(4 * 1024 * 1024))


@pytest.mark.limit_leaks("1 MB")
def test_tensor_freed():
    x = torch.empty(4 * 1024 * 1024)
    del x


@pytest.mark.limit_memory("8 MB", layer="heap")
def test_tensor_over_heap():
    x = torch.randn(4 * 1024 * 1024)
    assert x.numel() == 4 * 1024 * 1024
