"""fused_softmax_mask: softmax(X + Mask) over the last axis, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# fused_softmax_mask: softmax(X + Mask) over the last axis
# --------------------------------------------------------------------------
def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _fused_softmax_mask(c: Call):
    x, m = array_in(c, "X"), array_in(c, "Mask")
    if x.ndim != 4 or m.ndim != 4 or m.shape[1] != 1 or m.shape[0] != x.shape[0] or m.shape[2:] != x.shape[2:]:
        raise ExecutionError(f"fused_softmax_mask: X [b, h, s, t] and Mask [b, 1, s, t] expected, got "
                             f"{list(x.shape)} and {list(m.shape)}")
    return {"Out": _softmax(x + m).astype(x.dtype, copy=False)}


def _fused_softmax_mask_grad(c: Call):
    y, g = array_in(c, "Softmax"), array_in(c, "Out@GRAD")
    return {"X@GRAD": (g - (g * y).sum(axis=-1, keepdims=True)) * y}


register(paddle_opdef("fused_softmax_mask", _fused_softmax_mask,
                      {"fused_softmax_mask_grad": _fused_softmax_mask_grad}, samples=lambda rng: [
                          Sample({"X": [rng.standard_normal((2, 3, 4, 5))],
                                  "Mask": [np.where(rng.random((2, 1, 4, 5)) < 0.3, -10000.0, 0.0)]}, wrt=("X",))],
                      doc="Out = softmax(X + Mask) over the last axis (Mask broadcast over heads)"))
