"""eig: eigenvalues and eigenvectors of general square matrices, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .decompositions import matrices
from ..opcheck import PhaseSample
from ..paddle_table import paddle_opdef
from ..registry import Call, register


def _t(a: np.ndarray) -> np.ndarray:
    """The matrix transpose of a stack of matrices."""
    return np.swapaxes(a, -1, -2)


# --------------------------------------------------------------------------
# eig
# --------------------------------------------------------------------------
_COMPLEX_OF = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
               np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}


def _eig_input(c: Call) -> np.ndarray:
    x = np.asarray(c.x("X"))
    if x.dtype not in _COMPLEX_OF:
        raise ExecutionError(f"op eig: Paddle's CPU kernel takes float32, float64, complex64 or complex128, "
                             f"X is {x.dtype}")
    matrices(c, x, square=True)
    return x


def _eig(c: Call):
    x = _eig_input(c)
    if not np.all(np.isfinite(x)):
        raise ExecutionError("op eig: X holds NaN or Inf (LAPACK geev cannot decompose it)")
    ct = _COMPLEX_OF[x.dtype]
    n = x.shape[-1]
    flat = x.reshape((-1, n, n))
    w = np.empty(flat.shape[:2], ct)
    v = np.empty(flat.shape, ct)
    try:
        # geev in x's precision, one matrix at a time as Paddle's kernel calls it (numpy's batched
        # call picks other signs for some eigenvectors)
        for i, m in enumerate(flat):
            w[i], v[i] = np.linalg.eig(m)
    except np.linalg.LinAlgError:
        raise ExecutionError("op eig: the eigenvalue iteration (LAPACK geev) did not converge") from None
    return {"Eigenvalues": w.reshape(x.shape[:-1]), "Eigenvectors": v.reshape(x.shape)}


def _eig_grad(c: Call):
    """Paddle's eig_grad (ComputeBackwardForComplexInput), L the eigenvalues and V the eigenvectors:
    X@GRAD = V^-H (diag(gL) + (V^H gV - V^H V diag(Re diag(V^H gV))) / E) V^H, with
    E[i, j] = conj(L_j) - conj(L_i) off the diagonal. X@GRAD is complex, as Paddle's kernel
    allocates it, also for a real X."""
    lam = np.asarray(c.x("Eigenvalues")).astype(np.complex128)
    v = np.asarray(c.x("Eigenvectors")).astype(np.complex128)
    ct = np.asarray(c.x("Eigenvectors")).dtype
    gl = c.x("Eigenvalues@GRAD")
    gv = c.x("Eigenvectors@GRAD")
    gl = np.zeros(lam.shape, np.complex128) if gl is None else np.asarray(gl).astype(np.complex128)
    gv = np.zeros(v.shape, np.complex128) if gv is None else np.asarray(gv).astype(np.complex128)
    n = v.shape[-1]
    vh = np.conj(_t(v))
    lc = np.conj(lam)
    e = lc[..., None, :] - lc[..., :, None]
    vhgv = vh @ gv
    d = np.real(np.diagonal(vhgv, axis1=-2, axis2=-1))
    res = vhgv - vh @ (v * d[..., None, :])
    off = ~np.eye(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.where(off, res / np.where(off, e, 1.0), 0.0)
    res = res + gl[..., :, None] * np.eye(n)
    try:
        dx = np.linalg.solve(vh, res @ vh)
    except np.linalg.LinAlgError:
        raise ExecutionError("op eig_grad: the eigenvectors of X are linearly dependent "
                             "(X is not diagonalizable); its gradient is not defined") from None
    return {"X@GRAD": dx.astype(ct)}


def _eig_samples(rng):
    """Complex X only: for a real X Paddle's kernel also gives a complex X@GRAD, which its executor
    (and pybackward's interpreter) casts to X's real dtype - the real part. Real X is checked by
    tests/ops/test_index_elementwise_eig_pyramid_hash.py (finite differences, and Paddle's values through a program)."""
    def c(*shape):
        return 0.6 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) + np.eye(shape[-1])

    return [PhaseSample({"X": [c(3, 3)]}, phase_invariant=("Eigenvectors",), note="complex X"),
            PhaseSample({"X": [c(2, 4, 4)]}, phase_invariant=("Eigenvectors",), note="batch"),
            PhaseSample({"X": [np.array([[2.5 - 0.5j]])]}, phase_invariant=("Eigenvectors",), note="1x1")]


register(paddle_opdef("eig", _eig, {"eig_grad": _eig_grad}, samples=_eig_samples,
                      doc="Eigenvalues, Eigenvectors = LAPACK geev of X (complex, eigenvectors of unit norm with "
                          "their largest component real); batched"))
