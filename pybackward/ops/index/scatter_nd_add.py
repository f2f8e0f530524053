"""scatter_nd_add, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in
from .._inputs import checked_indices


# --------------------------------------------------------------------------
# scatter_nd_add
# --------------------------------------------------------------------------
def _nd_where(c: Call, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    index = np.asarray(c.x("Index"))
    k = index.shape[-1] if index.ndim else 0
    if k > len(shape):
        raise ExecutionError(f"{c.op_type}: Index's last dim {k} exceeds X's rank {len(shape)}")
    return tuple(checked_indices(c, index[..., j], shape[j], "Index", allow_negative=False) for j in range(k))


def _scatter_nd_add(c: Call):
    x = array_in(c)
    where = _nd_where(c, x.shape)
    out = x.copy()
    upd = array_in(c, "Updates")
    if not where:  # an empty last dim adds every update to all of X
        out = out + upd.reshape((-1,) + x.shape).sum(axis=0).astype(x.dtype)
        return {"Out": out}
    np.add.at(out, where, upd.astype(x.dtype, copy=False))
    return {"Out": out}


def _scatter_nd_add_grad(c: Call):
    g = array_in(c, "Out@GRAD")
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
