"""linspace: evenly spaced values (no gradient)."""
from __future__ import annotations

import numpy as np
from ...base import dtypes
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .creation import cast_array, np_dtype
from .._inputs import single_value


# --------------------------------------------------------------------------
# linspace
# --------------------------------------------------------------------------
def _linspace(c: Call):
    """Paddle 3.3.1's CPU values: Start and Stop cast to dtype; for a float
    dtype the step and every value are computed in that dtype, for an integer
    one in double and truncated; the first half counts up from Start, the
    second half down from Stop (checked against Paddle on several ranges)."""
    dt = np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.FP32))
    start, stop, num = single_value(c, "Start"), single_value(c, "Stop"), int(single_value(c, "Num"))
    if num < 0:
        raise ExecutionError(f"linspace: Num must not be negative, got {num}")
    start, stop = cast_array(np.asarray(start), dt), cast_array(np.asarray(stop), dt)
    if num <= 1:
        return {"Out": np.full(num, start, dt)}
    i = np.arange(num)
    if dt.kind == "f":
        step = (stop - start) / dt.type(num - 1)
        vals = np.where(i < num // 2, start + step * i.astype(dt), stop - step * (num - 1 - i).astype(dt))
        return {"Out": vals.astype(dt)}
    with np.errstate(over="ignore"):
        step = float(stop - start) / (num - 1)
    vals = np.where(i < num // 2, float(start) + step * i, float(stop) - step * (num - 1 - i))
    return {"Out": cast_array(vals, dt)}


register(paddle_opdef(
    "linspace", _linspace, attrs_handled=("dtype",), samples=lambda rng: [
        Sample({"Start": [np.array([-1.5], np.float32)], "Stop": [np.array([2.0], np.float32)],
                "Num": [np.array([7], np.int32)]}, {"dtype": 5}),
        Sample({"Start": [np.array([0.0])], "Stop": [np.array([1.0])], "Num": [np.array([10], np.int32)]},
               {"dtype": 6}),
        Sample({"Start": [np.array([3], np.int32)], "Stop": [np.array([-4], np.int32)],
                "Num": [np.array([5], np.int32)]}, {"dtype": 3}, note="int64")],
    doc="Out = Num evenly spaced values from Start to Stop"))
