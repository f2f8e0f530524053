"""More tensor ops, with slots from Paddle's records: where_index, size,
shape64, linspace, fill_any (with its grad), searchsorted, bincount,
unique_consecutive and unique (sorted)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ExecutionError
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register
from .tensor import cast_array, norm_axis, np_dtype


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _scalar(c: Call, slot: str):
    v = _x(c, slot)
    if v.size != 1:
        raise ExecutionError(f"{c.op_type}: {slot} must hold one element, got shape {list(v.shape)}")
    return v.reshape(-1)[0]


# --------------------------------------------------------------------------
# where_index / size / shape64
# --------------------------------------------------------------------------
register(paddle_opdef(
    "where_index", lambda c: {"Out": np.argwhere(np.asarray(c.x("Condition")).astype(bool)).astype(np.int64)},
    samples=lambda rng: [Sample({"Condition": [rng.random((3, 4)) > 0.5]}),
                         Sample({"Condition": [np.array([0, 2, 0, 1], np.int32)]})],
    doc="Out = the coordinates of Condition's true (non-zero) elements, one row each (int64)"))

register(paddle_opdef(
    "size", lambda c: {"Out": np.array(np.size(c.x("Input")), np.int64)},
    samples=lambda rng: [Sample({"Input": [rng.standard_normal((3, 4))]})],
    doc="Out = the number of elements of Input (0-D int64)"))

register(paddle_opdef(
    "shape64", lambda c: {"out": np.array(np.shape(c.x("input")), np.int64)},
    samples=lambda rng: [Sample({"input": [rng.standard_normal((3, 1, 4))]})],
    doc="out = the dims of input (int64)"))


# --------------------------------------------------------------------------
# linspace
# --------------------------------------------------------------------------
def _linspace(c: Call):
    """Paddle 3.3.1's CPU values: Start and Stop cast to dtype; for a float
    dtype the step and every value are computed in that dtype, for an integer
    one in double and truncated; the first half counts up from Start, the
    second half down from Stop (checked against Paddle on several ranges)."""
    dt = np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.FP32))
    start, stop, num = _scalar(c, "Start"), _scalar(c, "Stop"), int(_scalar(c, "Num"))
    if num < 0:
        raise ExecutionError(f"linspace: Num must not be negative, got {num}")
    start, stop = cast_array(np.asarray(start), dt), cast_array(np.asarray(stop), dt)
    if num <= 1:
        return {"Out": np.full(num, start, dt)}
    i = np.arange(num)
    if dt.kind == "f":
        step = (stop - start) / dt.type(num - 1)
        vals = np.where(i < num // 2, start + step * i.astype(dt), stop - step * (num - 1 - i).astype(dt))
        return {"Out": vals.astype(dt)}
    with np.errstate(over="ignore"):
        step = float(stop - start) / (num - 1)
    vals = np.where(i < num // 2, float(start) + step * i, float(stop) - step * (num - 1 - i))
    return {"Out": cast_array(vals, dt)}


register(paddle_opdef(
    "linspace", _linspace, attrs_handled=("dtype",), samples=lambda rng: [
        Sample({"Start": [np.array([-1.5], np.float32)], "Stop": [np.array([2.0], np.float32)],
                "Num": [np.array([7], np.int32)]}, {"dtype": 5}),
        Sample({"Start": [np.array([0.0])], "Stop": [np.array([1.0])], "Num": [np.array([10], np.int32)]},
               {"dtype": 6}),
        Sample({"Start": [np.array([3], np.int32)], "Stop": [np.array([-4], np.int32)],
                "Num": [np.array([5], np.int32)]}, {"dtype": 3}, note="int64")],
    doc="Out = Num evenly spaced values from Start to Stop"))


# --------------------------------------------------------------------------
# fill_any (its grad is zeros)
# --------------------------------------------------------------------------
def _fill_any(c: Call):
    x = _x(c)
    value = float(c.attr("value", 0.0))
    if x.dtype.kind in "iu":
        value = int(value)
    return {"Out": np.full(x.shape, value, dtype=x.dtype)}


register(paddle_opdef(
    "fill_any", _fill_any, {"fill_any_grad": lambda c: {"X@GRAD": np.zeros_like(_x(c, "Out@GRAD"))}},
    attrs_handled=("value",), samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"value": 1.5}),
        Sample({"X": [rng.standard_normal(())]}, {"value": -2.0}, note="0-D")],
    doc="Out = X's shape filled with value (the grad is zero)"))


# --------------------------------------------------------------------------
# searchsorted / bincount
# --------------------------------------------------------------------------
def _searchsorted(c: Call):
    seq, vals = _x(c, "SortedSequence"), _x(c, "Values")
    side = "right" if c.attr("right", False) else "left"
    dt = np.int32 if c.attr("out_int32", False) else np.int64
    if seq.ndim == 1:
        return {"Out": np.searchsorted(seq, vals, side=side).astype(dt)}
    if seq.shape[:-1] != vals.shape[:-1]:
        raise ExecutionError(f"searchsorted: SortedSequence {list(seq.shape)} and Values {list(vals.shape)} "
                             f"must share all but the last dim")
    s2, v2 = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1])
    out = np.stack([np.searchsorted(a, b, side=side) for a, b in zip(s2, v2)]) if len(s2) else \
        np.zeros(v2.shape, np.int64)
    return {"Out": out.reshape(vals.shape).astype(dt)}


register(paddle_opdef(
    "searchsorted", _searchsorted, attrs_handled=("right", "out_int32"), samples=lambda rng: [
        Sample({"SortedSequence": [np.array([1.0, 2.0, 2.0, 5.0])], "Values": [np.array([[2.0, 0.5], [6.0, 5.0]])]},
               {"right": False, "out_int32": False}),
        Sample({"SortedSequence": [np.array([[1, 3, 5], [2, 2, 9]])], "Values": [np.array([[3, 6], [2, 1]])]},
               {"right": True, "out_int32": True}, note="batched, right")],
    doc="Out = the insertion points of Values into the last dim of SortedSequence"))


def _bincount(c: Call):
    x = _x(c)
    if x.dtype.kind not in "iu":
        raise ExecutionError(f"bincount: X must be an integer tensor, got {x.dtype}")
    x = x.reshape(-1)
    if x.size and x.min() < 0:
        raise ExecutionError("bincount: X must be non-negative")
    minlength = int(c.attr("minlength", 0))
    if c.has("Weights"):
        w = _x(c, "Weights").reshape(-1)
        # Paddle 3.3.1: float weights keep their type, integer weights count in int64
        dt = w.dtype if w.dtype.kind == "f" else np.dtype(np.int64)
        return {"Out": np.bincount(x, w.astype(np.float64), minlength).astype(dt)}
    return {"Out": np.bincount(x, minlength=minlength).astype(np.int64)}


register(paddle_opdef(
    "bincount", _bincount, attrs_handled=("minlength",), samples=lambda rng: [
        Sample({"X": [np.array([1, 3, 3, 0, 1, 3])]}, {"minlength": 0}),
        Sample({"X": [np.array([1, 3, 3], np.int32)], "Weights": [np.array([0.5, 1.5, -1.0])]}, {"minlength": 6},
               note="weights, minlength")],
    doc="Out[i] = how often i occurs in X (or the sum of its Weights)"))


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
    x = _x(c)
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
    x = _x(c)
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


# --------------------------------------------------------------------------
# sequence_mask: Y[..., j] = j < X[...] (no gradient)
# --------------------------------------------------------------------------
def _sequence_mask(c: Call):
    lengths = c.x("X")
    if lengths.dtype.kind not in "iu":
        raise ExecutionError(f"op sequence_mask: X must hold integer lengths, not {lengths.dtype}")
    maxlen = int(np.asarray(c.x("MaxLenTensor")).reshape(-1)[0]) if c.has("MaxLenTensor") \
        else int(c.attr("maxlen", -1))
    if maxlen < 0:
        maxlen = int(lengths.max()) if lengths.size else 0
    dt = np_dtype(c, "out_dtype", c.attr("out_dtype", 3))
    return {"Y": (np.arange(maxlen) < lengths[..., None]).astype(dt)}


register(paddle_opdef(
    "sequence_mask", _sequence_mask, attrs_handled=("maxlen", "out_dtype"),
    samples=lambda rng: [
        Sample({"X": [np.array([3, 1, 0, 4])]}, {"maxlen": -1, "out_dtype": 5}, note="maxlen from X"),
        Sample({"X": [np.array([[2, 5], [0, 1]])]}, {"maxlen": 4, "out_dtype": 3}, note="2-D, maxlen 4"),
        Sample({"X": [np.array([1, 2])], "MaxLenTensor": [np.array([3], np.int32)]},
               {"maxlen": -1, "out_dtype": 2}, note="MaxLenTensor")],
    doc="Y = arange(maxlen) < X[..., None] in out_dtype (maxlen -1: max(X))"))
