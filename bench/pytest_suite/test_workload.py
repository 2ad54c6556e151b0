"""A comparable test suite for bench/pytest_overhead.sh: 200 tests of ordinary Python work
(containers, strings, json, regular expressions, sorting), a few ms each, no markers."""
import json
import re

import pytest

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


@pytest.mark.parametrize("n", range(50))
def test_dicts(n):
    d = {("%s-%d" % (WORDS[i % 8], i)): i * n for i in range(2000)}
    assert sum(d.values()) == n * sum(range(2000))


@pytest.mark.parametrize("n", range(50))
def test_json_roundtrip(n):
    doc = [{"id": i, "name": WORDS[i % 8] * (n % 5 + 1), "tags": WORDS[: i % 8]}
           for i in range(500)]
    assert json.loads(json.dumps(doc)) == doc


@pytest.mark.parametrize("n", range(50))
def test_regex(n):
    text = " ".join("%s%d" % (WORDS[i % 8], i * n) for i in range(2000))
    assert len(re.findall(r"[a-z]+\d+", text)) == 2000


@pytest.mark.parametrize("n", range(50))
def test_sort(n):
    xs = [(i * 7919 + n) % 10007 for i in range(20000)]
    assert sorted(xs)[0] == min(xs)
