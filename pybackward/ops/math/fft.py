"""Spectral ops, with slots and grad rules from Paddle's records: fft_c2c,
fft_r2c, fft_c2r, frame, overlap_add, stft, and their grads.

The FFT ops follow Paddle's CPU kernels (pocketfft):

* `forward` picks the sign of the exponent (True: e^-2pi i jk/n);
* `normalization` is read with `forward`: "backward" scales by 1 going
  forward and 1/n going back, "forward" the reverse, "ortho" 1/sqrt(n)
  both ways, n the product of the signal sizes over `axes` (the real
  side's sizes for r2c and c2r);
* fft_r2c keeps the first n/2 + 1 bins of the last axis when `onesided`;
  with forward=False it is the conjugate of the forward transform;
* fft_c2r reads n/2 + 1 bins of the last axis, n = `last_dim_size` or
  2 (m - 1) for m input bins, and ignores the imaginary parts of the bins
  the Hermitian extension makes real (as pocketfft does);
* each grad op applies the transform the other way with the forward op's
  scale factor (the adjoint); fft_c2r_grad doubles the bins whose conjugate
  the forward op folded in, as Paddle's FFTFillConjGradFunctor does.

Gradients are Paddle's dL/dRe + i dL/dIm (see ops/math/complex.py).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .complex import complex_dtype, real_dtype
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_NORMS = ("backward", "forward", "ortho")


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _axes(c: Call, ndim: int) -> list[int]:
    axes = [int(a) for a in c.attr("axes", [])]
    if not axes:
        raise ExecutionError(f"{c.op_type}: attr axes is empty")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ExecutionError(f"{c.op_type}: axis {a} is out of range for a {ndim}-D input")
        out.append(a + ndim if a < 0 else a)
    if len(set(out)) != len(out):
        raise ExecutionError(f"{c.op_type}: attr axes {axes} repeats an axis")
    return out


def _factor(c: Call, size: int) -> float:
    """Paddle's scale for a transform over `size` points (get_norm_from_string)."""
    norm = c.attr("normalization", "backward") or "backward"
    if norm not in _NORMS:
        raise c.unsupported("normalization", norm, "Paddle knows 'backward', 'forward' and 'ortho'")
    forward = bool(c.attr("forward", True))
    if norm == "ortho":
        return 1.0 / np.sqrt(size)
    return 1.0 / size if (norm == "forward") == forward else 1.0


def _size(shape: tuple[int, ...], axes: list[int]) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _c2c(x: np.ndarray, axes: list[int], forward: bool, factor: float) -> np.ndarray:
    """Unnormalised c2c in the given direction, times factor (complex128)."""
    y = np.fft.fftn(x, axes=axes) if forward else np.fft.ifftn(x, axes=axes, norm="forward")
    return y * factor if factor != 1.0 else y


def _r2c(x: np.ndarray, axes: list[int], forward: bool, factor: float, onesided: bool) -> np.ndarray:
    y = np.fft.rfftn(x, axes=axes) if onesided else np.fft.fftn(x, axes=axes)
    if not forward:
        y = np.conj(y)
    return y * factor if factor != 1.0 else y


def _c2r(x: np.ndarray, axes: list[int], forward: bool, factor: float, n: int) -> np.ndarray:
    s = [x.shape[a] for a in axes[:-1]] + [n]
    y = np.fft.irfftn(np.conj(x) if forward else x, s=s, axes=axes, norm="forward")
    return y * factor if factor != 1.0 else y


def _need(x: np.ndarray, kind: str, c: Call, slot: str = "X") -> None:
    if x.dtype.kind != kind or x.dtype.itemsize not in ((4, 8) if kind == "f" else (8, 16)):
        want = "float32 or float64" if kind == "f" else "complex64 or complex128"
        raise ExecutionError(f"{c.op_type}: {slot} must be {want}, got {x.dtype}")


# --------------------------------------------------------------------------
# fft_c2c
# --------------------------------------------------------------------------
def _fft_c2c(c: Call):
    x = _x(c)
    _need(x, "c", c)
    axes = _axes(c, x.ndim)
    out = _c2c(x, axes, bool(c.attr("forward", True)), _factor(c, _size(x.shape, axes)))
    return {"Out": out.astype(x.dtype)}


