"""The LU family (lu, lu_unpack, lu_solve), fill_diagonal / fill_diagonal_tensor, matrix_rank and
lstsq.

LU follows LAPACK's getrf, as Paddle's CPU kernel does: partial pivoting
(the first largest |value| of the column), the factors packed in one matrix
(unit-lower L below the diagonal, U on and above), 1-based int32 Pivots
(row i was swapped with row Pivots[i] - 1) and int32 Infos (0, or k + 1 for
the first zero pivot U[k, k]). The gradients are the derivatives of the
factorisation (as Paddle's lu_grad computes them), for square, wide and tall
matrices. Real float32 / float64 only.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .decompositions import grad_or_zeros, matrices
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _as(a, like: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(like.dtype, copy=False)


def _real_float(c: Call, a, what: str = "X") -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: pybackward runs it for float32 / float64 only, "
                             f"{what} is {a.dtype}")
    return a


# --------------------------------------------------------------------------
# LU helpers
# --------------------------------------------------------------------------
def _getrf(a: np.ndarray):
    """LAPACK getrf on a batch: (packed LU, 1-based int32 pivots, int32 infos)."""
    lu = np.array(a, dtype=np.float64)
    m, n = lu.shape[-2:]
    k = min(m, n)
    flat = lu.reshape(-1, m, n)
    b = np.arange(flat.shape[0])
    piv = np.zeros((flat.shape[0], k), np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    for j in range(k):
        p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        rows_j, rows_p = flat[b, j].copy(), flat[b, p].copy()
        flat[b, j], flat[b, p] = rows_p, rows_j
        d = flat[:, j, j]
        zero = d == 0
        info = np.where((info == 0) & zero, j + 1, info)
        safe = np.where(zero, 1.0, d)
        if j + 1 < m:
            flat[:, j + 1:, j] = np.where(zero[:, None], flat[:, j + 1:, j], flat[:, j + 1:, j] / safe[:, None])
            flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j:j + 1] * flat[:, j:j + 1, j + 1:]
    batch = a.shape[:-2]
    return lu, piv.reshape(batch + (k,)), info.reshape(batch)


def _perm(piv: np.ndarray, m: int) -> np.ndarray:
    """The row order getrf's swaps give: (P^T A)[i] = A[perm[i]]."""
    flat = piv.reshape(-1, piv.shape[-1]).astype(np.int64) - 1
    perm = np.broadcast_to(np.arange(m), (flat.shape[0], m)).copy()
    b = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        pj, pp = perm[b, j].copy(), perm[b, flat[:, j]].copy()
        perm[b, j], perm[b, flat[:, j]] = pp, pj
    return perm.reshape(piv.shape[:-1] + (m,))


def _pmat(piv: np.ndarray, m: int) -> np.ndarray:
    """P with A = P L U."""
    perm = _perm(piv, m)
    return (perm[..., None, :] == np.arange(m)[:, None]).astype(np.float64)


