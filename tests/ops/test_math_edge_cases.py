"""Edge cases of the activation / unary-math / special / binary / compare
kernels that the registry samples (finite differences, and Paddle's values
in tests/ops/test_kernels_vs_paddle.py) do not reach: integer dtypes, poles,
infinities, NaN, out-of-range shifts, division by zero. Every expected value
here was read off Paddle 3.3.1's CPU kernels (legacy static graph).
"""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry

INF, NAN = np.inf, np.nan


def run(op, ins, attrs=None, outs=None):
    d = registry.get(op)
    outs = outs or {s: 1 for s in d.outputs}
    res = opcheck.run_kernel(op, ins, dict(attrs or {}), {s: [f"{s}{i}" for i in range(n)] for s, n in outs.items()})
    return res[d.outputs[0]][0]


def grad(op, ins, attrs=None):
    """d(sum out)/d(inputs) through the op's grad maker and grad kernels."""
    d = registry.get(op)
    outs = {s: 1 for s in d.outputs}
    fwd = opcheck.run_kernel(op, ins, dict(attrs or {}), {s: [f"{s}0"] for s in outs})
    cots = {s: [np.ones_like(fwd[s][0])] for s in outs if fwd[s][0].dtype.kind == "f"}
    _, grads = opcheck.run_with_grads(op, ins, dict(attrs or {}), outs, cots)
    return grads


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300, equal_nan=True)


# --------------------------------------------------------------------------
# dtype rules
# --------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["floor", "ceil", "trunc", "round", "sign"])
def test_rounding_ops_keep_integers(op):
    x = np.array([1, -2, 3], np.int64)
    out = run(op, {"X": [x]}, {"decimals": -1} if op == "round" else {})
    assert out.dtype == np.int64
    same(out, np.sign(x) if op == "sign" else x)


def test_rint_keeps_integers_and_rounds_half_to_even():
    assert run("rint", {"x": [np.array([1, -2], np.int32)]}).dtype == np.int32
    same(run("rint", {"x": [np.array([0.5, 1.5, 2.5, -0.5, -1.5])]}), [0, 2, 2, -0.0, -2])


def test_round_is_half_to_even_at_the_scaled_value():
    same(run("round", {"X": [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999999999999994])]}), [0, 2, 2, 0, -2, 0])
    same(run("round", {"X": [np.array([0.125, 1.235, -2.5, 1234.5])]}, {"decimals": 2}), [0.12, 1.24, -2.5, 1234.5])
    same(run("round", {"X": [np.array([1234.5, 1250.0, 1350.0])]}, {"decimals": -2}), [1200, 1200, 1400])


@pytest.mark.parametrize("op", ["expm1", "log1p", "log2", "log10"])
def test_log_exp_variants_turn_integers_into_float32(op):
    assert run(op, {"X": [np.array([1, 2, 3], np.int64)]}).dtype == np.float32


@pytest.mark.parametrize("op,slot", [("sin", "X"), ("tanh_shrink", "X"), ("erf", "X"), ("lgamma", "X"),
                                     ("i0", "x"), ("mish", "X"), ("floor", "X")])
def test_no_kernel_for_integers_or_bools(op, slot):
    x = np.array([True, False]) if op == "floor" else np.array([1, 2], np.int32)
    with pytest.raises(ExecutionError, match="no (int32|bool) kernel"):
        run(op, {slot: [x]})


def test_atan2_of_integers_is_float64_and_wants_equal_shapes():
    out = run("atan2", {"X1": [np.array([1, 2, -3], np.int32)], "X2": [np.array([1, -2, 3], np.int32)]})
    assert out.dtype == np.float64
    same(out, [0.78539816339744830, 2.35619449019234484, -0.78539816339744830])
    with pytest.raises(ExecutionError, match="same shape"):
        run("atan2", {"X1": [np.ones((2, 3))], "X2": [np.ones((3,))]})


def test_binary_op_dtypes_are_paddles():
    u8 = np.array([3, 4], np.uint8)
    for op in ("elementwise_fmax", "elementwise_heaviside", "elementwise_mod"):
        with pytest.raises(ExecutionError, match="no uint8 kernel"):
            run(op, {"X": [u8], "Y": [u8]})
    same(run("elementwise_floordiv", {"X": [u8], "Y": [np.array([2, 5], np.uint8)]}), [1, 0])
    b = np.array([True, False])
    assert run("copysign", {"x": [b], "y": [np.array([True, True])]}).tolist() == [True, False]
    same(run("copysign", {"x": [np.array([7, -7, 6, 0])], "y": [np.array([-2, 2, -3, 5])]}), [-7, 7, -6, 0])
    with pytest.raises(ExecutionError, match="no int32 kernel"):
        run("lerp", {"X": [np.ones(2, np.int32)], "Y": [np.ones(2, np.int32)], "Weight": [np.ones(1, np.int32)]})


