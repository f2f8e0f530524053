"""The legacy versions of shape ops: expand (v1), expand_as_v2, flatten2, reshape (v1), with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .core import reshape_target
from ..tensor.creation import ints_from, shape_from_xshape, xshape_of
from .._inputs import array_in


# --------------------------------------------------------------------------
# expand (v1) / expand_as_v2
# --------------------------------------------------------------------------
def _expand_times(c: Call, ndim: int) -> list[int]:
    times = ints_from(c, "ExpandTimes", "expand_times_tensor", "expand_times")
    if len(times) != ndim:
        raise ExecutionError(f"expand: {len(times)} expand_times for an input of rank {ndim}")
    if any(t <= 0 for t in times):
        raise ExecutionError(f"expand: expand_times {times} must be positive")
    return times


def _expand(c: Call):
    x = array_in(c)
    return {"Out": np.tile(x, _expand_times(c, x.ndim))}


def _expand_grad(c: Call):
    x = array_in(c)
    times = _expand_times(c, x.ndim)
    g = array_in(c, "Out@GRAD").reshape([v for t, d in zip(times, x.shape) for v in (t, d)])
    return {"X@GRAD": g.sum(axis=tuple(range(0, 2 * x.ndim, 2))).reshape(x.shape)}


register(paddle_opdef(
    "expand", _expand, {"expand_grad": _expand_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"expand_times": [2, 3]}),
        Sample({"X": [rng.standard_normal((2, 1))], "ExpandTimes": [np.array([1, 4], np.int32)]},
               {"expand_times": [1, 1]}, note="ExpandTimes tensor"),
        Sample({"X": [rng.standard_normal((2, 3))],
                "expand_times_tensor": [np.array([3], np.int32), np.array([1], np.int32)]},
               {"expand_times": [1, 1]}, note="expand_times_tensor")],
    attrs_handled=("expand_times",), doc="Out = X tiled expand_times times along each dim"))


def _expand_as_shapes(c: Call, x_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(X's shape padded with leading 1s, the output shape)."""
    target = list(np.shape(c.x("Y"))) if c.has("Y") else [int(v) for v in c.attr("target_shape", ())]
    diff = len(target) - len(x_shape)
    if diff < 0:
        raise ExecutionError(f"expand_as_v2: target shape {target} has fewer dims than X {list(x_shape)}")
    xs = (1,) * diff + tuple(x_shape)
    out = []
    for i, (d, t) in enumerate(zip(xs, target)):
        if t == -1 and i >= diff:
            t = d
        if t <= 0 or (d != 1 and d != t):
            raise ExecutionError(f"expand_as_v2: cannot expand X {list(x_shape)} to {target}")
        out.append(t)
    return xs, tuple(out)


def _expand_as_v2(c: Call):
    x = array_in(c)
    xs, out = _expand_as_shapes(c, x.shape)
    return {"Out": np.array(np.broadcast_to(x.reshape(xs), out))}


def _expand_as_v2_grad(c: Call):
    x = array_in(c)
    g = array_in(c, "Out@GRAD")
    return {"X@GRAD": unbroadcast(g, (1,) * (g.ndim - x.ndim) + x.shape).reshape(x.shape)}


register(paddle_opdef(
    "expand_as_v2", _expand_as_v2, {"expand_as_v2_grad": _expand_as_v2_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 1))]}, {"target_shape": [2, 3, 4]}),
        Sample({"X": [rng.standard_normal((1, 4))], "Y": [rng.standard_normal((3, 4))]},
               {"target_shape": [3, 4]}, wrt=("X",), note="Y")],
    attrs_handled=("target_shape",), doc="Out = X broadcast to Y's shape (or target_shape)"))


# --------------------------------------------------------------------------
# flatten2 / reshape (v1)
# --------------------------------------------------------------------------
def _flatten2(c: Call):
    x = array_in(c)
    axis = int(c.attr("axis", 1))
    if not 0 <= axis <= x.ndim:
        raise c.unsupported("axis", axis, f"not in [0, {x.ndim}] for a rank-{x.ndim} input")
    out = (int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))
    return {"Out": x.reshape(out), "XShape": xshape_of(x)}


def _flatten2_grad(c: Call):
    shape = np.shape(c.x("X")) if c.has("X") else shape_from_xshape(c.x("XShape"))
    return {"X@GRAD": array_in(c, "Out@GRAD").reshape(shape)}


register(paddle_opdef(
    "flatten2", _flatten2, {"flatten2_grad": _flatten2_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 1}),
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 0}),
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 3})],
    attrs_handled=("axis",), doc="Out = X as a matrix: dims before axis x dims from axis on"))


def _reshape(c: Call):
    x = array_in(c)
    if c.has("ShapeTensor"):
        shape = ints_from(c, None, "ShapeTensor", "shape")
    else:
        shape = ints_from(c, "Shape", None, "shape")
    return {"Out": x.reshape(reshape_target(x.shape, shape))}


register(paddle_opdef(
    "reshape", _reshape, {"reshape_grad": lambda c: {"X@GRAD": array_in(c, "Out@GRAD").reshape(np.shape(c.x("X")))}},
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4))]}, {"shape": [0, 2, -1]}),
        Sample({"X": [rng.standard_normal((2, 6))], "Shape": [np.array([3, -1], np.int32)]}, {"shape": [12]},
               note="Shape tensor")],
    attrs_handled=("shape",), doc="the legacy reshape (no XShape): 0 copies a dim, -1 is inferred"))