def _unpack(lu: np.ndarray):
    """(L [.., m, k] unit lower, U [.., k, n] upper) of a packed LU."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    lo = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    return lo, np.triu(lu[..., :k, :])


def _check_pivots(c: Call, piv, lu: np.ndarray) -> np.ndarray:
    piv = np.asarray(piv)
    m, n = lu.shape[-2:]
    if piv.dtype.kind not in "iu" or piv.shape != lu.shape[:-2] + (min(m, n),) or \
            (piv.size and (piv.min() < 1 or piv.max() > m)):
        raise ExecutionError(f"op {c.op_type}: Pivots must be int of shape {list(lu.shape[:-2]) + [min(m, n)]} "
                             f"with values in [1, {m}]; got {piv.dtype} {list(piv.shape)}")
    return piv


def _solve_tri(a, b, lower: bool, unit: bool = False):
    """a^-1 b for triangular a (a's other triangle ignored)."""
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - t * np.eye(t.shape[-1]) + np.eye(t.shape[-1])
    return np.linalg.solve(t, b)


# --------------------------------------------------------------------------
# lu
# --------------------------------------------------------------------------
def _lu(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x)
    if not c.attr("pivots", True):
        raise c.unsupported("pivots", False, "Paddle's CPU lu always pivots")
    lu, piv, info = _getrf(x)
    return {"Out": _as(lu, x), "Pivots": piv, "Infos": info}


def _lu_grad_raw(lo, up, pmat, g):
    """dA for A = P L U (L [m, k], U [k, n]) from the packed factor's gradient g."""
    m, n = g.shape[-2:]
    k = min(m, n)
    l1, u1 = lo[..., :k, :k], up[..., :k, :k]
    gl1, gu1 = np.tril(g[..., :k, :k], -1), np.triu(g[..., :k, :k])
    phi = np.tril(_t(l1) @ gl1, -1) + np.triu(gu1 @ _t(u1))
    if m <= n:
        psi = np.zeros(g.shape)
        if k < n:
            u2, gu2 = up[..., :, k:], g[..., :k, k:]
            phi = phi - np.tril(gu2 @ _t(u2), -1)
            psi[..., :, k:] = gu2
        psi[..., :, :k] = _t(_solve_tri(u1, _t(phi), lower=False))      # phi U1^-T
        return pmat @ _solve_tri(_t(l1), psi, lower=False, unit=True)    # P L1^-T psi
    l2, gl2 = lo[..., k:, :], g[..., k:, :k]
    phi = phi - np.triu(_t(l2) @ gl2)
    psi = np.concatenate([_solve_tri(_t(l1), phi, lower=False, unit=True), gl2], axis=-2)
    return pmat @ _t(_solve_tri(u1, _t(psi), lower=False))                # P psi U1^-T


def _lu_grad(c: Call):
    x, out, piv = np.asarray(c.x("X")), np.asarray(c.x("Out")), np.asarray(c.x("Pivots"))
    if not c.wants("X@GRAD"):
        return {}
    g = grad_or_zeros(c, "Out@GRAD", out)
    lo, up = _unpack(out.astype(np.float64))
    dx = _lu_grad_raw(lo, up, _pmat(piv, x.shape[-2]), g)
    return {"X@GRAD": _as(dx, x)}


def _lu_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 3))]}, {"pivots": True}, outputs={"Out": 1, "Pivots": 1, "Infos": 1}),
            Sample({"X": [r((2, 4, 4))]}, {"pivots": True}, note="batch"),
            Sample({"X": [r((3, 5))]}, {"pivots": True}, note="wide"),
            Sample({"X": [r((2, 5, 3))]}, {"pivots": True}, note="tall, batch")]


register(paddle_opdef("lu", _lu, {"lu_grad": _lu_grad}, samples=_lu_samples, attrs_handled=("pivots",),
                      doc="LAPACK getrf: Out = packed L\\U, Pivots (1-based int32), Infos (int32); batched"))


# --------------------------------------------------------------------------
# lu_unpack
# --------------------------------------------------------------------------
def _lu_unpack(c: Call):
    x = _real_float(c, c.x("X"))
    matrices(c, x)
    piv = _check_pivots(c, c.x("Pivots"), x)
    res = {}
    if c.attr("unpack_ludata", True):
        lo, up = _unpack(x)
        res["L"], res["U"] = _as(lo, x), _as(up, x)
    if c.attr("unpack_pivots", True):
        res["Pmat"] = _as(_pmat(piv, x.shape[-2]), x)
    return res


def _lu_unpack_grad(c: Call):
    x = np.asarray(c.x("X"))
    if not c.wants("X@GRAD"):
        return {}
    m, n = x.shape[-2:]
    k = min(m, n)
    dx = np.zeros(x.shape)
    if c.x("L@GRAD") is not None:
        dx[..., :, :k] += np.tril(np.asarray(c.x("L@GRAD"), np.float64), -1)
    if c.x("U@GRAD") is not None:
        dx[..., :k, :] += np.triu(np.asarray(c.x("U@GRAD"), np.float64))
    return {"X@GRAD": _as(dx, x)}


def _lu_unpack_samples(rng):
    out = []
    for shape, note in (((3, 3), ""), ((2, 4, 3), "tall batch"), ((3, 4), "wide")):
        lu, piv, _ = _getrf(rng.standard_normal(shape))
        out.append(Sample({"X": [lu], "Pivots": [piv]}, {"unpack_ludata": True, "unpack_pivots": True},
                          wrt=("X",), note=note))
    return out


register(paddle_opdef("lu_unpack", _lu_unpack, {"lu_unpack_grad": _lu_unpack_grad}, samples=_lu_unpack_samples,
                      attrs_handled=("unpack_ludata", "unpack_pivots"),
                      doc="Pmat, L (unit lower), U of a packed LU and its pivots (X = Pmat L U)"))


