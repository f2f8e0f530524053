"""reduce_as: x summed down to target's shape, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# reduce_as: x summed down to target's shape
# --------------------------------------------------------------------------
def _reduce_as(c: Call):
    x, t = array_in(c, "x"), array_in(c, "target")
    try:
        np.broadcast_shapes(x.shape, t.shape)
    except ValueError:
        raise ExecutionError(f"reduce_as: x {list(x.shape)} does not reduce to target {list(t.shape)}") from None
    return {"out": unbroadcast(x, t.shape).astype(x.dtype, copy=False)}


def _reduce_as_grad(c: Call):
    x, g = array_in(c, "x"), array_in(c, "out@GRAD")
    return {"x@GRAD": np.broadcast_to(g.reshape(g.shape), x.shape).copy()}


register(paddle_opdef("reduce_as", _reduce_as, {"reduce_as_grad": _reduce_as_grad}, samples=lambda rng: [
    Sample({"x": [rng.standard_normal((2, 3, 4))], "target": [rng.standard_normal((3, 1))]}, wrt=("x",)),
    Sample({"x": [rng.standard_normal((2, 3))], "target": [rng.standard_normal((1, 3))]}, wrt=("x",)),
    Sample({"x": [rng.standard_normal((2, 3))], "target": [rng.standard_normal((2, 3))]}, wrt=("x",))],
    doc="out = x summed over the dims target broadcasts along"))
