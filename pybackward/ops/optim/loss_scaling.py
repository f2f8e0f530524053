"""Non-differentiable ops real training programs contain: loss scaling and
clipping (check_finite_and_unscale, update_loss_scaling, clip_by_norm),
boolean reductions, constant makers (logspace, fill_constant_batch_size_like,
full_int_array), metrics (accuracy, histogram), copies the CPU runs as
identities (memcpy*, depend, nop, share_data), and small integer ops
(shard_index, trunc_divide, nextafter, is_empty, fc, gather_tree).

Every formula follows Paddle 3.3.1's CPU kernel, including its dtype rules
(bool outputs of the reductions, int32 Correct/Total of accuracy, ...) and
the in-place convention of the loss-scaling ops: outputs a kernel leaves
unwritten keep the value of the input var Paddle aliases them to.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..errors import ExecutionError
from ._util import reduce_axes
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register


def input_value(c: Call, slot: str) -> np.ndarray:
    """An input slot's (first) array; an error naming the slot if it has none."""
    v = c.x(slot)
    if v is None:
        raise ExecutionError(f"{c.op_type}: input '{slot}' has no value")
    return np.asarray(v)


def dtype_attr(c: Call, default: int) -> np.dtype:
    """The NumPy dtype the op's `dtype` attr names (default: `default`)."""
    d = int(c.attr("dtype", default))
    try:
        return dtypes.to_numpy(d)
    except (KeyError, ValueError):
        raise c.unsupported("dtype", d, f"data type {dtypes.type_name(d)} has no NumPy equivalent") from None


def _reg(name, kernel, samples=None, attrs=(), doc=""):
    register(paddle_opdef(name, kernel, samples=samples, attrs_handled=tuple(attrs), doc=doc))


# --------------------------------------------------------------------------
# loss scaling and clipping
# --------------------------------------------------------------------------
def _check_finite_and_unscale(c: Call):
    scale = input_value(c, "Scale")
    xs = [np.asarray(x) for x in c.xs("X")]
    outs, found = [], False
    for x in xs:
        if x.dtype.kind != "f":
            raise ExecutionError(f"check_finite_and_unscale: X is {x.dtype}; Paddle takes float tensors")
        t = x.dtype.type
        if not found:
            found = not bool(np.all(np.isfinite(x)))
        if found:  # this tensor and every later one: x * 0 (NaN stays NaN, inf gives NaN)
            with np.errstate(invalid="ignore"):
                outs.append(x * t(0))
        else:
            inv = t(1.0 / float(scale.reshape(-1)[0].astype(x.dtype)))
            outs.append(x * inv)
    return {"Out": outs, "FoundInfinite": np.array([found])}


def _cfu_samples(rng):
    # (an inf input gives NaN outputs, which the float32 comparison cannot take:
    # tests/test_ops_misc_more.py checks that case)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(5)
    return [Sample({"X": [a, b], "Scale": [np.array([1024.0])]}, outputs={"Out": 2, "FoundInfinite": 1}),
            Sample({"X": [b], "Scale": [np.array([0.3])]}, outputs={"Out": 1, "FoundInfinite": 1},
                   note="one tensor")]


_reg("check_finite_and_unscale", _check_finite_and_unscale, _cfu_samples, (),
     "Out = X / Scale; FoundInfinite if any X has a NaN or inf (then that X and later ones are X * 0)")


