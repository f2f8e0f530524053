"""index_sample and index_add, with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis
from .._inputs import array_in
from .._inputs import checked_indices


# --------------------------------------------------------------------------
# index_sample / index_add
# --------------------------------------------------------------------------
def _index_sample_args(c: Call):
    x = array_in(c)
    index = np.asarray(c.x("Index"))
    if x.ndim != 2 or index.ndim != 2 or index.shape[0] != x.shape[0]:
        raise ExecutionError(f"index_sample: X {list(x.shape)} and Index {list(index.shape)} must be 2-D "
                             f"with the same first dim")
    rows = np.arange(x.shape[0])[:, None]
    return x, (rows, checked_indices(c, index, x.shape[1], "Index", allow_negative=False))


def _index_sample(c: Call):
    x, where = _index_sample_args(c)
    return {"Out": x[where]}


def _index_sample_grad(c: Call):
    x, where = _index_sample_args(c)
    g = array_in(c, "Out@GRAD")
    gx = np.zeros(x.shape, g.dtype)
    np.add.at(gx, where, g)
    return {"X@GRAD": gx}


register(paddle_opdef(
    "index_sample", _index_sample, {"index_sample_grad": _index_sample_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 5))], "Index": [np.array([[0, 4, 4], [1, 2, 3], [3, 3, 0]])]}),
        Sample({"X": [rng.standard_normal((2, 4))], "Index": [np.array([[3], [0]], np.int32)]})],
    doc="Out[i, j] = X[i, Index[i, j]]"))


def _index_add_args(c: Call, shape: tuple[int, ...]):
    axis = norm_axis(c.attr("axis", 0), len(shape))
    index = np.asarray(c.x("Index"))
    if index.ndim > 1:
        raise ExecutionError(f"index_add: Index must be 1-D, got shape {list(index.shape)}")
    return axis, checked_indices(c, index.reshape(-1), shape[axis], "Index")


def _index_add(c: Call):
    x = array_in(c)
    axis, index = _index_add_args(c, x.shape)
    out = x.copy()
    v = np.moveaxis(array_in(c, "AddValue"), axis, 0)
    np.add.at(np.moveaxis(out, axis, 0), index, v.astype(x.dtype, copy=False))
    return {"Out": out}


def _index_add_grad(c: Call):
    g = array_in(c, "Out@GRAD")
    axis, index = _index_add_args(c, g.shape)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = g.copy()
    if c.wants("AddValue@GRAD"):
        res["AddValue@GRAD"] = np.take(g, index, axis=axis).reshape(np.shape(c.x("AddValue")))
    return res


register(paddle_opdef(
    "index_add", _index_add, {"index_add_grad": _index_add_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((4, 3))], "Index": [np.array([3, 0, 3])],
                "AddValue": [rng.standard_normal((3, 3))]}, {"axis": 0}),
        Sample({"X": [rng.standard_normal((2, 5))], "Index": [np.array([-1, 2], np.int32)],
                "AddValue": [rng.standard_normal((2, 2))]}, {"axis": -1})],
    attrs_handled=("axis",), doc="Out = X with AddValue's slices added at Index along axis"))
