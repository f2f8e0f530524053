"""reverse (the legacy flip; its grad op is reverse of Out@GRAD)."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis
from .._inputs import array_in


# --------------------------------------------------------------------------
# reverse (legacy flip; its grad op is reverse of Out@GRAD)
# --------------------------------------------------------------------------
def _reverse(c: Call):
    x = array_in(c, "X")
    axes = c.attr("axis", [])
    if not axes:
        raise ExecutionError("reverse: 'axis' must not be empty")
    return {"Out": np.flip(x, tuple({norm_axis(a, x.ndim) for a in axes})).copy()}


register(paddle_opdef("reverse", _reverse, samples=lambda rng: [
    Sample({"X": [rng.standard_normal((3, 4))]}, {"axis": [0]}),
    Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": [-1, 1]})],
    attrs_handled=("axis",), doc="Out = X reversed along each axis"))
