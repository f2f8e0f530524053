"""fill_any: a tensor filled with one value (its grad is zeros)."""
from __future__ import annotations

import numpy as np
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# fill_any (its grad is zeros)
# --------------------------------------------------------------------------
def _fill_any(c: Call):
    x = array_in(c)
    value = float(c.attr("value", 0.0))
    if x.dtype.kind in "iu":
        value = int(value)
    return {"Out": np.full(x.shape, value, dtype=x.dtype)}


register(paddle_opdef(
    "fill_any", _fill_any, {"fill_any_grad": lambda c: {"X@GRAD": np.zeros_like(array_in(c, "Out@GRAD"))}},
    attrs_handled=("value",), samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"value": 1.5}),
        Sample({"X": [rng.standard_normal(())]}, {"value": -2.0}, note="0-D")],
    doc="Out = X's shape filled with value (the grad is zero)"))
