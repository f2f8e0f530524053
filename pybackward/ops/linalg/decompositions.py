"""Matrix decompositions: cholesky, eigh, eigvalsh, qr, svd, svdvals, with
their grads as Paddle 3.3.1's CPU grad kernels compute them.

Matrices carry leading batch dims (`[..., M, N]`). cholesky reads the lower
triangle of X and eigh / eigvalsh the triangle UPLO names, as Paddle's CPU
kernels (LAPACK / Eigen) do; their gradients are Paddle's, which are
symmetric (the derivative along symmetric perturbations of X), so their
samples are checked with `Sample.symmetric` (see opcheck.check_op_grad).
Real float32 / float64 only: complex inputs are refused.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _as(a, like: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(like.dtype, copy=False)


def _real_float(c: Call, a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: pybackward runs it for float32 / float64 only, "
                             f"the input is {a.dtype}")
    return a


def matrices(c: Call, a: np.ndarray, what: str = "X", square: bool = False) -> None:
    """Refuse an `a` that is not a (batch of) matrices (square ones if `square`)."""
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        raise ExecutionError(f"op {c.op_type}: {what} must be a (batch of) {'square ' if square else ''}"
                             f"matrices, it has shape {list(a.shape)}")


def grad_or_zeros(c: Call, slot: str, like: np.ndarray) -> np.ndarray:
    """An output gradient, zeros where the program gives none."""
    g = c.x(slot)
    return np.zeros(like.shape) if g is None else np.asarray(g, dtype=np.float64)


def _from_triangle(x: np.ndarray, lower: bool) -> np.ndarray:
    """The symmetric matrix whose `lower` (or upper) triangle is x's."""
    t = np.tril(x) if lower else np.triu(x)
    return t + _t(np.tril(x, -1) if lower else np.triu(x, 1))


def _spd(rng, shape):
    """Symmetric positive definite matrices with well separated eigenvalues."""
    n = shape[-1]
    q, _ = np.linalg.qr(rng.standard_normal(shape))
    w = np.broadcast_to(np.linspace(1.0, 1.0 + 1.3 * n, n), shape[:-1])
    a = (q * w[..., None, :]) @ _t(q)
    return 0.5 * (a + _t(a))   # exactly symmetric


def _sym(rng, shape):
    """Symmetric matrices with well separated eigenvalues (some negative)."""
    n = shape[-1]
    q, _ = np.linalg.qr(rng.standard_normal(shape))
    w = np.broadcast_to(np.linspace(-1.5, -1.5 + 1.1 * n, n), shape[:-1])
    a = (q * w[..., None, :]) @ _t(q)
    return 0.5 * (a + _t(a))   # exactly symmetric


# --------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------
def _cholesky(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x, square=True)
    try:
        lo = np.linalg.cholesky(_from_triangle(x, lower=True).astype(np.float64))
    except np.linalg.LinAlgError:
        raise ExecutionError("op cholesky: the input is not positive definite "
                             "(Cholesky decomposition failed)") from None
    return {"Out": _as(_t(lo) if c.attr("upper", False) else lo, x)}


def _cholesky_grad(c: Call):
    out = np.asarray(c.x("Out"))
    if not c.wants("X@GRAD"):
        return {}
    g = grad_or_zeros(c, "Out@GRAD", out)
    lo, glo = (out.astype(np.float64), g) if not c.attr("upper", False) else (_t(out), _t(g))
    n = lo.shape[-1]
    # Murray (2016): phi = tril(L^T dL) with its diagonal halved; dX = sym(L^-T phi L^-1)
    phi = np.tril(_t(lo) @ glo) * (1 - 0.5 * np.eye(n))
    linv = np.linalg.solve(lo, np.broadcast_to(np.eye(n), lo.shape))
    dx = _t(linv) @ phi @ linv
    return {"X@GRAD": _as(0.5 * (dx + _t(dx)), out)}


def _cholesky_samples(rng):
    return [Sample({"X": [_spd(rng, (3, 3))]}, {"upper": False}, symmetric=("X",)),
            Sample({"X": [_spd(rng, (3, 3))]}, {"upper": True}, symmetric=("X",), note="upper"),
            Sample({"X": [_spd(rng, (2, 4, 4))]}, {"upper": False}, symmetric=("X",), note="batch"),
            Sample({"X": [_spd(rng, (2, 1, 3, 3))]}, {"upper": True}, symmetric=("X",),
                   note="2 batch dims, upper"),
            Sample({"X": [_spd(rng, (1, 1))]}, {"upper": False}, symmetric=("X",), note="1x1")]


