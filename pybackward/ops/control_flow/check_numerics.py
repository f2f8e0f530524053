"""check_numerics: the op FLAGS_check_nan_inf inserts, counting NaN / Inf values of a tensor."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# check_numerics (FLAGS_check_nan_inf's op)
# --------------------------------------------------------------------------
def _check_numerics(c: Call):
    x = input_value(c, "tensor")
    if x.dtype.kind not in "fc":
        raise ExecutionError(f"check_numerics: tensor is {x.dtype}; Paddle checks float tensors")
    flat = x.reshape(-1)
    nan, inf = np.isnan(flat), np.isinf(flat)
    stats = np.array([nan.sum(), inf.sum(), (flat == 0).sum()], np.int64)
    level = int(c.attr("check_nan_inf_level", 0))
    if level == 0 and (stats[0] or stats[1]):
        raise ExecutionError(f"check_numerics: there are NaN or inf values (num_nan={stats[0]}, "
                             f"num_inf={stats[1]}, num_zero={stats[2]}) in op {c.attr('op_type', '')!r}, "
                             f"tensor {c.attr('var_name', '')!r}")
    seen = flat[~nan].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mean = np.sum(flat.astype(np.float64)) / flat.size if flat.size else np.nan
        values = np.array([seen.max(initial=-np.inf), seen.min(initial=np.inf), mean], np.float64)
    return {"stats": stats, "values": values.astype(np.float32)}


def _check_numerics_samples(rng):
    attrs = {"op_type": "matmul", "var_name": "x", "check_nan_inf_level": 0, "stack_height_limit": -1,
             "output_dir": ""}
    x = rng.standard_normal((3, 4))
    x[1, 2] = 0.0
    return [Sample({"tensor": [x]}, attrs), Sample({"tensor": [rng.standard_normal(5)]},
                                                    dict(attrs, check_nan_inf_level=3), note="level 3")]


register_plain("check_numerics", _check_numerics, _check_numerics_samples,
     ("op_type", "var_name", "check_nan_inf_level", "stack_height_limit", "output_dir"),
     "stats = [#NaN, #inf, #zero], values = [max, min, mean] (float32); level 0 raises on NaN / inf")