def _update_loss_scaling(c: Call):
    found = bool(input_value(c, "FoundInfinite").reshape(-1)[0])
    xs = [np.asarray(x) for x in c.xs("X")]
    outs = [np.zeros_like(x) if found else x.copy() for x in xs]
    stop = bool(np.asarray(c.x("StopUpdate")).reshape(-1)[0]) if c.has("StopUpdate") else \
        bool(c.attr("stop_update", False))
    prev = input_value(c, "PrevLossScaling")
    good, bad = input_value(c, "InGoodSteps"), input_value(c, "InBadSteps")
    if stop:
        return {"Out": outs, "LossScaling": prev.copy(), "OutGoodSteps": good.copy(), "OutBadSteps": bad.copy()}
    t = prev.dtype.type
    p = t(prev.reshape(-1)[0])
    g, b = int(good.reshape(-1)[0]), int(bad.reshape(-1)[0])
    incr_n, decr_n = int(c.attr("incr_every_n_steps", 1000)), int(c.attr("decr_every_n_nan_or_inf", 2))
    incr, decr = np.float32(c.attr("incr_ratio", 2.0)), np.float32(c.attr("decr_ratio", 0.5))
    new = p
    if found:
        g, b = 0, b + 1
        if b == decr_n:
            s = t(p * t(decr))
            new, b = (t(1) if s < t(1) else s), 0
    else:
        g, b = g + 1, 0
        if g == incr_n:
            with np.errstate(over="ignore"):
                s = t(p * t(incr))
            new, g = (s if np.isfinite(s) else p), 0
    return {"Out": outs, "LossScaling": np.full(prev.shape, new, dtype=prev.dtype),
            "OutGoodSteps": np.full(good.shape, g, dtype=good.dtype),
            "OutBadSteps": np.full(bad.shape, b, dtype=bad.dtype)}


def _uls_samples(rng):
    def ins(found, good, bad, scale=1024.0):
        return {"X": [rng.standard_normal((2, 3)), rng.standard_normal(4)], "FoundInfinite": [np.array([found])],
                "PrevLossScaling": [np.array([scale])], "InGoodSteps": [np.array([good], np.int32)],
                "InBadSteps": [np.array([bad], np.int32)]}
    attrs = {"incr_every_n_steps": 3, "decr_every_n_nan_or_inf": 2, "incr_ratio": 2.0, "decr_ratio": 0.5}
    outs = {"Out": 2, "LossScaling": 1, "OutGoodSteps": 1, "OutBadSteps": 1}
    return [Sample(ins(False, 0, 0), attrs, outputs=outs, note="finite, no change"),
            Sample(ins(False, 2, 0), attrs, outputs=outs, note="finite, scale grows"),
            Sample(ins(True, 1, 0), attrs, outputs=outs, note="inf, counted"),
            Sample(ins(True, 0, 1), attrs, outputs=outs, note="inf, scale shrinks"),
            Sample(ins(True, 0, 1, 1.5), attrs, outputs=outs, note="shrink floors at 1"),
            Sample(ins(True, 0, 1), dict(attrs, stop_update=True), outputs=outs, note="stop_update")]


_reg("update_loss_scaling", _update_loss_scaling, _uls_samples,
     ("incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_ratio", "decr_ratio", "stop_update"),
     "dynamic loss scaling: zero the grads on inf/NaN; grow the scale after n good steps, shrink after m bad")


def _clip_by_norm(c: Call):
    x = input_value(c, "X")
    if x.dtype.kind != "f":
        raise ExecutionError(f"clip_by_norm: X is {x.dtype}; Paddle takes float tensors")
    t = x.dtype.type
    max_norm = t(np.float32(c.attr("max_norm", 1.0)))
    norm = np.sqrt(np.sum(x * x, dtype=x.dtype))
    if norm <= max_norm:
        return {"Out": x.copy()}
    eps = t(1e-6) if norm <= t(1e-30) else t(0)
    return {"Out": x * (max_norm / (norm + eps))}


def _clip_by_norm_samples(rng):
    return [Sample({"X": [rng.standard_normal((3, 4))]}, {"max_norm": 1.0}, note="clipped"),
            Sample({"X": [0.1 * rng.standard_normal(5)]}, {"max_norm": 5.0}, note="within the norm")]


_reg("clip_by_norm", _clip_by_norm, _clip_by_norm_samples, ("max_norm",),
     "Out = X * max_norm / |X| where |X| > max_norm, else X (Paddle's CPU kernel is float32 only)")


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


_reg("reduce_all", _bool_reduce(np.all), _bool_reduce_samples, ("dim", "keep_dim", "reduce_all"),
     "Out = all(X != 0) over dim (bool)")
_reg("reduce_any", _bool_reduce(np.any), _bool_reduce_samples, ("dim", "keep_dim", "reduce_all"),
     "Out = any(X != 0) over dim (bool)")


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


