"""Matrix-structure ops, with slots and grad rules from Paddle's records:
tril_triu, diag_v2, diagonal, trace, kron (with grads), and diag_embed, eye,
tril_indices, triu_indices (no gradient)."""
from __future__ import annotations

import numpy as np

from ...base import dtypes
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis, np_dtype


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


# --------------------------------------------------------------------------
# tril_triu
# --------------------------------------------------------------------------
def _tri_mask(c: Call, shape: tuple[int, ...]) -> np.ndarray:
    if len(shape) < 2:
        raise ExecutionError(f"tril_triu: X must have at least 2 dims, got shape {list(shape)}")
    k = int(c.attr("diagonal", 0))
    rows, cols = shape[-2:]
    if c.attr("lower", True):
        return np.tri(rows, cols, k, dtype=bool)
    return ~np.tri(rows, cols, k - 1, dtype=bool)


def _tril_triu(c: Call):
    x = _x(c)
    return {"Out": np.where(_tri_mask(c, x.shape), x, np.zeros((), x.dtype))}


def _tril_triu_grad(c: Call):
    g = _x(c, "Out@GRAD")
    return {"X@GRAD": np.where(_tri_mask(c, g.shape), g, np.zeros((), g.dtype))}


register(paddle_opdef(
    "tril_triu", _tril_triu, {"tril_triu_grad": _tril_triu_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4))]}, {"lower": True, "diagonal": 0}),
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"lower": False, "diagonal": 1}),
        Sample({"X": [rng.standard_normal((4, 3))]}, {"lower": True, "diagonal": -2}),
        Sample({"X": [rng.standard_normal((4, 3))]}, {"lower": False, "diagonal": -1})],
    attrs_handled=("lower", "diagonal"),
    doc="Out = the lower (tril) or upper (triu) triangle of X's last two dims from `diagonal` on"))


# --------------------------------------------------------------------------
# diag_v2 / diagonal / trace
# --------------------------------------------------------------------------
def _diag_v2(c: Call):
    x = _x(c)
    k = int(c.attr("offset", 0))
    if x.ndim == 0:
        x = x.reshape(1)
    if x.ndim == 1:
        n = x.shape[0] + abs(k)
        out = np.full((n, n), c.attr("padding_value", 0.0)).astype(x.dtype)
        i = np.arange(x.shape[0])
        out[i + max(-k, 0), i + max(k, 0)] = x
        return {"Out": out}
    if x.ndim == 2:
        return {"Out": np.diagonal(x, k).copy()}
    raise ExecutionError(f"diag_v2: X must be 0-D, 1-D or 2-D, got shape {list(x.shape)}")


def _diag_v2_grad(c: Call):
    x = _x(c)
    g = _x(c, "Out@GRAD")
    k = int(c.attr("offset", 0))
    if x.ndim <= 1:
        return {"X@GRAD": np.diagonal(g, k).reshape(x.shape).copy()}
    gx = np.zeros(x.shape, g.dtype)
    i = np.arange(g.shape[0])
    gx[i + max(-k, 0), i + max(k, 0)] = g
    return {"X@GRAD": gx}


register(paddle_opdef(
    "diag_v2", _diag_v2, {"diag_v2_grad": _diag_v2_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal(3)]}, {"offset": 1, "padding_value": 0.5}),
        Sample({"X": [rng.standard_normal(2)]}, {"offset": -2, "padding_value": 0.0}),
        Sample({"X": [rng.standard_normal((3, 4))]}, {"offset": 1, "padding_value": 0.0}),
        Sample({"X": [rng.standard_normal((4, 3))]}, {"offset": -1, "padding_value": 0.0})],
    attrs_handled=("offset", "padding_value"),
    doc="1-D X: a matrix with X on diagonal `offset` (padding_value elsewhere); 2-D X: that diagonal"))


def _diag_axes(c: Call, ndim: int) -> tuple[int, int, int]:
    a1 = norm_axis(c.attr("axis1", 0), ndim, "axis1")
    a2 = norm_axis(c.attr("axis2", 1), ndim, "axis2")
    if a1 == a2:
        raise ExecutionError(f"{c.op_type}: axis1 and axis2 are both {a1}")
    return int(c.attr("offset", 0)), a1, a2


