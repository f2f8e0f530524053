"""Random ops of pybackward/ops/random/distributions.py that no program can make
reproduce Paddle's values (they draw from Paddle's global generator): their
distributions. (uniform_random_batch_size_like and randint are compared with
Paddle's exact values by tests/ops/test_kernels_vs_paddle.py.)"""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.base import dtypes
from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck
from pybackward.ops.random.engine import MT19937_64
from pybackward.ops.random.distributions import uniform_ints


def _run(op, ins, attrs, outs, seed=0):
    return opcheck.run_kernel(op, ins, attrs, {s: [s] for s in outs}, np.random.default_rng(seed))


def test_bernoulli_mean_and_dtype():
    p = np.full((200, 50), 0.3, np.float32)
    out = _run("bernoulli", {"X": [p]}, {}, ["Out"])["Out"][0]
    assert out.dtype == np.float32 and set(np.unique(out)) <= {0.0, 1.0}
    assert abs(out.mean() - 0.3) < 0.02


def test_binomial_mean_and_dtype():
    out = _run("binomial", {"count": [np.full(5000, 10, np.int64)], "prob": [np.full(5000, 0.25)]}, {},
               ["out"])["out"][0]
    assert out.dtype == np.int64 and out.min() >= 0 and out.max() <= 10
    assert abs(out.mean() - 2.5) < 0.1


def test_standard_gamma_and_dirichlet_means():
    g = _run("standard_gamma", {"x": [np.full(20000, 2.5)]}, {}, ["out"])["out"][0]
    assert abs(g.mean() - 2.5) < 0.08
    alpha = np.tile(np.array([1.0, 2.0, 5.0], np.float32), (8000, 1))
    d = _run("dirichlet", {"Alpha": [alpha]}, {}, ["Out"])["Out"][0]
    assert d.dtype == np.float32
    np.testing.assert_allclose(d.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(d.mean(axis=0), [0.125, 0.25, 0.625], atol=0.01)


def test_multinomial_with_and_without_replacement():
    w = np.array([[0.0, 1.0, 3.0], [2.0, 2.0, 0.0]])
    out = _run("multinomial", {"X": [w]}, {"num_samples": 4000, "replacement": True}, ["Out"])["Out"][0]
    assert out.shape == (2, 4000) and out.dtype == np.int64
    assert not np.any(out[0] == 0) and not np.any(out[1] == 2)
    assert abs(np.mean(out[0] == 2) - 0.75) < 0.03
    out = _run("multinomial", {"X": [w]}, {"num_samples": 2, "replacement": False}, ["Out"])["Out"][0]
    assert sorted(out[0].tolist()) == [1, 2] and sorted(out[1].tolist()) == [0, 1]
    with pytest.raises(ExecutionError):
        _run("multinomial", {"X": [w]}, {"num_samples": 3, "replacement": False}, ["Out"])


def test_randperm_is_a_permutation_fixed_by_its_seed():
    attrs = {"n": 50, "seed": 3, "dtype": dtypes.VarType.INT32}
    a = _run("randperm", {}, attrs, ["Out"], seed=1)["Out"][0]
    b = _run("randperm", {}, attrs, ["Out"], seed=2)["Out"][0]
    assert a.dtype == np.int32 and sorted(a.tolist()) == list(range(50))
    np.testing.assert_array_equal(a, b)


def test_randint_seed_quirk_of_paddle():
    """Paddle 3.3.1 seeds randint with the dtype value for any nonzero seed."""
    attrs = {"low": 0, "high": 1000, "shape": [6], "dtype": dtypes.VarType.INT64}
    a = _run("randint", {}, dict(attrs, seed=3), ["Out"])["Out"][0]
    b = _run("randint", {}, dict(attrs, seed=99), ["Out"])["Out"][0]
    np.testing.assert_array_equal(a, b)
    assert a.tolist() == [558, 195, 590, 346, 559, 361]  # Paddle 3.3.1's values


@pytest.mark.parametrize("span", [1, 2, 7, 1000, (1 << 32) - 5, (1 << 40) + 3, (1 << 63) + 11])
def test_uniform_ints_equals_lemire_on_python_ints(span):
    u = [int(v) for v in MT19937_64(17).raw(2000)]
    threshold = ((1 << 64) - span) % span
    want = [(x * span) >> 64 for x in u if (x * span) & ((1 << 64) - 1) >= threshold][:300]
    got = uniform_ints(MT19937_64(17), 300, span)
    assert [int(v) for v in got] == want