register(paddle_opdef("cholesky", _cholesky, {"cholesky_grad": _cholesky_grad}, samples=_cholesky_samples,
                      attrs_handled=("upper",),
                      doc="Out = L with X = L L^T, from X's lower triangle (upper: Out = L^T); batched"))


# --------------------------------------------------------------------------
# eigh, eigvalsh
# --------------------------------------------------------------------------
def _uplo(c: Call) -> bool:
    """True for the lower triangle."""
    u = c.attr("UPLO", "L")
    if u not in ("L", "U"):
        raise c.unsupported("UPLO", u, "'L' or 'U'")
    return u == "L"


def _eigh_raw(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x, square=True)
    try:
        w, v = np.linalg.eigh(_from_triangle(x, _uplo(c)).astype(np.float64))
    except np.linalg.LinAlgError:
        raise ExecutionError(f"op {c.op_type}: the eigenvalue iteration did not converge") from None
    return x, w, v


def _eigh(c: Call):
    x, w, v = _eigh_raw(c)
    return {"Eigenvalues": _as(w, x), "Eigenvectors": _as(v, x)}


def _eigh_grad(c: Call):
    w, v = np.asarray(c.x("Eigenvalues")), np.asarray(c.x("Eigenvectors"))
    if not c.wants("X@GRAD"):
        return {}
    gw = grad_or_zeros(c, "Eigenvalues@GRAD", w)
    gv = grad_or_zeros(c, "Eigenvectors@GRAD", v)
    v64 = v.astype(np.float64)
    r = _t(v64) @ gv
    r = 0.5 * (r - _t(r))
    diff = w[..., None, :].astype(np.float64) - w[..., :, None]   # w_j - w_i
    n = w.shape[-1]
    eye = np.eye(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(eye, 0.0, r / np.where(eye, 1.0, diff))
    r = r + gw[..., None] * np.eye(n)
    return {"X@GRAD": _as(v64 @ r @ _t(v64), v)}


def _eigh_samples(rng):
    return [Sample({"X": [_sym(rng, (3, 3))]}, {"UPLO": "L"}, symmetric=("X",)),
            Sample({"X": [_sym(rng, (3, 3))]}, {"UPLO": "U"}, symmetric=("X",), note="UPLO=U"),
            Sample({"X": [_sym(rng, (2, 4, 4))]}, {"UPLO": "L"}, symmetric=("X",), note="batch"),
            Sample({"X": [_sym(rng, (2, 2, 2, 2))]}, {"UPLO": "U"}, symmetric=("X",), note="2 batch dims")]


register(paddle_opdef("eigh", _eigh, {"eigh_grad": _eigh_grad}, samples=_eigh_samples,
                      attrs_handled=("UPLO",),
                      doc="Eigenvalues (ascending), Eigenvectors of the symmetric matrix given by X's "
                          "UPLO triangle; batched"))


def _eigvalsh_grad(c: Call):
    v = np.asarray(c.x("Eigenvectors"))
    if not c.wants("X@GRAD"):
        return {}
    gw = grad_or_zeros(c, "Eigenvalues@GRAD", v[..., 0])
    v64 = v.astype(np.float64)
    return {"X@GRAD": _as((v64 * gw[..., None, :]) @ _t(v64), v)}


def _eigvalsh_samples(rng):
    return [Sample({"X": [_sym(rng, (3, 3))]}, {"UPLO": "L", "is_test": False}, symmetric=("X",)),
            Sample({"X": [_sym(rng, (2, 3, 3))]}, {"UPLO": "U", "is_test": False}, symmetric=("X",),
                   note="batch, UPLO=U")]


# Eigenvectors is eigvalsh's helper output (Python's paddle.linalg.eigvalsh drops
# it): Paddle's eigvalsh_grad reads it but no gradient flows back from it.
register(paddle_opdef("eigvalsh", _eigh, {"eigvalsh_grad": _eigvalsh_grad}, samples=_eigvalsh_samples,
                      attrs_handled=("UPLO",), intermediate_outputs=("Eigenvectors",),
                      doc="as eigh; the gradient flows from Eigenvalues only"))


# --------------------------------------------------------------------------
# qr
# --------------------------------------------------------------------------
def _qr_mode(c: Call) -> str:
    mode = c.attr("mode", "reduced")
    if mode not in ("reduced", "complete", "r"):
        raise c.unsupported("mode", mode, "'reduced', 'complete' or 'r'")
    return mode


def _qr(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x)
    mode = _qr_mode(c)
    q, r = np.linalg.qr(x.astype(np.float64), mode="complete" if mode == "complete" else "reduced")
    if mode == "r":   # Paddle computes R only and leaves Q unset; an empty Q lets
        # qr_grad reach its kernel and say plainly that there is no derivative
        return {"Q": np.zeros((0,), x.dtype), "R": _as(r, x)}
    return {"Q": _as(q, x), "R": _as(r, x)}


def _qr_grad_tall(q, r, gq, gr):
    """dA for A = Q R with Q [m, k], R [k, k] (Roberts & Roberts 2020)."""
    m = r @ _t(gr) - _t(gq) @ q
    m = np.tril(m) + _t(np.tril(m, -1))
    rhs = gq + q @ m
    # dA R^T = rhs
    return _t(np.linalg.solve(r, _t(rhs)))


def _qr_grad(c: Call):
    x, q, r = (np.asarray(c.x(s)) for s in ("X", "Q", "R"))
    if not c.wants("X@GRAD"):
        return {}
    mode = _qr_mode(c)
    m, n = x.shape[-2:]
    if mode == "r":
        raise ExecutionError("op qr_grad: Paddle has no derivative of qr with mode='r'")
    if mode == "complete" and m > n:
        raise ExecutionError(f"op qr_grad: Paddle has no derivative of qr with mode='complete' and "
                             f"{m} > {n} rows (the extra columns of Q are not unique)")
    gq, gr = grad_or_zeros(c, "Q@GRAD", q), grad_or_zeros(c, "R@GRAD", r)
    q, r = q.astype(np.float64), r.astype(np.float64)
    if m >= n:
        dx = _qr_grad_tall(q, r, gq, gr)
    else:   # A = [X | Y], R = [U | V]
        y, u = x[..., m:].astype(np.float64), r[..., :m]
        gu, gv = gr[..., :m], gr[..., m:]
        dxl = _qr_grad_tall(q, u, gq + y @ _t(gv), gu)
        dx = np.concatenate([dxl, q @ gv], axis=-1)
    return {"X@GRAD": _as(dx, x)}


def _qr_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((4, 3))]}, {"mode": "reduced"}),
            Sample({"X": [r((3, 3))]}, {"mode": "complete"}, note="square complete"),
            Sample({"X": [r((2, 3, 5))]}, {"mode": "reduced"}, note="wide, batch"),
            Sample({"X": [r((2, 5, 3))]}, {"mode": "reduced"}, note="tall, batch"),
            Sample({"X": [r((3, 4))]}, {"mode": "complete"}, note="wide complete")]


