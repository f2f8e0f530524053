"""More shape ops, with slots and grad rules from Paddle's records:
flip, roll, expand (v1), expand_as_v2, flatten2, reshape (v1), pad, crop,
crop_tensor, unbind, meshgrid, broadcast_tensors, pixel_shuffle,
pixel_unshuffle, channel_shuffle, shuffle_channel, temporal_shift
(unfold / fold are in im2col.py)."""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ._util import unbroadcast
from .paddle_table import paddle_opdef
from .registry import EMPTY_VAR_NAME, Call, Sample, register
from .shape import reshape_target
from .tensor import ints_from, norm_axis, shape_from_xshape, xshape_of


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _wanted(c: Call, slot: str, arrays: list) -> list:
    """One entry per output name of a duplicable grad slot (None for @EMPTY@)."""
    names = c.outs.get(slot, ())
    return [a if i < len(names) and names[i] != EMPTY_VAR_NAME else None for i, a in enumerate(arrays)]


# --------------------------------------------------------------------------
# flip / roll
# --------------------------------------------------------------------------
def _flip(c: Call):
    x = _x(c)
    axes = tuple(norm_axis(a, x.ndim) for a in c.attr("axis", ()))
    return {"Out": np.flip(x, axes).copy() if axes else x.copy()}


register(paddle_opdef(
    "flip", _flip, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": [0, 2]}),
        Sample({"X": [rng.standard_normal((3, 4))]}, {"axis": [-1]})],
    attrs_handled=("axis",), doc="Out = X reversed along axis (its grad is a flip of Out@GRAD)"))


def _roll_args(c: Call, ndim: int):
    shifts = ints_from(c, "ShiftsTensor", None, "shifts")
    axes = [int(a) for a in c.attr("axis", ())]
    if axes and len(axes) != len(shifts):
        raise ExecutionError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    if not axes and len(shifts) != 1:
        raise ExecutionError(f"roll: without axis, shifts must have one value, got {shifts}")
    return shifts, [norm_axis(a, ndim) for a in axes]


def _roll_by(x: np.ndarray, shifts: list[int], axes: list[int], sign: int) -> np.ndarray:
    if not axes:  # the flattened tensor is rolled
        return np.roll(x.reshape(-1), sign * shifts[0]).reshape(x.shape)
    return np.roll(x, [sign * s for s in shifts], axis=axes)


def _roll(c: Call):
    x = _x(c)
    shifts, axes = _roll_args(c, x.ndim)
    return {"Out": _roll_by(x, shifts, axes, 1)}


def _roll_grad(c: Call):
    g = _x(c, "Out@GRAD")
    shifts, axes = _roll_args(c, g.ndim)
    return {"X@GRAD": _roll_by(g, shifts, axes, -1)}


register(paddle_opdef(
    "roll", _roll, {"roll_grad": _roll_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4))]}, {"shifts": [1, -5], "axis": [0, -1]}),
        Sample({"X": [rng.standard_normal((3, 4))]}, {"shifts": [5], "axis": []}, note="flattened"),
        Sample({"X": [rng.standard_normal((2, 5))], "ShiftsTensor": [np.array([2], np.int64)]},
               {"shifts": [0], "axis": [1]}, note="ShiftsTensor")],
    attrs_handled=("shifts", "axis"), doc="Out = X shifted cyclically along axis (all of X if axis is empty)"))


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
    x = _x(c)
    return {"Out": np.tile(x, _expand_times(c, x.ndim))}


def _expand_grad(c: Call):
    x = _x(c)
    times = _expand_times(c, x.ndim)
    g = _x(c, "Out@GRAD").reshape([v for t, d in zip(times, x.shape) for v in (t, d)])
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
    x = _x(c)
    xs, out = _expand_as_shapes(c, x.shape)
    return {"Out": np.array(np.broadcast_to(x.reshape(xs), out))}


def _expand_as_v2_grad(c: Call):
    x = _x(c)
    g = _x(c, "Out@GRAD")
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
    x = _x(c)
    axis = int(c.attr("axis", 1))
    if not 0 <= axis <= x.ndim:
        raise c.unsupported("axis", axis, f"not in [0, {x.ndim}] for a rank-{x.ndim} input")
    out = (int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))
    return {"Out": x.reshape(out), "XShape": xshape_of(x)}


def _flatten2_grad(c: Call):
    shape = np.shape(c.x("X")) if c.has("X") else shape_from_xshape(c.x("XShape"))
    return {"X@GRAD": _x(c, "Out@GRAD").reshape(shape)}


