"""Indexing ops: slice, gather, gather_nd, index_select, scatter, where,
top_k_v2, lookup_table_v2, and their grads."""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .. import _stl
from .._util import unbroadcast
from ..registry import Call, GradSpec, OpDef, Sample, register
from ..tensor.creation import ints_from, norm_axis, scalar_from


def _check_range(idx: np.ndarray, n: int, what: str, allow_negative: bool) -> np.ndarray:
    """Validate integer indices into a dim of size n; negatives wrap when allowed."""
    idx = np.asarray(idx).astype(np.int64, copy=False)
    lo = -n if allow_negative else 0
    if idx.size and (idx.min() < lo or idx.max() >= n):
        raise ExecutionError(f"{what}: index out of range [{lo}, {n}): got [{idx.min()}, {idx.max()}]")
    return np.where(idx < 0, idx + n, idx)


# --------------------------------------------------------------------------
# slice
# --------------------------------------------------------------------------
def _slice_spec(c: Call, shape: tuple[int, ...]):
    """(index tuple into Input, the sliced shape, the output shape after decrease_axis)."""
    axes = list(c.attr("axes", ()))
    if any(a < 0 for a in axes):
        # Paddle 3.3.1's slice kernel leaves a negative axis unsliced and its
        # slice_grad crashes on it (paddle.slice normalises axes before the op)
        raise c.unsupported("axes", axes, "negative axes")
    axes = [norm_axis(a, len(shape)) for a in axes]
    starts = ints_from(c, "StartsTensor", "StartsTensorList", "starts")
    ends = ints_from(c, "EndsTensor", "EndsTensorList", "ends")
    if len(starts) != len(axes) or len(ends) != len(axes):
        raise ExecutionError(f"slice: {len(axes)} axes but {len(starts)} starts and {len(ends)} ends")
    index = [slice(None)] * len(shape)
    sliced = list(shape)
    for a, s, e in zip(axes, starts, ends):
        dim = shape[a]
        s = max(s + dim if s < 0 else s, 0)
        e = min(e + dim if e < 0 else e, dim)
        s, e = min(s, dim), max(e, 0)
        e = max(e, s)  # Paddle 3.3.1: end < start gives an empty slice
        index[a] = slice(s, e)
        sliced[a] = e - s
    decrease = {norm_axis(a, len(shape)) for a in c.attr("decrease_axis", ())}
    for a in decrease:
        if sliced[a] != 1:
            raise ExecutionError(f"slice: decrease_axis {a} has size {sliced[a]}, not 1")
    out = tuple(d for i, d in enumerate(sliced) if i not in decrease)
    return tuple(index), tuple(sliced), out


def _slice(c: Call):
    x = np.asarray(c.x("Input"))
    index, _, out = _slice_spec(c, x.shape)
    return {"Out": x[index].reshape(out)}


def _slice_grad(c: Call):
    x = np.asarray(c.x("Input"))
    g = np.asarray(c.x("Out@GRAD"))
    index, sliced, _ = _slice_spec(c, x.shape)
    gx = np.zeros(x.shape, dtype=g.dtype)
    gx[index] = g.reshape(sliced)
    return {"Input@GRAD": gx}


SLICE_TENSORS = ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")


def _slice_samples(rng):
    r = rng.standard_normal
    return [
        Sample({"Input": [r((3, 4, 5))]}, {"axes": [0, 2], "starts": [1, -3], "ends": [2, 100],
                                           "decrease_axis": [0], "infer_flags": [1, 1]}),
        Sample({"Input": [r((3, 4))]}, {"axes": [0, 1], "starts": [1, 2], "ends": [2, 3], "decrease_axis": [0, 1]},
               note="0-D result"),
        Sample({"Input": [r((3, 4))]}, {"axes": [1], "starts": [1], "ends": [-1]}),
        Sample({"Input": [r((3, 6))], "StartsTensor": [np.array([1, 2])],
                "EndsTensorList": [np.array([3]), np.array([-1], np.int32)]},
               {"axes": [0, 1], "starts": [0, 0], "ends": [1, 1], "infer_flags": [-1, -1]}, note="tensors"),
    ]


register(OpDef(
    type="slice", inputs=("Input",) + SLICE_TENSORS, outputs=("Out",), kernel=_slice,
    grad=GradSpec("slice_grad", ("Input", "Out@GRAD") + SLICE_TENSORS, ("Input@GRAD",), kernel=_slice_grad,
                  sets_lod_level=False),
    samples=_slice_samples, attrs_handled=("axes", "starts", "ends", "decrease_axis", "infer_flags"),
    doc="Out = Input[starts:ends] on axes, dims in decrease_axis dropped"))