def _fft_c2c_grad(c: Call):
    g = _x(c, "Out@GRAD")
    _need(g, "c", c, "Out@GRAD")
    axes = _axes(c, g.ndim)
    dx = _c2c(g, axes, not c.attr("forward", True), _factor(c, _size(g.shape, axes)))
    return {"X@GRAD": dx.astype(g.dtype)}


def _cx(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _c2c_samples(rng):
    return [
        Sample({"X": [_cx(rng, (5,))]}, {"axes": [0], "normalization": "backward", "forward": True}),
        Sample({"X": [_cx(rng, (4,))]}, {"axes": [0], "normalization": "backward", "forward": False}),
        Sample({"X": [_cx(rng, (2, 3, 4))]}, {"axes": [1, 2], "normalization": "ortho", "forward": True}),
        Sample({"X": [_cx(rng, (3, 4))]}, {"axes": [0, 1], "normalization": "forward", "forward": False}),
        Sample({"X": [_cx(rng, (3, 4))]}, {"axes": [0], "normalization": "forward", "forward": True}),
        Sample({"X": [_cx(rng, (2, 3, 2))]}, {"axes": [2, 0], "normalization": "ortho", "forward": False},
               note="axes out of order"),
    ]


register(paddle_opdef(
    "fft_c2c", _fft_c2c, {"fft_c2c_grad": _fft_c2c_grad}, samples=_c2c_samples,
    attrs_handled=("axes", "normalization", "forward"),
    doc="complex-to-complex FFT over axes (forward: e^-2pi i jk/n), scaled by normalization"))


# --------------------------------------------------------------------------
# fft_r2c
# --------------------------------------------------------------------------
def _fft_r2c(c: Call):
    x = _x(c)
    _need(x, "f", c)
    axes = _axes(c, x.ndim)
    out = _r2c(x, axes, bool(c.attr("forward", True)), _factor(c, _size(x.shape, axes)),
               bool(c.attr("onesided", True)))
    return {"Out": out.astype(complex_dtype(x.dtype, c.op_type))}


def _fft_r2c_grad(c: Call):
    x, g = _x(c), _x(c, "Out@GRAD")
    axes = _axes(c, x.ndim)
    if c.attr("onesided", True):
        last = axes[-1]
        pad = [(0, 0)] * g.ndim
        pad[last] = (0, x.shape[last] - g.shape[last])
        g = np.pad(g, pad)
    dx = _c2c(g, axes, not c.attr("forward", True), _factor(c, _size(x.shape, axes)))
    return {"X@GRAD": dx.real.astype(x.dtype)}


def _r2c_samples(rng):
    return [
        Sample({"X": [rng.standard_normal((6,))]},
               {"axes": [0], "normalization": "backward", "forward": True, "onesided": True}),
        Sample({"X": [rng.standard_normal((5,))]},
               {"axes": [0], "normalization": "backward", "forward": True, "onesided": True}, note="odd"),
        Sample({"X": [rng.standard_normal((2, 4))]},
               {"axes": [1], "normalization": "ortho", "forward": True, "onesided": False}),
        Sample({"X": [rng.standard_normal((3, 4))]},
               {"axes": [0, 1], "normalization": "forward", "forward": True, "onesided": True}),
        Sample({"X": [rng.standard_normal((2, 3, 5))]},
               {"axes": [0, 2], "normalization": "backward", "forward": False, "onesided": True},
               note="ihfft-like"),
        Sample({"X": [rng.standard_normal((4, 3))]},
               {"axes": [1, 0], "normalization": "ortho", "forward": False, "onesided": False}),
    ]


register(paddle_opdef(
    "fft_r2c", _fft_r2c, {"fft_r2c_grad": _fft_r2c_grad}, samples=_r2c_samples,
    attrs_handled=("axes", "normalization", "forward", "onesided"),
    doc="real-to-complex FFT over axes (complex64 from float32); onesided keeps n/2+1 bins of the last"))


# --------------------------------------------------------------------------
# fft_c2r
# --------------------------------------------------------------------------
def _c2r_n(c: Call, m: int) -> int:
    n = int(c.attr("last_dim_size", 0) or 0)
    n = n if n > 0 else 2 * (m - 1)
    if n < 1:
        raise ExecutionError(f"{c.op_type}: an output of {n} points along the last axis "
                             f"(last_dim_size={c.attr('last_dim_size', 0)}, {m} input bins)")
    return n


def _fft_c2r(c: Call):
    x = _x(c)
    _need(x, "c", c)
    axes = _axes(c, x.ndim)
    m = x.shape[axes[-1]]
    n = _c2r_n(c, m)
    if m < n // 2 + 1:
        raise ExecutionError(f"fft_c2r: {n} output points read {n // 2 + 1} bins of the last axis, "
                             f"X has {m}")
    size = _size(x.shape, axes[:-1]) * n
    out = _c2r(x, axes, bool(c.attr("forward", False)), _factor(c, size), n)
    return {"Out": out.astype(real_dtype(x.dtype, c.op_type))}


def _fft_c2r_grad(c: Call):
    g = _x(c, "Out@GRAD")
    _need(g, "f", c, "Out@GRAD")
    axes = _axes(c, g.ndim)
    last = axes[-1]
    n = g.shape[last]
    dx = _r2c(g, axes, not c.attr("forward", False), _factor(c, _size(g.shape, axes)), True)
    m = dx.shape[last]
    idx = [slice(None)] * dx.ndim
    idx[last] = slice(1, n - m + 1)   # the bins whose conjugate the forward folded in
    dx[tuple(idx)] *= 2
    return {"X@GRAD": dx.astype(complex_dtype(g.dtype, c.op_type))}


def _c2r_samples(rng):
    return [
        Sample({"X": [_cx(rng, (4,))]}, {"axes": [0], "normalization": "backward", "forward": False,
                                         "last_dim_size": 0}),
        Sample({"X": [_cx(rng, (4,))]}, {"axes": [0], "normalization": "backward", "forward": False,
                                         "last_dim_size": 7}, note="odd"),
        Sample({"X": [_cx(rng, (3, 3))]}, {"axes": [0, 1], "normalization": "ortho", "forward": False,
                                           "last_dim_size": 4}),
        Sample({"X": [_cx(rng, (2, 3, 4))]}, {"axes": [1, 2], "normalization": "forward", "forward": False,
                                              "last_dim_size": 6}),
        Sample({"X": [_cx(rng, (3, 2))]}, {"axes": [1], "normalization": "backward", "forward": True,
                                           "last_dim_size": 3}, note="hfft-like"),
        Sample({"X": [_cx(rng, (4, 3))]}, {"axes": [1, 0], "normalization": "ortho", "forward": True,
                                           "last_dim_size": 0}),
    ]


register(paddle_opdef(
    "fft_c2r", _fft_c2r, {"fft_c2r_grad": _fft_c2r_grad}, samples=_c2r_samples,
    attrs_handled=("axes", "normalization", "forward", "last_dim_size"),
    doc="complex-to-real (Hermitian) FFT over axes; last_dim_size (or 2(m-1)) points on the last"))


# --------------------------------------------------------------------------
# frame / overlap_add (each other's grad) and stft
# --------------------------------------------------------------------------
def _frame_axis(c: Call) -> int:
    axis = int(c.attr("axis", -1))
    if axis not in (0, -1):
        raise c.unsupported("axis", axis, "Paddle frames along the first (0) or last (-1) axis")
    return axis


def _hop(c: Call) -> int:
    hop = int(c.attr("hop_length"))
    if hop <= 0:
        raise ExecutionError(f"{c.op_type}: hop_length must be positive, got {hop}")
    return hop


def _frame_index(frame_length: int, n_frames: int, hop: int, axis: int) -> np.ndarray:
    """Sample positions of each frame: (frame_length, n_frames) for axis -1,
    (n_frames, frame_length) for axis 0 - the layouts Paddle gives them."""
    idx = np.arange(frame_length)[:, None] + hop * np.arange(n_frames)[None, :]
    return idx if axis == -1 else idx.T


def frames_of(x: np.ndarray, frame_length: int, hop: int, axis: int, op: str) -> np.ndarray:
    """Paddle's frame: axis -1 turns (..., L) into (..., frame_length, n_frames),
    axis 0 turns (L, ...) into (n_frames, frame_length, ...)."""
    if x.ndim < 1:
        raise ExecutionError(f"{op}: X must have at least 1 dim")
    seq = x.shape[axis]
    if frame_length <= 0 or frame_length > seq:
        raise ExecutionError(f"{op}: frame_length must be in [1, {seq}] (the sequence length), "
                             f"got {frame_length}")
    idx = _frame_index(frame_length, 1 + (seq - frame_length) // hop, hop, axis)
    return x[..., idx] if axis == -1 else x[idx]


def overlap_added(x: np.ndarray, hop: int, axis: int, op: str) -> np.ndarray:
    """Paddle's overlap_add, the inverse layout of frames_of: frames summed
    into a sequence of (n_frames - 1) * hop + frame_length samples."""
    if x.ndim < 2:
        raise ExecutionError(f"{op}: X must have at least 2 dims, got shape {list(x.shape)}")
    if axis == -1:
        frame_length, n_frames = x.shape[-2:]
    else:
        n_frames, frame_length = x.shape[:2]
    seq = (n_frames - 1) * hop + frame_length
    idx = _frame_index(frame_length, n_frames, hop, axis)
    if axis == -1:
        lead = x.shape[:-2]
        out = np.zeros((int(np.prod(lead, dtype=np.int64)), seq), x.dtype)
        np.add.at(out, (slice(None), idx), x.reshape((-1,) + idx.shape))
        return out.reshape(lead + (seq,))
    out = np.zeros((seq,) + x.shape[2:], x.dtype)
    np.add.at(out, idx, x)
    return out


def _frame(c: Call):
    x = _x(c)
    return {"Out": frames_of(x, int(c.attr("frame_length")), _hop(c), _frame_axis(c), c.op_type)}


def _frame_grad(c: Call):
    x, g = _x(c), _x(c, "Out@GRAD")
    axis = _frame_axis(c)
    dx = overlap_added(g, _hop(c), axis, c.op_type)
    seq = x.shape[axis]
    if dx.shape[axis] < seq:  # samples after the last frame get no gradient
        pad = [(0, 0)] * dx.ndim
        pad[axis] = (0, seq - dx.shape[axis])
        dx = np.pad(dx, pad)
    return {"X@GRAD": dx.astype(x.dtype)}


def _overlap_add(c: Call):
    x, hop, axis = _x(c), _hop(c), _frame_axis(c)
    frame_length = x.shape[-2] if axis == -1 and x.ndim >= 2 else x.shape[1] if x.ndim >= 2 else 0
    if hop > frame_length:  # Paddle's shape inference refuses gaps between frames
        raise ExecutionError(f"overlap_add: hop_length ({hop}) must not exceed frame_length ({frame_length})")
    return {"Out": overlap_added(x, hop, axis, c.op_type)}


def _overlap_add_grad(c: Call):
    x, g = _x(c), _x(c, "Out@GRAD")
    axis = _frame_axis(c)
    frame_length = x.shape[-2] if axis == -1 else x.shape[1]
    return {"X@GRAD": frames_of(g, frame_length, _hop(c), axis, c.op_type).astype(x.dtype)}


register(paddle_opdef(
    "frame", _frame, {"frame_grad": _frame_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((10,))]}, {"frame_length": 4, "hop_length": 2, "axis": -1}),
        Sample({"X": [rng.standard_normal((2, 9))]}, {"frame_length": 3, "hop_length": 3, "axis": -1}),
        Sample({"X": [rng.standard_normal((2, 3, 11))]}, {"frame_length": 5, "hop_length": 2, "axis": -1},
               note="tail"),
        Sample({"X": [rng.standard_normal((8,))]}, {"frame_length": 8, "hop_length": 1, "axis": 0}),
        Sample({"X": [rng.standard_normal((9, 2, 3))]}, {"frame_length": 4, "hop_length": 3, "axis": 0}),
        Sample({"X": [_cx(rng, (2, 7))]}, {"frame_length": 3, "hop_length": 2, "axis": -1},
               note="complex"),
        Sample({"X": [rng.standard_normal((10, 2))]}, {"frame_length": 2, "hop_length": 3, "axis": 0},
               note="gaps"),
    ], attrs_handled=("frame_length", "hop_length", "axis"),
    doc="Out = frames of frame_length samples every hop_length along the first or last axis"))