# --------------------------------------------------------------------------
# special functions at their edges
# --------------------------------------------------------------------------
EDGE = np.array([0.0, -1.0, -2.5, 1e-300, 0.5, -0.0, INF, -INF, NAN, 30.5, -30.5])


def test_digamma_and_lgamma_edges():
    same(run("digamma", {"X": [EDGE]}),
         [-INF, NAN, 1.1031566406452433, -1e300, -1.9635100260214227, INF, INF, NAN, NAN,
          3.4012436689616612, 3.4340305542075624])
    same(run("lgamma", {"X": [EDGE]}),
         [INF, INF, -0.05624371649767407, 690.7755278982137, 0.5723649429247001, INF, INF, INF, NAN,
          72.95347118416940, -75.22646798193337])
    # gammaln's grad sums digamma in another order than lgamma's (Paddle's two implementations)
    same(grad("gammaln", {"x": [np.array([-2.5, 0.5])]})["x"][0], [1.1031566406451025, -1.9635100260215637])
    same(grad("lgamma", {"X": [np.array([-2.5, 0.5])]})["X"][0], [1.1031566406452433, -1.9635100260214227])


def test_polygamma_is_paddles_kernel_even_for_n_0():
    same(run("polygamma", {"x": [EDGE]}, {"n": 0}), np.full(EDGE.shape, -INF))
    same(run("polygamma", {"x": [EDGE]}, {"n": 1}),
         [INF, INF, 9.539246644989124, INF, 4.93480220054468, INF, NAN, INF, NAN, 0.03333024811280161,
          9.837349132820686])
    with pytest.raises(ExecutionError, match="n=-1"):
        run("polygamma", {"x": [EDGE]}, {"n": -1})


def test_bessel_edges():
    x = np.array([0.0, -0.0, 1e-300, INF, -INF, NAN, 30.5, -30.5])
    same(run("i0", {"x": [x]}), [1, 1, 1, NAN, NAN, NAN, 1.2780621387125664e12, 1.2780621387125664e12])
    same(run("i0e", {"x": [x]}), [1, 1, 1, 0, 0, NAN, 0.07253878407077907, 0.07253878407077907])
    same(run("i1e", {"x": [x]}), [0, 0, 5e-301, 0, -0.0, NAN, 0.071339539285261988, -0.071339539285261988])
    same(grad("i1", {"x": [x[:3]]})["x"][0], [0.5, 0.5, 0.5])
    same(grad("i1e", {"x": [x[:3]]})["x"][0], [0.5, 0.5, 0.5])
    same(grad("i0e", {"x": [x[:3]]})["x"][0], [-1, 1, -1])  # Paddle's sign at +-0 is the sign bit's


def test_erfinv_edges():
    x = np.array([-1.0, 1.0, 1.5, -2.5, -1 + 1e-12, 1 - 1e-15, 0.0, 1e-20, 1e-300, NAN])
    same(run("erfinv", {"X": [x]}), [-INF, INF, INF, -INF, -5.042031898572697, 5.68612844131039, 0, 0, 0, NAN])


def test_gammaincc_edges():
    a = np.array([0.5, 1.0, 2.0, 0.0, -1.0, 1.0, 3.0, 100.0])
    y = np.array([0.5, 0.0, 3.0, 1.0, 1.0, -1.0, INF, 90.0])
    same(run("gammaincc", {"x": [a], "y": [y]}),
         [0.31731050786291404, 1, 0.1991482734714558, 1, 1, 1, NAN, 0.8417790108135794])
    same(grad("gammaincc", {"x": [a], "y": [y]})["y"][0],
         [-0.48394144903828673, -1, -0.14936120510359183, -0.0, NAN, -2.718281828459045, NAN, -0.02591202825015755])


# --------------------------------------------------------------------------
# binary ops at their edges
# --------------------------------------------------------------------------
XF = np.array([5.5, -5.5, 5.5, -5.5, 3.0, -3.0, 0.0, 1.0, NAN, 2.0, INF, 5.0, -5.0])
YF = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 2.0, 0.0, 1.0, NAN, 2.0, INF, INF])


def test_mod_and_floordiv_follow_python():
    same(run("elementwise_mod", {"X": [XF], "Y": [YF]}), [1.5, 0.5, -0.5, -1.5, 0, 0, 0, NAN, NAN, NAN, NAN, 5, INF])
    same(run("elementwise_floordiv", {"X": [XF[:11]], "Y": [YF[:11]]}), [2, -3, -3, 2, 1, -1, 0, INF, NAN, NAN, NAN])
    xi, yi = np.array([7, -7, 7, -7, 6, 0]), np.array([2, 2, -2, -2, 3, 5])
    same(run("elementwise_mod", {"X": [xi], "Y": [yi]}), [1, 1, -1, -1, 0, 0])
    same(run("elementwise_floordiv", {"X": [xi], "Y": [yi]}), [3, -4, -4, 3, 2, 0])
    for op in ("elementwise_mod", "elementwise_floordiv"):
        with pytest.raises(ExecutionError, match="division by zero"):
            run(op, {"X": [np.array([1, 2], np.int32)], "Y": [np.array([0, 1], np.int32)]})