_reg("logspace", _logspace, _logspace_samples, ("dtype",),
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


_reg("fill_constant_batch_size_like", _fill_constant_batch_size_like, _fcbsl_samples,
     ("shape", "input_dim_idx", "output_dim_idx", "value", "str_value", "dtype", "force_cpu"),
     "Out = `shape` (dim output_dim_idx taken from Input's dim input_dim_idx) filled with value")


def _full_int_array(c: Call):
    dt = dtype_attr(c, dtypes.VarType.INT64)
    if dt.kind not in "iu":
        raise c.unsupported("dtype", int(c.attr("dtype")), "full_int_array makes int32 or int64 tensors")
    return {"out": np.array([int(v) for v in c.attr("value", [])], dtype=dt)}


# No samples for the Paddle comparison: Paddle 3.3.1's legacy executor crashes (SIGSEGV in
# FullIntArrayOp::GetExpectedKernelType) on a program with this op; tests/test_ops_misc_more.py checks it.
_reg("full_int_array", _full_int_array, None, ("value", "dtype", "place"),
     "out = the 1-D int tensor `value`")


# --------------------------------------------------------------------------
# identities on CPU
# --------------------------------------------------------------------------
def _copy_x(c: Call):
    return {"Out": np.array(input_value(c, "X"), copy=True)}


def _copy_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))]}, {"dst_place_type": 0}),
            Sample({"X": [np.arange(4, dtype=np.int64)]}, {"dst_place_type": 0}, note="int64")]


for _name in ("memcpy", "memcpy_d2h", "memcpy_h2d"):
    _reg(_name, _copy_x, _copy_samples, ("dst_place_type",),
         "Out = X (a device copy; on CPU the same values)")
_reg("share_data", _copy_x, _copy_samples, (), "Out = X (shares X's data)")


def _depend(c: Call):
    return {"Out": np.array(input_value(c, "X"), copy=True)}


def _depend_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))], "Dep": [rng.standard_normal(2)]})]


_reg("depend", _depend, _depend_samples, (), "Out = X; Dep only orders the ops")


def _nop(c: Call):
    return {"Out": [np.array(x, copy=True) for x in c.xs("X")]}


_reg("nop", _nop, None, (), "Out = X (an op that does nothing: it only orders ops)")


# --------------------------------------------------------------------------
# elementwise integer / float helpers
# --------------------------------------------------------------------------
def _nextafter(c: Call):
    x, y = input_value(c, "x"), input_value(c, "y")
    if x.dtype.kind != "f" or y.dtype != x.dtype:
        raise ExecutionError(f"nextafter: x is {x.dtype}, y is {y.dtype}; both must be the same float type")
    return {"out": np.nextafter(x, y)}


def _nextafter_samples(rng):
    x = rng.standard_normal((3, 4))
    y = rng.standard_normal((3, 4))
    y[0, 0] = x[0, 0]
    return [Sample({"x": [x], "y": [y]}), Sample({"x": [x], "y": [rng.standard_normal(4)]}, note="broadcast")]


_reg("nextafter", _nextafter, _nextafter_samples, (), "out = the next float after x toward y")


def _trunc_divide(c: Call):
    x, y = input_value(c, "x"), input_value(c, "y")
    if x.dtype != y.dtype:
        raise ExecutionError(f"trunc_divide: x is {x.dtype}, y is {y.dtype}; Paddle needs one dtype")
    if x.dtype.kind in "iu":
        if np.any(y == 0):
            raise ExecutionError("trunc_divide: integer division by zero")
        q = np.abs(x) // np.abs(y)  # C++ integer division truncates toward zero
        return {"out": np.where((x < 0) != (y < 0), -q, q).astype(x.dtype)}
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"out": np.trunc(x / y)}


def _trunc_divide_samples(rng):
    xi = rng.integers(-20, 20, (3, 4)).astype(np.int64)
    yi = rng.choice([-3, -2, 2, 5], (3, 4)).astype(np.int64)
    return [Sample({"x": [3 * rng.standard_normal((3, 4))], "y": [rng.uniform(0.5, 2, (3, 4))]}),
            Sample({"x": [xi], "y": [yi]}, note="int64"),
            Sample({"x": [3 * rng.standard_normal((2, 3))], "y": [rng.uniform(0.5, 2, 3)]}, note="broadcast")]


_reg("trunc_divide", _trunc_divide, _trunc_divide_samples, (),
     "out = x / y rounded toward zero (C++ integer division for integers)")


