"""Ops without a gradient that real programs use for masks and checks:
bitwise logic and shifts, isnan / isinf / isfinite, isclose / allclose,
equal_all and arg_min. Behaviour probed on Paddle 3.3.1's CPU kernels:

* bitwise ops take bool and integer tensors (NumPy broadcasting); shifts by
  a negative amount or by the bit width or more give 0 (an arithmetic right
  shift of a negative value gives -1); a logical right shift works on the
  unsigned bit pattern;
* isnan_v2 / isinf_v2 / isfinite_v2 accept integers (never NaN or inf) but
  not bools;
* isclose is |a - b| <= atol + rtol * |b|, or a == b, or |left - right| <= 1e-15
  (so isclose(inf, -inf) is true, as in Paddle); `rtol` / `atol` are string
  attrs, overridden by the Rtol / Atol tensors; allclose and equal_all give a
  0-D bool;
* arg_min never picks a NaN, like Paddle's reducer.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import arg_extreme

_INTS = "biu"


def _ints_only(c: Call, *arrays: np.ndarray) -> None:
    for a in arrays:
        if a.dtype.kind not in _INTS:
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {a.dtype} kernel for it")


# --------------------------------------------------------------------------
# bitwise logic and shifts
# --------------------------------------------------------------------------
def _bitwise(fn):
    def kernel(c: Call):
        x, y = c.x("X"), c.x("Y")
        _ints_only(c, x, y)
        return {"Out": np.asarray(fn(x, y))}
    return kernel


def _bitwise_not(c: Call):
    x = c.x("X")
    _ints_only(c, x)
    return {"Out": np.asarray(np.invert(x))}


def _unsigned(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "i" else a


def _shift_operands(c: Call):
    x, y = c.x("x"), c.x("y")
    _ints_only(c, x, y)
    if x.dtype.kind == "b":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no bool kernel for it")
    x, y = np.broadcast_arrays(x, y)
    bits = x.dtype.itemsize * 8
    y64 = y.astype(np.int64)
    ok = (y64 >= 0) & (y64 < bits)
    return np.ascontiguousarray(x), np.where(ok, y64, 0).astype(_unsigned(x).dtype), ok


def _left_shift(c: Call):
    x, s, ok = _shift_operands(c)
    shifted = np.left_shift(_unsigned(x), s).view(x.dtype)  # wraps, as C++ does
    return {"out": np.where(ok, shifted, np.zeros((), x.dtype))}


def _right_shift(c: Call):
    x, s, ok = _shift_operands(c)
    if c.attr("is_arithmetic", True) and x.dtype.kind == "i":
        out = np.where(ok, np.right_shift(x, s.astype(x.dtype)), np.where(x < 0, -1, 0).astype(x.dtype))
    else:
        out = np.where(ok, np.right_shift(_unsigned(x), s).view(x.dtype), np.zeros((), x.dtype))
    return {"out": np.asarray(out, dtype=x.dtype)}


def _bitwise_samples(rng):
    i = lambda s, dt=np.int32: rng.integers(-50, 50, s).astype(dt)  # noqa: E731
    return [Sample({"X": [i((3, 4))], "Y": [i((3, 4))]}),
            Sample({"X": [i((2, 3, 4), np.int64)], "Y": [i((4,), np.int64)]}, note="broadcast int64"),
            Sample({"X": [rng.random((3, 4)) < 0.5], "Y": [rng.random((3,1)) < 0.5]}, note="bool")]


def _shift_samples(rng):
    x = np.array([-128, -5, -1, 0, 1, 5, 127, 64, -64, -5, -5, 5])
    y = np.array([1, 1, 3, 2, 31, 32, 33, -1, 2, 40, -1, -1])
    out = []
    for arith in (True, False):
        out += [Sample({"x": [x.astype(np.int32)], "y": [y.astype(np.int32)]}, {"is_arithmetic": arith},
                       note=f"int32 arithmetic={arith}"),
                Sample({"x": [x.astype(np.int64)], "y": [np.minimum(y, 70).astype(np.int64) * 2]},
                       {"is_arithmetic": arith}, note=f"int64 arithmetic={arith}"),
                Sample({"x": [(x % 256).astype(np.uint8)], "y": [(y % 10).astype(np.uint8)]}, {"is_arithmetic": arith},
                       note=f"uint8 arithmetic={arith}")]
    return out


for _name, _fn in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)):
    register(paddle_opdef(_name, _bitwise(_fn), samples=_bitwise_samples,
                          doc=f"Out = {_name}(X, Y) for bool or integer tensors"))
register(paddle_opdef("bitwise_not", _bitwise_not, doc="Out = ~X for bool or integer tensors",
                      samples=lambda rng: [Sample({"X": [rng.integers(-50, 50, (3, 4)).astype(np.int32)]}),
                                           Sample({"X": [rng.random((3, 4)) < 0.5]}, note="bool")]))
register(paddle_opdef("bitwise_left_shift", _left_shift, attrs_handled=("is_arithmetic",), samples=_shift_samples,
                      doc="out = x << y (wrapping); 0 where y < 0 or y >= the bit width"))
register(paddle_opdef("bitwise_right_shift", _right_shift, attrs_handled=("is_arithmetic",), samples=_shift_samples,
                      doc="out = x >> y, sign-filling with is_arithmetic, else on the unsigned bits"))


# --------------------------------------------------------------------------
# isnan / isinf / isfinite
# --------------------------------------------------------------------------
def _classify(fn, for_ints: bool):
    def kernel(c: Call):
        x = c.x("X")
        if x.dtype.kind == "b":
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no bool kernel for it")
        if x.dtype.kind in "iu":
            return {"Out": np.full(x.shape, for_ints, dtype=np.bool_)}
        return {"Out": np.asarray(fn(x), dtype=np.bool_)}
    return kernel


def _special_values(rng):
    x = rng.standard_normal((3, 4))
    x[0, :3] = [np.nan, np.inf, -np.inf]
    return [Sample({"X": [x]}), Sample({"X": [np.asarray(np.nan)]}, note="0-D"),
            Sample({"X": [rng.integers(-5, 5, (2, 3)).astype(np.int32)]}, note="int32")]


register(paddle_opdef("isnan_v2", _classify(np.isnan, False), doc="Out = X is NaN (bool)", samples=_special_values))
register(paddle_opdef("isinf_v2", _classify(np.isinf, False), doc="Out = X is +-inf (bool)", samples=_special_values))
register(paddle_opdef("isfinite_v2", _classify(np.isfinite, True), doc="Out = X is finite (bool)",
                      samples=_special_values))


# --------------------------------------------------------------------------
# isclose / allclose / equal_all
# --------------------------------------------------------------------------
def _tolerance(c: Call, slot: str, attr: str, default: str) -> float:
    if c.has(slot):
        t = np.asarray(c.x(slot))
        if t.dtype != np.float64:
            raise ExecutionError(f"op {c.op_type}: {slot} must be float64 (as in Paddle), got {t.dtype}")
        return float(t.reshape(-1)[0])
    value = c.attr(attr, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise c.unsupported(attr, value, "expected a number written as a string") from None


def _close(c: Call) -> np.ndarray:
    a, b = c.x("Input"), c.x("Other")
    if a.dtype.kind not in "f" or b.dtype != a.dtype:
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no kernel for {a.dtype} and {b.dtype}")
    if a.shape != b.shape:
        raise ExecutionError(f"op {c.op_type}: Input{a.shape} and Other{b.shape} must have the same shape")
    t = a.dtype.type
    rtol, atol = t(_tolerance(c, "Rtol", "rtol", "1e-05")), t(_tolerance(c, "Atol", "atol", "1e-08"))
    with np.errstate(all="ignore"):
        left = np.abs(a - b)
        right = atol + rtol * np.abs(b)
        out = (a == b) | (left <= right) | (np.abs(left - right) <= t(1e-15))
        if c.attr("equal_nan", False):
            out |= np.isnan(a) & np.isnan(b)
    return out


def _equal_all(c: Call):
    x, y = c.x("X"), c.x("Y")
    return {"Out": np.asarray(x.shape == y.shape and bool(np.all(x == y)))}


def _close_samples(rng):
    a = np.array([1.0, 1.0, np.nan, np.inf, np.inf, 1e-9, 100.0, 1.0, 0.5, 1.0, np.nan, 2.0])
    b = np.array([1.0 + 1e-6, 1.1, np.nan, np.inf, -np.inf, 0.0, 100.001, 1.0 + 3e-5, 0.5, 1.5, 1.0, 2.0])
    x = rng.standard_normal((2, 3))
    return [Sample({"Input": [a], "Other": [b]}, {"rtol": "1e-05", "atol": "1e-08", "equal_nan": False}),
            Sample({"Input": [a], "Other": [b]}, {"rtol": "1e-05", "atol": "1e-08", "equal_nan": True}, note="equal_nan"),
            Sample({"Input": [a], "Other": [b]}, {"rtol": "0.25", "atol": "0.0"}, note="rtol 0.25"),
            Sample({"Input": [x], "Other": [x.copy()]}, {"rtol": "1e-05", "atol": "1e-08"}, note="equal")]


def _equal_all_samples(rng):
    x = rng.standard_normal((2, 3))
    return [Sample({"X": [x], "Y": [x.copy()]}), Sample({"X": [x], "Y": [x + 1.0]}, note="differ"),
            Sample({"X": [x], "Y": [x[0]]}, note="shapes differ"),
            Sample({"X": [np.arange(4, dtype=np.int32)], "Y": [np.arange(4, dtype=np.int32)]}, note="int32")]


register(paddle_opdef("isclose", lambda c: {"Out": np.asarray(_close(c))}, attrs_handled=("rtol", "atol", "equal_nan"),
                      samples=_close_samples, doc="Out = |Input - Other| <= atol + rtol * |Other| elementwise (bool)"))
register(paddle_opdef("allclose", lambda c: {"Out": np.asarray(bool(np.all(_close(c))))}, samples=_close_samples,
                      attrs_handled=("rtol", "atol", "equal_nan"), doc="Out = all of isclose (0-D bool)"))
register(paddle_opdef("equal_all", _equal_all, samples=_equal_all_samples,
                      doc="Out = X and Y have one shape and equal elements (0-D bool)"))


# --------------------------------------------------------------------------
# arg_min
# --------------------------------------------------------------------------
def _arg_min_samples(rng):
    x = rng.standard_normal((3, 4, 5))
    xn = np.array([[np.nan, 1.0, 2.0], [np.nan, np.nan, np.nan], [np.inf, np.nan, np.inf], [3.0, np.nan, -1.0]])
    return [Sample({"X": [x]}, {"axis": 1}), Sample({"X": [x]}, {"axis": -1, "keepdims": True}, note="keepdims"),
            Sample({"X": [x]}, {"axis": 0, "dtype": 2}, note="int32"),
            Sample({"X": [x]}, {"axis": 0, "flatten": True}, note="flatten"),
            Sample({"X": [xn]}, {"axis": 1}, note="NaN"),
            Sample({"X": [np.asarray(2.5)]}, {"axis": 0, "keepdims": True}, note="0-D keepdims"),
            Sample({"X": [rng.integers(0, 3, (3, 4)).astype(np.int64)]}, {"axis": 1}, note="int64 ties")]


register(paddle_opdef("arg_min", lambda c: arg_extreme(c, False), attrs_handled=("axis", "keepdims", "flatten", "dtype"), samples=_arg_min_samples,
                      doc="Out = index of the first minimum along axis (NaN skipped)"))
