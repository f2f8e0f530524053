"""sequence_mask: Y[..., j] = j < X[...] (no gradient)."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import np_dtype


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