register(paddle_opdef(
    "flatten2", _flatten2, {"flatten2_grad": _flatten2_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 1}),
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 0}),
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 3})],
    attrs_handled=("axis",), doc="Out = X as a matrix: dims before axis x dims from axis on"))


def _reshape(c: Call):
    x = _x(c)
    if c.has("ShapeTensor"):
        shape = ints_from(c, None, "ShapeTensor", "shape")
    else:
        shape = ints_from(c, "Shape", None, "shape")
    return {"Out": x.reshape(reshape_target(x.shape, shape))}


register(paddle_opdef(
    "reshape", _reshape, {"reshape_grad": lambda c: {"X@GRAD": _x(c, "Out@GRAD").reshape(np.shape(c.x("X")))}},
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 4))]}, {"shape": [0, 2, -1]}),
        Sample({"X": [rng.standard_normal((2, 6))], "Shape": [np.array([3, -1], np.int32)]}, {"shape": [12]},
               note="Shape tensor")],
    attrs_handled=("shape",), doc="the legacy reshape (no XShape): 0 copies a dim, -1 is inferred"))


# --------------------------------------------------------------------------
# pad / crop / crop_tensor
# --------------------------------------------------------------------------
def _pad_pairs(c: Call, ndim: int) -> list[tuple[int, int]]:
    p = [int(v) for v in c.attr("paddings", ())]
    if len(p) != 2 * ndim:
        raise ExecutionError(f"pad: {len(p)} paddings for an input of rank {ndim} (need {2 * ndim})")
    if any(v < 0 for v in p):
        raise c.unsupported("paddings", p, "negative paddings")
    return [(p[2 * i], p[2 * i + 1]) for i in range(ndim)]


def _pad(c: Call):
    x = _x(c)
    pairs = _pad_pairs(c, x.ndim)
    return {"Out": np.pad(x, pairs, constant_values=np.asarray(c.attr("pad_value", 0.0)).astype(x.dtype))}


def _pad_grad(c: Call):
    g = _x(c, "Out@GRAD")
    pairs = _pad_pairs(c, g.ndim)
    return {"X@GRAD": g[tuple(slice(b, d - a) for (b, a), d in zip(pairs, g.shape))].copy()}


register(paddle_opdef(
    "pad", _pad, {"pad_grad": _pad_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"paddings": [1, 0, 2, 3], "pad_value": 0.5}),
        Sample({"X": [rng.standard_normal((2, 3, 2))]}, {"paddings": [0, 0, 1, 1, 0, 2]})],
    attrs_handled=("paddings", "pad_value"),
    doc="Out = X padded with pad_value; paddings = [before_0, after_0, before_1, ...]"))


def _crop_window(c: Call, x_shape: tuple[int, ...], shape: list[int], offsets: list[int]) -> tuple[slice, ...]:
    if len(shape) != len(x_shape) or len(offsets) != len(x_shape):
        raise ExecutionError(f"{c.op_type}: shape {shape} and offsets {offsets} must have rank {len(x_shape)}")
    for d, s, o in zip(x_shape, shape, offsets):
        if o < 0 or s < 0 or o + s > d:
            raise ExecutionError(f"{c.op_type}: offsets {offsets} + shape {shape} exceed X's shape {list(x_shape)}")
    return tuple(slice(o, o + s) for o, s in zip(offsets, shape))


def _crop_offsets(c: Call, ndim: int) -> list[int]:
    if c.has("OffsetsTensor"):
        return ints_from(c, None, "OffsetsTensor", "offsets")
    return ints_from(c, "Offsets", None, "offsets") or [0] * ndim


def _crop_shape(c: Call, x_shape: tuple[int, ...]) -> list[int]:
    return list(np.shape(c.x("Y"))) if c.has("Y") else [int(v) for v in c.attr("shape", ())]


def _crop_tensor_shape(c: Call, x_shape: tuple[int, ...]) -> list[int]:
    if c.has("ShapeTensor"):
        shape = ints_from(c, None, "ShapeTensor", "shape")
    else:
        shape = ints_from(c, "Shape", None, "shape")
    offsets = _crop_offsets(c, len(x_shape))
    if len(offsets) == len(shape) == len(x_shape):  # -1 in shape: up to the end of X's dim
        shape = [d - o if s == -1 else s for s, d, o in zip(shape, x_shape, offsets)]
    return shape


