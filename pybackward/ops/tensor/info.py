"""Tensor facts as tensors: where_index, size and shape64 (no gradients)."""
from __future__ import annotations

import numpy as np

from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))



# --------------------------------------------------------------------------
# where_index / size / shape64
# --------------------------------------------------------------------------
register(paddle_opdef(
    "where_index", lambda c: {"Out": np.argwhere(np.asarray(c.x("Condition")).astype(bool)).astype(np.int64)},
    samples=lambda rng: [Sample({"Condition": [rng.random((3, 4)) > 0.5]}),
                         Sample({"Condition": [np.array([0, 2, 0, 1], np.int32)]})],
    doc="Out = the coordinates of Condition's true (non-zero) elements, one row each (int64)"))

register(paddle_opdef(
    "size", lambda c: {"Out": np.array(np.size(c.x("Input")), np.int64)},
    samples=lambda rng: [Sample({"Input": [rng.standard_normal((3, 4))]})],
    doc="Out = the number of elements of Input (0-D int64)"))

register(paddle_opdef(
    "shape64", lambda c: {"out": np.array(np.shape(c.x("input")), np.int64)},
    samples=lambda rng: [Sample({"input": [rng.standard_normal((3, 1, 4))]})],
    doc="out = the dims of input (int64)"))
