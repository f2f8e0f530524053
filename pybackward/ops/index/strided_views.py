"""Strided views: index_select_strided, as_strided, view_shape (copies here), with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis
from .._inputs import array_in


# --------------------------------------------------------------------------
# strided views: index_select_strided, as_strided, view_shape (copies here)
# --------------------------------------------------------------------------
def _select_args(c: Call):
    x = array_in(c, "x")
    if x.ndim == 0:
        raise ExecutionError("index_select_strided: x must have rank >= 1")
    axis = norm_axis(c.attr("axis", 0), x.ndim)
    n = x.shape[axis]
    index = int(c.attr("index"))
    if not -n <= index < n:
        raise ExecutionError(f"index_select_strided: index {index} out of range for dim {axis} of size {n}")
    return x, axis, index % n


def _index_select_strided(c: Call):
    x, axis, index = _select_args(c)
    return {"out": np.take(x, index, axis=axis).copy()}


def _index_select_strided_grad(c: Call):
    x, axis, index = _select_args(c)
    g = array_in(c, "out@GRAD")
    gx = np.zeros(x.shape, g.dtype)
    sl = [slice(None)] * x.ndim
    sl[axis] = index
    gx[tuple(sl)] = g
    return {"x@GRAD": gx}


register(paddle_opdef("index_select_strided", _index_select_strided,
                      {"index_select_strided_grad": _index_select_strided_grad}, samples=lambda rng: [
                          Sample({"x": [rng.standard_normal((3, 4))]}, {"index": 1, "axis": 0}),
                          Sample({"x": [rng.standard_normal((2, 3, 4))]}, {"index": -1, "axis": 2}),
                          Sample({"x": [rng.standard_normal(5)]}, {"index": 2, "axis": -1}, note="to 0-D")],
                      attrs_handled=("index", "axis"), doc="out = x[..., index, ...] along axis (the dim dropped)"))


def _strided_where(c: Call) -> tuple[np.ndarray, tuple[int, ...]]:
    """Flat positions in input that each element of the view reads."""
    x = array_in(c, "input")
    dims = [int(d) for d in c.attr("dims", [])]
    stride = [int(s) for s in c.attr("stride", [])]
    offset_bytes = int(c.attr("offset", 0))  # Paddle's offset counts bytes
    if offset_bytes < 0 or offset_bytes % x.dtype.itemsize:
        raise c.unsupported("offset", offset_bytes, f"bytes: a non-negative multiple of {x.dtype.itemsize} "
                                                   "(Paddle reads misaligned memory otherwise)")
    offset = offset_bytes // x.dtype.itemsize
    if len(dims) != len(stride) or any(d < 0 for d in dims):
        raise ExecutionError(f"as_strided: dims {dims} and stride {stride} do not pair up")
    where = np.full(dims, offset, np.int64)
    for k, (d, s) in enumerate(zip(dims, stride)):
        where = where + (np.arange(d, dtype=np.int64) * s).reshape([-1 if i == k else 1 for i in range(len(dims))])
    if where.size and (where.min() < 0 or where.max() >= x.size):
        raise ExecutionError(f"as_strided: the view reads outside the {x.size} elements of input")
    return where, x.shape


def _as_strided(c: Call):
    where, _ = _strided_where(c)
    return {"out": array_in(c, "input").reshape(-1)[where]}


def _as_strided_grad(c: Call):
    where, shape = _strided_where(c)
    g = array_in(c, "out@GRAD")
    gx = np.zeros(int(np.prod(shape, dtype=np.int64)), g.dtype)
    np.add.at(gx, where.reshape(-1), g.reshape(-1))
    return {"input@GRAD": gx.reshape(shape)}


register(paddle_opdef("as_strided", _as_strided, {"as_strided_grad": _as_strided_grad}, samples=lambda rng: [
    Sample({"input": [rng.standard_normal((3, 4))]}, {"dims": [4, 3], "stride": [1, 4], "offset": 0},
           note="a transpose"),
    Sample({"input": [rng.standard_normal((3, 4))]}, {"dims": [2, 2], "stride": [4, 2], "offset": 8}),
    Sample({"input": [rng.standard_normal(6)]}, {"dims": [3, 2], "stride": [2, 1], "offset": 0}),
    Sample({"input": [rng.standard_normal(6)]}, {"dims": [3, 3], "stride": [1, 1], "offset": 8},
           note="overlapping windows: the grad sums (Paddle's copies, docs/deviations.md)")],
    attrs_handled=("dims", "stride", "offset"),
    doc="out[i] = input.flat[offset / itemsize + sum(i_k * stride_k)] (a copy of the view; offset in bytes)"))


def _view_dims(c: Call) -> list[int]:
    x = array_in(c, "input")
    dims = [int(d) for d in c.attr("dims", [])]
    if dims.count(-1) > 1:
        raise ExecutionError(f"view_shape: at most one -1 in dims {dims}")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise ExecutionError(f"view_shape: input of {x.size} elements does not fit dims {dims}")
        dims[dims.index(-1)] = x.size // known
    if int(np.prod(dims, dtype=np.int64)) != x.size:
        raise ExecutionError(f"view_shape: input {list(x.shape)} does not fit dims {dims}")
    return dims


def _view_shape(c: Call):
    return {"out": array_in(c, "input").reshape(_view_dims(c)).copy()}


def _view_shape_grad(c: Call):
    return {"input@GRAD": array_in(c, "out@GRAD").reshape(array_in(c, "input").shape).copy()}


register(paddle_opdef("view_shape", _view_shape, {"view_shape_grad": _view_shape_grad}, samples=lambda rng: [
    Sample({"input": [rng.standard_normal((3, 4))]}, {"dims": [2, 6]}),
    Sample({"input": [rng.standard_normal((2, 3, 2))]}, {"dims": [-1, 4]})],
    attrs_handled=("dims",), doc="out = input viewed with shape dims (-1 inferred)"))
