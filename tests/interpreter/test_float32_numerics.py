"""Float32 numerics (issue #22 item 3): pybackward's float32 gradients stay
within Paddle's own float32-vs-float64 distance.

testdata/numerics/deep_cnn/ (written by testdata/numerics/gen_deep_cnn.py
with a live Paddle 3.3.1) holds a DenseNet-style CNN - 8 blocks of
conv3x3 + batch_norm (training) + relu, concatenated, mean pool, fc,
softmax_with_cross_entropy - with Paddle's float32 and float64 gradients of
every parameter and of the image. pybackward appends the backward section to
the float32 forward program and its interpreter runs it in float32; every
gradient element must be as close to Paddle's float64 value as Paddle's own
float32 value is (twice that distance, plus a floor of one float32 ulp of
the tensor's largest element).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import pybackward
from conftest import TESTDATA
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck

CASE = TESTDATA / "numerics" / "deep_cnn"


@pytest.fixture(scope="module")
def grads():
    case = json.loads((CASE / "case.json").read_text())
    prog = pybackward.load(CASE / "forward.pb")
    pybackward.append_backward(case["loss"], program=prog)
    scope = Scope()
    for k, v in np.load(CASE / "params.npz").items():
        scope.set(k, v)
    names = case["grads"]
    got = Executor().run(prog, feed=dict(np.load(CASE / "feeds.npz")), fetch_list=names, scope=scope)
    return dict(zip(names, got)), dict(np.load(CASE / "paddle_f32.npz")), dict(np.load(CASE / "paddle_f64.npz"))


def test_deep_cnn_float32_gradients_within_paddles_own_float32_distance(grads):
    ours, p32, p64 = grads
    assert len(ours) == 27
    bad = []
    for name, want in p64.items():
        have = ours[name]
        assert have.dtype == np.float32 and have.shape == want.shape, name
        paddle_dist = np.abs(p32[name].astype(np.float64) - want)
        our_dist = np.abs(have.astype(np.float64) - want)
        tol = 2 * paddle_dist + 1.2e-7 * np.abs(want).max()
        if not np.all(our_dist <= tol):
            i = np.unravel_index(np.argmax(our_dist - tol), want.shape)
            bad.append(f"{name}{list(i)}: ours {have[i]:.9g}, Paddle f32 {p32[name][i]:.9g}, f64 {want[i]:.9g}")
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("op,shape,attrs", [
    ("reduce_sum", (50000, 6), {"dim": [0]}),
    ("reduce_sum", (16, 4, 40, 40), {"dim": [0, 2, 3]}),
    ("reduce_mean", (16, 4, 40, 40), {"dim": [0, 2, 3]}),
    ("reduce_mean", (6, 50000), {"dim": [1]}),
])
def test_float32_reductions_round_once(op, shape, attrs):
    """Long float32 reductions accumulate in float64: within 2 ulp of the exact value
    (Paddle's own float32 kernels are off by up to ~1e-5 relative on these)."""
    x = (np.random.default_rng(0).standard_normal(shape) * 0.1 + 1.0).astype(np.float32)
    got = opcheck.run_kernel(op, {"X": [x]}, attrs, {"Out": ["o"]})["Out"][0]
    want = opcheck.run_kernel(op, {"X": [x.astype(np.float64)]}, attrs, {"Out": ["o"]})["Out"][0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2.4e-7)
