"""unique_consecutive and unique (sorted), no gradients."""
from __future__ import annotations

import numpy as np
from ...base import dtypes
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis, np_dtype
from .._inputs import array_in


# --------------------------------------------------------------------------
# unique_consecutive / unique
# --------------------------------------------------------------------------
def _index_dtype(c: Call) -> np.dtype:
    return np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.INT64))


def _unique_axis(c: Call, x: np.ndarray) -> int | None:
    axis = [int(a) for a in c.attr("axis", ())]
    if len(axis) > 1:
        raise c.unsupported("axis", axis, "one axis at most")
    return norm_axis(axis[0], x.ndim) if axis else None


def _unique_consecutive(c: Call):
    x = array_in(c)
    axis = _unique_axis(c, x)
    dt = _index_dtype(c)
    xm = x.reshape(-1) if axis is None else np.moveaxis(x, axis, 0)
    n = xm.shape[0]
    if n == 0:
        starts = np.zeros(0, np.int64)
    else:
        rows = xm.reshape(n, -1)
        change = np.any(rows[1:] != rows[:-1], axis=1)
        starts = np.concatenate([[0], np.flatnonzero(change) + 1])
    out = xm[starts]
    res = {"Out": out if axis is None else np.moveaxis(out, 0, axis)}
    if c.wants("Index"):
        res["Index"] = (np.cumsum(np.isin(np.arange(n), starts)) - 1).astype(dt)
    if c.wants("Counts"):
        res["Counts"] = np.diff(np.append(starts, n)).astype(dt)
    return res


register(paddle_opdef(
    "unique_consecutive", _unique_consecutive,
    attrs_handled=("return_inverse", "return_counts", "axis", "dtype"), samples=lambda rng: [
        Sample({"X": [np.array([1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 3.0])]},
               {"return_inverse": True, "return_counts": True, "axis": [], "dtype": 3}),
        Sample({"X": [np.array([[1, 2], [1, 2], [3, 2], [1, 2]])]},
               {"return_inverse": True, "return_counts": True, "axis": [0], "dtype": 2}, note="axis 0, int32")],
    doc="Out = X with runs of equal values (slices along axis) kept once; Index, Counts as asked"))


def _unique(c: Call):
    x = array_in(c)
    if not c.attr("is_sorted", False):
        raise c.unsupported("is_sorted", False, "only the sorted unique (paddle.unique) is supported")
    axis = _unique_axis(c, x)
    dt = _index_dtype(c)
    out, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                            axis=axis)
    res = {"Out": out}
    if c.wants("Indices"):
        res["Indices"] = index.astype(dt)
    if c.wants("Index"):
        res["Index"] = inverse.reshape(-1).astype(dt)
    if c.wants("Counts"):
        res["Counts"] = counts.astype(dt)
    return res


register(paddle_opdef(
    "unique", _unique,
    attrs_handled=("return_index", "return_inverse", "return_counts", "axis", "dtype", "is_sorted"),
    samples=lambda rng: [
        Sample({"X": [np.array([3.0, 1.0, 2.0, 3.0, 1.0, 5.0])]},
               {"return_index": True, "return_inverse": True, "return_counts": True, "axis": [], "dtype": 3,
                "is_sorted": True}),
        Sample({"X": [np.array([[2, 1], [0, 4], [2, 1]])]},
               {"return_index": True, "return_inverse": True, "return_counts": True, "axis": [0], "dtype": 2,
                "is_sorted": True}, note="axis 0")],
    doc="Out = X's distinct values (or slices along axis), sorted; Indices, Index (inverse), Counts"))