def test_fmax_fmin_heaviside_copysign_edges():
    x, y = np.array([3.0, NAN, 2.0, -0.0]), np.array([3.0, 1.0, NAN, -2.0])
    same(run("elementwise_fmax", {"X": [x], "Y": [y]}), [3, 1, 2, -0.0])
    g = grad("elementwise_fmax", {"X": [x], "Y": [y]})
    same(g["X"][0], [1, 0, 1, 1])
    same(g["Y"][0], [0, 1, 0, 0])
    g = grad("elementwise_fmin", {"X": [x], "Y": [y]})
    same(g["X"][0], [1, 0, 1, 0])
    same(run("elementwise_heaviside", {"X": [np.array([0.0, -0.0, NAN, 2.0])], "Y": [np.array([2.0, -2.0, 1.0, 1.0])]}),
         [2, -2, 0, 1])
    same(grad("copysign", {"x": [np.array([0.0, 1.0, NAN, INF])], "y": [np.array([2.0, -1.0, 1.0, 2.0])]})["x"][0],
         [0, -1, NAN, NAN])


# --------------------------------------------------------------------------
# compare / bitwise / arg_min
# --------------------------------------------------------------------------
def test_shifts_out_of_range():
    x = np.array([-128, -5, -1, 0, 1, 5, 127, 64, -64, -5, -5], np.int8)
    s = np.array([1, 1, 3, 2, 7, 8, 9, -1, 2, 8, -1], np.int8)
    same(run("bitwise_left_shift", {"x": [x], "y": [s]}), [0, -10, -8, 0, -128, 0, 0, 0, 0, 0, 0])
    same(run("bitwise_right_shift", {"x": [x], "y": [s]}, {"is_arithmetic": True}), [-64, -3, -1, 0, 0, 0, 0, 0, -16, -1, -1])
    same(run("bitwise_right_shift", {"x": [x], "y": [s]}, {"is_arithmetic": False}), [64, 125, 31, 0, 0, 0, 0, 0, 48, 0, 0])
    with pytest.raises(ExecutionError, match="float64 kernel"):
        run("bitwise_and", {"X": [np.ones(2)], "Y": [np.ones(2)]})


def test_isclose_quirks():
    a, b = np.array([INF, 1.0, 1.0, NAN]), np.array([-INF, 1 + 2.2e-16, 1 + 1e-15, NAN])
    assert run("isclose", {"Input": [a], "Other": [b]}, {"rtol": "0", "atol": "0"}).tolist() == [False, True, False, False]
    assert run("isclose", {"Input": [a], "Other": [b]}, {"rtol": "1e-05", "atol": "1e-08"})[0]  # inf vs -inf
    assert run("isclose", {"Input": [a], "Other": [b]}, {"rtol": "0", "atol": "0", "equal_nan": True}).tolist()[3]
    out = run("allclose", {"Input": [a[1:2]], "Other": [b[1:2]]}, {"rtol": "0", "atol": "0"})
    assert out.shape == () and out.dtype == np.bool_ and bool(out)
    same(run("isclose", {"Input": [np.array([1.0, 1e-9])], "Other": [np.array([1.1, 0.0])],
                         "Rtol": [np.array([0.2])], "Atol": [np.array([0.0])]}, {"rtol": "1e-05", "atol": "1e-08"}),
         [True, False])
    with pytest.raises(ExecutionError, match="Atol must be float64"):
        run("isclose", {"Input": [a], "Other": [b], "Atol": [np.array([0.0], np.float32)]})


def test_equal_all_and_classification():
    assert run("equal_all", {"X": [np.ones((2, 3))], "Y": [np.ones(3)]}).shape == ()
    assert not run("equal_all", {"X": [np.array([NAN])], "Y": [np.array([NAN])]})
    assert run("isfinite_v2", {"X": [np.array([1, 2], np.int32)]}).tolist() == [True, True]
    assert run("isnan_v2", {"X": [np.array([1, 2], np.int32)]}).tolist() == [False, False]
    with pytest.raises(ExecutionError, match="bool kernel"):
        run("isinf_v2", {"X": [np.array([True])]})


def test_arg_min_skips_nan_and_keeps_a_dim_for_0d():
    x = np.array([[NAN, 1.0, 2.0], [NAN, NAN, NAN], [INF, NAN, INF], [3.0, NAN, -1.0]])
    same(run("arg_min", {"X": [x]}, {"axis": 1}), [1, 0, 0, 2])
    same(run("arg_min", {"X": [x]}, {"axis": 0, "flatten": True}), 11)
    assert run("arg_min", {"X": [np.asarray(2.5)]}, {"axis": -1, "keepdims": True}).shape == (1,)
    assert run("arg_min", {"X": [np.ones((2, 3))]}, {"axis": 0, "keepdims": True, "flatten": True}).shape == (1, 1)