# --------------------------------------------------------------------------
# lu_solve
# --------------------------------------------------------------------------
def _lu_solve_trans(c: Call) -> bool:
    t = c.attr("trans", "N")
    if t not in ("N", "T", "C"):
        raise c.unsupported("trans", t, "'N', 'T' or 'C'")
    return t != "N"


def _lu_solve_operands(c: Call):
    b, lu = _real_float(c, c.x("b"), "b"), _real_float(c, c.x("lu"), "lu")
    matrices(c, lu, "lu", square=True)
    piv = _check_pivots(c, c.x("pivots"), lu)
    if b.ndim < 2 or b.shape[-2] != lu.shape[-1] or b.shape[:-2] != lu.shape[:-2]:
        raise ExecutionError(f"op lu_solve: b{list(b.shape)} must be [..., {lu.shape[-1]}, K] with lu's "
                             f"batch dims {list(lu.shape[:-2])}")
    lo, up = _unpack(lu.astype(np.float64))
    return b, lu, lo, up, _pmat(piv, lu.shape[-1])


def _lu_solve_raw(lo, up, pmat, b, trans):
    if trans:   # (P L U)^T x = b: x = P L^-T U^-T b
        return pmat @ _solve_tri(_t(lo), _solve_tri(_t(up), b, lower=True), lower=False, unit=True)
    return _solve_tri(up, _solve_tri(lo, _t(pmat) @ b, lower=True, unit=True), lower=False)


def _lu_solve(c: Call):
    b, lu, lo, up, pmat = _lu_solve_operands(c)
    try:
        return {"out": _as(_lu_solve_raw(lo, up, pmat, b.astype(np.float64), _lu_solve_trans(c)), b)}
    except np.linalg.LinAlgError:
        raise ExecutionError("op lu_solve: U is singular") from None


def _lu_solve_grad(c: Call):
    b, lu, lo, up, pmat = _lu_solve_operands(c)
    trans = _lu_solve_trans(c)
    out = np.asarray(c.x("out"), np.float64)
    g = grad_or_zeros(c, "out@GRAD", out)
    gb = _lu_solve_raw(lo, up, pmat, g, not trans)
    res = {}
    if c.wants("b@GRAD"):
        res["b@GRAD"] = _as(gb, b)
    if c.wants("lu@GRAD"):
        ga = -(gb @ _t(out)) if not trans else -(out @ _t(gb))   # the gradient of A = P L U
        gl = _t(pmat) @ ga @ _t(up)
        gu = _t(lo) @ _t(pmat) @ ga
        res["lu@GRAD"] = _as(np.tril(gl, -1) + np.triu(gu), lu)
    return res


def _lu_solve_samples(rng):
    out = []
    for shape, k, trans, note in (((3, 3), 2, "N", ""), ((2, 4, 4), 1, "N", "batch"),
                                  ((3, 3), 2, "T", "trans T"), ((2, 3, 3), 2, "C", "trans C batch")):
        a = rng.standard_normal(shape) + 2 * np.eye(shape[-1])
        lu, piv, _ = _getrf(a)
        out.append(Sample({"b": [rng.standard_normal(shape[:-1] + (k,))], "lu": [lu], "pivots": [piv]},
                          {"trans": trans}, wrt=("b", "lu"), note=note))
    return out


register(paddle_opdef("lu_solve", _lu_solve, {"lu_solve_grad": _lu_solve_grad}, samples=_lu_solve_samples,
                      attrs_handled=("trans",),
                      doc="out = A^-1 b (trans T/C: A^-T b) for A = P L U given by lu and pivots"))


# --------------------------------------------------------------------------
# fill_diagonal, fill_diagonal_tensor
# --------------------------------------------------------------------------
def _fill_diagonal_positions(c: Call, shape) -> np.ndarray:
    """Flat positions Paddle's fill_diagonal writes: every sum-of-strides step
    (the (i, i, ..., i) elements), shifted by offset within its row; without
    wrap only the first shape[1]^2 elements (2-D: the top square)."""
    if len(shape) < 2 or (len(shape) > 2 and len(set(shape)) != 1):
        raise ExecutionError(f"op {c.op_type}: X must be 2-D or have all dims equal, it has shape {list(shape)}")
    offset = int(c.attr("offset", 0))
    size = int(np.prod(shape))
    if not c.attr("wrap", False):
        size = min(size, shape[1] * shape[1])
    stride = int(sum(np.prod(shape[i + 1:]) for i in range(len(shape))))
    pos = np.arange(0, size, stride)
    col = pos % shape[1] + offset
    return pos[(col >= 0) & (col < shape[1])] + offset


