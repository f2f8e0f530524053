"""Tied values in the sorting ops: the index Paddle reports is the one
libstdc++'s unstable sort leaves, recorded from Paddle 3.3.1 by
testdata/ops/gen_sort_ties.py (finite-difference samples cannot hold ties)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import TESTDATA
from pybackward.ops import opcheck

CASES = json.loads((TESTDATA / "ops" / "sort_ties.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['op']}-{c['input']}-{i}" for i, c in enumerate(CASES)])
def test_ties_match_paddle(case):
    x = np.array(case["x"], dtype=np.float64)
    got = opcheck.run_kernel(case["op"], {"X": [x]}, case["attrs"], {"Out": ["out"], "Indices": ["idx"]})
    idx = got["Indices"][0]
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, np.array(case["indices"], np.int64))
    want = np.array([np.nan if v is None else v for v in case["out"]]).reshape(case["out_shape"])
    np.testing.assert_array_equal(got["Out"][0], want)


def test_sorting_a_nan_row():
    """argsort puts NaN last ascending and first descending, as Paddle's comparator does."""
    x = np.array([1.0, np.nan, 0.5])
    out = opcheck.run_kernel("argsort", {"X": [x]}, {"axis": 0, "descending": True, "stable": True},
                             {"Out": ["o"], "Indices": ["i"]})
    np.testing.assert_array_equal(out["Indices"][0], [1, 0, 2])
