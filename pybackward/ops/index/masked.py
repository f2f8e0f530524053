"""masked_fill and masked_select, with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# masked_fill / masked_select
# --------------------------------------------------------------------------
def _masked_fill(c: Call):
    x, mask, v = array_in(c, "x"), np.asarray(c.x("mask"), bool), array_in(c, "value")
    if v.size != 1:
        raise ExecutionError(f"masked_fill: value must hold one element, got shape {list(v.shape)}")
    return {"out": np.where(mask, v.reshape(()).astype(x.dtype), x)}


def _masked_fill_grad(c: Call):
    """x@GRAD: out@GRAD where mask is false; value@GRAD: the sum of out@GRAD
    where mask is true, in value's shape. (Paddle 3.3.1 leaves value@GRAD
    unreduced, in the broadcast shape of x and mask; this is the true one.)"""
    x, mask, g = array_in(c, "x"), np.asarray(c.x("mask"), bool), array_in(c, "out@GRAD")
    res = {}
    zero = np.zeros((), g.dtype)
    if c.wants("x@GRAD"):
        res["x@GRAD"] = unbroadcast(np.where(mask, zero, g), x.shape)
    if c.wants("value@GRAD"):
        res["value@GRAD"] = np.asarray(np.where(mask, g, zero).sum(dtype=g.dtype)).reshape(np.shape(c.x("value")))
    return res


register(paddle_opdef(
    "masked_fill", _masked_fill, {"masked_fill_grad": _masked_fill_grad}, samples=lambda rng: [
        Sample({"x": [rng.standard_normal((3, 4))], "mask": [rng.random((3, 4)) > 0.5],
                "value": [rng.standard_normal(())]}),
        Sample({"x": [rng.standard_normal((3, 1))], "mask": [rng.random((2, 3, 4)) > 0.5],
                "value": [rng.standard_normal((1,))]}, note="broadcast")],
    doc="out = x with value where mask (broadcast) is true"))


def _masked_select_args(c: Call):
    x, mask = array_in(c), np.asarray(c.x("Mask"), bool)
    shape = np.broadcast_shapes(x.shape, mask.shape)
    return x, np.broadcast_to(mask, shape), shape


def _masked_select(c: Call):
    x, mask, shape = _masked_select_args(c)
    return {"Y": np.broadcast_to(x, shape)[mask]}


def _masked_select_grad(c: Call):
    x, mask, shape = _masked_select_args(c)
    g = array_in(c, "Y@GRAD")
    full = np.zeros(shape, g.dtype)
    full[mask] = g
    return {"X@GRAD": unbroadcast(full, x.shape)}


register(paddle_opdef(
    "masked_select", _masked_select, {"masked_select_grad": _masked_select_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4))], "Mask": [rng.random((3, 4)) > 0.5]}),
        Sample({"X": [rng.standard_normal((1, 4))], "Mask": [rng.random((3, 4)) > 0.5]}, note="broadcast X")],
    doc="Y = the elements of X (broadcast with Mask) where Mask is true, as a 1-D tensor"))