def _crop_kernels(shape_of):
    """Forward and grad of a crop; the grad takes the window's shape from
    Out@GRAD (crop_tensor_grad is not given the Shape inputs)."""
    def fwd(c: Call):
        x = _x(c)
        return {"Out": x[_crop_window(c, x.shape, shape_of(c, x.shape), _crop_offsets(c, x.ndim))].copy()}

    def grad(c: Call):
        x = _x(c)
        g = _x(c, "Out@GRAD")
        gx = np.zeros(x.shape, g.dtype)
        gx[_crop_window(c, x.shape, list(g.shape), _crop_offsets(c, x.ndim))] = g
        return {"X@GRAD": gx}
    return fwd, grad


_crop, _crop_grad = _crop_kernels(_crop_shape)
_crop_tensor, _crop_tensor_grad = _crop_kernels(_crop_tensor_shape)

register(paddle_opdef(
    "crop", _crop, {"crop_grad": _crop_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 5))]}, {"shape": [2, 3], "offsets": [1, 2]}),
        Sample({"X": [rng.standard_normal((3, 5))], "Y": [np.zeros((2, 2))],
                "Offsets": [np.array([0, 3], np.int32)]}, {"shape": [1, 1], "offsets": [0, 0]},
               wrt=("X",), note="Y and Offsets tensors")],
    attrs_handled=("shape", "offsets"), doc="Out = the window of X at offsets with Y's shape (or shape)"))

register(paddle_opdef(
    "crop_tensor", _crop_tensor, {"crop_tensor_grad": _crop_tensor_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 5))]}, {"shape": [2, -1], "offsets": [1, 2]}),
        Sample({"X": [rng.standard_normal((3, 5, 2))], "Shape": [np.array([2, 2, 1], np.int32)],
                "OffsetsTensor": [np.array([1], np.int32), np.array([0], np.int32), np.array([1], np.int32)]},
               {"shape": [1, 1, 1], "offsets": [0, 0, 0]}, note="Shape and OffsetsTensor")],
    attrs_handled=("shape", "offsets"),
    doc="Out = the window of X at offsets of the given shape (-1: to the end of the dim)"))


# --------------------------------------------------------------------------
# unbind / meshgrid / broadcast_tensors
# --------------------------------------------------------------------------
def _unbind(c: Call):
    x = _x(c)
    axis = norm_axis(c.attr("axis", 0), x.ndim)
    return {"Out": [np.take(x, i, axis=axis) for i in range(x.shape[axis])]}


register(paddle_opdef(
    "unbind", _unbind, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 1}, outputs={"Out": 3}),
        Sample({"X": [rng.standard_normal((3, 2))]}, {"axis": -1}, outputs={"Out": 2})],
    attrs_handled=("axis",), doc="Out = the slices of X along axis (its grad is a stack of Out@GRAD)"))


def _meshgrid(c: Call):
    xs = [np.asarray(v).reshape(-1) for v in c.xs("X")]
    return {"Out": [np.array(a) for a in np.meshgrid(*xs, indexing="ij")]}


def _meshgrid_grad(c: Call):
    gs = [np.asarray(g) for g in c.xs("Out@GRAD")]
    xs = c.xs("X")
    n = len(xs)
    res = []
    for i, x in enumerate(xs):
        g = gs[i].sum(axis=tuple(j for j in range(n) if j != i))
        res.append(g.reshape(np.shape(x)))
    return {"X@GRAD": _wanted(c, "X@GRAD", res)}


register(paddle_opdef(
    "meshgrid", _meshgrid, {"meshgrid_grad": _meshgrid_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(4)]}, {},
               outputs={"Out": 3}),
        Sample({"X": [rng.standard_normal(()), rng.standard_normal(2)]}, {}, outputs={"Out": 2}, note="0-D")],
    doc="Out[i] = X[i] spread over the grid of all X's sizes ('ij' indexing)"))


def _broadcast_tensors(c: Call):
    xs = [np.asarray(v) for v in c.xs("X")]
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    return {"Out": [np.array(np.broadcast_to(x, shape)) for x in xs]}


def _broadcast_tensors_grad(c: Call):
    gs = c.xs("Out@GRAD")
    return {"X@GRAD": _wanted(c, "X@GRAD", [unbroadcast(np.asarray(g), np.shape(x))
                                              for g, x in zip(gs, c.xs("X"))])}


register(paddle_opdef(
    "broadcast_tensors", _broadcast_tensors, {"broadcast_tensors_grad": _broadcast_tensors_grad},
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 1, 3)), rng.standard_normal((4, 1)), rng.standard_normal(())]},
               {}, outputs={"Out": 3})],
    doc="Out[i] = X[i] broadcast to the common shape of all X"))