register(paddle_opdef("qr", _qr, {"qr_grad": _qr_grad}, samples=_qr_samples, attrs_handled=("mode",),
                      doc="X = Q R (mode reduced: Q [M, K]; complete: Q [M, M]; r: R only, Q empty); batched"))


# --------------------------------------------------------------------------
# svd, svdvals
# --------------------------------------------------------------------------
def _svd(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x)
    try:
        u, s, vh = np.linalg.svd(x.astype(np.float64), full_matrices=bool(c.attr("full_matrices", False)))
    except np.linalg.LinAlgError:
        raise ExecutionError("op svd: the SVD did not converge") from None
    return {"U": _as(u, x), "S": _as(s, x), "VH": _as(vh, x)}


def _svd_grad_raw(u, s, vh, gu, gs, gvh):
    """Paddle's SvdGradKernel for U [m, k], S [k], VH [k, n]; gu / gvh None when absent."""
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    dx = (u * gs[..., None, :]) @ vh if gs is not None else 0.0
    s2 = s * s
    with np.errstate(divide="ignore"):
        f = 1.0 / (s2[..., None, :] - s2[..., :, None] + np.diag(np.full(k, np.inf)))
    if gu is not None:
        ut = (_t(u) @ gu - _t(gu) @ u) * f * s[..., None, :]
        term = u @ ut
        if m > k:
            term = term + (gu - u @ (_t(u) @ gu)) / s[..., None, :]
        dx = dx + term @ vh
    if gvh is not None:
        vt = (((vh @ _t(gvh) - gvh @ _t(vh)) * f) @ vh) * s[..., :, None]
        if n > k:
            vt = vt + (gvh - (gvh @ _t(vh)) @ vh) / s[..., :, None]
        dx = dx + u @ vt
    return dx


