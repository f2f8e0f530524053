"""unpool3d and fractional_max_pool3d, with their grads.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* unpool3d (max): `Out[Indices] = X` per (N, C) volume, Out of
  `output_size` (Paddle's shape inference reads it as the shape; the Python
  API computes `(in-1)*s - 2p + k`); the grad reads Out@GRAD at Indices.
* fractional_max_pool3d: fractional_max_pool2d one axis further - per axis
  `a = (in - k) / (out - 1)` (disjoint windows with u rescaled when k is 0),
  windows `[int((o+u)*a) - int(u*a), ...)` in float; out the window's first
  maximum, mask (int32) its flat index in the volume; the grad adds out@GRAD
  at mask. A random_u of 0 draws u from the interpreter's generator.
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from .pool import distinct
from .pool_nd import fractional_windows, max_with_index, scatter_by_mask
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# unpool3d
# --------------------------------------------------------------------------
def _unpool3d_setup(c: Call, x):
    if x.ndim != 5:
        raise c.unsupported("X rank", x.ndim, "unpool3d takes a 5-D input")
    if c.attr("data_format", "NCDHW") != "NCDHW":
        raise c.unsupported("data_format", c.attr("data_format"), "unpool3d takes NCDHW")
    osz = [int(v) for v in (c.attr("output_size", []) or [])]
    if len(osz) != 3 or min(osz) < 1:
        # Paddle's shape inference takes output_size as the output's shape (zeros: an empty output)
        raise c.unsupported("output_size", osz, "three positive sizes (paddle.nn.functional.max_unpool3d "
                                                "computes them from ksize, strides and paddings)")
    shape = tuple(osz)
    idx = np.asarray(c.x("Indices")).astype(np.int64)
    if idx.shape != x.shape:
        raise ExecutionError(f"unpool3d: Indices {idx.shape} and X {x.shape} differ")
    vol = int(np.prod(shape))
    if idx.size and (idx.min() < 0 or idx.max() >= vol):
        raise ExecutionError(f"unpool3d: an index is outside the output volume of {vol}")
    return shape, idx.reshape(x.shape[0] * x.shape[1], -1), vol


def _unpool3d(c: Call):
    x = c.x("X")
    shape, idx, vol = _unpool3d_setup(c, x)
    out = np.zeros((idx.shape[0], vol), x.dtype)
    out[np.arange(idx.shape[0])[:, None], idx] = x.reshape(idx.shape)
    return {"Out": out.reshape(x.shape[:2] + shape)}


def _unpool3d_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    _, idx, vol = _unpool3d_setup(c, x)
    dy = np.asarray(c.x("Out@GRAD")).reshape(idx.shape[0], vol)
    return {"X@GRAD": np.take_along_axis(dy, idx, axis=1).reshape(x.shape).astype(x.dtype, copy=False)}


def _unpool3d_samples(rng):
    x = rng.standard_normal((1, 2, 2, 2, 3))
    # indices of a 2x2x2 stride-2 max pooling of a 4x4x6 volume: one per window
    od, oh, ow = np.meshgrid(np.arange(2), np.arange(2), np.arange(3), indexing="ij")
    pick = rng.integers(0, 2, (1, 2, 2, 2, 3, 3))
    idx = (((2 * od + pick[..., 0]) * 4 + (2 * oh + pick[..., 1])) * 6 + (2 * ow + pick[..., 2])).astype(np.int32)
    return [Sample({"X": [x], "Indices": [idx]}, {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0],
                                                  "output_size": [4, 4, 6], "data_format": "NCDHW"},
                   wrt=("X",), note="2x2x2 s2"),
            Sample({"X": [x], "Indices": [idx]}, {"ksize": [3, 3, 3], "strides": [2, 2, 2], "paddings": [1, 1, 1],
                                                  "output_size": [5, 4, 7], "data_format": "NCDHW"},
                   wrt=("X",), note="3x3x3 s2 pad 1, larger output")]


register(paddle_opdef("unpool3d", _unpool3d, {"unpool3d_grad": _unpool3d_grad}, samples=_unpool3d_samples,
                      attrs_handled=("ksize", "strides", "paddings", "output_size", "data_format"),
                      doc="3-D max unpooling: Out[Indices] = X in each volume"))


# --------------------------------------------------------------------------
# fractional_max_pool3d
# --------------------------------------------------------------------------
def _fractional_max_pool3d(c: Call):
    x = c.x("x")
    out, mask = max_with_index(x, fractional_windows(c, x, 3))
    return {"out": out, "mask": mask}


def _fractional_max_pool3d_grad(c: Call):
    if not c.wants("x@GRAD"):
        return {}
    x = c.x("x")
    return {"x@GRAD": scatter_by_mask(c, x, np.asarray(c.x("mask")), c.x("out@GRAD"))}


def _fractional3d_samples(rng):
    d = lambda *s: distinct(rng, s)  # noqa: E731
    return [
        Sample({"x": [d(1, 2, 5, 6, 5)]}, {"output_size": [2, 3, 2], "kernel_size": [0, 0, 0], "random_u": 0.3,
                                           "return_mask": True}, note="disjoint windows"),
        Sample({"x": [d(2, 1, 6, 5, 7)]}, {"output_size": [3, 2, 4], "kernel_size": [2, 2, 2], "random_u": 0.7,
                                           "return_mask": True}, note="kernel_size"),
    ]


register(paddle_opdef("fractional_max_pool3d", _fractional_max_pool3d,
                      {"fractional_max_pool3d_grad": _fractional_max_pool3d_grad}, samples=_fractional3d_samples,
                      attrs_handled=("output_size", "kernel_size", "random_u", "return_mask"),
                      doc="3-D fractional max pooling (windows from random_u; u drawn when 0)"))