def _is_empty(c: Call):
    return {"Out": np.array(input_value(c, "X").size == 0)}


def _is_empty_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))]}), Sample({"X": [np.zeros((0, 3))]}, note="empty")]


_reg("is_empty", _is_empty, _is_empty_samples, (), "Out = (X has no elements), a 0-D bool")


def _shard_index(c: Call):
    x = input_value(c, "X")
    if x.dtype.kind not in "iu":
        raise ExecutionError(f"shard_index: X is {x.dtype}; Paddle takes int32 or int64 ids")
    index_num, nshards = int(c.attr("index_num", 0)), int(c.attr("nshards", 0))
    shard_id, ignore = int(c.attr("shard_id", 0)), int(c.attr("ignore_value", -1))
    if index_num <= 0 or nshards <= 0 or not 0 <= shard_id < nshards:
        raise ExecutionError(f"shard_index: index_num {index_num}, nshards {nshards}, shard_id {shard_id}: "
                             "need index_num > 0, nshards > 0 and 0 <= shard_id < nshards")
    if np.any((x < 0) | (x >= index_num)):
        raise ExecutionError(f"shard_index: ids must be in [0, {index_num})")
    size = (index_num + nshards - 1) // nshards
    return {"Out": np.where(x // size == shard_id, x - shard_id * size, ignore).astype(x.dtype)}


def _shard_index_samples(rng):
    x = rng.integers(0, 20, (4, 1)).astype(np.int64)
    return [Sample({"X": [x]}, {"index_num": 20, "nshards": 2, "shard_id": 0, "ignore_value": -1}),
            Sample({"X": [x.astype(np.int32)]}, {"index_num": 20, "nshards": 3, "shard_id": 1, "ignore_value": -5},
                   note="int32, uneven shards")]


_reg("shard_index", _shard_index, _shard_index_samples, ("index_num", "nshards", "shard_id", "ignore_value"),
     "Out = X - shard_id * shard_size where X falls in this shard, else ignore_value")


# --------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------
def _accuracy(c: Call):
    idx, label = input_value(c, "Indices"), input_value(c, "Label")
    n = idx.shape[0] if idx.ndim else 0
    if label.size != n:
        raise ExecutionError(f"accuracy: Label has {label.size} values for {n} samples")
    if n == 0:
        correct = 0
    else:
        correct = int(np.sum(np.any(idx.reshape(n, -1) == label.reshape(n, 1), axis=1)))
    acc = np.float32(correct) / np.float32(n) if n else np.float32(0)
    return {"Accuracy": np.array(acc, np.float32), "Correct": np.array(correct, np.int32),
            "Total": np.array(n, np.int32)}


def _accuracy_samples(rng):
    out = rng.random((6, 3))
    idx = np.argsort(-out, axis=1).astype(np.int64)
    label = rng.integers(0, 5, (6, 1)).astype(np.int64)
    return [Sample({"Out": [np.take_along_axis(out, idx, 1)], "Indices": [idx], "Label": [label]})]


_reg("accuracy", _accuracy, _accuracy_samples, (),
     "Accuracy = (samples whose label is among their top-k Indices) / samples")


def _histogram(c: Call):
    x = input_value(c, "X")
    bins = int(c.attr("bins", 100))
    if bins < 1:
        raise ExecutionError(f"histogram: bins {bins} must be >= 1")
    lo, hi = float(np.float32(c.attr("min", 0.0))), float(np.float32(c.attr("max", 0.0)))
    flat = x.reshape(-1).astype(np.float64)
    if lo == 0 and hi == 0 and flat.size:
        lo, hi = float(flat.min().astype(x.dtype)), float(flat.max().astype(x.dtype))
    if lo > hi:
        raise ExecutionError(f"histogram: max {hi} is less than min {lo}")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    w = np.asarray(c.x("Weight")).reshape(-1) if c.has("Weight") else None
    density = bool(c.attr("density", False))
    keep = (flat >= lo) & (flat <= hi)
    pos = np.minimum(((flat[keep] - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    counts = np.bincount(pos, weights=None if w is None else w[keep].astype(np.float64), minlength=bins)
    if density:  # Paddle 3.3.1: a float32 Out with weights or density, whatever the input dtypes
        total = counts.sum()
        out = counts / total / ((hi - lo) / bins) if total else counts * np.nan
        return {"Out": out.astype(np.float32)}
    if w is not None:
        return {"Out": counts.astype(np.float32)}
    return {"Out": counts.astype(np.int64)}


def _histogram_samples(rng):
    x = rng.standard_normal((4, 5))
    return [Sample({"X": [x]}, {"bins": 5, "min": -1.0, "max": 1.0, "density": False}),
            Sample({"X": [x]}, {"bins": 4, "min": 0.0, "max": 0.0, "density": False}, note="range from X"),
            Sample({"X": [(rng.random(10) * 6).astype(np.int64)]}, {"bins": 3, "min": 0.0, "max": 5.0,
                                                                     "density": False}, note="int64"),
            Sample({"X": [x]}, {"bins": 6, "min": -2.0, "max": 2.0, "density": True}, note="density"),
            Sample({"X": [x], "Weight": [rng.random((4, 5))]}, {"bins": 5, "min": -1.5, "max": 1.5,
                                                                 "density": False}, note="weights"),
            Sample({"X": [x], "Weight": [rng.random((4, 5))]}, {"bins": 5, "min": -1.5, "max": 1.5,
                                                                 "density": True}, note="weights, density")]


_reg("histogram", _histogram, _histogram_samples, ("bins", "min", "max", "density"),
     "Out = counts of X in `bins` equal bins over [min, max] (min = max = 0: X's range)")


# --------------------------------------------------------------------------
# fc (the fused inference op) and average_accumulates (ModelAverage)
# --------------------------------------------------------------------------
def _fc(c: Call):
    x, w = input_value(c, "Input"), input_value(c, "W")
    k = int(c.attr("in_num_col_dims", 1))
    if not 1 <= k < max(x.ndim, 2):
        raise ExecutionError(f"fc: in_num_col_dims {k} does not fit Input of rank {x.ndim}")
    if c.attr("padding_weights", False):
        w = w[:-4, :-4]
    act = c.attr("activation_type", "")
    if act not in ("", "relu"):
        raise c.unsupported("activation_type", act, "Paddle's CPU fc applies '' or 'relu'")
    lead = x.shape[:k]
    x2 = x.reshape(int(np.prod(lead, dtype=np.int64)), -1)
    if w.ndim != 2 or x2.shape[1] != w.shape[0]:
        raise ExecutionError(f"fc: Input {list(x.shape)} flattened at {k} is {list(x2.shape)}, "
                             f"which does not multiply W {list(w.shape)}")
    out = x2 @ w
    if c.has("Bias"):
        out = out + np.asarray(c.x("Bias")).reshape(1, -1)
    if act == "relu":
        out = np.maximum(out, out.dtype.type(0))
    return {"Out": out.astype(x.dtype, copy=False).reshape(lead + (w.shape[1],))}


def _fc_samples(rng):
    x = rng.standard_normal((2, 3, 4))
    w = rng.standard_normal((12, 5))
    return [Sample({"Input": [x], "W": [w], "Bias": [rng.standard_normal(5)]}, {"in_num_col_dims": 1}),
            Sample({"Input": [x], "W": [rng.standard_normal((4, 3))], "Bias": [rng.standard_normal((1, 3))]},
                   {"in_num_col_dims": 2, "activation_type": "relu"}, note="relu, 2 col dims"),
            Sample({"Input": [x], "W": [rng.standard_normal((16, 9))]},
                   {"in_num_col_dims": 1, "padding_weights": True}, note="padded weights, no bias")]


_reg("fc", _fc, _fc_samples, ("in_num_col_dims", "activation_type", "padding_weights"),
     "Out = act(flatten(Input, in_num_col_dims) @ W + Bias)")

_MAX_NUM_ACCUMULATES = 16384


def _average_accumulates(c: Call):
    p = input_value(c, "param")
    s1, s2, s3 = (input_value(c, s).astype(p.dtype, copy=False).reshape(p.shape) for s in ("in_sum_1", "in_sum_2",
                                                                                   "in_sum_3"))
    counters = {s: input_value(c, s) for s in ("in_num_accumulates", "in_old_num_accumulates", "in_num_updates")}
    n_acc = int(counters["in_num_accumulates"].reshape(-1)[0]) + 1
    old = int(counters["in_old_num_accumulates"].reshape(-1)[0])
    n_upd = int(counters["in_num_updates"].reshape(-1)[0]) + 1
    window = float(np.float32(c.attr("average_window", 0.0)))
    max_w, min_w = int(c.attr("max_average_window", 10000)), int(c.attr("min_average_window", 10000))
    if min_w > max_w:
        raise ExecutionError(f"average_accumulates: min_average_window {min_w} > max_average_window {max_w}")
    # Paddle runs it in place (out_sum_i is in_sum_i): each step reads the sums as updated so far
    s1 = s1 + p
    if n_upd % _MAX_NUM_ACCUMULATES == 0:
        s2, s1 = s2 + s1, np.zeros_like(s1)
    if n_acc >= min_w and n_acc >= min(max_w, int(n_upd * np.float32(window))):
        s3, s1, s2 = s1 + s2, np.zeros_like(s1), np.zeros_like(s2)
        old, n_acc = n_acc, 0

    def counter(slot, v):
        a = counters[slot]
        return np.full(a.shape, v, dtype=a.dtype)
    return {"out_sum_1": s1, "out_sum_2": s2, "out_sum_3": s3,
            "out_num_accumulates": counter("in_num_accumulates", n_acc),
            "out_old_num_accumulates": counter("in_old_num_accumulates", old),
            "out_num_updates": counter("in_num_updates", n_upd)}


def _average_accumulates_samples(rng):
    def ins(n_acc, old, n_upd):
        return {"param": [rng.standard_normal((3, 2))], "in_sum_1": [rng.standard_normal((3, 2))],
                "in_sum_2": [rng.standard_normal((3, 2))], "in_sum_3": [rng.standard_normal((3, 2))],
                "in_num_accumulates": [np.array([n_acc], np.int64)],
                "in_old_num_accumulates": [np.array([old], np.int64)],
                "in_num_updates": [np.array([n_upd], np.int64)]}
    attrs = {"average_window": 0.15, "max_average_window": 20, "min_average_window": 4}
    return [Sample(ins(1, 0, 5), attrs, note="accumulate"),
            Sample(ins(9, 3, 40), attrs, note="window full: restart"),
            Sample(ins(2, 0, _MAX_NUM_ACCUMULATES - 1), attrs, note="move sum_1 to sum_2")]


_reg("average_accumulates", _average_accumulates, _average_accumulates_samples,
     ("average_window", "max_average_window", "min_average_window"),
     "ModelAverage's running sums of a param (in place, as Paddle runs it)")


# --------------------------------------------------------------------------
# auc (streaming, with a sliding window of slide_steps batches)
# --------------------------------------------------------------------------
def _auc_from(pos: np.ndarray, neg: np.ndarray) -> float:
    """Paddle's calcAuc: trapezoids from the highest threshold down."""
    tp, fp = np.cumsum(pos[::-1].astype(np.float64)), np.cumsum(neg[::-1].astype(np.float64))
    tp_prev, fp_prev = np.concatenate([[0.0], tp[:-1]]), np.concatenate([[0.0], fp[:-1]])
    area = float(np.sum(np.abs(fp - fp_prev) * (tp + tp_prev) / 2.0))
    return area / tp[-1] / fp[-1] if tp[-1] > 0 and fp[-1] > 0 else area


def _auc(c: Call):
    pred, label = input_value(c, "Predict"), input_value(c, "Label")
    if c.attr("curve", "ROC") != "ROC":
        raise c.unsupported("curve", c.attr("curve"), "Paddle's CPU auc computes the ROC curve only")
    nt, steps = int(c.attr("num_thresholds", 2 ** 12 - 1)), int(c.attr("slide_steps", 1))
    pos_in, neg_in = input_value(c, "StatPos"), input_value(c, "StatNeg")
    bucket = nt + 1
    size = (1 + steps) * bucket + (1 if steps > 0 else 0)
    pos, neg = pos_in.reshape(-1).astype(np.int64), neg_in.reshape(-1).astype(np.int64)
    if pos.size < size or neg.size < size:
        raise ExecutionError(f"auc: StatPos/StatNeg need {size} counters for num_thresholds={nt}, "
                             f"slide_steps={steps}; they have {pos.size}, {neg.size}")
    pos, neg = pos.copy(), neg.copy()
    fake = c.has("InsTagWeight") and float(np.asarray(c.x("InsTagWeight")).reshape(-1)[0]) == 0
    p = pred.reshape(pred.shape[0], -1)[:, -1]
    if np.any((p < 0) | (p > 1)):
        raise ExecutionError("auc: predictions must be in [0, 1]")
    lab = label.reshape(-1).astype(np.int64)
    bins = (p * p.dtype.type(nt)).astype(np.uint32).astype(np.int64)
    add_pos = np.bincount(bins[lab > 0], minlength=bucket)[:bucket]
    add_neg = np.bincount(bins[lab == 0], minlength=bucket)[:bucket]

    def out(auc_value):
        return {"AUC": np.array(auc_value, np.float64), "StatPosOut": pos.reshape(pos_in.shape),
                "StatNegOut": neg.reshape(neg_in.shape)}
    if steps == 0:
        if not fake:
            pos[:bucket] += add_pos
            neg[:bucket] += add_neg
        return out(_auc_from(pos[:bucket], neg[:bucket]))
    cur = int(pos[(steps + 1) * bucket]) % steps
    cur_sl, sum_sl = slice(cur * bucket, (cur + 1) * bucket), slice(steps * bucket, (steps + 1) * bucket)
    for s in (pos, neg):
        s[sum_sl] -= s[cur_sl]
    pos[cur_sl], neg[cur_sl] = add_pos, add_neg
    if not fake:
        pos[sum_sl] += pos[cur_sl]
        neg[sum_sl] += neg[cur_sl]
    value = _auc_from(pos[sum_sl], neg[sum_sl])
    pos[(steps + 1) * bucket] += 1
    neg[(steps + 1) * bucket] += 1
    return out(value)


def _auc_samples(rng):
    p1 = rng.random(12)
    pred = np.stack([1 - p1, p1], axis=1)
    label = (rng.random((12, 1)) < p1[:, None]).astype(np.int64)
    nt = 20

    def stats(steps):
        if not steps:  # the shapes Paddle's shape inference gives the stat vars
            return tuple(rng.integers(0, 3, (1, nt + 1)).astype(np.int64) for _ in range(2))
        size = (1 + steps) * (nt + 1) + 1
        a, b = rng.integers(0, 3, size).astype(np.int64), rng.integers(0, 3, size).astype(np.int64)
        a[-1] = b[-1] = 5
        return a, b
    outs = {"AUC": 1, "StatPosOut": 1, "StatNegOut": 1}
    sp, sn = stats(0)
    wp, wn = stats(3)
    return [Sample({"Predict": [pred], "Label": [label], "StatPos": [sp], "StatNeg": [sn]},
                   {"curve": "ROC", "num_thresholds": nt, "slide_steps": 0}, outputs=outs, note="global"),
            Sample({"Predict": [pred], "Label": [label], "StatPos": [wp], "StatNeg": [wn]},
                   {"curve": "ROC", "num_thresholds": nt, "slide_steps": 3}, outputs=outs, note="sliding window")]


_reg("auc", _auc, _auc_samples, ("curve", "num_thresholds", "slide_steps"),
     "AUC of the ROC curve from bucketed positive/negative counts, updated with this batch (in place)")


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


_reg("check_numerics", _check_numerics, _check_numerics_samples,
     ("op_type", "var_name", "check_nan_inf_level", "stack_height_limit", "output_dir"),
     "stats = [#NaN, #inf, #zero], values = [max, min, mean] (float32); level 0 raises on NaN / inf")


# --------------------------------------------------------------------------
# data: its var holds what was fed
# --------------------------------------------------------------------------
def _data(c: Call):
    names = [n for n in c.outs.get("out", ()) if n]
    scope = getattr(c.env, "scope", None)
    value = scope.get(names[0]) if scope is not None and names else None
    if value is None:
        raise ExecutionError(f"data: var {names[0] if names else '?'!r} (name attr "
                             f"{c.attr('name', '')!r}) was not fed")
    return {"out": value}


_reg("data", _data, None, ("name", "shape", "dtype", "place"),
     "out = the value fed to its var (the op only declares the input)")