def _svd_grad(c: Call):
    x, u, s, vh = (np.asarray(c.x(k)) for k in ("X", "U", "S", "VH"))
    if not c.wants("X@GRAD"):
        return {}
    k = s.shape[-1]
    u64, vh64, s64 = u[..., :k].astype(np.float64), vh[..., :k, :].astype(np.float64), s.astype(np.float64)
    gu = None if c.x("U@GRAD") is None else np.asarray(c.x("U@GRAD"), np.float64)[..., :k]
    gvh = None if c.x("VH@GRAD") is None else np.asarray(c.x("VH@GRAD"), np.float64)[..., :k, :]
    gs = None if c.x("S@GRAD") is None else np.asarray(c.x("S@GRAD"), np.float64)
    dx = _svd_grad_raw(u64, s64, vh64, gu, gs, gvh)
    return {"X@GRAD": _as(np.broadcast_to(dx, x.shape), x)}


def _separated(rng, shape):
    """Matrices with well separated singular values (2, 3, 4, ...)."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (m, k)))
    v, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (n, k)))
    return (u * np.linspace(2.0, 1.0 + k, k)) @ _t(v)


def _svd_samples(rng):
    return [Sample({"X": [_separated(rng, (4, 3))]}, {"full_matrices": False}),
            Sample({"X": [_separated(rng, (3, 5))]}, {"full_matrices": False}, note="wide"),
            Sample({"X": [_separated(rng, (2, 4, 4))]}, {"full_matrices": False}, note="batch square"),
            Sample({"X": [_separated(rng, (3, 3))]}, {"full_matrices": True}, note="full, square"),
            Sample({"X": [_separated(rng, (2, 2, 3))]}, {"full_matrices": False}, note="wide batch")]


register(paddle_opdef("svd", _svd, {"svd_grad": _svd_grad}, samples=_svd_samples,
                      attrs_handled=("full_matrices",),
                      doc="X = U diag(S) VH (S descending; full_matrices: U [M, M], VH [N, N]); batched"))


def _svdvals(c: Call):
    x = _real_float(c, c.x("x"))
    matrices(c, x)
    try:
        return {"s": _as(np.linalg.svd(x.astype(np.float64), compute_uv=False), x)}
    except np.linalg.LinAlgError:
        raise ExecutionError("op svdvals: the SVD did not converge") from None


def _svdvals_grad(c: Call):
    x = np.asarray(c.x("x"))
    if not c.wants("x@GRAD"):
        return {}
    u, s, vh = np.linalg.svd(x.astype(np.float64), full_matrices=False)
    gs = grad_or_zeros(c, "s@GRAD", s)
    return {"x@GRAD": _as((u * gs[..., None, :]) @ vh, x)}


def _svdvals_samples(rng):
    return [Sample({"x": [_separated(rng, (4, 3))]}),
            Sample({"x": [_separated(rng, (2, 3, 5))]}, note="wide batch")]


register(paddle_opdef("svdvals", _svdvals, {"svdvals_grad": _svdvals_grad}, samples=_svdvals_samples,
                      doc="s = the singular values of x (descending); batched"))


# --------------------------------------------------------------------------
# eigvals (no gradient; complex output)
# --------------------------------------------------------------------------
def _eigvals(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x, square=True)
    try:
        # LAPACK geev in x's precision on X^T (Paddle hands its row-major X to the
        # column-major LAPACK): same values, and the order Paddle's come in
        w = np.linalg.eigvals(_t(x))
    except np.linalg.LinAlgError:
        raise ExecutionError("op eigvals: the eigenvalue iteration did not converge") from None
    return {"Out": w.astype(np.complex64 if x.dtype == np.float32 else np.complex128)}


def _eigvals_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [_sym(rng, (3, 3))]}, note="real eigenvalues"),
            Sample({"X": [np.array([[0.0, -2.0, 0.5], [2.0, 0.0, 0.1], [0.0, 0.3, 1.0]])]},
                   note="a complex pair"),
            Sample({"X": [r((2, 4, 4))]}, note="batch")]


register(paddle_opdef("eigvals", _eigvals, samples=_eigvals_samples,
                      doc="Out = the eigenvalues of X (complex64 / complex128, in the order LAPACK geev gives "
                          "them for X^T, as Paddle's); batched"))
