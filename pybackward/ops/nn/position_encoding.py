"""add_position_encoding (dense 3-D input): alpha * X + beta * a sinusoid table, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# add_position_encoding (dense 3-D input): alpha * X + beta * sinusoid table
# --------------------------------------------------------------------------
def _add_position_encoding(c: Call):
    x = array_in(c, "X")
    if x.ndim != 3:
        raise ExecutionError(f"add_position_encoding: X must be 3-D [batch, seq, dim], got {list(x.shape)}")
    alpha, beta = float(c.attr("alpha", 1.0)), float(c.attr("beta", 1.0))
    seq, dim = x.shape[1], x.shape[2]
    if dim % 2:
        raise ExecutionError(f"add_position_encoding: the encoding size {dim} must be even")
    half = dim // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.arange(seq, dtype=np.float64)[:, None] / np.power(10000.0, np.arange(half) / (half - 1.0))
    pe = np.concatenate([np.sin(val), np.cos(val)], axis=1)
    return {"Out": (x * x.dtype.type(alpha) + (pe * beta).astype(x.dtype)).astype(x.dtype)}


def _add_position_encoding_grad(c: Call):
    g = array_in(c, "Out@GRAD")
    return {"X@GRAD": g * g.dtype.type(float(c.attr("alpha", 1.0)))}


register(paddle_opdef("add_position_encoding", _add_position_encoding,
                      {"add_position_encoding_grad": _add_position_encoding_grad}, samples=lambda rng: [
                          Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"alpha": 1.0, "beta": 1.0}),
                          Sample({"X": [rng.standard_normal((1, 5, 6))]}, {"alpha": 0.5, "beta": 2.0})],
                      attrs_handled=("alpha", "beta"),
                      doc="Out = alpha X + beta [sin, cos](pos / 10000^(k / (dim/2 - 1)))"))
