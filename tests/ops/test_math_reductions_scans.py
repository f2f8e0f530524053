"""Edge cases of the reductions and scans (ops/math/reductions_and_norms.py, ops/math/scan.py,
arg_max / arg_min) that the registry-wide finite-difference samples cannot
hold: ties, NaN, integer inputs, exclusive log-space scans and float32-only
kernels. Expected values were read from Paddle 3.3.1's CPU kernels."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from pybackward.ops.registry import Call
from conftest import TESTDATA


def run(op, ins, attrs, outs=("Out",)):
    res = opcheck.run_kernel(op, ins, attrs, {s: [s.lower()] for s in outs})
    return [res[s][0] for s in outs] if len(outs) > 1 else res[outs[0]][0]


def grad(op, ins, attrs, cot):
    """Run the forward op and its grad kernel with Out@GRAD = cot."""
    d = registry.get(op)
    fwd = run(op, ins, attrs, d.outputs)
    fwd = fwd if isinstance(fwd, list) else [fwd]
    gtype = f"{op}_grad"
    gins = {**ins, **{s: [v] for s, v in zip(d.outputs, fwd)}, f"{d.outputs[0]}@GRAD": [cot]}
    gdef = registry.get(gtype)
    out_slot = gdef.outputs[0]
    res = gdef.kernel(Call(gtype, {s: gins[s] for s in gdef.inputs if s in gins}, attrs, {out_slot: ["g"]}))
    return res[out_slot]


# --------------------------------------------------------------------------
# arg_max / arg_min: NaN never wins, 0-D keepdims keeps a dim
# --------------------------------------------------------------------------
NAN_ROWS = np.array([[3, np.nan, 1, 1], [np.nan, -np.inf, -np.inf, np.nan], [np.nan] * 4,
                     [np.nan, 2, 5, 5], [-np.inf, np.nan, -np.inf, -np.inf]])


def test_arg_max_never_picks_nan():
    np.testing.assert_array_equal(run("arg_max", {"X": [NAN_ROWS]}, {"axis": 1}), [0, 0, 0, 2, 0])
    np.testing.assert_array_equal(run("arg_min", {"X": [-NAN_ROWS]}, {"axis": 1}), [0, 0, 0, 2, 0])
    assert int(run("arg_max", {"X": [NAN_ROWS]}, {"axis": 0, "flatten": True})) == 14


@pytest.mark.parametrize("op", ["arg_max", "arg_min"])
def test_arg_ops_keep_a_dim_for_0d_with_keepdims(op):
    x = np.asarray(2.5)
    assert run(op, {"X": [x]}, {"axis": 0, "keepdims": True}).shape == (1,)
    assert run(op, {"X": [x]}, {"axis": 0, "keepdims": False}).shape == ()
    assert run(op, {"X": [x]}, {"axis": 0, "keepdims": True, "flatten": True}).shape == ()


# --------------------------------------------------------------------------
# cummax / cummin: last index of ties, NaN sticks, integers
# --------------------------------------------------------------------------
TIES = np.array([[1.0, 3.0, 3.0, 2.0, 5.0, 5.0, 1.0], [0.5, 0.5, -1.0, -1.0, 0.5, 2.0, -1.0]])
NANS = np.array([[1.0, 3.0, np.nan, 2.0, np.nan, 0.5], [np.nan, 1.0, -1.0, 2.0, -2.0, 0.0]])


@pytest.mark.parametrize("op,x,out,idx", [
    ("cummax", TIES, [[1, 3, 3, 3, 5, 5, 5], [.5, .5, .5, .5, .5, 2, 2]],
     [[0, 1, 2, 2, 4, 5, 5], [0, 1, 1, 1, 4, 5, 5]]),
    ("cummin", TIES, [[1, 1, 1, 1, 1, 1, 1], [.5, .5, -1, -1, -1, -1, -1]],
     [[0, 0, 0, 0, 0, 0, 6], [0, 1, 2, 3, 3, 3, 6]]),
    ("cummax", NANS, [[1, 3] + [np.nan] * 4, [np.nan] * 6], [[0, 1, 2, 2, 4, 4], [0] * 6]),
    ("cummin", NANS, [[1, 1] + [np.nan] * 4, [np.nan] * 6], [[0, 0, 2, 2, 4, 4], [0] * 6]),
])
def test_cum_extreme_ties_and_nan(op, x, out, idx):
    o, i = run(op, {"x": [x]}, {"axis": 1, "dtype": 3}, ("out", "indices"))
    np.testing.assert_array_equal(o, out)
    np.testing.assert_array_equal(i, idx)
    assert i.dtype == np.int64


def test_cum_extreme_integers_and_index_dtype():
    x = np.array([[2, 1, 2, 3, 3]], dtype=np.int64)
    o, i = run("cummax", {"x": [x]}, {"axis": 1, "dtype": 2}, ("out", "indices"))
    np.testing.assert_array_equal(o, [[2, 2, 2, 3, 3]])
    np.testing.assert_array_equal(i, [[0, 0, 2, 3, 4]])
    assert o.dtype == np.int64 and i.dtype == np.int32
    o, i = run("cummin", {"x": [x]}, {"axis": 1, "dtype": 2}, ("out", "indices"))
    np.testing.assert_array_equal(o, [[2, 1, 1, 1, 1]])
    np.testing.assert_array_equal(i, [[0, 1, 1, 1, 1]])


def test_cummax_grad_goes_to_the_reported_index():
    g = grad("cummax", {"x": [TIES]}, {"axis": 1, "dtype": 3}, np.ones_like(TIES))
    np.testing.assert_array_equal(g, [[1, 1, 2, 0, 1, 2, 0], [1, 3, 0, 0, 1, 2, 0]])


# --------------------------------------------------------------------------
# logcumsumexp exclusive: starts from the lowest finite value
# --------------------------------------------------------------------------
def test_logcumsumexp_exclusive_reverse_matches_paddle():
    x = np.array([[0.5, 1.0, 2.0], [3.0, -1.0, 0.0]])
    attrs = {"axis": 1, "flatten": False, "exclusive": True, "reverse": True}
    lo = np.finfo(np.float64).min
    np.testing.assert_allclose(run("logcumsumexp", {"X": [x]}, attrs),
                               [[2.31326169, 2.0, lo], [0.313261688, 0.0, lo]], rtol=1e-8)
    cot = np.array([[0.5, 1.0, -2.0], [1.0, -1.0, 0.3]])
    np.testing.assert_allclose(grad("logcumsumexp", {"X": [x]}, attrs, cot),
                               [[0, 0.13447071, 1.36552929], [0, 0.26894142, -0.26894142]], rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_logcumsumexp_exclusive_grad_by_finite_differences(reverse):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3))
    attrs = {"axis": 1, "flatten": False, "exclusive": True, "reverse": reverse}
    cot = rng.standard_normal(x.shape)
    cot[:, -1 if reverse else 0] = 0  # the filled slot reads no X
    f = lambda v: float(np.sum(np.where(cot != 0, run("logcumsumexp", {"X": [v]}, attrs), 0) * cot))  # noqa: E731
    num = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = 1e-6
        num.reshape(-1)[i] = (f(x + e.reshape(x.shape)) - f(x - e.reshape(x.shape))) / 2e-6
    np.testing.assert_allclose(grad("logcumsumexp", {"X": [x]}, attrs, cot), num, rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------------
# integer inputs, float32-only kernels
# --------------------------------------------------------------------------
def test_cumprod_on_integers():
    x = np.array([[2, -1, 3, 0, 4]], dtype=np.int64)
    out = run("cumprod", {"X": [x]}, {"dim": 1, "exclusive": False, "reverse": False})
    np.testing.assert_array_equal(out, [[2, -2, -6, 0, 0]])
    assert out.dtype == np.int64
    np.testing.assert_array_equal(run("cumprod", {"X": [x]}, {"dim": 1, "exclusive": True, "reverse": True}),
                                  [[0, 0, 0, 4, 1]])


def test_nansum_of_integers_is_int64():
    out = run("nansum", {"x": [np.array([[1, 2], [3, 4]], dtype=np.int32)]},
              {"axis": [1], "dtype": -1, "keepdim": False}, ("out",))
    np.testing.assert_array_equal(out, [3, 7])
    assert out.dtype == np.int64


def test_l1_norm_float32_matches_paddle():
    """Paddle has a float32 l1_norm kernel only: its float32 refs, checked here."""
    kdir = TESTDATA / "kernels"
    cases = {c["case"]: c for c in json.loads((kdir / "reduce_more.samples.json").read_text())}
    arrays, ref = np.load(kdir / "reduce_more.samples.npz"), np.load(kdir / "reduce_more.paddle.npz")
    for name in ("l1_norm-0", "l1_norm-1"):
        assert cases[name]["op"] == "l1_norm"
        x = arrays[f"{name}|in|X|0"].astype(np.float32)
        out = run("l1_norm", {"X": [x]}, {})
        want = ref[f"{name}|float32|out|Out|0"]
        assert out.dtype == np.float32 and out.shape == want.shape
        np.testing.assert_allclose(out, want, rtol=1e-5)
        cot = arrays[f"{name}|cot|Out|0"].astype(np.float32)
        np.testing.assert_allclose(grad("l1_norm", {"X": [x]}, {}, cot), ref[f"{name}|float32|grad|X|0"], rtol=1e-5)
