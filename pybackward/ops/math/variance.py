"""variance: the population variance (divisor n) over `axis` (all axes when
empty), `keepdim` as reductions do - what Paddle 3.3.1's CPU kernel computes
(a forward-only op; `paddle.var` builds its unbiased variance from other ops).
The sums accumulate in float64 and round once, as the reductions do."""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _variance(c: Call):
    x = np.asarray(c.x("x"))
    if x.dtype.kind != "f":
        raise ExecutionError(f"op variance: x must be float32 or float64, not {x.dtype}")
    axes = [int(a) for a in (c.attr("axis", []) or [])]
    if any(not -max(x.ndim, 1) <= a < max(x.ndim, 1) for a in axes):
        raise ExecutionError(f"op variance: axis {axes} is out of range for a {x.ndim}-D x")
    axis = tuple(sorted({a % x.ndim for a in axes})) if axes and x.ndim else None
    out = np.var(x.astype(np.float64), axis=axis, keepdims=bool(c.attr("keepdim", False)))
    return {"out": np.asarray(out).astype(x.dtype)}


register(paddle_opdef("variance", _variance, attrs_handled=("axis", "keepdim"),
                      samples=lambda rng: [
                          Sample({"x": [rng.standard_normal((3, 4))]}, {"axis": [1], "keepdim": False}),
                          Sample({"x": [rng.standard_normal((2, 3, 4))]}, {"axis": [0, -1], "keepdim": True},
                                 note="two axes, keepdim"),
                          Sample({"x": [rng.standard_normal((2, 3))]}, {"axis": [], "keepdim": False},
                                 note="every axis")],
                      doc="out = mean((x - mean(x))^2) over axis (divisor n)"))
