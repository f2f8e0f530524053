"""Scans along one axis, with slots and grad rules from Paddle's records:
cumprod, logcumsumexp, cummax and cummin (cumsum is in math.py).

Behaviour probed on Paddle 3.3.1's CPU kernels:

* cummax / cummin report the LAST index of a tied running extreme, and a NaN
  becomes the running value from where it appears (a later NaN moves the
  index to itself); their grad adds Out@GRAD at the reported indices;
* logcumsumexp's grad is computed in log space, split by the sign of
  Out@GRAD, so large Out never overflows; its exclusive form starts from the
  dtype's lowest finite value (not -inf);
* cumprod's grad is exact where X has zeros (no division by X).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import normalize_axis
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import np_dtype


def _arr(v, like: np.ndarray) -> np.ndarray:
    return np.asarray(v).astype(like.dtype, copy=False)


def _to_last(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """X with the scan axis moved last (and reversed)."""
    x = np.moveaxis(x, axis, -1)
    return x[..., ::-1] if reverse else x


def _from_last(y: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return np.moveaxis(y[..., ::-1] if reverse else y, -1, axis)


def _shift(y: np.ndarray, fill) -> np.ndarray:
    """The exclusive form of an inclusive scan along the last axis."""
    out = np.empty_like(y)
    out[..., :1] = fill
    out[..., 1:] = y[..., :-1]
    return out


# --------------------------------------------------------------------------
# cumprod
# --------------------------------------------------------------------------
def _cumprod_axis(c: Call, x: np.ndarray) -> tuple[np.ndarray, int]:
    dim = int(c.attr("dim", -1))
    if not -x.ndim <= dim < max(x.ndim, 1):  # Paddle: a 0-D X takes dim=0 only
        raise c.unsupported("dim", dim, f"out of range for a {x.ndim}-D X")
    if x.ndim == 0:
        return x.reshape(1), 0
    return x, normalize_axis(dim, x.ndim)


def _cumprod(c: Call):
    x0 = np.asarray(c.x("X"))
    x, axis = _cumprod_axis(c, x0)
    rev, excl = bool(c.attr("reverse", False)), bool(c.attr("exclusive", False))
    y = np.cumprod(_to_last(x, axis, rev), axis=-1, dtype=x.dtype)
    if excl:
        y = _shift(y, 1)
    return {"Out": _from_last(y, axis, rev).reshape(x0.shape)}


def _cumprod_grad(c: Call):
    """dX_j = prod_{k<j} X_k * S_j, S_j = sum over later outputs i of
    g_i * prod_{j<k<=i} X_k (exclusive: i > j, product over j<k<i), by the
    backward recurrence S_j = g_j + X_{j+1} S_{j+1} - exact with zeros in X."""
    x0 = np.asarray(c.x("X"))
    if x0.dtype.kind not in "fc":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 differentiates float cumprod only")
    x, axis = _cumprod_axis(c, x0)
    rev, excl = bool(c.attr("reverse", False)), bool(c.attr("exclusive", False))
    xl = _to_last(x, axis, rev)
    if np.iscomplexobj(xl):  # dOut * conj(dOut/dX): every product below runs on conj(X)
        xl = np.conj(xl)
    gl = _to_last(np.reshape(c.x("Out@GRAD"), x.shape), axis, rev)
    n = xl.shape[-1]
    before = _shift(np.cumprod(xl, axis=-1), 1)
    s = np.zeros_like(xl)
    if n:
        s[..., n - 1] = 0 if excl else gl[..., n - 1]
        for j in range(n - 2, -1, -1):
            s[..., j] = (gl[..., j + 1] if excl else gl[..., j]) + xl[..., j + 1] * s[..., j + 1]
    dx = _from_last(before * s, axis, rev).reshape(x0.shape)
    return {"X@GRAD": _arr(dx, x0)}


def _cumprod_samples(rng):
    x = rng.uniform(0.5, 1.5, (3, 4)) * rng.choice([-1, 1], (3, 4))
    z = x.copy()
    z[0, 1] = z[1, 2] = z[1, 3] = 0.0  # one zero, and two in a row
    cx = x * np.exp(1j * rng.uniform(-np.pi, np.pi, (3, 4)))  # Paddle has complex kernels
    return [Sample({"X": [x]}, {"dim": 1, "exclusive": False, "reverse": False}, note="dim=1"),
            Sample({"X": [x]}, {"dim": -2, "exclusive": False, "reverse": False}, note="dim=-2"),
            Sample({"X": [z]}, {"dim": 1, "exclusive": False, "reverse": False}, note="zeros"),
            Sample({"X": [z]}, {"dim": 1, "exclusive": True, "reverse": False}, note="exclusive zeros"),
            Sample({"X": [z]}, {"dim": 1, "exclusive": False, "reverse": True}, note="reverse zeros"),
            Sample({"X": [x.reshape(2, 3, 2)]}, {"dim": 1, "exclusive": True, "reverse": True},
                   note="exclusive reverse"),
            Sample({"X": [np.asarray(1.7)]}, {"dim": 0, "exclusive": False, "reverse": False}, note="0-D"),
            Sample({"X": [cx]}, {"dim": 1, "exclusive": False, "reverse": False}, note="complex"),
            Sample({"X": [cx.reshape(2, 3, 2)]}, {"dim": 1, "exclusive": True, "reverse": True},
                   note="complex, exclusive reverse")]


register(paddle_opdef("cumprod", _cumprod, {"cumprod_grad": _cumprod_grad}, samples=_cumprod_samples,
                      attrs_handled=("dim", "exclusive", "reverse"),
                      doc="Out = cumulative product of X along `dim`"))


# --------------------------------------------------------------------------
# logcumsumexp
# --------------------------------------------------------------------------
def _lcse_axis(c: Call, x: np.ndarray) -> tuple[np.ndarray, int]:
    if c.attr("flatten", False) or x.ndim == 0:
        return x.reshape(-1), 0
    return x, normalize_axis(int(c.attr("axis", -1)), x.ndim)


def _lcse(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    y = np.logaddexp.accumulate(_to_last(x, axis, reverse), axis=-1)
    if exclusive:  # Paddle starts the exclusive scan from the lowest finite value, not -inf
        y = _shift(y, np.finfo(y.dtype).min)
    return _from_last(y, axis, reverse)


def _logcumsumexp(c: Call):
    x0 = np.asarray(c.x("X"))
    if x0.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x0.dtype} kernel for it")
    x, axis = _lcse_axis(c, x0)
    out = _lcse(x, axis, bool(c.attr("exclusive", False)), bool(c.attr("reverse", False)))
    return {"Out": out.reshape(x0.shape if not c.attr("flatten", False) else x.shape)}


def _logcumsumexp_grad(c: Call):
    """dX_j = sum over outputs i that read X_j of g_i exp(X_j - Out_i): a
    scan in the other direction of log|g| - Out, separately for g > 0 and g < 0."""
    x0 = np.asarray(c.x("X"))
    x, axis = _lcse_axis(c, x0)
    out = np.reshape(c.x("Out"), x.shape)
    g = np.reshape(c.x("Out@GRAD"), x.shape)
    excl, rev = bool(c.attr("exclusive", False)), not bool(c.attr("reverse", False))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lg = np.log(np.abs(g)) - out
        pos = np.exp(_lcse(np.where(g > 0, lg, -np.inf), axis, excl, rev) + x)
        neg = np.exp(_lcse(np.where(g < 0, lg, -np.inf), axis, excl, rev) + x)
    return {"X@GRAD": _arr((pos - neg).reshape(x0.shape), x0)}


def _lcse_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))]}, {"axis": -1, "flatten": False, "exclusive": False, "reverse": False},
                   note="axis=-1"),
            Sample({"X": [r((3, 4)) * 20]}, {"axis": 0, "flatten": False, "exclusive": False, "reverse": False},
                   note="axis=0 large"),
            Sample({"X": [r((2, 3))]}, {"axis": -1, "flatten": True, "exclusive": False, "reverse": False},
                   note="flatten"),
            Sample({"X": [r((3, 4))]}, {"axis": 1, "flatten": False, "exclusive": False, "reverse": True},
                   note="reverse")]
    # exclusive scans: tests/ops/test_math_reductions_scans.py (their lowest-value fill defeats finite differences)

register(paddle_opdef("logcumsumexp", _logcumsumexp, {"logcumsumexp_grad": _logcumsumexp_grad},
                      samples=_lcse_samples, attrs_handled=("axis", "flatten", "exclusive", "reverse"),
                      doc="Out = log(cumsum(exp(X))) along `axis`, stably"))


# --------------------------------------------------------------------------
# cummax / cummin
# --------------------------------------------------------------------------
def _cum_axis(c: Call, x: np.ndarray) -> int:
    return normalize_axis(int(c.attr("axis", -1)), x.ndim) if x.ndim else 0


def _cum_extreme(largest: bool):
    def kernel(c: Call):
        x0 = np.asarray(c.x("x"))
        x = x0.reshape(1) if x0.ndim == 0 else x0
        axis = _cum_axis(c, x0)
        dt = np_dtype(c, "dtype", int(c.attr("dtype", 3)))
        xl = np.moveaxis(x, axis, -1)
        out, idx = np.empty_like(xl), np.zeros(xl.shape, np.int64)
        n = xl.shape[-1]
        if n:
            best, at = xl[..., 0].copy(), np.zeros(xl.shape[:-1], np.int64)
            is_f = xl.dtype.kind == "f"
            for i in range(n):
                v = xl[..., i]
                better = (v >= best) if largest else (v <= best)
                if is_f:
                    better = np.isnan(v) | (~np.isnan(best) & better)
                best, at = np.where(better, v, best), np.where(better, i, at)
                out[..., i], idx[..., i] = best, at
        return {"out": np.moveaxis(out, -1, axis).reshape(x0.shape),
                "indices": np.moveaxis(idx, -1, axis).reshape(x0.shape).astype(dt)}
    return kernel


def _cum_extreme_grad(c: Call):
    x0 = np.asarray(c.x("x"))
    axis = _cum_axis(c, x0)
    shape = x0.shape or (1,)
    idx = np.moveaxis(np.reshape(c.x("indices"), shape).astype(np.int64), axis, -1)
    g = np.moveaxis(np.reshape(c.x("out@GRAD"), shape), axis, -1)
    dx = np.zeros(g.shape, dtype=x0.dtype)
    rows = np.arange(g[..., 0].size).reshape(g.shape[:-1] + (1,))
    flat = dx.reshape(-1, g.shape[-1]) if g.size else dx
    if g.size:
        np.add.at(flat, (rows.reshape(-1, 1), idx.reshape(-1, g.shape[-1])), g.reshape(-1, g.shape[-1]))
        dx = flat.reshape(g.shape)
    return {"x@GRAD": np.moveaxis(dx, -1, axis).reshape(x0.shape)}


def _cum_extreme_samples(rng):
    x = rng.standard_normal((3, 5))
    return [Sample({"x": [x]}, {"axis": -1, "dtype": 3}, note="axis=-1"),
            Sample({"x": [x]}, {"axis": 0, "dtype": 2}, note="axis=0 int32 indices"),
            Sample({"x": [rng.standard_normal((2, 3, 4))]}, {"axis": 1, "dtype": 3}, note="3-D")]
    # no 0-D sample: Paddle's cummax_grad fails on one (a scatter into an empty index)


for _t, _largest in (("cummax", True), ("cummin", False)):
    register(paddle_opdef(_t, _cum_extreme(_largest), {f"{_t}_grad": _cum_extreme_grad},
                          samples=_cum_extreme_samples, attrs_handled=("axis", "dtype"),
                          doc=f"out = running {'maximum' if _largest else 'minimum'} along `axis`, indices = "
                              "where it was taken (last of ties; NaN sticks)"))
