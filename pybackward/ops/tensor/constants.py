"""Constant makers: logspace, fill_constant_batch_size_like, full_int_array and their kin."""
from __future__ import annotations

import math
import numpy as np
from ...base import dtypes
from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import dtype_attr, input_value


# --------------------------------------------------------------------------
# constants
# --------------------------------------------------------------------------
def _logspace(c: Call):
    dt = dtype_attr(c, dtypes.VarType.FP32)
    num = int(input_value(c, "Num").reshape(-1)[0])
    if num < 0:
        raise ExecutionError(f"logspace: Num is {num}; it must be >= 0")
    # Start, Stop and Base are first cast to dtype; step and exponents in double
    start, stop, base = (float(input_value(c, s).reshape(-1)[:1].astype(dt)[0]) for s in ("Start", "Stop", "Base"))
    if num > 1:
        step = (stop - start) / (num - 1) if dt.kind == "f" else float(int(stop - start)) / (num - 1)
        i = np.arange(num, dtype=np.float64)
        half = num // 2
        expo = np.where(i < half, start + step * i, stop - step * (num - i - 1))
    else:
        expo = np.full(num, start)
    with np.errstate(over="ignore", invalid="ignore"):
        vals = np.power(np.float64(base), expo)
    if dt.kind in "iu":
        vals = np.trunc(vals)
    return {"Out": vals.astype(dt)}


def _logspace_samples(rng):
    def ins(start, stop, num, base):
        return {"Start": [np.array([start])], "Stop": [np.array([stop])], "Num": [np.array([num], np.int32)],
                "Base": [np.array([base])]}
    return [Sample(ins(0.0, 3.0, 7, 10.0), {"dtype": dtypes.VarType.FP64}),
            Sample(ins(-1.5, 2.0, 5, 2.0), {"dtype": dtypes.VarType.FP32}, note="float32, base 2"),
            Sample(ins(1.0, 1.0, 1, 3.0), {"dtype": dtypes.VarType.FP64}, note="one value")]


register_plain("logspace", _logspace, _logspace_samples, ("dtype",),
     "Out = Base ** linspace(Start, Stop, Num) (the second half counted back from Stop, as Paddle does)")


def _fill_value(c: Call, dt: np.dtype):
    s = c.attr("str_value", "")
    if s:
        try:
            v = float(s)
        except ValueError:
            raise c.unsupported("str_value", s, "not a number") from None
    else:
        v = float(np.float32(c.attr("value", 0.0)))
    if dt.kind == "b":
        return bool(v)
    if dt.kind in "iu":
        if not math.isfinite(v):
            raise ExecutionError(f"{c.op_type}: cannot fill an integer tensor with {v}")
        return int(v)
    return v


def batch_shape(c: Call) -> tuple[int, ...]:
    x = input_value(c, "Input")
    shape = [int(d) for d in c.attr("shape", [])]
    i, o = int(c.attr("input_dim_idx", 0)), int(c.attr("output_dim_idx", 0))
    if not (0 <= i < x.ndim and 0 <= o < len(shape)):
        raise ExecutionError(f"{c.op_type}: input_dim_idx {i} / output_dim_idx {o} out of range for "
                             f"Input of rank {x.ndim} and shape {shape}")
    shape[o] = x.shape[i]
    if any(d < 0 for d in shape):
        raise ExecutionError(f"{c.op_type}: shape {shape} has a negative dim")
    return tuple(shape)


def _fill_constant_batch_size_like(c: Call):
    dt = dtype_attr(c, dtypes.VarType.FP32)
    return {"Out": np.full(batch_shape(c), _fill_value(c, dt), dtype=dt)}


def _fcbsl_samples(rng):
    x = rng.standard_normal((5, 3))
    return [Sample({"Input": [x]}, {"shape": [-1, 4], "value": 1.5, "dtype": dtypes.VarType.FP32}),
            Sample({"Input": [x]}, {"shape": [2, -1, 3], "input_dim_idx": 1, "output_dim_idx": 1, "value": 7.0,
                                    "dtype": dtypes.VarType.INT64}, note="int64, other dims"),
            Sample({"Input": [x]}, {"shape": [-1], "str_value": "-inf", "dtype": dtypes.VarType.FP64},
                   note="str_value")]


register_plain("fill_constant_batch_size_like", _fill_constant_batch_size_like, _fcbsl_samples,
     ("shape", "input_dim_idx", "output_dim_idx", "value", "str_value", "dtype", "force_cpu"),
     "Out = `shape` (dim output_dim_idx taken from Input's dim input_dim_idx) filled with value")


def _full_int_array(c: Call):
    dt = dtype_attr(c, dtypes.VarType.INT64)
    if dt.kind not in "iu":
        raise c.unsupported("dtype", int(c.attr("dtype")), "full_int_array makes int32 or int64 tensors")
    return {"out": np.array([int(v) for v in c.attr("value", [])], dtype=dt)}


# No samples for the Paddle comparison: Paddle 3.3.1's legacy executor crashes (SIGSEGV in
# FullIntArrayOp::GetExpectedKernelType) on a program with this op; tests/ops/test_loss_scaling_constants_metrics.py checks it.
register_plain("full_int_array", _full_int_array, None, ("value", "dtype", "place"),
     "out = the 1-D int tensor `value`")
