"""Elementary unary maths (exp/log variants, trigonometric and hyperbolic
functions, rounding, sign) and atan2, with Paddle's slots and grad rules.

Dtype rules are Paddle 3.3.1's CPU kernels: the trigonometric and hyperbolic
functions have no integer kernel; expm1, log1p, log2 and log10 turn an
integer input into float32; the rounding ops and sign keep integer inputs
as they are (their gradient is zero); atan2 of integers is float64.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .._unary import as_dtype, cj, complex_box, kinks, unary_op, unary_samples, uniform
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _zero_grad(c, x, out, g):
    """Rounding ops: Paddle's grad is 0 * dOut (NaN where dOut is NaN or inf)."""
    return 0.0 * g


def _round(x, c):
    d = int(c.attr("decimals", 0))
    if x.dtype.kind in "iu" or d == 0:  # complex: the real and imaginary parts each
        return np.rint(x) if x.dtype.kind in "fc" else x
    p = np.asarray(10.0 ** d, dtype=x.dtype)  # Paddle rounds half to even at the scaled value
    return np.rint(x * p) / p


def _acosh_grad(c, x, out, g):
    if np.iscomplexobj(x):  # sqrt(X - 1) sqrt(X + 1), not sqrt(X^2 - 1): the right branch for Re(X) < 0 too
        return g / np.conj(np.sqrt(x - 1.0) * np.sqrt(x + 1.0))
    return g / np.sqrt(x * x - 1.0)


def _acosh_samples(rng):
    out = unary_samples("X", uniform(1.2, 4.0), ({},), _CACOSH)(rng)
    return out + [Sample({"X": [complex_box((-2.5, -0.5), (0.3, 1.5))(rng, (3, 4))]}, note="complex, Re < 0")]


_POS = uniform(0.3, 3.0)
# Complex samples (Paddle has complex kernels): boxes clear of each function's branch cuts and poles.
_CANY = complex_box((-2.0, 2.0), (-1.5, 1.5))
_CPOS = complex_box((0.3, 2.5), (-1.5, 1.5))  # log: Re > 0, off the cut along the negative axis
_CACOSH = complex_box((0.5, 2.5), (0.3, 1.5))  # arccosh: off its cut (-inf, 1]
_CUNIT = complex_box((-0.9, 0.9), (-1.5, 1.5))  # asin, acos, atanh: cuts along the real axis beyond +-1
_CNEAR_RE = complex_box((-1.5, 1.5), (-0.8, 0.8))  # atan, asinh: cuts along the imaginary axis beyond +-i


def _csteps(rng, s):  # both parts clear of the rounding jumps
    a = _STEPS(rng, s) / 10.0
    return np.asarray(a + 1j * _STEPS(rng, s) / 10.0)
_UNIT = uniform(-0.9, 0.9)
# Rounding samples stay clear of the jumps so finite differences see flat pieces.
_STEPS = lambda rng, s: np.round(rng.uniform(-3, 3, s)) + rng.uniform(0.1, 0.4, s) * rng.choice([-1, 1], s)  # noqa: E731

# fmt: off
unary_op("expm1", lambda x, c: np.expm1(x), lambda c, x, o, g: g * cj(o) + g, ints="float32", doc="Out = e^X - 1",
         cgen=_CANY)
unary_op("log1p", lambda x, c: np.log(1.0 + x), lambda c, x, o, g: g / cj(x + 1.0), ints="float32",
         gen=uniform(-0.7, 3.0), doc="Out = log(1 + X) (Paddle computes 1 + X first, as written)",
         cgen=complex_box((-0.5, 2.0), (-1.5, 1.5)))
unary_op("log2", lambda x, c: np.log(x) / _LN2, lambda c, x, o, g: g / cj(x * _LN2), ints="float32", gen=_POS,
         doc="Out = log(X) / log(2)", cgen=_CPOS)
unary_op("log10", lambda x, c: np.log(x) / _LN10, lambda c, x, o, g: g / cj(x * _LN10), ints="float32", gen=_POS,
         doc="Out = log(X) / log(10)", cgen=_CPOS)
unary_op("sin", lambda x, c: np.sin(x), lambda c, x, o, g: g * cj(np.cos(x)), cgen=_CANY)
unary_op("cos", lambda x, c: np.cos(x), lambda c, x, o, g: -g * cj(np.sin(x)), cgen=_CANY)
unary_op("tan", lambda x, c: np.tan(x), lambda c, x, o, g: g / cj(np.cos(x) ** 2), gen=uniform(-1.3, 1.3),
         cgen=complex_box((-1.2, 1.2), (-1.0, 1.0)))