# --------------------------------------------------------------------------
# gather / gather_nd / index_select
# --------------------------------------------------------------------------
def _gather_args(c: Call):
    x = np.asarray(c.x("X"))
    axis = norm_axis(scalar_from(c, "Axis", "axis", 0), x.ndim)
    index = np.asarray(c.x("Index"))
    if index.ndim == 2 and index.shape[1] == 1:
        index = index.reshape(-1)
    elif index.ndim > 1:
        raise ExecutionError(f"gather: Index must be 0-D, 1-D or [N, 1], got shape {list(index.shape)}")
    return x, axis, _check_range(index, x.shape[axis], "gather", allow_negative=True)


def _gather(c: Call):
    x, axis, index = _gather_args(c)
    return {"Out": np.take(x, index, axis=axis)}


def _gather_grad(c: Call):
    x, axis, index = _gather_args(c)
    g = np.asarray(c.x("Out@GRAD"))
    if index.ndim == 0:
        g, index = np.expand_dims(g, axis), index.reshape(1)
    gx = np.zeros(x.shape, dtype=g.dtype)
    np.add.at(np.moveaxis(gx, axis, 0), index, np.moveaxis(g, axis, 0))
    return {"X@GRAD": gx}


def _gather_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((5, 3))], "Index": [np.array([4, 0, 4, 2])]}, {}),
            Sample({"X": [r((2, 5, 3))], "Index": [np.array([1, 3, 1], np.int32)]}, {"axis": 1}),
            Sample({"X": [r((2, 5))], "Index": [np.array([0, -1])], "Axis": [np.array([1], np.int32)]},
                   {"axis": 0}, note="Axis tensor"),
            Sample({"X": [r((3, 4))], "Index": [np.array(2)]}, {}, note="0-D index")]


register(OpDef(
    type="gather", inputs=("X", "Index", "Axis"), outputs=("Out",), kernel=_gather,
    grad=GradSpec("gather_grad", ("X", "Index", "Out@GRAD", "Axis"), ("X@GRAD",), kernel=_gather_grad),
    samples=_gather_samples, attrs_handled=("axis",),
    doc="Out = X indexed by Index along axis (negative indices wrap)"))


def _nd_index(x: np.ndarray, index: np.ndarray):
    index = np.asarray(index)
    k = index.shape[-1]
    if k > x.ndim:
        raise ExecutionError(f"gather_nd: Index's last dim {k} exceeds X's rank {x.ndim}")
    cols = [_check_range(index[..., j], x.shape[j], "gather_nd", allow_negative=True) for j in range(k)]
    return tuple(cols), index.shape[:-1]


def _gather_nd(c: Call):
    x = np.asarray(c.x("X"))
    cols, batch = _nd_index(x, c.x("Index"))
    if not cols:
        return {"Out": np.array(np.broadcast_to(x, batch + x.shape))}
    return {"Out": x[cols]}


def _gather_nd_grad(c: Call):
    x = np.asarray(c.x("X"))
    g = np.asarray(c.x("Out@GRAD"))
    cols, batch = _nd_index(x, c.x("Index"))
    if not cols:
        return {"X@GRAD": g.reshape((-1,) + x.shape).sum(axis=0)}
    gx = np.zeros(x.shape, dtype=g.dtype)
    np.add.at(gx, cols, g)
    return {"X@GRAD": gx}


register(OpDef(
    type="gather_nd", inputs=("X", "Index"), outputs=("Out",), kernel=_gather_nd,
    grad=GradSpec("gather_nd_grad", ("X", "Index", "Out@GRAD"), ("X@GRAD",), kernel=_gather_nd_grad),
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4, 5))], "Index": [np.array([[0, 1], [2, 3], [0, 1]])]}),
        Sample({"X": [rng.standard_normal((3, 4))], "Index": [np.array([[[0, 1]], [[2, -1]]])]})],
    doc="Out[i...] = X[Index[i..., :]]"))


def _index_select_args(c: Call):
    x = np.asarray(c.x("X"))
    dim = norm_axis(c.attr("dim", 0), x.ndim, "dim")
    index = _check_range(np.asarray(c.x("Index")).reshape(-1), x.shape[dim], "index_select", allow_negative=False)
    return x, dim, index


