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

Gradients are Paddle's dL/dRe + i dL/dIm (see ops/complex.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from .complex import complex_dtype, real_dtype
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register

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