# --------------------------------------------------------------------------
# pixel_shuffle / pixel_unshuffle / channel_shuffle / shuffle_channel
# --------------------------------------------------------------------------
def _channels_last(c: Call) -> bool:
    fmt = c.attr("data_format", "NCHW")
    if fmt not in ("NCHW", "NHWC"):
        raise c.unsupported("data_format", fmt, "NCHW or NHWC")
    return fmt == "NHWC"


def _pixel_shuffle_by(x: np.ndarray, r: int, nhwc: bool) -> np.ndarray:
    if nhwc:
        n, h, w, c = x.shape
        return x.reshape(n, h, w, c // (r * r), r, r).transpose(0, 1, 4, 2, 5, 3).reshape(n, h * r, w * r, -1)
    n, c, h, w = x.shape
    return x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, -1, h * r, w * r)


def _pixel_unshuffle_by(x: np.ndarray, r: int, nhwc: bool) -> np.ndarray:
    if nhwc:
        n, h, w, c = x.shape
        return x.reshape(n, h // r, r, w // r, r, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, h // r, w // r, -1)
    n, c, h, w = x.shape
    return x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4).reshape(n, -1, h // r, w // r)


def _factor(c: Call, attr: str) -> int:
    r = int(c.attr(attr, 1))
    if r <= 0:
        raise c.unsupported(attr, r, "must be positive")
    return r


def _check_4d(c: Call, x: np.ndarray) -> None:
    if x.ndim != 4:
        raise ExecutionError(f"{c.op_type}: X must be 4-D, got shape {list(x.shape)}")


def _shuffle_kernels(attr: str, fwd_fn, back_fn):
    def fwd(c: Call):
        x = _x(c)
        _check_4d(c, x)
        r, nhwc = _factor(c, attr), _channels_last(c)
        ch, sp = (x.shape[3], x.shape[1:3]) if nhwc else (x.shape[1], x.shape[2:])
        if fwd_fn is _pixel_shuffle_by and ch % (r * r):
            raise ExecutionError(f"pixel_shuffle: {ch} channels are not divisible by {r}^2")
        if fwd_fn is _pixel_unshuffle_by and any(s % r for s in sp):
            raise ExecutionError(f"pixel_unshuffle: spatial dims {list(sp)} are not divisible by {r}")
        return {"Out": fwd_fn(x, r, nhwc)}

    def grad(c: Call):
        return {"X@GRAD": back_fn(_x(c, "Out@GRAD"), _factor(c, attr), _channels_last(c))}
    return fwd, grad


_pixel_shuffle, _pixel_shuffle_grad = _shuffle_kernels("upscale_factor", _pixel_shuffle_by, _pixel_unshuffle_by)
_pixel_unshuffle, _pixel_unshuffle_grad = _shuffle_kernels("downscale_factor", _pixel_unshuffle_by,
                                                           _pixel_shuffle_by)

register(paddle_opdef(
    "pixel_shuffle", _pixel_shuffle, {"pixel_shuffle_grad": _pixel_shuffle_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 8, 2, 3))]}, {"upscale_factor": 2, "data_format": "NCHW"}),
        Sample({"X": [rng.standard_normal((1, 2, 3, 9))]}, {"upscale_factor": 3, "data_format": "NHWC"})],
    attrs_handled=("upscale_factor", "data_format"),
    doc="Out = X's channel blocks of r*r moved into r x r spatial blocks"))

register(paddle_opdef(
    "pixel_unshuffle", _pixel_unshuffle, {"pixel_unshuffle_grad": _pixel_unshuffle_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 2, 4, 6))]}, {"downscale_factor": 2, "data_format": "NCHW"}),
        Sample({"X": [rng.standard_normal((1, 6, 3, 2))]}, {"downscale_factor": 3, "data_format": "NHWC"})],
    attrs_handled=("downscale_factor", "data_format"), doc="the inverse of pixel_shuffle"))