def _fill_diagonal(c: Call):
    x = np.asarray(c.x("X"))
    out = x.copy()
    out.reshape(-1)[_fill_diagonal_positions(c, x.shape)] = c.attr("value", 0.0)
    return {"Out": out}


def _fill_diagonal_grad(c: Call):
    g = np.asarray(c.x("Out@GRAD"))
    if not c.wants("X@GRAD"):
        return {}
    dx = g.copy()
    dx.reshape(-1)[_fill_diagonal_positions(c, g.shape)] = 0
    return {"X@GRAD": dx}


def _fill_diagonal_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 3))]}, {"value": 2.5, "offset": 0, "wrap": False}),
            Sample({"X": [r((3, 4))]}, {"value": -1.0, "offset": 1, "wrap": False}, note="offset 1"),
            Sample({"X": [r((7, 3))]}, {"value": 0.5, "offset": 0, "wrap": True}, note="tall, wrap"),
            Sample({"X": [r((7, 3))]}, {"value": 0.5, "offset": -1, "wrap": False}, note="tall, offset -1"),
            Sample({"X": [r((2, 2, 2))]}, {"value": 3.0, "offset": 0, "wrap": False}, note="3-D cube")]


register(paddle_opdef("fill_diagonal", _fill_diagonal, {"fill_diagonal_grad": _fill_diagonal_grad},
                      samples=_fill_diagonal_samples, attrs_handled=("value", "offset", "wrap"),
                      doc="Out = X with its (offset) diagonal set to value (wrap: repeat down tall matrices)"))


def _diag_index(c: Call, shape):
    """(axes dim1, dim2 normalised, row indices, column indices) of the offset diagonal."""
    nd = len(shape)
    d1, d2, off = int(c.attr("dim1", 0)), int(c.attr("dim2", 1)), int(c.attr("offset", 0))
    if not (-nd <= d1 < nd and -nd <= d2 < nd) or d1 % nd == d2 % nd:
        raise ExecutionError(f"op {c.op_type}: dim1={d1}, dim2={d2} must be two different axes of rank {nd}")
    d1, d2 = d1 % nd, d2 % nd
    n1, n2 = shape[d1], shape[d2]
    length = max(0, min(n1, n2 - off) if off >= 0 else min(n1 + off, n2))
    rows = np.arange(length) + max(0, -off)
    return d1, d2, rows, rows - max(0, -off) + max(0, off)


def _fill_diagonal_tensor(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    d1, d2, rows, cols = _diag_index(c, x.shape)
    moved = np.moveaxis(x.copy(), (d1, d2), (-2, -1))
    want = moved.shape[:-2] + (len(rows),)
    if y.shape != want:
        raise ExecutionError(f"op fill_diagonal_tensor: Y must have shape {list(want)}, it has {list(y.shape)}")
    moved[..., rows, cols] = y
    return {"Out": np.moveaxis(moved, (-2, -1), (d1, d2))}


def _fill_diagonal_tensor_grad(c: Call):
    g = np.asarray(c.x("Out@GRAD"))
    if not c.wants("X@GRAD"):
        return {}
    d1, d2, rows, cols = _diag_index(c, g.shape)
    moved = np.moveaxis(g.copy(), (d1, d2), (-2, -1))
    moved[..., rows, cols] = 0
    return {"X@GRAD": np.moveaxis(moved, (-2, -1), (d1, d2))}


def _fill_diagonal_tensor_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 3))], "Y": [r(3)]}, {"offset": 0, "dim1": 0, "dim2": 1}),
            Sample({"X": [r((3, 4))], "Y": [r(3)]}, {"offset": 1, "dim1": 0, "dim2": 1}, note="offset 1"),
            Sample({"X": [r((4, 3))], "Y": [r(3)]}, {"offset": -1, "dim1": 0, "dim2": 1}, note="offset -1"),
            Sample({"X": [r((2, 3, 4))], "Y": [r((3, 2))]}, {"offset": 0, "dim1": 0, "dim2": 2},
                   note="3-D, dims 0 and 2"),
            Sample({"X": [r((2, 3, 3))], "Y": [r((2, 3))]}, {"offset": 0, "dim1": 1, "dim2": 2},
                   note="batch of matrices")]