def _index_select(c: Call):
    x, dim, index = _index_select_args(c)
    return {"Out": np.take(x, index, axis=dim)}


def _index_select_grad(c: Call):
    x, dim, index = _index_select_args(c)
    g = np.asarray(c.x("Out@GRAD"))
    gx = np.zeros(x.shape, dtype=g.dtype)
    np.add.at(np.moveaxis(gx, dim, 0), index, np.moveaxis(g, dim, 0))
    return {"X@GRAD": gx}


register(OpDef(
    type="index_select", inputs=("X", "Index"), outputs=("Out",), kernel=_index_select,
    grad=GradSpec("index_select_grad", ("X", "Index", "Out@GRAD"), ("X@GRAD",), kernel=_index_select_grad),
    attrs_handled=("dim",),
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 5))], "Index": [np.array([4, 0, 4])]}, {"dim": 1}),
        Sample({"X": [rng.standard_normal((3, 5))], "Index": [np.array([2, 1], np.int32)]}, {"dim": -2})],
    doc="Out = X indexed by the 1-D Index along dim"))


# --------------------------------------------------------------------------
# scatter
# --------------------------------------------------------------------------
def _scatter_ids(c: Call, n: int) -> np.ndarray:
    return _check_range(np.asarray(c.x("Ids")).reshape(-1), n, "scatter", allow_negative=False)


def _scatter(c: Call):
    x = np.asarray(c.x("X"))
    upd = np.asarray(c.x("Updates"))
    ids = _scatter_ids(c, x.shape[0])
    upd = upd.reshape((len(ids),) + x.shape[1:])
    out = x.copy()
    if c.attr("overwrite", True):  # later ids win, as the CPU kernel writes in order
        last = len(ids) - 1 - np.unique(ids[::-1], return_index=True)[1]
        out[ids[last]] = upd[last]
    else:  # rows at ids are zeroed, then every update is added
        out[ids] = 0
        np.add.at(out, ids, upd)
    return {"Out": out}


def _scatter_grad(c: Call):
    """Paddle's scatter_grad: X@GRAD = Out@GRAD with the rows at Ids zeroed,
    Updates@GRAD = Out@GRAD[Ids] (also for duplicate ids under overwrite)."""
    g = np.asarray(c.x("Out@GRAD"))
    ids = _scatter_ids(c, g.shape[0])
    res = {}
    if c.wants("X@GRAD"):
        gx = g.copy()
        gx[ids] = 0
        res["X@GRAD"] = gx
    if c.wants("Updates@GRAD"):
        res["Updates@GRAD"] = g[ids].reshape(np.shape(c.x("Updates")))
    return res


register(OpDef(
    type="scatter", inputs=("X", "Ids", "Updates"), outputs=("Out",), kernel=_scatter,
    grad=GradSpec("scatter_grad", ("Ids", "Updates", "Out@GRAD"), ("X@GRAD", "Updates@GRAD"),
                  kernel=_scatter_grad, sets_lod_level=False),
    attrs_handled=("overwrite",),
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((5, 4))], "Ids": [np.array([3, 0, 1])],
                "Updates": [rng.standard_normal((3, 4))]}, {"overwrite": True}),
        Sample({"X": [rng.standard_normal((5, 4))], "Ids": [np.array([3, 0, 3])],
                "Updates": [rng.standard_normal((3, 4))]}, {"overwrite": False}, note="add, duplicate ids")],
    doc="Out = X with rows Ids replaced by (overwrite) or set to the sum of Updates"))


# --------------------------------------------------------------------------
# where
# --------------------------------------------------------------------------
def _where(c: Call):
    return {"Out": np.where(np.asarray(c.x("Condition"), bool), c.x("X"), c.x("Y"))}


def _where_grad(c: Call):
    cond = np.asarray(c.x("Condition"), bool)
    g = np.asarray(c.x("Out@GRAD"))
    res = {}
    for slot, keep in (("X", cond), ("Y", ~cond)):
        if c.wants(slot + "@GRAD"):
            v = np.asarray(c.x(slot))
            full = np.where(keep, g, np.zeros((), g.dtype))
            res[slot + "@GRAD"] = unbroadcast(np.broadcast_to(full, np.broadcast_shapes(full.shape, v.shape)),
                                              v.shape).astype(g.dtype, copy=False)
    return res


