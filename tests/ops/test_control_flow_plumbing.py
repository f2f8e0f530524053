"""ops/control_flow/plumbing.py: the value-moving ops and the checks (assert, accuracy_check)."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck


def test_copies_are_copies():
    x = np.arange(6.0).reshape(2, 3)
    for op, i, o in (("fetch_v2", "X", "Out"), ("shadow_output", "x", "out"), ("npu_identity", "x", "out")):
        got = opcheck.run_kernel(op, {i: [x]}, {}, {o: ["o"]})[o][0]
        assert np.array_equal(got, x) and not np.shares_memory(got, x)
    got = opcheck.run_kernel("share_buffer", {"X": [x, x + 1]}, {}, {"Out": ["a", "b"], "XOut": ["c", "d"]})
    assert np.array_equal(got["Out"][1], x + 1) and np.array_equal(got["XOut"][0], x)


def test_transfer_layout_round_trips_and_view_slice_checks_its_rows():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    nhwc = opcheck.run_kernel("transfer_layout", {"X": [x]}, {"src_layout": 2, "dst_layout": 1}, {"Out": ["o"]})
    back = opcheck.run_kernel("transfer_layout", {"X": nhwc["Out"]}, {"src_layout": 1, "dst_layout": 2},
                              {"Out": ["o"]})
    assert nhwc["Out"][0].shape == (2, 4, 5, 3) and np.array_equal(back["Out"][0], x)
    with pytest.raises(ExecutionError, match=r"rows \[2, 9\) are not within the 5 rows"):
        opcheck.run_kernel("view_slice", {"input": [np.zeros((5, 2))]}, {"begin_idx": 2, "end_idx": 9},
                           {"out": ["o"]})


def test_assert_and_accuracy_check_raise_with_what_they_saw():
    assert opcheck.run_kernel("assert", {"Cond": [np.array([True])], "Data": []}, {}, {}) == {}
    with pytest.raises(ExecutionError, match=r"assert op is false: Data\[0\] float64\[4\]: \[0.0, 1.0\]"):
        opcheck.run_kernel("assert", {"Cond": [np.array([False])], "Data": [np.arange(4.0)]}, {"summarize": 2}, {})
    with pytest.raises(ExecutionError, match=r"accuracy_check 'conv' failed: x\[1\]"):
        opcheck.run_kernel("accuracy_check", {"x": [np.array([1.0, 2.0])], "y": [np.array([1.0, 2.1])]},
                           {"fn_name": "conv"}, {"out": ["o"]})
