"""Ops that rearrange elements, with slots and grad rules from Paddle's records: flip, roll,
pixel_shuffle, pixel_unshuffle, channel_shuffle, shuffle_channel and temporal_shift.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import ints_from, norm_axis


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))



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
