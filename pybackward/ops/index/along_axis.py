"""More indexing ops, with slots and grad rules from Paddle's records:
take_along_axis, put_along_axis, index_sample, index_add, scatter_nd_add,
masked_fill, masked_select, repeat_interleave, multiplex, and their grads."""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ._util import unbroadcast
from .paddle_table import paddle_opdef
from .registry import EMPTY_VAR_NAME, Call, Sample, register
from .tensor import norm_axis


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _ids(c: Call, idx: np.ndarray, n: int, what: str, allow_negative: bool = True) -> np.ndarray:
    """Integer indices into a dim of size n, checked; negatives wrap when allowed."""
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise ExecutionError(f"{c.op_type}: {what} must be an integer tensor, got {idx.dtype}")
    idx = idx.astype(np.int64)
    lo = -n if allow_negative else 0
    if idx.size and (idx.min() < lo or idx.max() >= n):
        raise ExecutionError(f"{c.op_type}: {what} out of range [{lo}, {n}): got [{idx.min()}, {idx.max()}]")
    return np.where(idx < 0, idx + n, idx)


def _along(shape_x: tuple[int, ...], index: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """The full index into X of every element of `index` along `axis`: the
    other coordinates are the element's own (Index may be smaller than X)."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[axis] = index
    return tuple(grid)


# --------------------------------------------------------------------------
# take_along_axis / put_along_axis
# --------------------------------------------------------------------------
def _take_args(c: Call):
    x = _x(c, "Input")
    if int(c.attr("Axis", 0)) < 0:  # Paddle 3.3.1's CPU kernels do not normalise it (wrong results)
        raise c.unsupported("Axis", c.attr("Axis"), "a negative Axis")
    axis = norm_axis(c.attr("Axis", 0), x.ndim, "Axis")
    index = np.asarray(c.x("Index"))
    if index.ndim != x.ndim or any(i > d for k, (i, d) in enumerate(zip(index.shape, x.shape)) if k != axis):
        raise ExecutionError(f"{c.op_type}: Index of shape {list(index.shape)} does not fit Input "
                             f"{list(x.shape)} along axis {axis}")
    return x, axis, _along(x.shape, _ids(c, index, x.shape[axis], "Index"), axis)


def _take_along_axis(c: Call):
    x, _, where = _take_args(c)
    return {"Result": x[where]}


def _take_along_axis_grad(c: Call):
    x, _, where = _take_args(c)
    g = _x(c, "Result@GRAD")
    gx = np.zeros(x.shape, g.dtype)
    np.add.at(gx, where, g)
    return {"Input@GRAD": gx}


register(paddle_opdef(
    "take_along_axis", _take_along_axis, {"take_along_axis_grad": _take_along_axis_grad}, samples=lambda rng: [
        Sample({"Input": [rng.standard_normal((3, 4))], "Index": [np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]])]},
               {"Axis": 1}),
        Sample({"Input": [rng.standard_normal((3, 4))], "Index": [np.array([[2, 0, 1, 2]], np.int32)]},
               {"Axis": 0}),
        Sample({"Input": [rng.standard_normal((2, 3, 2))], "Index": [np.array([[[-1], [0], [1]]])]},
               {"Axis": 2}, note="smaller Index, negative ids")],
    attrs_handled=("Axis",), doc="Result[..i..] = Input at Index[..i..] along Axis (Index's shape)"))


_PUT_REDUCES = ("assign", "add", "mean")


def _put_args(c: Call):
    x, axis, where = _take_args(c)
    reduce = c.attr("Reduce", "assign")
    if reduce not in _PUT_REDUCES:
        raise c.unsupported("Reduce", reduce, f"supported: {', '.join(_PUT_REDUCES)}")
    index_shape = np.shape(c.x("Index"))
    value = np.broadcast_to(_x(c, "Value"), index_shape)
    return x, where, value, reduce, bool(c.attr("Include_self", True))


def _flat_targets(shape: tuple[int, ...], where: tuple[np.ndarray, ...], index_shape) -> np.ndarray:
    return np.ravel_multi_index(tuple(np.broadcast_to(w, index_shape) for w in where), shape).reshape(-1)


def _counts(shape, targets: np.ndarray) -> np.ndarray:
    return np.bincount(targets, minlength=int(np.prod(shape, dtype=np.int64))).reshape(shape)


def _put_along_axis(c: Call):
    x, where, value, reduce, include_self = _put_args(c)
    out = x.copy()
    if reduce == "assign":  # written in Index's row-major order: the last write wins
        out[where] = value
        return {"Result": out}
    targets = _flat_targets(x.shape, where, value.shape)
    hit = _counts(x.shape, targets) > 0
    if not include_self:
        out[hit] = 0
    acc = out.astype(np.result_type(out, value), copy=False)
    np.add.at(acc, where, value)
    if reduce == "mean":
        n = _counts(x.shape, targets) + (1 if include_self else 0)
        acc = np.where(hit, acc / np.maximum(n, 1), acc)
    return {"Result": acc.astype(x.dtype, copy=False)}


def _last_writers(shape, targets: np.ndarray) -> np.ndarray:
    """For each element of the flattened Index, whether it made the final write."""
    last = np.zeros(targets.shape, bool)
    _, first_from_end = np.unique(targets[::-1], return_index=True)
    last[len(targets) - 1 - first_from_end] = True
    return last


def _put_along_axis_grad(c: Call):
    x, where, value, reduce, include_self = _put_args(c)
    g = _x(c, "Result@GRAD")
    targets = _flat_targets(x.shape, where, value.shape)
    counts = _counts(x.shape, targets)
    hit = counts > 0
    res = {}
    if c.wants("Input@GRAD"):
        gx = g.copy()
        if reduce == "assign" or not include_self:
            gx[hit] = 0
        elif reduce == "mean":
            gx = np.where(hit, g / (counts + 1).astype(g.dtype), g)
        res["Input@GRAD"] = gx
    if c.wants("Value@GRAD"):
        gv = np.broadcast_to(g[where], value.shape).copy()
        if reduce == "assign":
            gv.reshape(-1)[~_last_writers(x.shape, targets)] = 0
        elif reduce == "mean":
            gv = gv / (counts[where] + (1 if include_self else 0)).astype(g.dtype)
        vshape = np.shape(c.x("Value"))
        res["Value@GRAD"] = unbroadcast(gv, vshape) if gv.shape != vshape else gv
    return res


def _put_samples(rng):
    r = rng.standard_normal
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    return [
        Sample({"Input": [r((3, 4))], "Index": [np.array([[0, 3], [1, 2], [2, 0]])], "Value": [r((3, 2))]},
               {"Axis": 1, "Reduce": "assign", "Include_self": True}),
        Sample({"Input": [r((3, 4))], "Index": [idx], "Value": [r((3, 2))]},
               {"Axis": 1, "Reduce": "add", "Include_self": True}, note="add, repeated ids"),
        Sample({"Input": [r((3, 4))], "Index": [idx], "Value": [r((3, 2))]},
               {"Axis": 1, "Reduce": "add", "Include_self": False}, note="add without self"),
        Sample({"Input": [r((4, 3))], "Index": [np.array([[1, 0, 3], [1, 2, 3]])], "Value": [r((2, 3))]},
               {"Axis": 0, "Reduce": "mean", "Include_self": True}, note="mean"),
        Sample({"Input": [r((3, 4))], "Index": [idx], "Value": [r((3, 2))]},
               {"Axis": 1, "Reduce": "mean", "Include_self": False}, note="mean without self")]


register(paddle_opdef(
    "put_along_axis", _put_along_axis, {"put_along_axis_grad": _put_along_axis_grad}, samples=_put_samples,
    attrs_handled=("Axis", "Reduce", "Include_self"),
    doc="Result = Input with Value put at Index along Axis (assign, add or mean; Include_self)"))


# --------------------------------------------------------------------------
# index_sample / index_add
# --------------------------------------------------------------------------
def _index_sample_args(c: Call):
    x = _x(c)
    index = np.asarray(c.x("Index"))
    if x.ndim != 2 or index.ndim != 2 or index.shape[0] != x.shape[0]:
        raise ExecutionError(f"index_sample: X {list(x.shape)} and Index {list(index.shape)} must be 2-D "
                             f"with the same first dim")
    rows = np.arange(x.shape[0])[:, None]
    return x, (rows, _ids(c, index, x.shape[1], "Index", allow_negative=False))


def _index_sample(c: Call):
    x, where = _index_sample_args(c)
    return {"Out": x[where]}


def _index_sample_grad(c: Call):
    x, where = _index_sample_args(c)
    g = _x(c, "Out@GRAD")
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
    return axis, _ids(c, index.reshape(-1), shape[axis], "Index")


def _index_add(c: Call):
    x = _x(c)
    axis, index = _index_add_args(c, x.shape)
    out = x.copy()
    v = np.moveaxis(_x(c, "AddValue"), axis, 0)
    np.add.at(np.moveaxis(out, axis, 0), index, v.astype(x.dtype, copy=False))
    return {"Out": out}


def _index_add_grad(c: Call):
    g = _x(c, "Out@GRAD")
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


# --------------------------------------------------------------------------
# scatter_nd_add
# --------------------------------------------------------------------------
def _nd_where(c: Call, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    index = np.asarray(c.x("Index"))
    k = index.shape[-1] if index.ndim else 0
    if k > len(shape):
        raise ExecutionError(f"{c.op_type}: Index's last dim {k} exceeds X's rank {len(shape)}")
    return tuple(_ids(c, index[..., j], shape[j], "Index", allow_negative=False) for j in range(k))


def _scatter_nd_add(c: Call):
    x = _x(c)
    where = _nd_where(c, x.shape)
    out = x.copy()
    upd = _x(c, "Updates")
    if not where:  # an empty last dim adds every update to all of X
        out = out + upd.reshape((-1,) + x.shape).sum(axis=0).astype(x.dtype)
        return {"Out": out}
    np.add.at(out, where, upd.astype(x.dtype, copy=False))
    return {"Out": out}


def _scatter_nd_add_grad(c: Call):
    g = _x(c, "Out@GRAD")
    where = _nd_where(c, g.shape)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = g.copy()
    if c.wants("Updates@GRAD"):
        ushape = np.shape(c.x("Updates"))
        res["Updates@GRAD"] = (np.broadcast_to(g, ushape).copy() if not where else g[where].reshape(ushape))
    return res


register(paddle_opdef(
    "scatter_nd_add", _scatter_nd_add, {"scatter_nd_add_grad": _scatter_nd_add_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4, 2))], "Index": [np.array([[0, 1], [2, 3], [0, 1]])],
                "Updates": [rng.standard_normal((3, 2))]}),
        Sample({"X": [rng.standard_normal((4, 3))], "Index": [np.array([[[1], [3]], [[1], [0]]], np.int32)],
                "Updates": [rng.standard_normal((2, 2, 3))]}, note="batched, repeated ids")],
    doc="Out = X with Updates added at the positions Index's last dim names"))


# --------------------------------------------------------------------------
# masked_fill / masked_select
# --------------------------------------------------------------------------
def _masked_fill(c: Call):
    x, mask, v = _x(c, "x"), np.asarray(c.x("mask"), bool), _x(c, "value")
    if v.size != 1:
        raise ExecutionError(f"masked_fill: value must hold one element, got shape {list(v.shape)}")
    return {"out": np.where(mask, v.reshape(()).astype(x.dtype), x)}


def _masked_fill_grad(c: Call):
    """x@GRAD: out@GRAD where mask is false; value@GRAD: the sum of out@GRAD
    where mask is true, in value's shape. (Paddle 3.3.1 leaves value@GRAD
    unreduced, in the broadcast shape of x and mask; this is the true one.)"""
    x, mask, g = _x(c, "x"), np.asarray(c.x("mask"), bool), _x(c, "out@GRAD")
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
    x, mask = _x(c), np.asarray(c.x("Mask"), bool)
    shape = np.broadcast_shapes(x.shape, mask.shape)
    return x, np.broadcast_to(mask, shape), shape


def _masked_select(c: Call):
    x, mask, shape = _masked_select_args(c)
    return {"Y": np.broadcast_to(x, shape)[mask]}


def _masked_select_grad(c: Call):
    x, mask, shape = _masked_select_args(c)
    g = _x(c, "Y@GRAD")
    full = np.zeros(shape, g.dtype)
    full[mask] = g
    return {"X@GRAD": unbroadcast(full, x.shape)}


register(paddle_opdef(
    "masked_select", _masked_select, {"masked_select_grad": _masked_select_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4))], "Mask": [rng.random((3, 4)) > 0.5]}),
        Sample({"X": [rng.standard_normal((1, 4))], "Mask": [rng.random((3, 4)) > 0.5]}, note="broadcast X")],
    doc="Y = the elements of X (broadcast with Mask) where Mask is true, as a 1-D tensor"))


# --------------------------------------------------------------------------
# repeat_interleave / multiplex
# --------------------------------------------------------------------------
def _repeats(c: Call, x: np.ndarray):
    """(axis, repeats per slice). A negative dim is normalised (Paddle 3.3.1's
    CPU kernel hangs on one)."""
    axis = norm_axis(c.attr("dim", 0), max(x.ndim, 1), "dim")
    if c.has("RepeatsTensor"):
        reps = np.asarray(c.x("RepeatsTensor")).reshape(-1).astype(np.int64)
        if reps.size == 1:
            reps = np.full(x.shape[axis] if x.ndim else 1, reps[0])
    else:
        reps = np.full(x.shape[axis] if x.ndim else 1, int(c.attr("Repeats", 1)))
    n = x.shape[axis] if x.ndim else 1
    if reps.size != n or (reps < 0).any():
        raise ExecutionError(f"repeat_interleave: repeats {reps.tolist()} do not fit a dim of size {n}")
    return axis, reps


def _repeat_interleave(c: Call):
    x = _x(c)
    axis, reps = _repeats(c, x)
    return {"Out": np.repeat(x.reshape(-1) if x.ndim == 0 else x, reps, axis=axis)}


def _repeat_interleave_grad(c: Call):
    x = _x(c)
    axis, reps = _repeats(c, x)
    g = np.moveaxis(_x(c, "Out@GRAD"), axis, 0)
    seg = np.repeat(np.arange(reps.size), reps)
    gx = np.zeros((reps.size,) + g.shape[1:], g.dtype)
    np.add.at(gx, seg, g)
    return {"X@GRAD": np.moveaxis(gx, 0, axis).reshape(x.shape)}


register(paddle_opdef(
    "repeat_interleave", _repeat_interleave, {"repeat_interleave_grad": _repeat_interleave_grad},
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"Repeats": 2, "dim": 1, "output_size": -1}),
        Sample({"X": [rng.standard_normal((3, 2))], "RepeatsTensor": [np.array([1, 0, 3])]},
               {"Repeats": 1, "dim": 0, "output_size": -1}, note="RepeatsTensor"),
        Sample({"X": [rng.standard_normal((2, 3))]}, {"Repeats": 3, "dim": 1, "output_size": -1})],
    attrs_handled=("Repeats", "dim"), doc="Out = each slice of X along dim repeated (RepeatsTensor or Repeats)"))


def _multiplex_ids(c: Call, n_inputs: int, rows: int) -> np.ndarray:
    ids = np.asarray(c.x("Ids"))
    if ids.dtype != np.int32:  # Paddle's kernel reads Ids as int32 and rejects others
        raise ExecutionError(f"multiplex: Ids must be int32, got {ids.dtype}")
    if ids.ndim != 2 or ids.shape[1] != 1 or ids.shape[0] != rows:
        raise ExecutionError(f"multiplex: Ids must have shape [{rows}, 1], got {list(ids.shape)}")
    return _ids(c, ids.reshape(-1), n_inputs, "Ids", allow_negative=False)


def _multiplex(c: Call):
    xs = np.stack([np.asarray(v) for v in c.xs("X")])
    ids = _multiplex_ids(c, xs.shape[0], xs.shape[1])
    return {"Out": xs[ids, np.arange(xs.shape[1])]}


def _multiplex_grad(c: Call):
    g = _x(c, "Out@GRAD")
    names = c.outs.get("X@GRAD", ())
    n = len(names)
    ids = _multiplex_ids(c, n, g.shape[0])
    res = []
    for i, name in enumerate(names):
        if name == EMPTY_VAR_NAME:
            res.append(None)
            continue
        keep = (ids == i).reshape((-1,) + (1,) * (g.ndim - 1))
        res.append(np.where(keep, g, np.zeros((), g.dtype)))
    return {"X@GRAD": res}


register(paddle_opdef(
    "multiplex", _multiplex, {"multiplex_grad": _multiplex_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((4, 3)) for _ in range(3)],
                "Ids": [np.array([[2], [0], [2], [1]], np.int32)]}),
        Sample({"X": [rng.standard_normal((2, 2)) for _ in range(2)], "Ids": [np.array([[1], [1]], np.int32)]})],
    doc="Out[i] = X[Ids[i]][i]"))
