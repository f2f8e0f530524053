"""Complex-number ops, with slots and grad rules from Paddle's records:
complex, real, imag, angle, conj, as_complex, as_real, and their grads.

Gradients follow Paddle's convention for complex values (verified on a live
Paddle 3.3.1): the gradient of a real loss L w.r.t. a complex z is
dL/dRe(z) + i dL/dIm(z). So real_grad is complex(dOut, 0), imag_grad
complex(0, dOut), complex_grad splits dOut into (Re, Im), and conj,
as_complex and as_real are their own (each other's) grad ops.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

#: Paddle's complex type of each real precision, and back.
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def complex_dtype(real: np.dtype, op: str) -> np.dtype:
    """complex64 for float32, complex128 for float64 (Paddle has no others)."""
    try:
        return _COMPLEX_OF[np.dtype(real)]
    except KeyError:
        raise ExecutionError(f"{op}: needs a float32 or float64 input, got {np.dtype(real)}") from None


def real_dtype(cplx: np.dtype, op: str) -> np.dtype:
    """float32 for complex64, float64 for complex128."""
    try:
        return _REAL_OF[np.dtype(cplx)]
    except KeyError:
        raise ExecutionError(f"{op}: needs a complex64 or complex128 input, got {np.dtype(cplx)}") from None


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _cx(rng: np.random.Generator, shape) -> np.ndarray:
    """A complex128 sample input."""
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


# --------------------------------------------------------------------------
# complex(X, Y) = X + iY, with NumPy broadcasting
# --------------------------------------------------------------------------
def _complex(c: Call):
    x, y = _x(c), _x(c, "Y")
    if x.dtype != y.dtype:
        raise ExecutionError(f"complex: X is {x.dtype} and Y is {y.dtype}; they must match")
    try:
        out = np.empty(np.broadcast_shapes(x.shape, y.shape), complex_dtype(x.dtype, "complex"))
    except ValueError:
        raise ExecutionError(f"complex: X{list(x.shape)} and Y{list(y.shape)} do not broadcast") from None
    out.real, out.imag = x, y
    return {"Out": out}


def _complex_grad(c: Call):
    x, y, g = _x(c), _x(c, "Y"), _x(c, "Out@GRAD")
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = unbroadcast(g.real, x.shape).astype(x.dtype)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = unbroadcast(g.imag, y.shape).astype(y.dtype)
    return res


register(paddle_opdef(
    "complex", _complex, {"complex_grad": _complex_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))], "Y": [rng.standard_normal((2, 3))]}),
        Sample({"X": [rng.standard_normal((4, 1, 3))], "Y": [rng.standard_normal((2, 3))]},
               note="broadcast"),
        Sample({"X": [rng.standard_normal(())], "Y": [rng.standard_normal((3,))]}, note="0-D")],
    doc="Out = X + iY (complex64 from float32, complex128 from float64), broadcasting"))


# --------------------------------------------------------------------------
# real / imag / angle: complex -> real
# --------------------------------------------------------------------------
def _real(c: Call):
    x = _x(c)
    return {"Out": np.real(x).astype(real_dtype(x.dtype, "real"))}


def _imag(c: Call):
    x = _x(c)
    return {"Out": np.imag(x).astype(real_dtype(x.dtype, "imag"))}


def _real_grad(c: Call):
    g = _x(c, "Out@GRAD")
    return {"X@GRAD": g.astype(complex_dtype(g.dtype, "real_grad"))}


def _imag_grad(c: Call):
    g = _x(c, "Out@GRAD")
    out = np.zeros(g.shape, complex_dtype(g.dtype, "imag_grad"))
    out.imag = g
    return {"X@GRAD": out}


register(paddle_opdef(
    "real", _real, {"real_grad": _real_grad}, samples=lambda rng: [
        Sample({"X": [_cx(rng, (2, 3))]}), Sample({"X": [_cx(rng, ())]}, note="0-D")],
    doc="Out = Re(X) (float32 from complex64, float64 from complex128)"))
register(paddle_opdef(
    "imag", _imag, {"imag_grad": _imag_grad}, samples=lambda rng: [
        Sample({"X": [_cx(rng, (2, 3))]}), Sample({"X": [_cx(rng, ())]}, note="0-D")],
    doc="Out = Im(X) (float32 from complex64, float64 from complex128)"))


def _angle(c: Call):
    x = _x(c)
    if x.dtype.kind == "c":
        return {"Out": np.angle(x).astype(real_dtype(x.dtype, "angle"))}
    if x.dtype.kind != "f":
        raise ExecutionError(f"angle: needs a float or complex input, got {x.dtype}")
    # Paddle: pi where x < 0, 0 elsewhere (-0 included), NaN stays NaN
    out = np.where(x < 0, np.pi, 0.0).astype(x.dtype)
    return {"Out": np.where(np.isnan(x), x, out)}


def _angle_grad(c: Call):
    x, g = _x(c), _x(c, "Out@GRAD")
    if x.dtype.kind != "c":
        return {"X@GRAD": np.zeros(x.shape, x.dtype)}
    r2 = x.real * x.real + x.imag * x.imag
    zero = r2 == 0
    safe = np.where(zero, 1, r2)
    dx = np.empty(x.shape, x.dtype)
    dx.real = np.where(zero, 0, -g * x.imag / safe)
    dx.imag = np.where(zero, 0, g * x.real / safe)
    return {"X@GRAD": dx}


register(paddle_opdef(
    "angle", _angle, {"angle_grad": _angle_grad}, samples=lambda rng: [
        Sample({"X": [_cx(rng, (2, 3))]}),
        Sample({"X": [_cx(rng, ())]}, note="0-D"),
        Sample({"X": [np.array([[-1.5, 0.3, 2.0], [0.7, -0.2, -3.0]])]}, note="real")],
    doc="Out = arg(X) in (-pi, pi]; for real X, pi where X < 0 and 0 elsewhere (grad 0)"))


# --------------------------------------------------------------------------
# conj (its own grad op), as_complex <-> as_real (each other's grad ops)
# --------------------------------------------------------------------------
def _conj(c: Call):
    x = _x(c)
    return {"Out": np.conj(x) if x.dtype.kind == "c" else x.copy()}


register(paddle_opdef(
    "conj", _conj, samples=lambda rng: [
        Sample({"X": [_cx(rng, (2, 3))]}),
        Sample({"X": [_cx(rng, ())]}, note="0-D"),
        Sample({"X": [rng.standard_normal((3, 2))]}, note="real")],
    doc="Out = conj(X); a real or integer X is copied. Its grad op is conj of Out@GRAD"))


def _as_complex(c: Call):
    x = _x(c)
    if x.ndim < 1 or x.shape[-1] != 2:
        raise ExecutionError(f"as_complex: X's last dim must be 2, got shape {list(x.shape)}")
    out = np.empty(x.shape[:-1], complex_dtype(x.dtype, "as_complex"))
    out.real, out.imag = x[..., 0], x[..., 1]
    return {"Out": out}


def _as_real(c: Call):
    x = _x(c)
    out = np.empty(x.shape + (2,), real_dtype(x.dtype, "as_real"))
    out[..., 0], out[..., 1] = x.real, x.imag
    return {"Out": out}


# Each is the other's grad op: registering as_complex implies as_real as its
# grad op type; as_real's own declaration then takes that entry's place.
register(paddle_opdef(
    "as_complex", _as_complex, {"as_real": _as_real}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((3, 2))]}),
        Sample({"X": [rng.standard_normal((2, 2, 2))]}),
        Sample({"X": [rng.standard_normal((2,))]}, note="0-D out")],
    doc="Out[...] = X[..., 0] + i X[..., 1]; its grad op is as_real"))
register(paddle_opdef(
    "as_real", _as_real, {"as_complex": _as_complex}, samples=lambda rng: [
        Sample({"X": [_cx(rng, (3,))]}),
        Sample({"X": [_cx(rng, (2, 3))]}),
        Sample({"X": [_cx(rng, ())]}, note="0-D")],
    doc="Out[..., 0] = Re(X), Out[..., 1] = Im(X); its grad op is as_complex"))
