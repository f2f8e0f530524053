"""index_put: out = x; out[indices] = value (or += with accumulate), with its grad."""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in



# --------------------------------------------------------------------------
# index_put: out = x; out[indices] = value (or += with accumulate)
# --------------------------------------------------------------------------
def _put_index(c: Call, x: np.ndarray) -> tuple[np.ndarray, ...]:
    idx = []
    for t in c.xs("indices"):
        t = np.asarray(t)
        if t.dtype == np.bool_:
            idx.extend(np.nonzero(t))
        elif t.dtype.kind in "iu":
            idx.append(t.astype(np.int64))
        else:
            raise ExecutionError(f"index_put: indices must be bool or integer tensors, got {t.dtype}")
    if len(idx) > x.ndim:
        raise ExecutionError(f"index_put: {len(idx)} index tensors for a tensor of rank {x.ndim}")
    for d, t in enumerate(idx):
        if t.size and (t.min() < -x.shape[d] or t.max() >= x.shape[d]):
            raise ExecutionError(f"index_put: index out of range for dim {d} of size {x.shape[d]}")
    try:
        np.broadcast_shapes(*(t.shape for t in idx))
    except ValueError:
        raise ExecutionError("index_put: the index tensors do not broadcast together") from None
    return tuple(idx)


def _index_put(c: Call):
    x, v = array_in(c, "x"), array_in(c, "value")
    idx = _put_index(c, x)
    out = x.copy()
    target = out[idx].shape
    try:
        vb = np.broadcast_to(v, target).astype(x.dtype, copy=False)
    except ValueError:
        raise ExecutionError(f"index_put: value of shape {list(v.shape)} does not broadcast to "
                             f"{list(target)}") from None
    if c.attr("accumulate", False):
        np.add.at(out, idx, vb)
    else:
        out[idx] = vb
    return {"out": out}


def _index_put_grad(c: Call):
    x, v, g = array_in(c, "x"), array_in(c, "value"), array_in(c, "out@GRAD")
    idx = _put_index(c, x)
    res = {}
    if c.wants("x@GRAD"):
        gx = g.copy()
        if not c.attr("accumulate", False):
            gx[idx] = 0
        res["x@GRAD"] = gx
    if c.wants("value@GRAD"):
        res["value@GRAD"] = unbroadcast(g[idx], v.shape).astype(g.dtype)
    return res


def _index_put_samples(rng):
    i0, i1 = np.array([0, 2, 1]), np.array([1, 3, 0])
    return [
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [i0, i1], "value": [rng.standard_normal(3)]},
               {"accumulate": False}),
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [i0, i1], "value": [rng.standard_normal(1)]},
               {"accumulate": True}, note="broadcast value"),
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [np.array([0, 2, 0])],
                "value": [rng.standard_normal(4)]}, {"accumulate": True}, note="duplicate rows add"),
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [np.array([True, False, True])],
                "value": [rng.standard_normal((2, 4))]}, {"accumulate": False}, note="bool mask"),
        Sample({"x": [rng.standard_normal((2, 3, 2))], "indices": [np.array([1, 0], np.int32)],
                "value": [rng.standard_normal((3, 2))]}, {"accumulate": False}, note="int32, rows")]


register(paddle_opdef("index_put", _index_put, {"index_put_grad": _index_put_grad},
                      samples=_index_put_samples, attrs_handled=("accumulate",),
                      doc="out = x with x[indices] set to (or, accumulate, increased by) value"))
