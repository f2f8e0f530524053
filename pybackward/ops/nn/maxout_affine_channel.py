"""maxout and affine_channel, with their grads.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels):
* maxout: channels split into C/groups runs of `groups` consecutive
  channels (axis 1, or 3 / -1 for NHWC); Out is each run's max, the grad
  goes to the first input equal to Out;
* affine_channel: `X * Scale[c] + Bias[c]`, c the channel axis (1, or the
  last for NHWC);

"""
from __future__ import annotations

import numpy as np

from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# maxout
# --------------------------------------------------------------------------
def _maxout_view(c: Call, x):
    if x.ndim != 4:
        raise c.unsupported("X rank", x.ndim, "maxout takes a 4-D input")
    axis = int(c.attr("axis", 1))
    if axis not in (1, 3, -1):
        raise c.unsupported("axis", axis, "maxout takes axis 1 or 3 (-1)")
    axis = axis % 4
    groups = int(c.attr("groups"))
    if groups < 1 or x.shape[axis] % groups:
        raise c.unsupported("groups", groups, f"must divide the {x.shape[axis]} channels")
    xm = np.moveaxis(x, axis, -1)
    return axis, xm.reshape(xm.shape[:-1] + (x.shape[axis] // groups, groups))


def _maxout(c: Call):
    x = c.x("X")
    axis, v = _maxout_view(c, x)
    return {"Out": np.moveaxis(v.max(axis=-1), -1, axis).astype(x.dtype, copy=False)}


def _maxout_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    axis, v = _maxout_view(c, x)
    out = np.moveaxis(c.x("Out"), axis, -1)
    dout = np.moveaxis(c.x("Out@GRAD"), axis, -1)
    hit = v == out[..., None]
    first = hit & (np.cumsum(hit, axis=-1) == 1)
    dv = np.where(first, dout[..., None], 0)
    dx = np.moveaxis(dv.reshape(dv.shape[:-2] + (-1,)), -1, axis)
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _distinct(rng, shape):
    v = rng.permutation(int(np.prod(shape))).astype(np.float64) * 0.1
    return (v + 0.01 * rng.random(v.shape)).reshape(shape) - v.mean()


def _maxout_samples(rng):
    return [Sample({"X": [_distinct(rng, (2, 6, 2, 3))]}, {"groups": 2, "axis": 1}, note="groups 2"),
            Sample({"X": [_distinct(rng, (1, 6, 3, 2))]}, {"groups": 3, "axis": 1}, note="groups 3"),
            Sample({"X": [_distinct(rng, (1, 2, 3, 4))]}, {"groups": 2, "axis": -1}, note="NHWC axis -1"),
            Sample({"X": [_distinct(rng, (1, 2, 2, 6))]}, {"groups": 3, "axis": 3}, note="axis 3")]


register(paddle_opdef("maxout", _maxout, {"maxout_grad": _maxout_grad}, samples=_maxout_samples,
                      attrs_handled=("groups", "axis"), doc="max over runs of `groups` consecutive channels"))


# --------------------------------------------------------------------------
# affine_channel
# --------------------------------------------------------------------------
def _channel_shape(c: Call, x):
    layout = c.attr("data_layout", "AnyLayout")
    if layout not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_layout", layout, "expected NCHW or NHWC")
    if x.ndim < 2:
        raise c.unsupported("X rank", x.ndim, "affine_channel needs at least 2 dims")
    axis = x.ndim - 1 if layout == "NHWC" else 1
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return axis, tuple(shape)


def _affine_channel(c: Call):
    x = c.x("X")
    _, shape = _channel_shape(c, x)
    s, b = np.asarray(c.x("Scale"), x.dtype).reshape(shape), np.asarray(c.x("Bias"), x.dtype).reshape(shape)
    return {"Out": (x * s + b).astype(x.dtype, copy=False)}


def _affine_channel_grad(c: Call):
    x, dy = c.x("X"), c.x("Out@GRAD")
    axis, shape = _channel_shape(c, x)
    scale = np.asarray(c.x("Scale"))
    others = tuple(i for i in range(x.ndim) if i != axis)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = (dy * scale.astype(x.dtype).reshape(shape)).astype(x.dtype, copy=False)
    if c.wants("Scale@GRAD"):
        res["Scale@GRAD"] = (dy * x).sum(axis=others).reshape(scale.shape).astype(scale.dtype)
    if c.wants("Bias@GRAD"):
        res["Bias@GRAD"] = dy.sum(axis=others).reshape(np.shape(c.x("Bias"))).astype(scale.dtype)
    return res


def _affine_channel_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 3, 2, 2))], "Scale": [r(3)], "Bias": [r(3)]}, {"data_layout": "NCHW"}, note="NCHW"),
            Sample({"X": [r((2, 2, 3, 4))], "Scale": [r(4)], "Bias": [r(4)]}, {"data_layout": "NHWC"}, note="NHWC"),
            Sample({"X": [r((3, 4))], "Scale": [r(4)], "Bias": [r(4)]}, {"data_layout": "NCHW"}, note="2-D")]


register(paddle_opdef("affine_channel", _affine_channel, {"affine_channel_grad": _affine_channel_grad},
                      samples=_affine_channel_samples, attrs_handled=("data_layout",),
                      doc="Out = X * Scale + Bias per channel"))
