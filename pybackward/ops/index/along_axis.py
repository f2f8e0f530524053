"""take_along_axis and put_along_axis, with slots and grad rules from Paddle's records."""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis
from .._inputs import checked_indices


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))



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
    return x, axis, _along(x.shape, checked_indices(c, index, x.shape[axis], "Index"), axis)


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