register(paddle_opdef(
    "overlap_add", _overlap_add, {"overlap_add_grad": _overlap_add_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((4, 3))]}, {"hop_length": 2, "axis": -1}),
        Sample({"X": [rng.standard_normal((2, 3, 5, 4))]}, {"hop_length": 3, "axis": -1}),
        Sample({"X": [rng.standard_normal((3, 4))]}, {"hop_length": 1, "axis": 0}),
        Sample({"X": [rng.standard_normal((4, 3, 2))]}, {"hop_length": 3, "axis": 0}),
        Sample({"X": [_cx(rng, (3, 4, 2))]}, {"hop_length": 2, "axis": 0}, note="complex"),
    ], attrs_handled=("hop_length", "axis"),
    doc="Out = frames (frame_length x n_frames, along the first or last axes) summed hop_length apart"))


def _stft_frames(c: Call, x: np.ndarray, window: np.ndarray) -> tuple[np.ndarray, int]:
    n_fft = int(c.attr("n_fft"))
    if x.ndim != 2:
        raise ExecutionError(f"stft: X must be 2-D (batch, seq_length), got shape {list(x.shape)}")
    if window.shape != (n_fft,):
        raise ExecutionError(f"stft: Window must have shape [{n_fft}] (n_fft), got {list(window.shape)}")
    return frames_of(x, n_fft, _hop(c), -1, "stft") * window[:, None], n_fft


