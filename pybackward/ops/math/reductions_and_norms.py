"""Reductions and norms beyond reduce_*, with slots and grad rules from Paddle's records:
logsumexp, nansum, reduce_amax / reduce_amin, frobenius_norm, l1_norm, norm (l2-normalize),
dist, renorm, std and var.

Behaviour probed on Paddle 3.3.1's CPU kernels:

* an empty axis list means every axis (as reduce_all);
* logsumexp subtracts the row maximum (an infinite maximum is taken as 0,
  so all -inf rows give -inf and a +inf row gives +inf);
* nansum's grad is zero where X is NaN;
* reduce_amax / reduce_amin share the gradient equally among the elements
  equal to the result (reduce_max gives each of them all of it);
* std / var divide by N - `correction`; the `unbiased` attr is ignored;
* renorm scales a slice by max_norm / (norm + 1e-7) when its p-norm exceeds
  max_norm; its grad kernel leaves the 1e-7 out of the second term, as Paddle's;
  a negative axis is refused (Paddle's kernel does not normalise it and crashes);
* l1_norm has a float32 kernel only in Paddle (float64 runs here for the
  finite-difference checks).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import normalize_axis, reduce_axes, unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import np_dtype


def _f(c: Call, slot: str) -> np.ndarray:
    x = np.asarray(c.x(slot))
    if x.dtype.kind not in "fc":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel for it")
    return x


def _arr(v, like: np.ndarray) -> np.ndarray:
    return np.asarray(v).astype(like.dtype, copy=False)


def _kept(a, x: np.ndarray, axes) -> np.ndarray:
    """A reduced result (with or without kept dims) broadcast back over X."""
    a = np.asarray(a).reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
    return np.broadcast_to(a, x.shape)


def _axes(c: Call, x: np.ndarray, dim: str = "dim", all_attr: str | None = "reduce_all"):
    return reduce_axes(c.attr(dim, []), x.ndim, bool(c.attr(all_attr, False)) if all_attr else False)


def _away_from_zero(rng, shape, low=0.3):
    v = rng.standard_normal(shape)
    return np.where(np.abs(v) < low, np.sign(v) * (1.0 + np.abs(v)), v)


# --------------------------------------------------------------------------
# logsumexp
# --------------------------------------------------------------------------
def _logsumexp(c: Call):
    x = _f(c, "X")
    axes = _axes(c, x, "axis")
    m = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros([1] * x.ndim, x.dtype)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not c.attr("keepdim", False):
        out = out.reshape([d for i, d in enumerate(x.shape) if i not in axes])
    return {"Out": _arr(out, x)}


def _logsumexp_grad(c: Call):
    x = _f(c, "X")
    axes = _axes(c, x, "axis")
    g, out = _kept(c.x("Out@GRAD"), x, axes), _kept(c.x("Out"), x, axes)
    return {"X@GRAD": _arr(g * np.exp(x - out), x)}


def _logsumexp_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 3, 4))]}, {"axis": [1], "keepdim": False, "reduce_all": False}, note="axis=1"),
            Sample({"X": [r((2, 3, 4))]}, {"axis": [0, -1], "keepdim": True, "reduce_all": False},
                   note="axis=[0,-1] keepdim"),
            Sample({"X": [r((3, 4)) * 30]}, {"axis": [], "keepdim": False, "reduce_all": True}, note="all, large"),
            Sample({"X": [np.asarray(r(()))]}, {"axis": [], "keepdim": False, "reduce_all": True}, note="0-D")]


register(paddle_opdef("logsumexp", _logsumexp, {"logsumexp_grad": _logsumexp_grad}, samples=_logsumexp_samples,
                      attrs_handled=("axis", "keepdim", "reduce_all"),
                      doc="Out = log(sum(exp(X))) over `axis`, computed around the maximum"))


# --------------------------------------------------------------------------
# nansum, reduce_amax / reduce_amin
# --------------------------------------------------------------------------
def _nansum_axes(c: Call, x: np.ndarray):
    if c.has("AxisTensor") or c.has("AxisTensorList"):
        raise c.unsupported("AxisTensor", "tensor", "axis given as a tensor")
    return _axes(c, x, "axis", None)


def _nansum(c: Call):
    x = np.asarray(c.x("x"))
    axes, keep = _nansum_axes(c, x), bool(c.attr("keepdim", False))
    od = int(c.attr("dtype", -1))
    if od != -1:
        dt = np_dtype(c, "dtype", od)
    else:
        dt = np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype
    if x.dtype.kind in "fc":  # complex: NaN in either part counts as 0, as in Paddle
        x = np.where(np.isnan(x), 0, x)
    return {"out": np.asarray(np.sum(x, axis=axes, keepdims=keep, dtype=dt))}


def _nansum_grad(c: Call):
    x = np.asarray(c.x("x"))
    g = _kept(c.x("out@GRAD"), x, _nansum_axes(c, x))
    dx = np.where(np.isnan(x), 0, g) if x.dtype.kind in "fc" else g
    return {"x@GRAD": _arr(dx, x)}


def _nansum_samples(rng):
    x = rng.standard_normal((3, 4))
    x[0, 1] = x[2, 3] = np.nan
    out = [Sample({"x": [x]}, {"axis": [1], "dtype": -1, "keepdim": False}, note="axis=1 NaN"),
           Sample({"x": [x]}, {"axis": [0], "dtype": -1, "keepdim": True}, note="keepdim"),
           Sample({"x": [rng.standard_normal((2, 3, 2))]}, {"axis": [], "dtype": -1, "keepdim": False}, note="all")]
    z = x + 1j * rng.standard_normal((3, 4))  # complex (Paddle's kernels: NaN in Re or Im counts as 0)
    z[1, 2] = complex(0.5, np.nan)
    return out + [Sample({"x": [z]}, {"axis": [1], "dtype": -1, "keepdim": False}, note="complex, NaN in Re or Im")]


register(paddle_opdef("nansum", _nansum, {"nansum_grad": _nansum_grad}, samples=_nansum_samples,
                      attrs_handled=("axis", "dtype", "keepdim"), doc="out = sum of X over `axis`, NaN counted as 0"))


def _amax_like(fn):
    def kernel(c: Call):
        x = np.asarray(c.x("X"))
        if c.has("AxisTensor") or c.has("AxisTensorList"):
            raise c.unsupported("AxisTensor", "tensor", "axis given as a tensor")
        return {"Out": np.asarray(fn(x, axis=_axes(c, x), keepdims=bool(c.attr("keep_dim", False))))}
    return kernel


def _amax_grad(c: Call):
    x = np.asarray(c.x("X"))
    axes = _axes(c, x)
    mask = x == _kept(c.x("Out"), x, axes)
    dx = _kept(c.x("Out@GRAD"), x, axes) * mask / np.sum(mask, axis=axes, keepdims=True)
    return {"X@GRAD": _arr(dx, x)}


def _amax_samples(rng):
    x = rng.standard_normal((3, 4, 2))
    # two-way ties: central differences give each half, as the shared grad does
    t = np.array([[1.0, 3.0, 3.0, 2.0], [0.5, 0.7, 0.5, 0.7], [-1.0, 2.0, -1.0, 2.0]])
    return [Sample({"X": [x]}, {"dim": [1], "keep_dim": False, "reduce_all": False}, note="dim=1"),
            Sample({"X": [x]}, {"dim": [0, -1], "keep_dim": True, "reduce_all": False}, note="dims keep_dim"),
            Sample({"X": [x]}, {"dim": [], "keep_dim": False, "reduce_all": True}, note="reduce_all"),
            Sample({"X": [t]}, {"dim": [1], "keep_dim": False, "reduce_all": False}, note="two-way ties"),
            Sample({"X": [np.asarray(1.5)]}, {"dim": [], "keep_dim": False, "reduce_all": True}, note="0-D")]


for _t, _fn in (("reduce_amax", np.max), ("reduce_amin", np.min)):
    register(paddle_opdef(_t, _amax_like(_fn), {f"{_t}_grad": _amax_grad}, samples=_amax_samples,
                          attrs_handled=("dim", "keep_dim", "reduce_all"),
                          doc=f"Out = {_fn.__name__} of X over `dim`; the grad is shared equally among ties"))


# --------------------------------------------------------------------------
# frobenius_norm, l1_norm, norm
# --------------------------------------------------------------------------
def _frobenius_norm(c: Call):
    x = _f(c, "X")
    return {"Out": _arr(np.sqrt(np.sum(x * x, axis=_axes(c, x), keepdims=bool(c.attr("keep_dim", False)))), x)}


def _frobenius_norm_grad(c: Call):
    x = _f(c, "X")
    axes = _axes(c, x)
    with np.errstate(all="ignore"):
        if np.iscomplexobj(x):  # Out = sqrt(sum(X^2)) is holomorphic: dOut * conj(X / Out)
            dx = _kept(c.x("Out@GRAD"), x, axes) * np.conj(x / _kept(c.x("Out"), x, axes))
        else:
            dx = x * _kept(c.x("Out@GRAD"), x, axes) / _kept(c.x("Out"), x, axes)
    return {"X@GRAD": _arr(dx, x)}


def _frobenius_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))]}, {"dim": [1], "keep_dim": False, "reduce_all": False}, note="dim=1"),
            Sample({"X": [r((2, 3, 4))]}, {"dim": [-2, -1], "keep_dim": True, "reduce_all": False}, note="keep_dim"),
            Sample({"X": [r((2, 3))]}, {"dim": [0], "keep_dim": False, "reduce_all": True}, note="reduce_all"),
            # complex: Paddle squares (not |X|^2), so Out is complex
            Sample({"X": [r((3, 4)) + 1j * r((3, 4))]}, {"dim": [1], "keep_dim": False, "reduce_all": False},
                   note="complex"),
            Sample({"X": [r((2, 3)) + 1j * r((2, 3))]}, {"dim": [0], "keep_dim": True, "reduce_all": True},
                   note="complex, reduce_all")]


register(paddle_opdef("frobenius_norm", _frobenius_norm, {"frobenius_norm_grad": _frobenius_norm_grad},
                      samples=_frobenius_samples, attrs_handled=("dim", "keep_dim", "reduce_all"),
                      doc="Out = sqrt(sum(X^2)) over `dim`"))


def _l1_norm(c: Call):
    x = _f(c, "X")
    return {"Out": _arr(np.sum(np.abs(x)), x)}


def _l1_norm_grad(c: Call):
    x = _f(c, "X")
    return {"X@GRAD": _arr(np.sign(x) * np.reshape(c.x("Out@GRAD"), ()), x)}


register(paddle_opdef("l1_norm", _l1_norm, {"l1_norm_grad": _l1_norm_grad},
                      samples=lambda rng: [Sample({"X": [_away_from_zero(rng, (3, 4))]}),
                                           Sample({"X": [_away_from_zero(rng, (5,))]}, note="1-D")],
                      doc="Out = sum(|X|), 0-D (Paddle: float32 only)"))


def _norm_axis(c: Call, x: np.ndarray) -> int:
    if x.ndim == 0:
        raise ExecutionError(f"op {c.op_type}: X must have at least one dim")
    return normalize_axis(int(c.attr("axis", -1)), x.ndim)


def _norm(c: Call):
    x = _f(c, "X")
    n = np.sqrt(np.sum(x * x, axis=_norm_axis(c, x), keepdims=True) + c.attr("epsilon", 1e-10))
    return {"Out": _arr(x / n, x), "Norm": _arr(n, x)}


def _norm_grad(c: Call):
    x = _f(c, "X")
    n, g = np.asarray(c.x("Norm")), np.asarray(c.x("Out@GRAD"))
    dx = g / n - x * np.sum(x * g, axis=_norm_axis(c, x), keepdims=True) / n ** 3
    return {"X@GRAD": _arr(dx, x)}


def _norm_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))]}, {"axis": 1, "epsilon": 1e-10, "is_test": False}, note="axis=1"),
            Sample({"X": [r((2, 3, 4))]}, {"axis": -2, "epsilon": 1e-10, "is_test": False}, note="axis=-2"),
            Sample({"X": [r((2, 3))]}, {"axis": 0, "epsilon": 0.5, "is_test": False}, note="large epsilon")]


register(paddle_opdef("norm", _norm, {"norm_grad": _norm_grad}, samples=_norm_samples,
                      attrs_handled=("axis", "epsilon", "is_test"),
                      doc="Out = X / sqrt(sum(X^2, axis) + epsilon); Norm = that root (kept dim)"))


# --------------------------------------------------------------------------
# dist, renorm
# --------------------------------------------------------------------------
def _pnorm_all(a: np.ndarray, p: float):
    a = np.abs(a)
    if p == 0:
        return np.sum(a != 0).astype(a.dtype)
    if p == np.inf:
        return np.max(a)
    if p == -np.inf:
        return np.min(a)
    return np.sum(a ** p) ** (1.0 / p)


def _dist(c: Call):
    x, y = _f(c, "X"), _f(c, "Y")
    return {"Out": _arr(_pnorm_all(x - y, float(c.attr("p", 2.0))), x)}


def _dist_grad(c: Call):
    x, y = _f(c, "X"), _f(c, "Y")
    p = float(c.attr("p", 2.0))
    d = x - y
    out, g = np.reshape(c.x("Out"), ()), np.reshape(c.x("Out@GRAD"), ())
    if p == 0 or out == 0:
        gd = np.zeros_like(d)
    elif p in (np.inf, -np.inf):
        gd = (np.abs(d) == out) * np.sign(d) * g
    else:
        gd = np.sign(d) * np.abs(d) ** (p - 1) * out ** (1 - p) * g
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _arr(unbroadcast(gd, x.shape), x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _arr(-unbroadcast(gd, y.shape), y)
    return res


def _dist_samples(rng):
    def xy(sx, sy):
        y = rng.standard_normal(sy)
        return {"X": [y + _away_from_zero(rng, sx) if sx == sy else rng.standard_normal(sx) * 3], "Y": [y]}
    return [Sample(xy((3, 4), (3, 4)), {"p": 2.0}, note="p=2"),
            Sample(xy((3, 4), (3, 4)), {"p": 1.0}, note="p=1"),
            Sample(xy((3, 4), (3, 4)), {"p": 3.0}, note="p=3"),
            Sample(xy((2, 3, 4), (3, 1)), {"p": 2.0}, note="broadcast"),
            Sample(xy((3, 4), (3, 4)), {"p": float("inf")}, note="p=inf"),
            Sample(xy((3, 4), (3, 4)), {"p": float("-inf")}, note="p=-inf"),
            Sample(xy((3, 4), (3, 4)), {"p": 0.0}, note="p=0")]


register(paddle_opdef("dist", _dist, {"dist_grad": _dist_grad}, samples=_dist_samples, attrs_handled=("p",),
                      doc="Out = p-norm of X - Y (broadcast), 0-D; p = 0, inf, -inf too"))


def _renorm_parts(c: Call, x: np.ndarray):
    axis = int(c.attr("axis", -1))
    if not 0 <= axis < x.ndim:  # Paddle's CPU kernel reads outside X (it crashes) for a negative axis
        raise c.unsupported("axis", axis, f"renorm needs 0 <= axis < {x.ndim}")
    others = tuple(i for i in range(x.ndim) if i != axis)
    p, max_norm = float(c.attr("p", 2.0)), float(c.attr("max_norm", 1.0))
    if p <= 0:
        raise c.unsupported("p", p, "renorm needs p > 0")
    powsum = np.sum(np.abs(x) ** p, axis=others, keepdims=True)
    return p, max_norm, others, powsum, powsum ** (1.0 / p)


def _renorm(c: Call):
    x = _f(c, "X")
    p, max_norm, _, _, norm = _renorm_parts(c, x)
    scale = np.where(norm > max_norm, max_norm / (norm + 1e-7), 1.0)
    return {"Out": _arr(x * scale, x)}


def _renorm_grad(c: Call):
    x = _f(c, "X")
    g = np.asarray(c.x("Out@GRAD"))
    p, max_norm, others, powsum, norm = _renorm_parts(c, x)
    over = norm > max_norm
    scale = np.where(over, max_norm / (norm + 1e-7), 1.0)
    with np.errstate(all="ignore"):
        coef = np.where(over, -max_norm * powsum ** (-1.0 - 1.0 / p), 0.0)
        dx = scale * g + coef * np.sum(x * g, axis=others, keepdims=True) * np.abs(x) ** (p - 1) * np.sign(x)
    return {"X@GRAD": _arr(dx, x)}


def _renorm_samples(rng):
    x = _away_from_zero(rng, (3, 4, 2))
    return [Sample({"X": [x]}, {"p": 2.0, "axis": 1, "max_norm": 2.0}, note="p=2 axis=1"),
            Sample({"X": [x]}, {"p": 1.0, "axis": 2, "max_norm": 5.0}, note="p=1 axis=2"),
            Sample({"X": [x]}, {"p": 3.0, "axis": 0, "max_norm": 1.5}, note="p=3 axis=0"),
            Sample({"X": [x]}, {"p": 2.0, "axis": 0, "max_norm": 100.0}, note="none over max_norm")]


register(paddle_opdef("renorm", _renorm, {"renorm_grad": _renorm_grad}, samples=_renorm_samples,
                      attrs_handled=("p", "axis", "max_norm"),
                      doc="Out = X with each slice along `axis` scaled to p-norm max_norm where it exceeds it"))


# --------------------------------------------------------------------------
# std, var
# --------------------------------------------------------------------------
def _moments(c: Call, x: np.ndarray):
    axes = _axes(c, x, "axis", None)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    dev = x - np.mean(x, axis=axes, keepdims=True)
    return axes, dev, n - float(c.attr("correction", 1.0))


def _var_value(c: Call, x: np.ndarray):
    axes, dev, dof = _moments(c, x)
    with np.errstate(all="ignore"):
        return np.sum(dev * dev, axis=axes, keepdims=bool(c.attr("keepdim", False))) / max(dof, 0.0)


def _var(c: Call):
    x = _f(c, "x")
    return {"out": _arr(_var_value(c, x), x)}


def _std(c: Call):
    x = _f(c, "x")
    return {"out": _arr(np.sqrt(_var_value(c, x)), x)}


def _var_grad(c: Call):
    x = _f(c, "x")
    axes, dev, dof = _moments(c, x)
    with np.errstate(all="ignore"):
        return {"x@GRAD": _arr(2.0 * _kept(c.x("out@GRAD"), x, axes) * dev / dof, x)}


def _std_grad(c: Call):
    x = _f(c, "x")
    axes, dev, dof = _moments(c, x)
    with np.errstate(all="ignore"):
        dx = _kept(c.x("out@GRAD"), x, axes) * dev / (dof * _kept(c.x("out"), x, axes))
    return {"x@GRAD": _arr(dx, x)}


def _std_samples(rng):
    r = rng.standard_normal
    return [Sample({"x": [r((3, 5))]}, {"axis": [1], "keepdim": False, "unbiased": True, "correction": 1.0},
                   note="axis=1"),
            Sample({"x": [r((2, 3, 4))]}, {"axis": [0, -1], "keepdim": True, "unbiased": True, "correction": 1.0},
                   note="axes keepdim"),
            Sample({"x": [r((3, 4))]}, {"axis": [], "keepdim": False, "unbiased": False, "correction": 0.0},
                   note="all, biased"),
            Sample({"x": [r((4, 5))]}, {"axis": [0], "keepdim": False, "unbiased": True, "correction": 2.0},
                   note="correction=2")]


register(paddle_opdef("var", _var, {"var_grad": _var_grad}, samples=_std_samples,
                      attrs_handled=("axis", "keepdim", "correction"),
                      doc="out = sum((x - mean)^2) / (N - correction) over `axis`"))
register(paddle_opdef("std", _std, {"std_grad": _std_grad}, samples=_std_samples,
                      attrs_handled=("axis", "keepdim", "correction"),
                      doc="out = sqrt(var(x)) over `axis`, N - correction degrees of freedom"))