register(paddle_opdef("fill_diagonal_tensor", _fill_diagonal_tensor,
                      {"fill_diagonal_tensor_grad": _fill_diagonal_tensor_grad},
                      samples=_fill_diagonal_tensor_samples, attrs_handled=("offset", "dim1", "dim2"),
                      doc="Out = X with its diagonal (offset, dim1, dim2) replaced by Y (Y gets no gradient)"))


# --------------------------------------------------------------------------
# matrix_rank, matrix_rank_atol_rtol (no gradient)
# --------------------------------------------------------------------------
def _singular_values(c: Call, x: np.ndarray, hermitian: bool) -> np.ndarray:
    """Singular values (|eigenvalues| of the lower triangle's symmetric
    matrix if hermitian), in x's dtype as Paddle's kernel computes them."""
    matrices(c, x)
    if hermitian:
        matrices(c, x, square=True)
        s = np.abs(np.linalg.eigvalsh(np.tril(x) + _t(np.tril(x, -1))))
    else:
        s = np.linalg.svd(x, compute_uv=False)
    return s.astype(x.dtype)


def _rank(s: np.ndarray, tol: np.ndarray) -> np.ndarray:
    return np.sum(s > np.asarray(tol)[..., None], axis=-1).astype(np.int64)


def _default_rtol(x: np.ndarray):
    return np.finfo(x.dtype).eps * max(x.shape[-2:])


def _matrix_rank(c: Call):
    x = _real_float(c, c.x("X"))
    hermitian = bool(c.attr("hermitian", False))
    s = _singular_values(c, x, hermitian)
    smax = s.max(axis=-1) if s.shape[-1] else np.zeros(s.shape[:-1], x.dtype)
    rtol = _default_rtol(x) if c.attr("use_default_tol", True) else 0.0
    atol = np.asarray(c.x("TolTensor"), x.dtype) if c.has("TolTensor") else \
        np.asarray(0.0 if c.attr("use_default_tol", True) else c.attr("tol", 0.0), x.dtype)
    return {"Out": _rank(s, np.maximum(atol, (rtol * smax).astype(x.dtype)))}


def _matrix_rank_samples(rng):
    r = rng.standard_normal
    low = r((4, 2)) @ r((2, 5))
    sym = r((4, 4))
    sym = sym + sym.T
    return [Sample({"X": [r((3, 4))]}, {"tol": 0.0, "hermitian": False, "use_default_tol": True}),
            Sample({"X": [low]}, {"tol": 0.0, "hermitian": False, "use_default_tol": True}, note="rank 2"),
            Sample({"X": [np.stack([low[:, :4], r((4, 4))])]}, {"tol": 0.5, "hermitian": False,
                                                                "use_default_tol": False}, note="tol, batch"),
            Sample({"X": [sym]}, {"tol": 0.0, "hermitian": True, "use_default_tol": True}, note="hermitian"),
            Sample({"X": [np.stack([low[:, :4], r((4, 4))])], "TolTensor": [np.array([0.1, 1.5])]},
                   {"tol": 0.0, "hermitian": False, "use_default_tol": False}, note="TolTensor")]


register(paddle_opdef("matrix_rank", _matrix_rank, samples=_matrix_rank_samples,
                      attrs_handled=("tol", "hermitian", "use_default_tol"),
                      doc="Out (int64) = #singular values > max(tol or TolTensor, eps * max(M, N) * s_max if "
                          "use_default_tol); hermitian: |eigenvalues| of the lower triangle"))


def _matrix_rank_atol_rtol(c: Call):
    x = _real_float(c, c.x("x"))
    s = _singular_values(c, x, bool(c.attr("hermitian", False)))
    smax = s.max(axis=-1) if s.shape[-1] else np.zeros(s.shape[:-1], x.dtype)
    atol = np.asarray(c.x("atol"), x.dtype)
    if c.has("rtol"):
        rel = np.asarray(c.x("rtol"), x.dtype) * smax
    else:   # Paddle: the default rtol only where atol is 0
        rel = np.where(atol == 0, _default_rtol(x) * smax, 0.0)
    return {"out": _rank(s, np.maximum(atol, rel).astype(x.dtype))}