unary_op("asin", lambda x, c: np.arcsin(x), lambda c, x, o, g: g / cj(np.sqrt(1.0 - x * x)), gen=_UNIT, cgen=_CUNIT)
unary_op("acos", lambda x, c: np.arccos(x), lambda c, x, o, g: -g / cj(np.sqrt(1.0 - x * x)), gen=_UNIT, cgen=_CUNIT)
unary_op("atan", lambda x, c: np.arctan(x), lambda c, x, o, g: g / cj(1.0 + x * x), cgen=_CNEAR_RE)
unary_op("sinh", lambda x, c: np.sinh(x), lambda c, x, o, g: g * cj(np.cosh(x)), cgen=_CANY)
unary_op("cosh", lambda x, c: np.cosh(x), lambda c, x, o, g: g * cj(np.sinh(x)), cgen=_CANY)
unary_op("asinh", lambda x, c: np.arcsinh(x), lambda c, x, o, g: g / cj(np.sqrt(x * x + 1.0)), cgen=_CNEAR_RE)
unary_op("acosh", lambda x, c: np.arccosh(x), _acosh_grad, samples=_acosh_samples)
unary_op("atanh", lambda x, c: np.arctanh(x), lambda c, x, o, g: g / cj(1.0 - x * x), gen=_UNIT, cgen=_CUNIT)
unary_op("floor", lambda x, c: np.floor(x) if x.dtype.kind == "f" else x, _zero_grad, ints="keep", gen=_STEPS)
unary_op("ceil", lambda x, c: np.ceil(x) if x.dtype.kind == "f" else x, _zero_grad, ints="keep", gen=_STEPS)
unary_op("trunc", lambda x, c: np.trunc(x) if x.dtype.kind == "f" else x, _zero_grad, ints="keep", gen=_STEPS)
unary_op("rint", lambda x, c: np.rint(x) if x.dtype.kind == "f" else x, _zero_grad, ints="keep", gen=_STEPS,
         doc="out = x rounded half to even")
unary_op("round", _round, _zero_grad, ints="keep", gen=lambda rng, s: _STEPS(rng, s) / 10.0,
         attrs_list=({}, {"decimals": 1}, {"decimals": -1}), attrs_handled=("decimals",),
         doc="Out = X rounded half to even at `decimals` digits (integers unchanged)", cgen=_csteps)
unary_op("sign", lambda x, c: np.sign(x), None, ints="keep", gen=kinks(0.0),
         doc="Out = sign(X) (0 at 0, NaN at NaN; X/|X| for complex X); grad: Paddle's `scale` by 0")
# fmt: on


# --------------------------------------------------------------------------
# atan2: same-shape operands (no broadcasting); integers give float64
# --------------------------------------------------------------------------
def _atan2_operands(c: Call):
    x1, x2 = c.x("X1"), c.x("X2")
    if x1.shape != x2.shape:
        raise ExecutionError(f"op atan2: X1{x1.shape} and X2{x2.shape} must have the same shape")
    if x1.dtype.kind in "iu":
        x1, x2 = x1.astype(np.float64), x2.astype(np.float64)
    elif x1.dtype.kind != "f":
        raise ExecutionError(f"op atan2: Paddle 3.3.1 has no {x1.dtype} kernel for it")
    return x1, x2


def _atan2(c: Call):
    x1, x2 = _atan2_operands(c)
    return {"Out": as_dtype(np.arctan2(x1, x2), x1)}


def _atan2_grad(c: Call):
    x1, x2 = c.x("X1"), c.x("X2")
    g = c.x("Out@GRAD")
    with np.errstate(all="ignore"):
        r = x1 * x1 + x2 * x2
        res = {}
        if c.wants("X1@GRAD"):
            res["X1@GRAD"] = as_dtype(g * x2 / r, x1)
        if c.wants("X2@GRAD"):
            res["X2@GRAD"] = as_dtype(-g * x1 / r, x2)
    return res


def _atan2_samples(rng):
    r = rng.standard_normal
    return [Sample({"X1": [r((3, 4))], "X2": [r((3, 4))]}),
            Sample({"X1": [r((2, 3, 2))], "X2": [r((2, 3, 2))]}, note="3-D"),
            Sample({"X1": [np.asarray(r(()))], "X2": [np.asarray(r(()))]}, note="0-D")]


register(paddle_opdef("atan2", _atan2, {"atan2_grad": _atan2_grad}, samples=_atan2_samples,
                      doc="Out = atan2(X1, X2) (same shapes; integer inputs give float64)"))
