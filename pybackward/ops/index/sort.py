"""Sorting ops, with slots and grad rules from Paddle's records: top_k (v1),
argsort, kthvalue, mode, and their grads.

Paddle's CPU kernels sort (value, index) pairs with libstdc++'s unstable
algorithms (std::sort, std::nth_element, std::partial_sort) under a "less"
that puts NaN last (first when descending). Where values tie, the index
Paddle reports is whatever those algorithms leave, so such rows are replayed
with `_stl`; rows without ties take a NumPy sort, which gives the same order.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .. import _stl
from .core import top_k_indices
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis, scalar_from


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _less(descending: bool, is_float: bool):
    """The comparator of Paddle's kernels on (value, index) pairs."""
    isnan = math.isnan if is_float else (lambda v: False)
    if descending:
        return lambda a, b: (isnan(a[0]) and not isnan(b[0])) or a[0] > b[0]
    return lambda a, b: (not isnan(a[0]) and isnan(b[0])) or a[0] < b[0]


def _tied_rows(flat: np.ndarray) -> np.ndarray:
    """Rows (of a 2-D array) holding equal values or more than one NaN."""
    if flat.shape[1] < 2:
        return np.zeros(0, np.int64)
    s = np.sort(flat, axis=1)
    dup = (s[:, 1:] == s[:, :-1]).any(axis=1)
    if flat.dtype.kind == "f":
        dup |= np.isnan(flat).sum(axis=1) > 1
    return np.flatnonzero(dup)


def _replay(row: np.ndarray, algo: str, k: int, descending: bool) -> list[int]:
    """The index order libstdc++'s `algo` leaves on one row's (value, index) pairs."""
    pairs = [(v, j) for j, v in enumerate(row.tolist())]
    comp = _less(descending, row.dtype.kind == "f")
    n = len(pairs)
    if algo == "sort":
        _stl.sort(pairs, 0, n, comp)
    elif algo == "partial_sort":
        _stl.partial_sort(pairs, 0, k, n, comp)
    else:
        _stl.nth_element(pairs, 0, k - 1, n, comp)
    return [j for _, j in pairs]