register(OpDef(
    type="where", inputs=("Condition", "X", "Y"), outputs=("Out",), kernel=_where,
    grad=GradSpec("where_grad", ("Condition", "X", "Y", "Out@GRAD"), ("X@GRAD", "Y@GRAD"), kernel=_where_grad),
    samples=lambda rng: [Sample({"Condition": [rng.random((2, 3)) > 0.5], "X": [rng.standard_normal((2, 3))],
                                 "Y": [rng.standard_normal((2, 3))]})],
    doc="Out = X where Condition else Y"))


# --------------------------------------------------------------------------
# top_k_v2
# --------------------------------------------------------------------------
def _stable_order(xm: np.ndarray, largest: bool) -> np.ndarray:
    """Sort order along the last axis, NaN first when largest (last otherwise),
    ties by index."""
    if xm.dtype.kind == "f":
        nan = np.isnan(xm)
        if largest:
            return np.lexsort((np.where(nan, 0, -xm), ~nan), axis=-1)
        return np.argsort(xm, axis=-1, kind="stable")  # NaNs sort last
    return np.argsort(-xm if largest else xm, axis=-1, kind="stable")


def _paddle_top_k_row(row: np.ndarray, k: int, largest: bool, sorted_: bool) -> list[int]:
    """Paddle's FullTopK on one row: partial_sort when k * 64 < width, else
    nth_element and (if sorted) a sort of the first k - 1 pairs."""
    pairs = [(v, j) for j, v in enumerate(row.tolist())]
    isnan = math.isnan if row.dtype.kind == "f" else (lambda v: False)
    if largest:
        def comp(a, b):
            return (isnan(a[0]) and not isnan(b[0])) or a[0] > b[0]
    else:
        def comp(a, b):
            return (not isnan(a[0]) and isnan(b[0])) or a[0] < b[0]
    n = len(pairs)
    if k * 64 < n:
        _stl.partial_sort(pairs, 0, k, n, comp)
    else:
        _stl.nth_element(pairs, 0, k - 1, n, comp)
        if sorted_:
            _stl.sort(pairs, 0, k - 1, comp)
    return [j for _, j in pairs[:k]]


def top_k_indices(xm: np.ndarray, k: int, largest: bool, sorted_: bool) -> np.ndarray:
    """Indices of Paddle's top k along the last axis of xm, in Paddle's order.
    Rows whose order is decided by the sort algorithm (ties, or sorted=False
    without partial_sort) replay libstdc++; the others use a NumPy sort."""
    width = xm.shape[-1]
    idx = _stable_order(xm, largest)[..., :k]
    if k == 0 or width == 0:
        return idx
    flat, fidx = xm.reshape(-1, width), idx.reshape(-1, k)
    if not sorted_ and k * 64 >= width and k > 1:
        rows = np.arange(flat.shape[0])
    else:
        s = np.sort(flat, axis=1)
        dup = (s[:, 1:] == s[:, :-1]).any(axis=1)
        if flat.dtype.kind == "f":
            dup |= np.isnan(flat).sum(axis=1) > 1
        rows = np.flatnonzero(dup)
    for r in rows:
        fidx[r] = _paddle_top_k_row(flat[r], k, largest, sorted_)
    return fidx.reshape(idx.shape)


def _top_k_v2(c: Call):
    x = np.asarray(c.x("X"))
    if x.ndim == 0:
        return {"Out": x.copy(), "Indices": np.zeros((), np.int64)}
    k = int(scalar_from(c, "K", "k", 1))
    axis = norm_axis(c.attr("axis", -1), x.ndim)
    xm = np.moveaxis(x, axis, -1)
    if not 0 <= k <= xm.shape[-1]:
        raise ExecutionError(f"top_k_v2: k={k} but the axis has {xm.shape[-1]} elements")
    idx = top_k_indices(xm, k, bool(c.attr("largest", True)), bool(c.attr("sorted", True)))
    vals = np.take_along_axis(xm, idx, axis=-1)
    return {"Out": np.moveaxis(vals, -1, axis), "Indices": np.moveaxis(idx, -1, axis).astype(np.int64)}


def _top_k_v2_grad(c: Call):
    x = np.asarray(c.x("X"))
    g = np.asarray(c.x("Out@GRAD"))
    if x.ndim == 0:
        return {"X@GRAD": g.copy()}
    axis = norm_axis(c.attr("axis", -1), x.ndim)
    gx = np.zeros(x.shape, dtype=g.dtype)
    np.put_along_axis(np.moveaxis(gx, axis, -1), np.moveaxis(np.asarray(c.x("Indices")), axis, -1),
                      np.moveaxis(g, axis, -1), axis=-1)
    return {"X@GRAD": gx}


