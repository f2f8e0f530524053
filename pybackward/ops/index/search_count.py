"""searchsorted and bincount (no gradients)."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# searchsorted / bincount
# --------------------------------------------------------------------------
def _searchsorted(c: Call):
    seq, vals = array_in(c, "SortedSequence"), array_in(c, "Values")
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
    x = array_in(c)
    if x.dtype.kind not in "iu":
        raise ExecutionError(f"bincount: X must be an integer tensor, got {x.dtype}")
    x = x.reshape(-1)
    if x.size and x.min() < 0:
        raise ExecutionError("bincount: X must be non-negative")
    minlength = int(c.attr("minlength", 0))
    if c.has("Weights"):
        w = array_in(c, "Weights").reshape(-1)
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
