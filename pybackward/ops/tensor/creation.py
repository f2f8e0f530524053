"""Tensor creation and copy ops: feed/fetch, fill_constant, fill_any_like,
assign, assign_value, cast, shape, increment, range, one_hot_v2, arg_max.

Shape ops (reshape2, concat, split, ...) live in `shape.py`, indexing ops
(slice, gather, lookup_table_v2, ...) in `indexing.py`; the helpers they share
(VarType -> NumPy dtype, int lists read from shape tensors, attr overrides on
grad ops) are defined here.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...base import dtypes
from ...base.errors import ExecutionError
from ..registry import GRAD_SUFFIX, Call, FwdOp, GradOp, OpDef, Sample, fresh_op, register

# --------------------------------------------------------------------------
# helpers shared by tensor.py, shape.py and indexing.py
# --------------------------------------------------------------------------


def np_dtype(c: Call, attr: str, value: int) -> np.dtype:
    """The NumPy dtype of a VarType attr value; unsupported (bf16, fp8...) raises."""
    try:
        return dtypes.to_numpy(int(value))
    except (KeyError, ValueError):
        raise c.unsupported(attr, value, f"data type {dtypes.type_name(int(value))} has no NumPy equivalent") from None


def ints_of(arr: Any) -> list[int]:
    """The values of an integer tensor (shape / axes / starts ...) as Python ints."""
    return [int(v) for v in np.asarray(arr).reshape(-1)]


def ints_from(c: Call, tensor_slot: str | None, list_slot: str | None, attr: str,
              default: Any = ()) -> list[int]:
    """Paddle's IntArray resolution: a 1-D tensor input wins over a list of
    1-element tensors, which wins over the attr."""
    if tensor_slot and c.has(tensor_slot):
        return ints_of(c.x(tensor_slot))
    if list_slot and c.has(list_slot):
        return [ints_of(t)[0] for t in c.xs(list_slot)]
    return [int(v) for v in c.attr(attr, default)]


def scalar_from(c: Call, slot: str, attr: str, default: Any) -> Any:
    """A scalar attr that an optional 1-element tensor input overrides."""
    if c.has(slot):
        return np.asarray(c.x(slot)).reshape(-1)[0].item()
    return c.attr(attr, default)


def norm_axis(axis: int, ndim: int, what: str = "axis") -> int:
    a = int(axis) + ndim if int(axis) < 0 else int(axis)
    if not 0 <= a < max(ndim, 1):
        raise ExecutionError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return a


def attr_override(fwd: FwdOp, name: str, value: Any) -> Any:
    """`value` with the wire type of the forward op's attr `name` (if it has one)."""
    for a in fwd.attrs_desc:
        if a.name == name:
            return (value, a.type)
    return value


def out_grads(fwd: FwdOp, slot: str) -> list[str]:
    """`name@GRAD` of every var of a forward output slot (grad makers never
    drop these inputs; the pass zero-fills the ones nobody computes)."""
    return [n + GRAD_SUFFIX for n in fwd.output(slot)]


def xshape_of(x: np.ndarray) -> np.ndarray:
    """Paddle's XShape output: a zero-size array whose dims are [0, *x.shape]."""
    return np.empty((0,) + tuple(np.shape(x)), dtype=np.asarray(x).dtype)


def shape_from_xshape(xshape: np.ndarray) -> tuple[int, ...]:
    return tuple(np.shape(xshape)[1:])


# --------------------------------------------------------------------------
# feed / fetch (the interpreter places feeds itself; these are plain copies)
# --------------------------------------------------------------------------
def _feed(c: Call):
    x = c.x("X")
    if isinstance(x, (list, tuple)):  # the FEED_MINIBATCH holder: take column `col`
        col = int(c.attr("col", 0))
        if col >= len(x):
            return {}  # nothing in the holder: Out was fed by name
        x = x[col]
    return {"Out": np.array(x, copy=True)}


def _fetch(c: Call):
    return {"Out": np.array(c.x("X"), copy=True)}


register(OpDef(type="feed", inputs=("X",), outputs=("Out",), kernel=_feed, grad=None,
               attrs_handled=("col",), doc="Out = X[col] of the feed holder (or X itself)"))
register(OpDef(type="fetch", inputs=("X",), outputs=("Out",), kernel=_fetch, grad=None,
               attrs_handled=("col",), doc="Out = copy of X"))