def _matrix_rank_atol_rtol_samples(rng):
    r = rng.standard_normal
    low = np.stack([r((4, 2)) @ r((2, 4)), r((4, 4))])
    return [Sample({"x": [low], "atol": [np.array(0.0)]}, {"hermitian": False}, note="atol 0: default rtol"),
            Sample({"x": [low], "atol": [np.array([0.2, 1.0])], "rtol": [np.array([0.0, 0.3])]},
                   {"hermitian": False}, note="atol and rtol per matrix"),
            Sample({"x": [low[0] + low[0].T], "atol": [np.array(0.5)]}, {"hermitian": True}, note="hermitian")]


register(paddle_opdef("matrix_rank_atol_rtol", _matrix_rank_atol_rtol, samples=_matrix_rank_atol_rtol_samples,
                      attrs_handled=("hermitian",),
                      doc="out (int64) = #singular values > max(atol, rtol * s_max) (no rtol: "
                          "eps * max(M, N) where atol is 0, else 0)"))


# --------------------------------------------------------------------------
# lstsq (no gradient)
# --------------------------------------------------------------------------
_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq(c: Call):
    x, y = _real_float(c, c.x("X")), _real_float(c, c.x("Y"), "Y")
    matrices(c, x)
    matrices(c, y, "Y")
    driver = c.attr("driver", "gelsy")
    if driver not in _LSTSQ_DRIVERS:
        raise c.unsupported("driver", driver, "gels, gelsy, gelsd or gelss on CPU")
    if x.shape[:-2] != y.shape[:-2] or x.shape[-2] != y.shape[-2]:
        raise ExecutionError(f"op lstsq: X{list(x.shape)} and Y{list(y.shape)} must have the same batch "
                             "dims and rows")
    m, n = x.shape[-2:]
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    u, s, vh = np.linalg.svd(x64, full_matrices=False)
    rcond = float(c.attr("rcond", 0.0))
    cut = (np.finfo(x.dtype).eps if rcond < 0 else rcond) * s[..., :1]
    keep = s > cut if driver != "gels" else np.ones(s.shape, bool)
    if driver == "gels" and np.any(s[..., -1:] == 0):
        raise ExecutionError("op lstsq: driver gels needs a full-rank X")
    inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    sol = _t(vh) @ (inv[..., :, None] * (_t(u) @ y64))
    res = {"Solution": _as(sol, x)}
    rank = keep.sum(axis=-1).astype(np.int32)
    if driver != "gels":   # gels leaves Rank unset
        res["Rank"] = rank
    if driver in ("gelsd", "gelss"):   # the other drivers leave it unset, as Paddle's kernel does
        res["SingularValues"] = _as(s, x)
    # Paddle: residuals for tall X solved in full rank, except by gelsy; else an empty tensor
    if m > n and driver != "gelsy" and (driver == "gels" or np.all(rank == n)):
        res["Residuals"] = _as(np.sum((x64 @ sol - y64) ** 2, axis=-2), x)
    else:
        res["Residuals"] = np.zeros((0,), x.dtype)
    return res


def _lstsq_samples(rng):
    r = rng.standard_normal
    out = []
    for driver in _LSTSQ_DRIVERS:
        out.append(Sample({"X": [r((5, 3))], "Y": [r((5, 2))]}, {"rcond": 0.0, "driver": driver},
                          note=f"tall {driver}"))
    out.append(Sample({"X": [r((2, 4, 3))], "Y": [r((2, 4, 1))]}, {"rcond": 0.0, "driver": "gelsd"},
                      note="batch gelsd"))
    out.append(Sample({"X": [r((3, 3))], "Y": [r((3, 2))]}, {"rcond": 0.0, "driver": "gelsy"}, note="square"))
    low = r((5, 2)) @ r((2, 3))
    for driver in ("gelsd", "gelss"):
        out.append(Sample({"X": [low], "Y": [r((5, 2))]}, {"rcond": 1e-5, "driver": driver},
                          note=f"rank 2 of 3, {driver}"))
    out.append(Sample({"X": [r((2, 4))], "Y": [r((2, 3))]}, {"rcond": 0.0, "driver": "gelsd"}, note="wide"))
    return out


register(paddle_opdef("lstsq", _lstsq, samples=_lstsq_samples, attrs_handled=("rcond", "driver"),
                      doc="least-squares Solution of X @ Solution = Y (SVD cut at rcond * s_max), Rank "
                          "(int32; not gels), SingularValues (gelsd / gelss), Residuals (M > N, full rank, "
                          "not gelsy; else empty)"))