def _diag_scatter(g_diag: np.ndarray, shape: tuple[int, ...], k: int, a1: int, a2: int) -> np.ndarray:
    """Zeros of `shape` with g_diag (diagonal last, as np.diagonal gives) on diagonal k of (a1, a2)."""
    gx = np.zeros(shape, g_diag.dtype)
    view = np.moveaxis(gx, (a1, a2), (-2, -1))
    n = g_diag.shape[-1]
    i = np.arange(n)
    view[..., i + max(-k, 0), i + max(k, 0)] = g_diag
    return gx


def _diagonal(c: Call):
    x = _x(c, "Input")
    k, a1, a2 = _diag_axes(c, x.ndim)
    return {"Out": np.diagonal(x, k, a1, a2).copy()}


def _diagonal_grad(c: Call):
    x = _x(c, "Input")
    k, a1, a2 = _diag_axes(c, x.ndim)
    return {"Input@GRAD": _diag_scatter(_x(c, "Out@GRAD"), x.shape, k, a1, a2)}


register(paddle_opdef(
    "diagonal", _diagonal, {"diagonal_grad": _diagonal_grad}, samples=lambda rng: [
        Sample({"Input": [rng.standard_normal((3, 4))]}, {"offset": 1, "axis1": 0, "axis2": 1}),
        Sample({"Input": [rng.standard_normal((2, 3, 4))]}, {"offset": -1, "axis1": 2, "axis2": 1}),
        Sample({"Input": [rng.standard_normal((3, 2, 4))]}, {"offset": 0, "axis1": -1, "axis2": 0})],
    attrs_handled=("offset", "axis1", "axis2"),
    doc="Out = the diagonal `offset` of the (axis1, axis2) planes of Input, as a last dim"))


def _trace(c: Call):
    x = _x(c, "Input")
    k, a1, a2 = _diag_axes(c, x.ndim)
    return {"Out": np.asarray(np.diagonal(x, k, a1, a2).sum(axis=-1, dtype=x.dtype))}


def _trace_grad(c: Call):
    x = _x(c, "Input")
    k, a1, a2 = _diag_axes(c, x.ndim)
    n = np.diagonal(x, k, a1, a2).shape[-1]
    g = _x(c, "Out@GRAD")
    return {"Input@GRAD": _diag_scatter(np.repeat(g[..., None], n, axis=-1), x.shape, k, a1, a2)}


register(paddle_opdef(
    "trace", _trace, {"trace_grad": _trace_grad}, samples=lambda rng: [
        Sample({"Input": [rng.standard_normal((3, 4))]}, {"offset": 1, "axis1": 0, "axis2": 1}),
        Sample({"Input": [rng.standard_normal((2, 3, 4))]}, {"offset": -1, "axis1": -1, "axis2": 1}),
        Sample({"Input": [rng.standard_normal((2, 3))]}, {"offset": 5, "axis1": 0, "axis2": 1},
               note="empty diagonal")],
    attrs_handled=("offset", "axis1", "axis2"), doc="Out = the sum of the diagonal `offset` of (axis1, axis2)"))


# --------------------------------------------------------------------------
# kron
# --------------------------------------------------------------------------
def _kron_shapes(x: np.ndarray, y: np.ndarray):
    n = max(x.ndim, y.ndim)
    return (1,) * (n - x.ndim) + x.shape, (1,) * (n - y.ndim) + y.shape


def _kron(c: Call):
    x, y = _x(c), _x(c, "Y")
    return {"Out": np.kron(x, y)}


def _kron_grad(c: Call):
    x, y = _x(c), _x(c, "Y")
    xs, ys = _kron_shapes(x, y)
    n = len(xs)
    g = _x(c, "Out@GRAD").reshape([v for a, b in zip(xs, ys) for v in (a, b)])
    xe = x.reshape([v for a in xs for v in (a, 1)])
    ye = y.reshape([v for b in ys for v in (1, b)])
    if np.iscomplexobj(xe) or np.iscomplexobj(ye):  # dX = dOut * conj(Y), dY = dOut * conj(X), summed
        xe, ye = np.conj(xe), np.conj(ye)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = (g * ye).sum(axis=tuple(range(1, 2 * n, 2))).reshape(x.shape)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = (g * xe).sum(axis=tuple(range(0, 2 * n, 2))).reshape(y.shape)
    return res


