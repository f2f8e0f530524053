"""Boolean reductions: reduce_all and reduce_any (bool outputs, no gradient)."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .._util import reduce_axes
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# boolean reductions
# --------------------------------------------------------------------------
def _bool_reduce(fn):
    def kernel(c: Call):
        x = input_value(c, "X")
        if c.has("AxisTensor") or c.has("AxisTensorList"):
            raise ExecutionError(f"{c.op_type}: axes given as tensors are not supported; use the dim attr")
        axes = reduce_axes(c.attr("dim", []), x.ndim, bool(c.attr("reduce_all", False)))
        with np.errstate(invalid="ignore"):
            out = fn(x.astype(bool), axis=axes, keepdims=bool(c.attr("keep_dim", False)))
        return {"Out": np.asarray(out, dtype=bool)}
    return kernel


def _bool_reduce_samples(rng):
    b = rng.random((3, 4, 2)) > 0.6
    f = np.where(rng.random((3, 4)) > 0.5, rng.standard_normal((3, 4)), 0.0)
    return [Sample({"X": [b]}, {"dim": [1], "keep_dim": False, "reduce_all": False}),
            Sample({"X": [b]}, {"dim": [0, 2], "keep_dim": True, "reduce_all": False}, note="keep_dim"),
            Sample({"X": [b]}, {"dim": [], "keep_dim": False, "reduce_all": True}, note="all"),
            Sample({"X": [f]}, {"dim": [-1], "keep_dim": False, "reduce_all": False}, note="float input"),
            Sample({"X": [(rng.random((2, 3)) * 3).astype(np.int64)]}, {"dim": [0], "keep_dim": False,
                                                                          "reduce_all": False}, note="int64")]


register_plain("reduce_all", _bool_reduce(np.all), _bool_reduce_samples, ("dim", "keep_dim", "reduce_all"),
     "Out = all(X != 0) over dim (bool)")
register_plain("reduce_any", _bool_reduce(np.any), _bool_reduce_samples, ("dim", "keep_dim", "reduce_all"),
     "Out = any(X != 0) over dim (bool)")