# --------------------------------------------------------------------------
# fill_constant / fill_any_like / assign_value
# --------------------------------------------------------------------------
def _fill_value(c: Call) -> Any:
    if c.has("ValueTensor"):
        return np.asarray(c.x("ValueTensor")).reshape(-1)[0].item()
    s = c.attr("str_value", "")
    if s:  # Paddle parses str_value as a double (inf / -inf / nan allowed)
        try:
            return float(s)
        except ValueError:
            raise c.unsupported("str_value", s, "not a number") from None
    return c.attr("value", 0.0)


def _full(shape, value, dt: np.dtype) -> np.ndarray:
    if dt.kind == "b":
        return np.full(shape, bool(value), dtype=dt)
    if dt.kind in "iu" and isinstance(value, float):
        if not math.isfinite(value):
            raise ExecutionError(f"cannot fill an integer tensor with {value}")
        value = int(value)  # C++ static_cast: truncation toward zero
    return np.full(shape, value, dtype=dt)


def _fill_constant(c: Call):
    dt = np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.FP32))
    shape = ints_from(c, "ShapeTensor", "ShapeTensorList", "shape")
    if any(d < 0 for d in shape):
        raise ExecutionError(f"fill_constant: shape {shape} has a negative dim")
    return {"Out": _full(tuple(shape), _fill_value(c), dt)}


register(OpDef(type="fill_constant", inputs=("ValueTensor", "ShapeTensor", "ShapeTensorList"),
               outputs=("Out",), kernel=_fill_constant, grad=None,
               sets_lod_level=False,  # its shape inference writes no LoD level (the loss@GRAD var)
               attrs_handled=("shape", "value", "str_value", "dtype"),
               doc="Out = a tensor of `shape` filled with `value` (str_value / ValueTensor win)"))


def _fill_any_like(c: Call):
    x = np.asarray(c.x("X"))
    d = int(c.attr("dtype", -1))
    dt = x.dtype if d == -1 else np_dtype(c, "dtype", d)
    return {"Out": _full(x.shape, c.attr("value", 0.0), dt)}


register(OpDef(type="fill_any_like", inputs=("X",), outputs=("Out",), kernel=_fill_any_like, grad=None,
               attrs_handled=("value", "dtype"), doc="Out = X's shape filled with `value` (dtype -1: X's)"))

#: Paddle < 3 stored assign_value data in one list per dtype.
_LEGACY_VALUES = {dtypes.VarType.BOOL: "bool_values", dtypes.VarType.INT32: "int32_values",
                  dtypes.VarType.INT64: "int64_values", dtypes.VarType.FP32: "fp32_values",
                  dtypes.VarType.FP64: "fp64_values"}


def _assign_value(c: Call):
    d = int(c.attr("dtype", dtypes.VarType.FP32))
    dt = np_dtype(c, "dtype", d)
    shape = tuple(int(v) for v in c.attr("shape", ()))
    values = list(c.attr("values", None) or ())
    if not values and d in _LEGACY_VALUES:
        values = list(c.attr(_LEGACY_VALUES[d], None) or ())
    n = int(np.prod(shape, dtype=np.int64))
    if len(values) != n:
        raise ExecutionError(f"assign_value: {len(values)} values for shape {list(shape)}")
    return {"Out": np.array(values, dtype=dt).reshape(shape)}


register(OpDef(type="assign_value", inputs=(), outputs=("Out",), kernel=_assign_value, grad=None,
               attrs_handled=("shape", "dtype", "values", "fp32_values", "int32_values", "int64_values",
                              "bool_values", "fp64_values"),
               doc="Out = the constant stored in the attrs"))


# --------------------------------------------------------------------------
# assign / cast (their grads are ops of the same type)
# --------------------------------------------------------------------------
def _assign(c: Call):
    x = c.x("X")
    if isinstance(x, list):  # a tensor array
        return {"Out": [np.array(v, copy=True) for v in x]}
    return {"Out": np.array(x, copy=True)}


def _assign_grad(fwd: FwdOp) -> list[GradOp]:
    """assign's grad is an `assign` Out@GRAD -> X@GRAD. Paddle's AssignGradMaker
    copies no attrs: the op gets the defaults (empty op_callstack, op_namescope "")."""
    return [fresh_op("assign", {"X": out_grads(fwd, "Out")}, {"Out": fwd.grads_of(fwd.input("X"))})]