register(paddle_opdef(
    "kron", _kron, {"kron_grad": _kron_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))], "Y": [rng.standard_normal((3, 2))]}),
        Sample({"X": [rng.standard_normal((2, 1, 2))], "Y": [rng.standard_normal((3,))]}, note="ranks differ"),
        Sample({"X": [rng.standard_normal((2,))], "Y": [rng.standard_normal((2, 2))]}),
        Sample({"X": [rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))],
                "Y": [rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))]}, note="complex"),
        Sample({"X": [rng.standard_normal((2, 1, 2)) + 1j * rng.standard_normal((2, 1, 2))],
                "Y": [rng.standard_normal((3,)) + 1j * rng.standard_normal((3,))]}, note="complex, ranks differ")],
    doc="Out = the Kronecker product of X and Y (the lower rank padded with leading 1s)"))


# --------------------------------------------------------------------------
# diag_embed / eye / tril_indices / triu_indices (no gradient)
# --------------------------------------------------------------------------
def _diag_embed(c: Call):
    x = _x(c, "Input")
    k = int(c.attr("offset", 0))
    nd = x.ndim + 1
    d1 = norm_axis(c.attr("dim1", -2), nd, "dim1")
    d2 = norm_axis(c.attr("dim2", -1), nd, "dim2")
    if d1 == d2:
        raise ExecutionError(f"diag_embed: dim1 and dim2 are both {d1}")
    n = x.shape[-1] + abs(k)
    out = np.zeros(x.shape[:-1] + (n, n), x.dtype)
    i = np.arange(x.shape[-1])
    out[..., i + max(-k, 0), i + max(k, 0)] = x
    # out's last two dims go to (d1, d2); the batch dims keep their order
    return {"Out": np.ascontiguousarray(np.moveaxis(out, (-2, -1), (d1, d2)))}


register(paddle_opdef(
    "diag_embed", _diag_embed, attrs_handled=("offset", "dim1", "dim2"), samples=lambda rng: [
        Sample({"Input": [rng.standard_normal((2, 3))]}, {"offset": 0, "dim1": -2, "dim2": -1}),
        Sample({"Input": [rng.standard_normal((2, 3))]}, {"offset": 1, "dim1": 0, "dim2": 2}),
        Sample({"Input": [rng.standard_normal((2, 3))]}, {"offset": -1, "dim1": 2, "dim2": 0})],
    doc="Out = matrices in the (dim1, dim2) planes with Input's last dim on diagonal `offset`"))


def _eye(c: Call):
    rows = int(c.attr("num_rows", 0))
    cols = int(c.attr("num_columns", -1))
    cols = rows if cols == -1 else cols
    if rows < 0 or cols < 0:
        raise ExecutionError(f"eye: num_rows={rows} and num_columns={cols} must not be negative")
    return {"Out": np.eye(rows, cols, dtype=np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.FP32)))}


register(paddle_opdef("eye", _eye, attrs_handled=("num_rows", "num_columns", "dtype"), samples=lambda rng: [
    Sample({}, {"num_rows": 3, "num_columns": -1, "dtype": 5}),
    Sample({}, {"num_rows": 2, "num_columns": 4, "dtype": 3})],
                      doc="Out = the num_rows x num_columns identity (num_columns -1: square)"))


def _tri_indices(lower: bool, rows_attr: str, cols_attr: str):
    def kernel(c: Call):
        rows, cols = int(c.attr(rows_attr, 0)), int(c.attr(cols_attr, 0))
        k = int(c.attr("offset", 0))
        dt = np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.INT64))
        mask = np.tri(rows, cols, k, dtype=bool) if lower else ~np.tri(rows, cols, k - 1, dtype=bool)
        return {"out": np.stack(np.nonzero(mask)).astype(dt).reshape(2, -1)}
    return kernel


register(paddle_opdef("tril_indices", _tri_indices(True, "rows", "cols"), samples=lambda rng: [
    Sample({}, {"rows": 4, "cols": 3, "offset": 0, "dtype": 3}),
    Sample({}, {"rows": 3, "cols": 5, "offset": -1, "dtype": 2})],
                      attrs_handled=("rows", "cols", "offset", "dtype"),
                      doc="out = [row indices, col indices] of the lower triangle from `offset`, row-major"))
register(paddle_opdef("triu_indices", _tri_indices(False, "row", "col"), samples=lambda rng: [
    Sample({}, {"row": 4, "col": 3, "offset": 0, "dtype": 3}),
    Sample({}, {"row": 3, "col": 5, "offset": 2, "dtype": 2})],
                      attrs_handled=("row", "col", "offset", "dtype"),
                      doc="out = [row indices, col indices] of the upper triangle from `offset`, row-major"))
