"""Small elementwise integer and float-bit ops: nextafter, trunc_divide, shard_index and their kin."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


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


register_plain("nextafter", _nextafter, _nextafter_samples, (), "out = the next float after x toward y")


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


register_plain("trunc_divide", _trunc_divide, _trunc_divide_samples, (),
     "out = x / y rounded toward zero (C++ integer division for integers)")


def _is_empty(c: Call):
    return {"Out": np.array(input_value(c, "X").size == 0)}


def _is_empty_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))]}), Sample({"X": [np.zeros((0, 3))]}, note="empty")]


register_plain("is_empty", _is_empty, _is_empty_samples, (), "Out = (X has no elements), a 0-D bool")


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


register_plain("shard_index", _shard_index, _shard_index_samples, ("index_num", "nshards", "shard_id", "ignore_value"),
     "Out = X - shard_id * shard_size where X falls in this shard, else ignore_value")
