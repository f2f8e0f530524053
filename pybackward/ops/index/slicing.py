"""Strided slicing ops, with slots and grad rules from Paddle's records:
strided_slice (x[a:b:s]) and set_value (x[a:b:s] = v), and their grads.

Paddle 3.3.1's CPU kernels follow Python's slice rules for starts / ends /
steps (clamping, negative indices, INT_MIN / INT_MAX for an absent bound,
empty slices instead of errors), as a sweep over every start, end and step
in [-7, 7] plus the two sentinels showed; so the index is a Python slice.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import ints_from


def _dense(c: Call, slot: str) -> np.ndarray:
    v = c.x(slot)
    if isinstance(v, list):
        raise c.unsupported(slot, "a tensor array", "strided slicing of a LoDTensorArray")
    return np.asarray(v)


def _axes(c: Call, name: str, ndim: int) -> list[int]:
    axes = [int(a) for a in c.attr(name, ())]
    for a in axes:
        if not 0 <= a < ndim:  # Paddle's infer-shape rejects negative axes
            raise c.unsupported(name, axes, f"axes must be in [0, {ndim})")
    return axes


def _slices(c: Call, shape: tuple[int, ...], axes: list[int], starts: list[int], ends: list[int],
            steps: list[int]) -> tuple[tuple[slice, ...], tuple[int, ...]]:
    """(the index into X, the sliced shape) for Python-style starts/ends/steps on axes."""
    if not len(starts) == len(ends) == len(steps) == len(axes):
        raise ExecutionError(f"{c.op_type}: {len(axes)} axes but {len(starts)} starts, {len(ends)} ends "
                             f"and {len(steps)} steps")
    index = [slice(None)] * len(shape)
    sliced = list(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise ExecutionError(f"{c.op_type}: step on axis {a} is 0")
        index[a] = slice(s, e, st)
        sliced[a] = len(range(*index[a].indices(shape[a])))
    return tuple(index), tuple(sliced)


# --------------------------------------------------------------------------
# strided_slice
# --------------------------------------------------------------------------
STRIDED_TENSORS = ("StartsTensor", "StartsTensorList", "EndsTensor", "EndsTensorList", "StridesTensor",
                   "StridesTensorList")


def _strided_spec(c: Call, shape: tuple[int, ...]):
    """(index into Input, the sliced shape, the output shape after decrease_axis)."""
    axes = _axes(c, "axes", len(shape))
    starts = ints_from(c, "StartsTensor", "StartsTensorList", "starts")
    ends = ints_from(c, "EndsTensor", "EndsTensorList", "ends")
    strides = ints_from(c, "StridesTensor", "StridesTensorList", "strides")
    decrease = [int(a) for a in c.attr("decrease_axis", ())]
    flags = [int(f) for f in c.attr("infer_flags", ())] or [1] * len(axes)
    for i, a in enumerate(axes):
        if i < len(starts) and i < len(ends) and starts[i] == -1 and ends[i] == 0 and \
                i < len(flags) and flags[i] == -1 and a in decrease:
            raise c.unsupported("infer_flags", flags, "the start=-1, end=0 'last element' form of a "
                                "decreased axis (Paddle's result depends on the stride)")
    index, sliced = _slices(c, shape, axes, starts, ends, strides)
    for a in decrease:
        if not 0 <= a < len(shape) or sliced[a] != 1:
            raise ExecutionError(f"strided_slice: decrease_axis {a} has size "
                                 f"{sliced[a] if 0 <= a < len(shape) else '?'}, not 1")
    out = tuple(d for i, d in enumerate(sliced) if i not in decrease)
    if decrease and not out:
        out = (1,)  # Paddle 3.3.1 keeps a 1-element dim when every dim is decreased
    return index, sliced, out


def _strided_slice(c: Call):
    x = _dense(c, "Input")
    index, _, out = _strided_spec(c, x.shape)
    return {"Out": x[index].reshape(out)}


def _strided_slice_grad(c: Call):
    """Input@GRAD: Out@GRAD scattered back into zeros. (Paddle 3.3.1's CPU
    kernel raises when decrease_axis is set: it reads Out@GRAD at the
    undecreased rank.)"""
    x = _dense(c, "Input")
    g = np.asarray(c.x("Out@GRAD"))
    index, sliced, _ = _strided_spec(c, x.shape)
    gx = np.zeros(x.shape, dtype=g.dtype)
    gx[index] = g.reshape(sliced)
    return {"Input@GRAD": gx}


_I32MIN, _I32MAX = -2 ** 31, 2 ** 31 - 1


def _strided_slice_samples(rng):
    r = rng.standard_normal
    return [
        Sample({"Input": [r((4, 5, 6))]}, {"axes": [0, 1, 2], "starts": [_I32MAX, 1, -1], "ends": [_I32MIN, 2, 0],
                                           "strides": [-2, 1, -1], "infer_flags": [1, 1, 1],
                                           "decrease_axis": [1]}, note="x[::-2, 1, -1:0:-1]"),
        Sample({"Input": [r((3, 7))]}, {"axes": [1], "starts": [1], "ends": [_I32MAX], "strides": [3],
                                        "infer_flags": [1], "decrease_axis": []}),
        Sample({"Input": [r((3, 4))]}, {"axes": [0, 1], "starts": [2, -9], "ends": [-9, 9], "strides": [-1, 2],
                                        "infer_flags": [1, 1], "decrease_axis": []}, note="clamped bounds"),
        Sample({"Input": [r((2, 3))]}, {"axes": [0, 1], "starts": [1, 2], "ends": [2, 3], "strides": [1, 1],
                                        "infer_flags": [1, 1], "decrease_axis": [0, 1]}, note="all decreased"),
        Sample({"Input": [r((5, 4))], "StartsTensor": [np.array([4, 0], np.int64)],
                "EndsTensorList": [np.array([0], np.int32), np.array([3], np.int64)],
                "StridesTensor": [np.array([-2, 2], np.int32)]},
               {"axes": [0, 1], "starts": [0, 0], "ends": [1, 1], "strides": [1, 1], "infer_flags": [-1, -1],
                "decrease_axis": []}, note="tensors"),
    ]


register(paddle_opdef(
    "strided_slice", _strided_slice, {"strided_slice_grad": _strided_slice_grad},
    samples=_strided_slice_samples,
    attrs_handled=("axes", "starts", "ends", "strides", "infer_flags", "decrease_axis"),
    doc="Out = Input[starts:ends:strides] on axes (Python slice rules), dims in decrease_axis dropped"))


# --------------------------------------------------------------------------
# set_value
# --------------------------------------------------------------------------
def _set_value_spec(c: Call, shape: tuple[int, ...]):
    """(index, the sliced shape, the shape the value is broadcast to: decreased
    dims dropped and none_axes inserted as in Paddle's SetValueImpl)."""
    axes = _axes(c, "axes", len(shape))
    starts = ints_from(c, None, "StartsTensorList", "starts")
    ends = ints_from(c, None, "EndsTensorList", "ends")
    steps = ints_from(c, None, "StepsTensorList", "steps") or [1] * len(axes)
    index, sliced = _slices(c, shape, axes, starts, ends, steps)
    decrease = sorted(int(a) for a in c.attr("decrease_axes", ()))
    none = sorted(int(a) for a in c.attr("none_axes", ()))
    for a in decrease:
        if not 0 <= a < len(shape) or sliced[a] != 1:
            raise ExecutionError(f"set_value: decrease_axes {decrease} name a dim whose slice is not of size 1")
    assign: list[int] = []
    ni = 0
    for i, d in enumerate(sliced):
        while ni < len(none) and none[ni] <= i:
            assign.append(1)
            ni += 1
        if i not in decrease:
            assign.append(d)
    assign += [1] * (len(none) - ni)
    if decrease and not none and not assign:
        assign = [1]
    return index, sliced, tuple(assign)


def _value(c: Call, dtype: np.dtype) -> np.ndarray:
    if c.has("ValueTensor"):
        return np.asarray(c.x("ValueTensor"))
    values = list(c.attr("values", None) or ())
    shape = tuple(int(v) for v in c.attr("shape", ()))
    if len(values) != int(np.prod(shape, dtype=np.int64)):
        raise ExecutionError(f"set_value: {len(values)} values for shape {list(shape)}")
    if dtype.kind != "c" and any(isinstance(v, complex) for v in values):
        raise c.unsupported("values", values, f"complex values for a {dtype} input")
    return np.array(values).astype(dtype).reshape(shape)  # Scalar.to<T>() of the input's type


def _set_value(c: Call):
    x = np.asarray(c.x("Input"))
    index, sliced, assign = _set_value_spec(c, x.shape)
    v = _value(c, x.dtype)
    try:
        full = np.broadcast_to(v, np.broadcast_shapes(assign, v.shape))
    except ValueError:
        raise ExecutionError(f"set_value: a value of shape {list(v.shape)} does not fit a slice of shape "
                             f"{list(assign)}") from None
    if full.size != int(np.prod(sliced, dtype=np.int64)):
        raise ExecutionError(f"set_value: a value of shape {list(v.shape)} does not fit a slice of shape "
                             f"{list(assign)}")
    out = x.copy()
    out[index] = full.reshape(sliced).astype(x.dtype, copy=False)
    return {"Out": out}


def _set_value_grad(c: Call):
    """Input@GRAD: Out@GRAD with the slice zeroed; ValueTensor@GRAD: the slice
    of Out@GRAD summed down to the value's shape. (Paddle 3.3.1 ignores
    none_axes here: a value with as many dims as the None-extended slice gets
    a wrong gradient there; this is the true one.)"""
    g = np.asarray(c.x("Out@GRAD"))
    index, sliced, assign = _set_value_spec(c, g.shape)
    res = {}
    if c.wants("Input@GRAD"):
        gx = g.copy()
        gx[index] = 0
        res["Input@GRAD"] = gx
    if c.wants("ValueTensor@GRAD"):
        vshape = np.shape(c.x("ValueTensor"))
        gv = g[index].reshape(assign)
        if len(vshape) > gv.ndim:
            gv = gv.reshape((1,) * (len(vshape) - gv.ndim) + gv.shape)
        res["ValueTensor@GRAD"] = unbroadcast(gv, vshape)
    return res


def _set_value_samples(rng):
    r = rng.standard_normal
    base = {"decrease_axes": [], "none_axes": [], "values": [], "shape": [], "dtype": 6}
    return [
        Sample({"Input": [r((4, 5))], "ValueTensor": [r((2, 5))]},
               dict(base, axes=[0], starts=[1], ends=[3], steps=[1]), note="x[1:3] = v"),
        Sample({"Input": [r((4, 5, 3))], "ValueTensor": [r((5,))]},
               dict(base, axes=[0, 2], starts=[_I32MAX, 2], ends=[_I32MIN, 3], steps=[-1, 1],
                    decrease_axes=[2]), note="x[::-1, :, 2] = v (broadcast)"),
        Sample({"Input": [r((4, 5, 3))], "ValueTensor": [r((1, 3))]},
               dict(base, axes=[1], starts=[-1], ends=[_I32MAX], steps=[1], decrease_axes=[1]),
               note="x[:, -1] = v"),
        Sample({"Input": [r((4, 6))], "ValueTensor": [r(())]},
               dict(base, axes=[1], starts=[5], ends=[0], steps=[-2]), note="0-D value, negative step"),
        Sample({"Input": [r((3, 4))]}, dict(base, axes=[1], starts=[1], ends=[2], steps=[1], decrease_axes=[1],
                                            values=[2.5], shape=[1]), note="values attr"),
        Sample({"Input": [r((4, 5))], "ValueTensor": [r((1, 5))],
                "StartsTensorList": [np.array([1], np.int64)], "EndsTensorList": [np.array([3], np.int32)]},
               dict(base, axes=[0], starts=[0], ends=[1], steps=[1], none_axes=[1]), note="None axis, tensors"),
    ]


register(paddle_opdef(
    "set_value", _set_value, {"set_value_grad": _set_value_grad}, samples=_set_value_samples,
    attrs_handled=("axes", "starts", "ends", "steps", "decrease_axes", "none_axes", "values", "shape", "dtype"),
    doc="Out = Input with Input[starts:ends:steps] = ValueTensor (or the values attr), broadcast"))