def _channel_shuffle_by(x: np.ndarray, g: int, nhwc: bool) -> np.ndarray:
    if nhwc:
        n, h, w, ch = x.shape
        return x.reshape(n, h, w, g, ch // g).swapaxes(3, 4).reshape(x.shape)
    n, ch, h, w = x.shape
    return x.reshape(n, g, ch // g, h, w).swapaxes(1, 2).reshape(x.shape)


def _groups(c: Call, x: np.ndarray, attr: str, nhwc: bool) -> int:
    g = _factor(c, attr)
    ch = x.shape[3] if nhwc else x.shape[1]
    if ch % g:
        raise ExecutionError(f"{c.op_type}: {ch} channels are not divisible by {attr}={g}")
    return g


def _channel_shuffle(c: Call):
    x = _x(c)
    _check_4d(c, x)
    nhwc = _channels_last(c)
    return {"Out": _channel_shuffle_by(x, _groups(c, x, "groups", nhwc), nhwc)}


def _channel_shuffle_grad(c: Call):
    g = _x(c, "Out@GRAD")
    nhwc = _channels_last(c)
    groups = _groups(c, g, "groups", nhwc)
    ch = g.shape[3] if nhwc else g.shape[1]
    return {"X@GRAD": _channel_shuffle_by(g, ch // groups, nhwc)}


register(paddle_opdef(
    "channel_shuffle", _channel_shuffle, {"channel_shuffle_grad": _channel_shuffle_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 6, 2, 2))]}, {"groups": 3, "data_format": "NCHW"}),
        Sample({"X": [rng.standard_normal((1, 2, 2, 4))]}, {"groups": 2, "data_format": "NHWC"})],
    attrs_handled=("groups", "data_format"), doc="Out = X's channels in groups, interleaved"))


def _shuffle_channel(c: Call):
    x = _x(c)
    _check_4d(c, x)
    return {"Out": _channel_shuffle_by(x, _groups(c, x, "group", False), False)}


def _shuffle_channel_grad(c: Call):
    g = _x(c, "Out@GRAD")
    groups = _groups(c, g, "group", False)
    return {"X@GRAD": _channel_shuffle_by(g, g.shape[1] // groups, False)}


#: Paddle 3.3.1's CPU shuffle_channel_grad applies the forward permutation
#: again instead of its inverse, which is only right when group * group equals
#: the channel count; ours is the true gradient, so the samples keep to that case
#: (float64 in Paddle also copies only half of each plane: memcpy of
#: sizeof(int) * H * W bytes).
register(paddle_opdef(
    "shuffle_channel", _shuffle_channel, {"shuffle_channel_grad": _shuffle_channel_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 4, 2, 3))]}, {"group": 2}),
        Sample({"X": [rng.standard_normal((1, 9, 1, 2))]}, {"group": 3})],
    attrs_handled=("group",), doc="the legacy channel_shuffle (NCHW)"))


# --------------------------------------------------------------------------
# temporal_shift
# --------------------------------------------------------------------------
def _temporal_args(c: Call, x: np.ndarray):
    _check_4d(c, x)
    t = _factor(c, "seg_num")
    nhwc = _channels_last(c)
    if x.shape[0] % t:
        raise ExecutionError(f"temporal_shift: batch {x.shape[0]} is not divisible by seg_num={t}")
    ch = x.shape[3] if nhwc else x.shape[1]
    ratio = float(c.attr("shift_ratio", 0.25))
    c1 = int(np.float32(ch) * np.float32(ratio))  # static_cast<int>(c * shift_ratio) in float
    c2 = int(np.float32(ch) * np.float32(2) * np.float32(ratio))
    return t, nhwc, c1, c2


def _temporal_shift_by(x: np.ndarray, t: int, nhwc: bool, c1: int, c2: int, sign: int) -> np.ndarray:
    """Channels [0, c1) take frame t - sign, [c1, c2) frame t + sign (zero past the ends)."""
    if nhwc:
        x = x.transpose(0, 3, 1, 2)
    v = x.reshape((-1, t) + x.shape[1:])
    out = v.copy()
    out[:, :, :c2] = 0
    if sign > 0:
        out[:, 1:, :c1] = v[:, :-1, :c1]
        out[:, :-1, c1:c2] = v[:, 1:, c1:c2]
    else:
        out[:, :-1, :c1] = v[:, 1:, :c1]
        out[:, 1:, c1:c2] = v[:, :-1, c1:c2]
    out = out.reshape(x.shape)
    return out.transpose(0, 2, 3, 1) if nhwc else out


def _temporal_shift(c: Call):
    x = _x(c)
    return {"Out": _temporal_shift_by(x, *_temporal_args(c, x), 1)}


def _temporal_shift_grad(c: Call):
    g = _x(c, "Out@GRAD")
    return {"X@GRAD": _temporal_shift_by(g, *_temporal_args(c, g), -1)}


register(paddle_opdef(
    "temporal_shift", _temporal_shift, {"temporal_shift_grad": _temporal_shift_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((6, 8, 2, 2))]}, {"seg_num": 3, "shift_ratio": 0.25}),
        Sample({"X": [rng.standard_normal((4, 2, 1, 7))]}, {"seg_num": 2, "shift_ratio": 0.2,
                                                            "data_format": "NHWC"})],
    attrs_handled=("seg_num", "shift_ratio", "data_format"),
    doc="Out = X with a shift_ratio of its channels moved one frame back and as many one frame forward"))