def sort_order(xm: np.ndarray, descending: bool, stable: bool) -> np.ndarray:
    """Indices that sort xm along its last axis as Paddle's argsort does."""
    if xm.shape[-1] == 0:
        return np.zeros(xm.shape, np.int64)
    n = xm.shape[-1]
    if descending:  # stable descending: ties keep their index order, NaN first
        order = n - 1 - np.argsort(xm[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    else:
        order = np.argsort(xm, axis=-1, kind="stable")
    if stable:
        return order
    flat, forder = xm.reshape(-1, n), order.reshape(-1, n)
    for r in _tied_rows(flat):
        forder[r] = _replay(flat[r], "sort", n, descending)
    return forder.reshape(order.shape)


def _scatter_last(shape: tuple[int, ...], axis: int, idx: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Zeros of `shape` with g put at idx along axis (idx and g shaped alike)."""
    gx = np.zeros(shape, g.dtype)
    np.put_along_axis(gx, idx.astype(np.int64), g, axis=axis)
    return gx


# --------------------------------------------------------------------------
# top_k (v1): the k largest along the last axis, sorted
# --------------------------------------------------------------------------
def _top_k(c: Call):
    x = _x(c)
    if x.ndim == 0:
        return {"Out": x.copy(), "Indices": np.zeros((), np.int64)}
    k = int(scalar_from(c, "K", "k", 1))
    if not 1 <= k <= x.shape[-1]:
        raise ExecutionError(f"top_k: k={k} but the last dim has {x.shape[-1]} elements")
    idx = top_k_indices(x, k, True, True)
    return {"Out": np.take_along_axis(x, idx, axis=-1), "Indices": idx.astype(np.int64)}


def _top_k_grad(c: Call):
    x = _x(c)
    g = _x(c, "Out@GRAD")
    if x.ndim == 0:
        return {"X@GRAD": g.copy()}
    return {"X@GRAD": _scatter_last(x.shape, -1, _x(c, "Indices"), g)}


def _top_k_samples(rng):
    x = rng.permutation(12).reshape(2, 6) + rng.random((2, 6)) * 0.5  # distinct values
    return [Sample({"X": [x]}, {"k": 3}),
            Sample({"X": [rng.permutation(24).reshape(2, 3, 4) * 0.5]}, {"k": 1}),
            Sample({"X": [x], "K": [np.array([2], np.int32)]}, {"k": 5}, note="K tensor")]


register(paddle_opdef(
    "top_k", _top_k, {"top_k_grad": _top_k_grad}, samples=_top_k_samples, attrs_handled=("k",),
    doc="the legacy top_k: Out, Indices = the k largest values along the last axis, sorted"))


# --------------------------------------------------------------------------
# argsort
# --------------------------------------------------------------------------
def _argsort(c: Call):
    x = _x(c)
    if x.ndim == 0:
        return {"Out": x.copy(), "Indices": np.zeros((), np.int64)}
    axis = norm_axis(c.attr("axis", -1), x.ndim)
    xm = np.moveaxis(x, axis, -1)
    order = sort_order(xm, bool(c.attr("descending", False)), bool(c.attr("stable", False)))
    return {"Out": np.moveaxis(np.take_along_axis(xm, order, axis=-1), -1, axis),
            "Indices": np.moveaxis(order, -1, axis).astype(np.int64)}


def _argsort_grad(c: Call):
    x = _x(c)
    g = _x(c, "Out@GRAD")
    if x.ndim == 0:
        return {"X@GRAD": g.copy()}
    axis = norm_axis(c.attr("axis", -1), x.ndim)
    return {"X@GRAD": _scatter_last(x.shape, axis, _x(c, "Indices"), g)}


def _argsort_samples(rng):
    """Distinct values only (a gradient is not defined at ties; the order of
    ties is checked against Paddle's in tests/ops/test_index_sort.py)."""
    x = rng.permutation(24).reshape(2, 3, 4) * 0.25
    return [Sample({"X": [x]}, {"axis": -1, "descending": False, "stable": False}),
            Sample({"X": [x]}, {"axis": 1, "descending": True, "stable": False}),
            Sample({"X": [x]}, {"axis": 0, "descending": True, "stable": True}),
            Sample({"X": [rng.permutation(5) - 2.5]}, {"axis": 0, "descending": False, "stable": True})]


register(paddle_opdef(
    "argsort", _argsort, {"argsort_grad": _argsort_grad}, samples=_argsort_samples,
    attrs_handled=("axis", "descending", "stable"),
    doc="Out, Indices = X sorted along axis (NaN last; first when descending) and the order"))


# --------------------------------------------------------------------------
# kthvalue / mode
# --------------------------------------------------------------------------
def _reduce_index(c: Call, x: np.ndarray, pick) -> dict:
    """Out, Indices of a per-row pick along axis (keepdim as the attr says)."""
    if x.ndim == 0:
        return {"Out": x.copy(), "Indices": np.zeros((), np.int64)}
    axis = norm_axis(c.attr("axis", -1), x.ndim)
    xm = np.moveaxis(x, axis, -1)
    flat = xm.reshape(-1, xm.shape[-1])
    idx = pick(flat).reshape(xm.shape[:-1] + (1,))
    vals = np.take_along_axis(xm, idx, axis=-1)
    vals, idx = np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)
    if not c.attr("keepdim", False):
        vals, idx = np.squeeze(vals, axis), np.squeeze(idx, axis)
    return {"Out": vals, "Indices": idx.astype(np.int64)}


def _reduce_index_grad(c: Call):
    x = _x(c)
    g = _x(c, "Out@GRAD")
    if x.ndim == 0:
        return {"X@GRAD": g.copy()}
    axis = norm_axis(c.attr("axis", -1), x.ndim)
    idx = _x(c, "Indices")
    if not c.attr("keepdim", False):
        idx, g = np.expand_dims(idx, axis), np.expand_dims(g, axis)
    return {"X@GRAD": _scatter_last(x.shape, axis, idx, g)}


def _kthvalue(c: Call):
    x = _x(c)
    k = int(c.attr("k", 1))
    width = x.shape[-1] if x.ndim == 0 else x.shape[norm_axis(c.attr("axis", -1), x.ndim)]
    if not 1 <= k <= max(width, 1) or (x.ndim == 0 and k != 1):
        raise ExecutionError(f"kthvalue: k={k} but the axis has {width} elements")

    def pick(flat):
        idx = np.argsort(flat, axis=1, kind="stable")[:, k - 1].copy()
        algo = "partial_sort" if k * 64 < flat.shape[1] else "nth_element"
        for r in _tied_rows(flat):
            idx[r] = _replay(flat[r], algo, k, False)[k - 1]
        return idx
    return _reduce_index(c, x, pick)


register(paddle_opdef(
    "kthvalue", _kthvalue, {"kthvalue_grad": _reduce_index_grad}, samples=lambda rng: [
        Sample({"X": [rng.permutation(24).reshape(2, 3, 4) * 0.5]}, {"k": 2, "axis": -1, "keepdim": False}),
        Sample({"X": [rng.permutation(24).reshape(2, 3, 4) * 0.5]}, {"k": 3, "axis": 1, "keepdim": True}),
        Sample({"X": [rng.permutation(130).reshape(1, 130) * 0.5]}, {"k": 2, "axis": 1, "keepdim": False},
               note="partial_sort path")],
    attrs_handled=("k", "axis", "keepdim"), doc="Out, Indices = the k-th smallest value along axis and its index"))


def _mode_pick(flat: np.ndarray) -> np.ndarray:
    """Per row: after Paddle's std::sort, the first run of equal values with
    the highest count wins, and the index of its last element is reported."""
    n = flat.shape[1]
    tied = set(_tied_rows(flat).tolist())
    idx = np.zeros(flat.shape[0], np.int64)
    for r in range(flat.shape[0]):
        if r in tied:
            order = _replay(flat[r], "sort", n, False)
        else:
            order = np.argsort(flat[r], kind="stable").tolist()
        vals = flat[r][order]
        best, run = 0, 0
        for i in range(n):
            run += 1
            if i == n - 1 or vals[i + 1] != vals[i]:
                if run > best:
                    best, idx[r] = run, order[i]
                run = 0
    return idx


def _mode(c: Call):
    return _reduce_index(c, _x(c), _mode_pick)


register(paddle_opdef(
    "mode", _mode, {"mode_grad": _reduce_index_grad}, samples=lambda rng: [
        # without repeats the mode is the smallest value; with them the gradient
        # is not defined (ties are checked in tests/ops/test_index_sort.py)
        Sample({"X": [rng.permutation(6).reshape(2, 3) * 0.5]}, {"axis": 0, "keepdim": False}),
        Sample({"X": [rng.permutation(24).reshape(2, 3, 4) * 0.5]}, {"axis": -1, "keepdim": True})],
    attrs_handled=("axis", "keepdim"),
    doc="Out, Indices = the most frequent value along axis (the smallest of equals) and an index of it"))
