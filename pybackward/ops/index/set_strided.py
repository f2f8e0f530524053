"""set: a strided view of `source` (dims, stride, offset) read into a dense array.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* set: Out is a strided view of `source`: dims, stride (elements) and offset
  (bytes), read into a dense array.
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# set
# --------------------------------------------------------------------------
def _set(c: Call):
    x, src = np.asarray(c.x("x")), np.asarray(c.x("source"))
    if x.dtype != src.dtype:
        raise ExecutionError(f"op set: x ({x.dtype}) and source ({src.dtype}) must have one dtype")
    dims = [int(d) for d in c.attr("dims")]
    stride = [int(s) for s in c.attr("stride")]
    offset = int(c.attr("offset", 0))
    if len(dims) != len(stride) or any(d < 0 for d in dims):
        raise ExecutionError(f"op set: dims {dims} and stride {stride} must have one length, dims >= 0")
    if offset < 0 or offset % src.itemsize:
        raise ExecutionError(f"op set: offset {offset} must be a non-negative multiple of {src.itemsize} bytes")
    flat = np.ascontiguousarray(src).reshape(-1)
    start = offset // src.itemsize
    idx = np.full(dims, start, np.int64) if dims else np.array(start, np.int64)
    for axis, (d, s) in enumerate(zip(dims, stride)):
        shape = [1] * len(dims)
        shape[axis] = d
        idx = idx + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise ExecutionError(f"op set: the view dims {dims}, stride {stride}, offset {offset} reaches past "
                             f"source's {flat.size} elements")
    return {"out": flat[idx].astype(src.dtype)}


def _set_samples(rng):
    src = rng.standard_normal(12)
    x = np.zeros((2, 3))
    return [
        Sample({"x": [x], "source": [src]}, {"dims": [2, 3], "stride": [3, 1], "offset": 0}),
        Sample({"x": [x], "source": [src]}, {"dims": [2, 3], "stride": [1, 2], "offset": 0}, note="transposed"),
        Sample({"x": [x.astype(np.int64)], "source": [np.arange(12, dtype=np.int64)]},
               {"dims": [2, 2], "stride": [2, 1], "offset": 16}, note="int64, an offset"),
        Sample({"x": [x], "source": [src]}, {"dims": [2, 2], "stride": [1, 2], "offset": 0}),
    ]


register(paddle_opdef("set", _set, samples=_set_samples, attrs_handled=("dims", "stride", "offset"),
                      doc="out = the strided view (dims, stride, byte offset) of source"))
