"""fused_elemwise_activation and fused_elemwise_add_activation: a binary
elementwise op (elementwise_add / elementwise_mul, Paddle's `axis`
broadcasting) composed with a unary one (scale, relu, tanh, sigmoid, gelu),
as Paddle's CPU kernels compute them. `functor_list` [f0, f1] means
f0(f1(...)): with f1 binary, Out = Unary(Binary(X, Y)) and IntermediateOut =
Binary(X, Y); with f0 binary, Out = Binary(X, Unary(Y)) and IntermediateOut
= Unary(Y). The grad op carries the same list with "_grad" appended to each
name (Paddle's maker); its kernel recomputes the intermediate from X and Y.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .._util import align_y, unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .special import erf

_BINARY = ("elementwise_add", "elementwise_mul")
_UNARY = ("scale", "relu", "tanh", "sigmoid", "gelu")
#: The compounds Paddle 3.3.1's kernels implement (others raise there too).
_IMPLEMENTED = ("elementwise_add,scale", "scale,elementwise_add", "elementwise_add,relu", "relu,elementwise_add",
                "elementwise_mul,scale", "tanh,elementwise_add", "elementwise_mul,tanh", "elementwise_mul,sigmoid",
                "gelu,elementwise_add")


def _unary(name: str, v: np.ndarray, scale) -> np.ndarray:
    t = v.dtype.type
    if name == "scale":
        return v * t(scale)
    if name == "relu":
        return np.maximum(v, t(0))
    if name == "tanh":
        return np.tanh(v)
    if name == "sigmoid":
        return t(1) / (t(1) + np.exp(-v))
    return (v * t(0.5) * (t(1) + erf(v * t(math.sqrt(0.5))).astype(v.dtype))).astype(v.dtype)


def _dunary(name: str, v: np.ndarray, scale) -> np.ndarray:
    """d Unary(v) / dv."""
    t = v.dtype.type
    if name == "scale":
        return np.full(v.shape, t(scale))
    if name == "relu":
        return (v > 0).astype(v.dtype)
    if name == "tanh":
        return t(1) - np.tanh(v) ** 2
    if name == "sigmoid":
        s = t(1) / (t(1) + np.exp(-v))
        return s * (t(1) - s)
    cdf = t(0.5) * (t(1) + erf(v * t(math.sqrt(0.5))).astype(v.dtype))
    return (cdf + v * np.exp(-v * v / t(2)) / t(math.sqrt(2 * math.pi))).astype(v.dtype)


def _setup(c: Call):
    names = [str(f) for f in (c.attr("functor_list") or [])]
    bare = [f[:-len("_grad")] if f.endswith("_grad") else f for f in names]
    if ",".join(bare) not in _IMPLEMENTED:
        raise c.unsupported("functor_list", names, f"Paddle implements {', '.join(_IMPLEMENTED)}")
    if c.op_type.startswith("fused_elemwise_add_activation") and "elementwise_add" not in bare:
        raise c.unsupported("functor_list", names, "fused_elemwise_add_activation needs elementwise_add")
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    if x.dtype != y.dtype:
        raise ExecutionError(f"{c.op_type}: X ({x.dtype}) and Y ({y.dtype}) must have one dtype")
    unary_compound = bare[1] in _BINARY
    binary, unary = (bare[1], bare[0]) if unary_compound else (bare[0], bare[1])
    axis = int(c.attr("axis", -1))
    try:  # Paddle broadcasts the smaller one (Y, unless X is) along `axis`
        if x.ndim >= y.ndim:
            xb, yb = x, align_y(x.shape, y, axis)
        else:
            xb, yb = align_y(y.shape, x, axis), y
        np.broadcast_shapes(xb.shape, yb.shape)
    except ValueError as e:
        raise ExecutionError(f"{c.op_type}: X {list(x.shape)} and Y {list(y.shape)} do not broadcast "
                             f"with axis={axis} ({e})") from None
    return x, y, xb, yb, unary_compound, binary, unary, float(c.attr("scale", 0.0))


def _forward(c: Call):
    x, y, xb, yb, unary_compound, binary, unary, scale = _setup(c)
    op = np.add if binary == "elementwise_add" else np.multiply
    if unary_compound:
        inter = op(xb, yb)
        out = _unary(unary, inter, scale)
    else:
        inter = _unary(unary, y, scale)
        out = op(xb, inter.reshape(yb.shape))
    return {"Out": out.astype(x.dtype, copy=False), "IntermediateOut": inter.astype(x.dtype, copy=False)}


def _backward(c: Call):
    x, y, xb, yb, unary_compound, binary, unary, scale = _setup(c)
    g = np.asarray(c.x("Out@GRAD"))
    add = binary == "elementwise_add"
    if unary_compound:
        b = xb + yb if add else xb * yb
        db = g * _dunary(unary, b, scale)
        gx, gy = (db, db) if add else (db * yb, db * xb)
    else:
        u = _unary(unary, yb, scale)
        gx = g if add else g * u
        gy = g * _dunary(unary, yb, scale) * (1 if add else xb)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = unbroadcast(np.asarray(gx), xb.shape).reshape(x.shape).astype(g.dtype)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = unbroadcast(np.asarray(gy), yb.shape).reshape(y.shape).astype(g.dtype)
    return res


def _samples(add_only: bool):
    def samples(rng):
        def away(shape):  # away from relu's kink
            v = rng.standard_normal(shape)
            return np.where(np.abs(v) < 0.1, 0.4, v)
        lists = [f.split(",") for f in _IMPLEMENTED if not add_only or "elementwise_add" in f]
        out = [Sample({"X": [away((2, 3))], "Y": [away((2, 3))]},
                      {"functor_list": f, "scale": 0.5, "axis": -1, "save_intermediate_out": True})
               for f in lists]
        out.append(Sample({"X": [away((2, 3, 4))], "Y": [away((3,))]},
                          {"functor_list": lists[-1] if add_only else ["elementwise_mul", "scale"],
                           "scale": 2.0, "axis": 1, "save_intermediate_out": False}, note="Y along axis 1"))
        out.append(Sample({"X": [away((2, 3))], "Y": [away((2, 3))]},
                          {"functor_list": ["relu", "elementwise_add"], "scale": 0.0, "axis": -1,
                           "save_intermediate_out": False}, outputs={"Out": 1, "IntermediateOut": 1}))
        return out
    return samples


for _op in ("fused_elemwise_activation", "fused_elemwise_add_activation"):
    register(paddle_opdef(_op, _forward, {_op + "_grad": _backward}, samples=_samples(_op.endswith("add_activation")),
                          attrs_handled=("functor_list", "axis", "scale", "save_intermediate_out"),
                          doc="Out = Unary(Binary(X, Y)) or Binary(X, Unary(Y)), per functor_list"))
