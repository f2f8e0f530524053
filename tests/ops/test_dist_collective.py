"""Collective ops run as the one rank of a world of size one (ops/dist/collective.py)."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck


def test_a_larger_world_is_refused_naming_the_attr():
    x = np.ones((2, 3))
    for op in ("c_concat", "c_split", "all_gather"):
        slot = "x" if op == "all_gather" else "X"
        out = "out" if op == "all_gather" else "Out"
        with pytest.raises(ExecutionError, match=r"nranks=4 is not supported \(pybackward runs a world of one"):
            opcheck.run_kernel(op, {slot: [x]}, {"nranks": 4}, {out: ["o"]})


def test_one_rank_collectives_are_the_identity_and_copy():
    x = np.arange(6.0).reshape(2, 3)
    for op, slot, out in (("c_identity", "X", "Out"), ("all_reduce", "x", "out"), ("mp_allreduce_sum", "X", "Out")):
        got = opcheck.run_kernel(op, {slot: [x]}, {}, {out: ["o"]})[out][0]
        assert np.array_equal(got, x) and got is not x


def test_c_split_grad_reads_paddles_upper_case_all_gather():
    # Paddle's c_split grad maker emits all_gather with slots X / Out (the op declares x / out)
    x = np.arange(4.0)
    got = opcheck.run_kernel("all_gather", {"X": [x]}, {"nranks": 1}, {"Out": ["o"]})
    assert np.array_equal(got["Out"][0], x)


def test_moe_counts_must_agree_in_one_process():
    x = np.ones((5, 2))
    with pytest.raises(ExecutionError, match="local_count .* and global_count .* differ"):
        opcheck.run_kernel("global_scatter", {"X": [x], "local_count": [np.array([2, 3])],
                                              "global_count": [np.array([3, 2])]}, {}, {"Out": ["o"]})
    with pytest.raises(ExecutionError, match="sums to 4 rows, X has 5"):
        opcheck.run_kernel("global_gather", {"X": [x], "local_count": [np.array([1, 3])],
                                             "global_count": [np.array([1, 3])]}, {}, {"Out": ["o"]})


def test_c_softmax_cross_entropy_equals_the_one_rank_loss():
    rng = np.random.default_rng(0)
    logits, label = rng.standard_normal((4, 6)), np.array([[1], [5], [-100], [0]])
    got = opcheck.run_kernel("c_softmax_with_cross_entropy", {"Logits": [logits], "Label": [label]},
                             {"ignore_index": -100, "nranks": 1}, {"Softmax": ["s"], "Loss": ["l"]})
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = -np.log(p[np.arange(4), np.maximum(label[:, 0], 0)])[:, None]
    want[2] = 0
    np.testing.assert_allclose(got["Loss"][0], want, rtol=1e-12)
    with pytest.raises(ExecutionError, match="label 7 is outside"):
        opcheck.run_kernel("c_softmax_with_cross_entropy", {"Logits": [logits], "Label": [label + 6]},
                           {"ignore_index": -100}, {"Softmax": ["s"], "Loss": ["l"]})