def _samples_unary(rng: np.random.Generator, **attrs):
    return [Sample({"X": [rng.standard_normal((3, 4))]}, dict(attrs)),
            Sample({"X": [rng.standard_normal((2, 1, 3))]}, dict(attrs))]


register(OpDef(type="assign", inputs=("X",), outputs=("Out",), kernel=_assign, grad=_assign_grad,
               samples=_samples_unary, doc="Out = X (grad: assign Out@GRAD -> X@GRAD)"))


def cast_array(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """x.astype(dt) with C++ static_cast results: float -> narrow int goes
    through int64 (so 300.0 -> uint8 is 44 and -1.7 -> uint8 is 255)."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore", over="ignore"):
        if x.dtype.kind in "fc" and dt.kind in "iu" and dt.itemsize < 8:
            return np.real(x).astype(np.int64).astype(dt)
        if x.dtype.kind == "c" and dt.kind != "c":
            return np.real(x).astype(dt)
        return x.astype(dt)


def _cast(c: Call):
    dt = np_dtype(c, "out_dtype", c.attr("out_dtype", dtypes.VarType.FP32))
    return {"Out": cast_array(c.x("X"), dt)}


def _cast_grad(fwd: FwdOp) -> list[GradOp]:
    """cast's grad is a new `cast` Out@GRAD -> X@GRAD with in/out dtypes swapped
    (Paddle's CastOpGradMaker builds it fresh: no forward attrs are copied)."""
    i, o = fwd.attr("in_dtype"), fwd.attr("out_dtype")
    attrs = {}
    if o is not None:
        attrs["in_dtype"] = attr_override(fwd, "in_dtype", o)
    if i is not None:
        attrs["out_dtype"] = attr_override(fwd, "out_dtype", i)
    return [fresh_op("cast", {"X": out_grads(fwd, "Out")}, {"Out": fwd.grads_of(fwd.input("X"))}, attrs)]


register(OpDef(type="cast", inputs=("X",), outputs=("Out",), kernel=_cast, grad=_cast_grad,
               samples=lambda rng: _samples_unary(rng, in_dtype=6, out_dtype=6),
               attrs_handled=("in_dtype", "out_dtype"),
               doc="Out = X converted to out_dtype (grad: cast back with the dtypes swapped)"))


# --------------------------------------------------------------------------
# shape / increment / range / one_hot_v2 / arg_max (no gradient)
# --------------------------------------------------------------------------
def _shape(c: Call):
    return {"Out": np.array(np.shape(c.x("Input")), dtype=np.int32)}


register(OpDef(type="shape", inputs=("Input",), outputs=("Out",), kernel=_shape, grad=None,
               doc="Out = the dims of Input (int32)"))


def _increment(c: Call):
    x = np.asarray(c.x("X"))
    step = np.asarray(c.attr("step", 1.0))
    with np.errstate(invalid="ignore"):
        step = step.astype(x.dtype)  # static_cast<T>(step): 2.7 -> 2 for ints
    return {"Out": (x + step).astype(x.dtype, copy=False)}


def _increment_grad(fwd: FwdOp) -> list[GradOp]:
    """Paddle's "grad" of increment undoes it: increment X=Out -> Out=X with -step.
    It reads and writes forward vars only (no @GRAD), to restore loop counters."""
    step = float(fwd.attr("step", 1.0))
    # IncrementGradOpMaker sets only `step`: no forward attrs are copied.
    return [fresh_op("increment", {"X": list(fwd.output("Out"))}, {"Out": list(fwd.input("X"))},
                     {"step": attr_override(fwd, "step", -step)})]


register(OpDef(type="increment", inputs=("X",), outputs=("Out",), kernel=_increment, grad=_increment_grad,
               samples=lambda rng: [Sample({"X": [np.array([1.5])]}, {"step": 2.0},
                                           note="reverse op, not a gradient")],
               attrs_handled=("step",),
               doc="Out = X + step (its grad maker emits increment(-step) Out -> X)"))


def _range(c: Call):
    start, end, step = (np.asarray(c.x(s)).reshape(-1)[0] for s in ("Start", "End", "Step"))
    dt = np.asarray(c.x("Start")).dtype
    start, end, step = dt.type(start), dt.type(end), dt.type(step)
    if step == 0:
        raise ExecutionError("range: step must not be 0")
    if (step > 0 and start >= end) or (step < 0 and start <= end):
        size = 0
    elif dt.kind in "iu":
        size = (abs(int(end) - int(start)) + abs(int(step)) - 1) // abs(int(step))
    else:
        with np.errstate(over="ignore"):
            size = int(np.ceil(np.abs((end - start) / step)))
    if size == 0:
        return {"Out": np.zeros((0,), dtype=dt)}
    seq = np.full(size, step, dtype=dt)
    seq[0] = start
    return {"Out": np.add.accumulate(seq, dtype=dt)}  # value = start; value += step (in T)


register(OpDef(type="range", inputs=("Start", "End", "Step"), outputs=("Out",), kernel=_range, grad=None,
               doc="Out = [start, start+step, ...) accumulated in Start's dtype"))


def _one_hot_v2(c: Call):
    x = np.asarray(c.x("X"))
    depth = int(scalar_from(c, "depth_tensor", "depth", -1))
    dt = np_dtype(c, "dtype", c.attr("dtype", dtypes.VarType.FP32))
    if x.size and (x.min() < 0 or x.max() >= depth):
        # Paddle 3.3.1's CPU kernel rejects these even with allow_out_of_range=True
        raise ExecutionError(f"one_hot_v2: ids must be in [0, {depth}), got [{x.min()}, {x.max()}]")
    return {"Out": (x[..., None] == np.arange(depth)).astype(dt)}


register(OpDef(type="one_hot_v2", inputs=("X", "depth_tensor"), outputs=("Out",), kernel=_one_hot_v2,
               grad=None, attrs_handled=("depth", "dtype", "allow_out_of_range"),
               doc="Out = one-hot of the int ids X, shape X.shape + [depth]"))


def arg_extreme(c: Call, largest: bool) -> dict[str, np.ndarray]:
    """arg_max / arg_min as Paddle's CPU reducer computes them: the first
    extreme along `axis` (or of the flattened X with `flatten`); a NaN never
    wins (an all-NaN row gives 0), and a 0-D X with keepdims keeps one dim."""
    x = np.asarray(c.x("X"))
    keepdims = bool(c.attr("keepdims", False))
    d = int(c.attr("dtype", dtypes.VarType.INT64))
    dt = np.dtype(np.int64) if d == -1 else np_dtype(c, "dtype", d)
    if x.dtype.kind == "f":  # NaN loses to everything, ties with -inf/+inf go to the first
        x = np.where(np.isnan(x), -np.inf if largest else np.inf, x)
    pick = np.argmax if largest else np.argmin
    if c.attr("flatten", False):
        out = np.full((1,) * x.ndim if keepdims else (), pick(x.reshape(-1)))
    elif x.ndim == 0:
        out = np.zeros((1,) if keepdims else (), dtype=np.int64)
    else:
        out = pick(x, axis=norm_axis(c.attr("axis", -1), x.ndim), keepdims=keepdims)
    return {"Out": np.asarray(out).astype(dt)}


def _arg_max_samples(rng):
    x = rng.standard_normal((3, 4, 5))
    xn = np.array([[3.0, np.nan, 1.0, 1.0], [np.nan, -np.inf, -np.inf, np.nan],
                   [np.nan] * 4, [np.nan, 2.0, 5.0, 5.0], [-np.inf, np.nan, -np.inf, -np.inf]])
    return [Sample({"X": [x]}, {"axis": 1}), Sample({"X": [x]}, {"axis": -1, "keepdims": True}, note="keepdims"),
            Sample({"X": [x]}, {"axis": 0, "dtype": 2}, note="int32"),
            Sample({"X": [x]}, {"axis": 0, "flatten": True}, note="flatten"),
            Sample({"X": [xn]}, {"axis": 1}, note="NaN"),
            Sample({"X": [xn]}, {"axis": 0, "flatten": True}, note="NaN flatten"),
            Sample({"X": [np.asarray(2.5)]}, {"axis": 0, "keepdims": True}, note="0-D keepdims"),
            Sample({"X": [np.asarray(2.5)]}, {"axis": 0, "keepdims": True, "flatten": True}, note="0-D flatten keepdims"),
            Sample({"X": [rng.integers(0, 3, (3, 4)).astype(np.int64)]}, {"axis": 1}, note="int64 ties")]


register(OpDef(type="arg_max", inputs=("X",), outputs=("Out",), kernel=lambda c: arg_extreme(c, True), grad=None,
               attrs_handled=("axis", "keepdims", "flatten", "dtype"), samples=_arg_max_samples,
               doc="Out = index of the first maximum along axis (NaN skipped)"))