def _top_k_samples(rng):
    x = rng.permutation(12).reshape(2, 6) + rng.random((2, 6)) * 0.5  # distinct values
    return [Sample({"X": [x]}, {"k": 3}),
            Sample({"X": [x]}, {"k": 1, "axis": 0, "largest": False}),
            Sample({"X": [x], "K": [np.array([2], np.int32)]}, {"k": 5}, note="K tensor")]


register(OpDef(
    type="top_k_v2", inputs=("X", "K"), outputs=("Out", "Indices"), kernel=_top_k_v2,
    grad=GradSpec("top_k_v2_grad", ("X", "Indices", "Out@GRAD", "K"), ("X@GRAD",), kernel=_top_k_v2_grad),
    samples=_top_k_samples, intermediate_outputs=("Indices",),
    attrs_handled=("k", "axis", "largest", "sorted"),
    doc="Out, Indices = the k largest (or smallest) values along axis, in Paddle's order"))


# --------------------------------------------------------------------------
# lookup_table_v2 (embedding)
# --------------------------------------------------------------------------
def _lookup_args(c: Call):
    w = np.asarray(c.x("W"))
    ids = _check_range(c.x("Ids"), w.shape[0], "lookup_table_v2", allow_negative=False)
    return w, ids, int(c.attr("padding_idx", -1))


def _lookup_table_v2(c: Call):
    w, ids, pad = _lookup_args(c)
    out = w[ids]
    if pad != -1:
        out[ids == pad] = 0
    return {"Out": out}


def _lookup_table_v2_grad(c: Call):
    """Dense W@GRAD (also when is_sparse: the values equal Paddle's SelectedRows)."""
    w, ids, pad = _lookup_args(c)
    g = np.asarray(c.x("Out@GRAD")).reshape(ids.size, w.shape[1])
    ids = ids.reshape(-1)
    keep = ids != pad if pad != -1 else slice(None)
    gw = np.zeros(w.shape, dtype=g.dtype)
    np.add.at(gw, ids[keep], g[keep])
    return {"W@GRAD": gw}


register(OpDef(
    type="lookup_table_v2", inputs=("Ids", "W"), outputs=("Out",), kernel=_lookup_table_v2,
    grad=GradSpec("lookup_table_v2_grad", ("Ids", "W", "Out@GRAD"), ("W@GRAD",), kernel=_lookup_table_v2_grad,
                  sets_lod_level=False),
    attrs_handled=("padding_idx",),
    samples=lambda rng: [
        Sample({"W": [rng.standard_normal((6, 4))], "Ids": [np.array([[1, 5], [1, 0]])]}),
        Sample({"W": [rng.standard_normal((6, 4))], "Ids": [np.array([2, 0, 2, 3])]}, {"padding_idx": 2},
               note="padding_idx")],
    doc="Out = rows of W at Ids (rows for padding_idx are zero and get no grad)"))


def _ids_v1(c: Call) -> Call:
    """lookup_table (v1) takes Ids of shape [..., 1]; v2 drops that last dim."""
    ids = np.asarray(c.x("Ids"))
    if ids.ndim == 0 or ids.shape[-1] != 1:
        raise c.unsupported("Ids", list(ids.shape), "lookup_table needs Ids whose last dim is 1")
    ins = dict(c.ins)
    ins["Ids"] = [ids[..., 0]]
    return Call(c.op_type, ins, c.attrs, c.outs, c.rng, c.env)


register(OpDef(
    type="lookup_table", inputs=("Ids", "W"), outputs=("Out",),
    kernel=lambda c: _lookup_table_v2(_ids_v1(c)),
    grad=GradSpec("lookup_table_grad", ("Ids", "W", "Out@GRAD"), ("W@GRAD",),
                  kernel=lambda c: _lookup_table_v2_grad(_ids_v1(c)), sets_lod_level=False),
    attrs_handled=("padding_idx",),
    samples=lambda rng: [
        Sample({"W": [rng.standard_normal((6, 4))], "Ids": [np.array([[1], [5], [1], [0]])]}),
        Sample({"W": [rng.standard_normal((6, 4))], "Ids": [np.array([[2], [0], [2]])]}, {"padding_idx": 2},
               note="padding_idx")],
    doc="the legacy embedding op: lookup_table_v2 with Ids of shape [..., 1]"))