def _stft_factor(c: Call, n_fft: int) -> float:
    return 1.0 / np.sqrt(n_fft) if c.attr("normalized", False) else 1.0


def _stft(c: Call):
    x, window = _x(c), _x(c, "Window")
    _need(x, "f", c)
    if window.dtype != x.dtype:
        raise ExecutionError(f"stft: Window is {window.dtype}, X is {x.dtype}; they must match")
    frames, n_fft = _stft_frames(c, x, window)
    out = _r2c(frames, [1], True, _stft_factor(c, n_fft), bool(c.attr("onesided", True)))
    return {"Out": out.astype(complex_dtype(x.dtype, "stft"))}


def _stft_grad(c: Call):
    x, window, g = _x(c), _x(c, "Window"), _x(c, "Out@GRAD")
    n_fft = int(c.attr("n_fft"))
    if c.attr("onesided", True):
        g = np.pad(g, [(0, 0), (0, n_fft - g.shape[1]), (0, 0)])
    d_frames = _c2c(g, [1], False, _stft_factor(c, n_fft)).real * window[:, None]
    dx = overlap_added(d_frames, _hop(c), -1, "stft_grad")
    dx = np.pad(dx, [(0, 0), (0, x.shape[1] - dx.shape[1])])
    return {"X@GRAD": dx.astype(x.dtype)}


register(paddle_opdef(
    "stft", _stft, {"stft_grad": _stft_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 12))], "Window": [rng.uniform(0.5, 1.5, 4)]},
               {"n_fft": 4, "hop_length": 2, "normalized": False, "onesided": True}),
        Sample({"X": [rng.standard_normal((1, 11))], "Window": [rng.uniform(0.5, 1.5, 5)]},
               {"n_fft": 5, "hop_length": 3, "normalized": True, "onesided": True}, note="tail"),
        Sample({"X": [rng.standard_normal((2, 8))], "Window": [rng.uniform(0.5, 1.5, 4)]},
               {"n_fft": 4, "hop_length": 1, "normalized": False, "onesided": False}),
        Sample({"X": [rng.standard_normal((3, 6))], "Window": [np.hanning(6)]},
               {"n_fft": 6, "hop_length": 4, "normalized": True, "onesided": False}),
    ], attrs_handled=("n_fft", "hop_length", "normalized", "onesided"),
    doc="Out[b, f, t] = sum_k Window[k] X[b, t hop + k] e^(-2 pi i f k / n_fft) (1/sqrt(n_fft) "
        "if normalized; n_fft/2+1 bins if onesided); no gradient for Window, as in Paddle"))
