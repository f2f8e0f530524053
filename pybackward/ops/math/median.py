"""median and nanmedian, with Paddle 3.3.1's CPU kernels' exact choices.

Both reduce over `axis` (all dims when it is empty) by moving the reduced
dims last and flattening them into rows. Paddle picks the middle elements
with its top_k kernel (k smallest, sorted), whose libstdc++ nth_element
leaves tied values in an order of its own: the index output (`medians` /
`MedianIndex`: two per row in mode "avg", one in mode "min") follows it
(`indexing.top_k_indices` replays it).

* median: k = n/2 + 1; a row holding a NaN gives NaN (its first NaN's index,
  written at flat position i, as Paddle does). Integer inputs average with
  C++ integer division (toward zero).
* nanmedian: NaNs are skipped (k = the most non-NaN values of any row); an
  all-NaN row gives NaN and index -1 (an all-NaN x: indices 0, 1).

Both grads (see `_grad`): with one axis in mode "min", to the indexed
element; otherwise spread evenly over the elements equal to the median
(NaN equal to NaN), or halved onto the two middle ones.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..index.core import top_k_indices
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_MODES = ("avg", "min")


def _axes(c: Call) -> list[int]:
    if c.has("AxisTensor"):
        return [int(v) for v in np.asarray(c.x("AxisTensor")).reshape(-1)]
    if c.has("AxisTensorList"):
        return [int(np.asarray(v).reshape(-1)[0]) for v in c.xs("AxisTensorList")]
    return [int(a) for a in (c.attr("axis", []) or [])]


def _setup(c: Call, x_slot: str):
    """(x, rows (pre, n), perm, permuted shape, out shape, mode)."""
    x = np.asarray(c.x(x_slot))
    mode = c.attr("mode", "avg")
    if mode not in _MODES:
        raise c.unsupported("mode", mode, "Paddle's modes are 'avg' and 'min'")
    axes = _axes(c)
    keepdim = bool(c.attr("keepdim", False))
    nd = x.ndim
    for a in axes:
        if not -max(nd, 1) <= a < max(nd, 1):
            raise ExecutionError(f"{c.op_type}: axis {a} is out of range for a tensor of rank {nd}")
    red = sorted({a + nd if a < 0 else a for a in axes}) if nd else []
    if not axes or nd <= 1:
        perm = list(range(nd))
        rows = x.reshape(1, -1)
        out_shape = (1,) * nd if keepdim else ()
        if axes and nd == 1 and not keepdim:
            out_shape = ()
    else:
        keep = [i for i in range(nd) if i not in red]
        perm = keep + red
        rows = np.transpose(x, perm).reshape(-1, int(np.prod([x.shape[i] for i in red], dtype=np.int64)))
        out_shape = tuple(1 if i in red else x.shape[i] for i in range(nd)) if keepdim else \
            tuple(x.shape[i] for i in keep)
    if rows.shape[1] == 0 and x.size:
        raise ExecutionError(f"{c.op_type}: the reduced dims of x {list(x.shape)} are empty")
    return x, rows, perm, out_shape, mode


def _half(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """(left + right) / 2 in the input's dtype (C++ integer division for ints)."""
    if left.dtype.kind in "iu":
        s = left + right
        return (np.sign(s) * (np.abs(s) // 2)).astype(left.dtype)
    return (left + right) / left.dtype.type(2)


def _pick(rows: np.ndarray, k: int):
    """Paddle's top_k (k smallest, sorted) of each row: values and indices."""
    idx = top_k_indices(rows, k, False, True)
    return np.take_along_axis(rows, idx, axis=1), idx


def _median_rows(rows: np.ndarray, mode: str, ignore_nan: bool):
    """(out (pre,), index (pre, 2) or (pre,)) per Paddle's CalcMedianFunc."""
    pre, n = rows.shape
    avg = mode == "avg"
    isnan = np.isnan(rows) if rows.dtype.kind == "f" else np.zeros(rows.shape, bool)
    nan_counts = isnan.sum(axis=1)
    m = np.zeros((pre, 2), np.int64)
    if ignore_nan and nan_counts.sum() == rows.size:
        out = np.full(pre, np.nan, rows.dtype)  # indices as Paddle 3.3.1 gives them (probed)
        m[:, 0], m[:, 1] = 0, 1 if avg else 0
        return out, (m if avg else m[:, 0])
    r = np.arange(pre)
    if ignore_nan:
        k = int(n - nan_counts.min())
        vals, idx = _pick(rows, k)
        nan_k = np.where(nan_counts > 0, n - nan_counts, k)
    else:
        k = n // 2 + 1
        vals, idx = _pick(rows, k)
        nan_k = np.full(pre, 2 * k - 1 if n & 1 else 2 * (k - 1))
    pos = nan_k >> 1 if ignore_nan else np.full(pre, k - 1)
    odd = (nan_k & 1).astype(bool) if ignore_nan else np.full(pre, bool(n & 1))
    left_pos = np.where(odd, pos, np.where(pos > 0, pos - 1, pos))
    pos_c = np.minimum(pos, k - 1)
    left_c = np.minimum(left_pos, k - 1)
    left, right = vals[r, left_c], vals[r, pos_c]
    if avg:
        out = np.where(odd, right, _half(left, right))
    else:
        out = left
    m[:, 0], m[:, 1] = idx[r, left_c], idx[r, pos_c]
    out = out.astype(rows.dtype, copy=False)
    if ignore_nan:
        allnan = nan_counts == n
        out = np.where(allnan, vals[:, 0], out)
        m[allnan] = -1
        return out, (m if avg else m[:, 0])
    nanrow = nan_counts > 0
    if not nanrow.any():
        return out, (m if avg else m[:, 0])
    out = np.where(nanrow, np.nan, out).astype(rows.dtype)
    first_nan = np.argmax(isnan, axis=1)
    if not avg:
        return out, np.where(nanrow, first_nan, m[:, 0])
    flat = m.reshape(-1)  # Paddle writes m[i], not m[2i], for such a row (its other slots: left as here)
    flat[2 * r[nanrow]] = flat[2 * r[nanrow] + 1] = first_nan[nanrow]
    flat[r[nanrow]] = first_nan[nanrow]
    return out, m


def _forward(c: Call, x_slot: str, ignore_nan: bool):
    x, rows, _, out_shape, mode = _setup(c, x_slot)
    idx_shape = out_shape + ((2,) if mode == "avg" else ())
    if x.size == 0:
        return np.full(out_shape, np.nan, x.dtype), np.zeros(idx_shape, np.int64)
    out, m = _median_rows(rows, mode, ignore_nan)
    return out.reshape(out_shape), m.reshape(idx_shape)


def _back(x: np.ndarray, perm: list[int], grows: np.ndarray) -> np.ndarray:
    """A gradient laid out as the rows, put back into x's shape."""
    shaped = grows.reshape([x.shape[p] for p in perm])
    return np.transpose(shaped, np.argsort(perm)) if perm else shaped.reshape(x.shape)


def _grad(c: Call, xs: str, outs: str, idxs: str):
    """Paddle 3.3.1's median_grad / nanmedian_grad: with one axis in mode
    "min", Out@GRAD goes to the indexed element; otherwise it is spread evenly
    over the elements equal to Out (NaN equal to NaN), or - when none is (the
    mean of two different values) - halved onto the two indexed ones."""
    x, rows, perm, _, mode = _setup(c, xs)
    g = np.asarray(c.x(outs + "@GRAD")).reshape(-1)
    gr = np.zeros(rows.shape, g.dtype)
    if x.size == 0:
        return {xs + "@GRAD": np.zeros(x.shape, g.dtype)}
    m = np.asarray(c.x(idxs)).reshape(len(g), -1)
    r = np.arange(len(g))
    if len(_axes(c)) == 1 and mode == "min":
        ok = m[:, 0] >= 0
        gr[r[ok], m[ok, 0]] = g[ok]
        return {xs + "@GRAD": _back(x, perm, gr)}
    med = np.asarray(c.x(outs)).reshape(-1)
    eq = rows == med[:, None]
    if rows.dtype.kind == "f":
        eq |= np.isnan(rows) & np.isnan(med)[:, None]
    cnt = eq.sum(axis=1)
    gr[eq] = (g / np.maximum(cnt, 1).astype(g.dtype))[np.nonzero(eq)[0]]
    none = cnt == 0
    if none.any():
        m2 = m[none] if m.shape[1] == 2 else np.repeat(m[none], 2, axis=1)
        same = m2[:, 0] == m2[:, 1]
        rn, gn = r[none], g[none]
        gr[rn[same], m2[same, 0]] = gn[same]
        half = gn[~same] / g.dtype.type(2)
        gr[rn[~same], m2[~same, 0]] = half
        gr[rn[~same], m2[~same, 1]] = half
    return {xs + "@GRAD": _back(x, perm, gr)}


def _median(c: Call):
    out, m = _forward(c, "x", ignore_nan=False)
    return {"out": out, "medians": m}


def _median_grad(c: Call):
    return _grad(c, "x", "out", "medians")


def _nanmedian(c: Call):
    out, m = _forward(c, "X", ignore_nan=True)
    return {"Out": out, "MedianIndex": m}


def _nanmedian_grad(c: Call):
    return _grad(c, "X", "Out", "MedianIndex")


def _distinct(rng, shape):
    return (rng.permutation(int(np.prod(shape))).reshape(shape) + rng.random(shape) * 0.5) * 0.7


def _median_samples(rng):  # ties, integers: tests/ops/test_kernel_cases.py (values probed on Paddle)
    return [
        Sample({"x": [_distinct(rng, (3, 4))]}, {"axis": [1], "keepdim": False, "mode": "avg"}),
        Sample({"x": [_distinct(rng, (3, 5))]}, {"axis": [-1], "keepdim": True, "mode": "min"}),
        Sample({"x": [_distinct(rng, (2, 3, 4))]}, {"axis": [0, 2], "keepdim": False, "mode": "avg"}),
        Sample({"x": [_distinct(rng, (2, 3, 4))]}, {"axis": [], "keepdim": True, "mode": "min"}),
        Sample({"x": [_distinct(rng, (7,))]}, {"axis": [0], "keepdim": False, "mode": "avg"}),
        Sample({"x": [np.array(1.5)]}, {"axis": [], "keepdim": False, "mode": "avg"}, note="0-D")]


def _nanmedian_samples(rng):
    x = _distinct(rng, (3, 4))
    xn = x.copy()
    xn[0, 1] = xn[2, 2] = xn[2, 3] = np.nan
    return [
        Sample({"X": [x]}, {"axis": [1], "keepdim": False, "mode": "avg"}),
        Sample({"X": [xn]}, {"axis": [1], "keepdim": False, "mode": "avg"}, note="NaNs skipped"),
        Sample({"X": [xn]}, {"axis": [-1], "keepdim": True, "mode": "min"}),
        Sample({"X": [_distinct(rng, (2, 3, 4))]}, {"axis": [0, 2], "keepdim": True, "mode": "avg"}),
        Sample({"X": [_distinct(rng, (2, 3, 4))]}, {"axis": [], "keepdim": False, "mode": "min"})]


register(paddle_opdef("median", _median, {"median_grad": _median_grad}, samples=_median_samples,
                      attrs_handled=("axis", "keepdim", "mode"),
                      doc="out = median of x over axis (avg of the two middle values, or the lower); "
                          "medians = their indices in Paddle's top_k order"))
register(paddle_opdef("nanmedian", _nanmedian, {"nanmedian_grad": _nanmedian_grad},
                      samples=_nanmedian_samples, attrs_handled=("axis", "keepdim", "mode"),
                      doc="Out = median of X over axis, NaNs skipped; MedianIndex = the middle elements"))
