"""pad, crop and crop_tensor, with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import ints_from
from .._inputs import array_in


# --------------------------------------------------------------------------
# pad / crop / crop_tensor
# --------------------------------------------------------------------------
def _pad_pairs(c: Call, ndim: int) -> list[tuple[int, int]]:
    p = [int(v) for v in c.attr("paddings", ())]
    if len(p) != 2 * ndim:
        raise ExecutionError(f"pad: {len(p)} paddings for an input of rank {ndim} (need {2 * ndim})")
    if any(v < 0 for v in p):
        raise c.unsupported("paddings", p, "negative paddings")
    return [(p[2 * i], p[2 * i + 1]) for i in range(ndim)]


def _pad(c: Call):
    x = array_in(c)
    pairs = _pad_pairs(c, x.ndim)
    return {"Out": np.pad(x, pairs, constant_values=np.asarray(c.attr("pad_value", 0.0)).astype(x.dtype))}


def _pad_grad(c: Call):
    g = array_in(c, "Out@GRAD")
    pairs = _pad_pairs(c, g.ndim)
    return {"X@GRAD": g[tuple(slice(b, d - a) for (b, a), d in zip(pairs, g.shape))].copy()}


register(paddle_opdef(
    "pad", _pad, {"pad_grad": _pad_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"paddings": [1, 0, 2, 3], "pad_value": 0.5}),
        Sample({"X": [rng.standard_normal((2, 3, 2))]}, {"paddings": [0, 0, 1, 1, 0, 2]})],
    attrs_handled=("paddings", "pad_value"),
    doc="Out = X padded with pad_value; paddings = [before_0, after_0, before_1, ...]"))


def _crop_window(c: Call, x_shape: tuple[int, ...], shape: list[int], offsets: list[int]) -> tuple[slice, ...]:
    if len(shape) != len(x_shape) or len(offsets) != len(x_shape):
        raise ExecutionError(f"{c.op_type}: shape {shape} and offsets {offsets} must have rank {len(x_shape)}")
    for d, s, o in zip(x_shape, shape, offsets):
        if o < 0 or s < 0 or o + s > d:
            raise ExecutionError(f"{c.op_type}: offsets {offsets} + shape {shape} exceed X's shape {list(x_shape)}")
    return tuple(slice(o, o + s) for o, s in zip(offsets, shape))


def _crop_offsets(c: Call, ndim: int) -> list[int]:
    if c.has("OffsetsTensor"):
        return ints_from(c, None, "OffsetsTensor", "offsets")
    return ints_from(c, "Offsets", None, "offsets") or [0] * ndim


def _crop_shape(c: Call, x_shape: tuple[int, ...]) -> list[int]:
    return list(np.shape(c.x("Y"))) if c.has("Y") else [int(v) for v in c.attr("shape", ())]


def _crop_tensor_shape(c: Call, x_shape: tuple[int, ...]) -> list[int]:
    if c.has("ShapeTensor"):
        shape = ints_from(c, None, "ShapeTensor", "shape")
    else:
        shape = ints_from(c, "Shape", None, "shape")
    offsets = _crop_offsets(c, len(x_shape))
    if len(offsets) == len(shape) == len(x_shape):  # -1 in shape: up to the end of X's dim
        shape = [d - o if s == -1 else s for s, d, o in zip(shape, x_shape, offsets)]
    return shape


def _crop_kernels(shape_of):
    """Forward and grad of a crop; the grad takes the window's shape from
    Out@GRAD (crop_tensor_grad is not given the Shape inputs)."""
    def fwd(c: Call):
        x = array_in(c)
        return {"Out": x[_crop_window(c, x.shape, shape_of(c, x.shape), _crop_offsets(c, x.ndim))].copy()}

    def grad(c: Call):
        x = array_in(c)
        g = array_in(c, "Out@GRAD")
        gx = np.zeros(x.shape, g.dtype)
        gx[_crop_window(c, x.shape, list(g.shape), _crop_offsets(c, x.ndim))] = g
        return {"X@GRAD": gx}
    return fwd, grad


_crop, _crop_grad = _crop_kernels(_crop_shape)
_crop_tensor, _crop_tensor_grad = _crop_kernels(_crop_tensor_shape)

register(paddle_opdef(
    "crop", _crop, {"crop_grad": _crop_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 5))]}, {"shape": [2, 3], "offsets": [1, 2]}),
        Sample({"X": [rng.standard_normal((3, 5))], "Y": [np.zeros((2, 2))],
                "Offsets": [np.array([0, 3], np.int32)]}, {"shape": [1, 1], "offsets": [0, 0]},
               wrt=("X",), note="Y and Offsets tensors")],
    attrs_handled=("shape", "offsets"), doc="Out = the window of X at offsets with Y's shape (or shape)"))

register(paddle_opdef(
    "crop_tensor", _crop_tensor, {"crop_tensor_grad": _crop_tensor_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 5))]}, {"shape": [2, -1], "offsets": [1, 2]}),
        Sample({"X": [rng.standard_normal((3, 5, 2))], "Shape": [np.array([2, 2, 1], np.int32)],
                "OffsetsTensor": [np.array([1], np.int32), np.array([0], np.int32), np.array([1], np.int32)]},
               {"shape": [1, 1, 1], "offsets": [0, 0, 0]}, note="Shape and OffsetsTensor")],
    attrs_handled=("shape", "offsets"),
    doc="Out = the window of X at offsets of the given shape (-1: to the end of the dim)"))
