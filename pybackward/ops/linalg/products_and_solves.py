"""Linear algebra: products (dot, mv, addmm, baddbmm, multi_dot, cross,
bilinear_tensor_product), solves and inverses (inverse, solve,
triangular_solve, cholesky_solve), determinants (determinant,
slogdeterminant) and matrix_power, with their grads.

Matrices carry leading batch dims (`[..., M, N]`) wherever Paddle 3.3.1's CPU
kernels take them; solve and triangular_solve broadcast the batch dims of
their two operands and sum the gradients back down. The kernels compute in
the operands' float dtype (Paddle registers float32 / float64 for these;
dot also integers).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


#: Ops of this module Paddle 3.3.1 also runs on complex values; pybackward's kernels are real-only so far.
_PADDLE_COMPLEX = {"determinant", "inverse", "matrix_power", "slogdeterminant", "slogdet_v2", "triangular_solve"}


def _float(c: Call, *arrays) -> None:
    for a in arrays:
        if a.dtype.kind != "f":
            if a.dtype.kind == "c" and c.op_type in _PADDLE_COMPLEX:
                raise ExecutionError(f"op {c.op_type}: pybackward runs it on float32 / float64 only, not "
                                     f"{a.dtype} (Paddle 3.3.1 has a complex kernel)")
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {a.dtype} CPU kernel for it "
                                 "(float32 / float64)")


def _square(c: Call, a: np.ndarray, what: str = "X") -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ExecutionError(f"op {c.op_type}: {what} must be a (batch of) square matrices, "
                             f"it has shape {list(a.shape)}")


def _as(a, like: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(like.dtype, copy=False)


def _well_conditioned(rng, shape, shift=None):
    """Random square matrices kept away from singularity."""
    n = shape[-1]
    return rng.standard_normal(shape) + (n if shift is None else shift) * np.eye(n)


# --------------------------------------------------------------------------
# dot, mv
# --------------------------------------------------------------------------
def _dot(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    if x.shape != y.shape or x.ndim not in (1, 2):
        raise ExecutionError(f"op dot: X{list(x.shape)} and Y{list(y.shape)} must be equal 1-D or 2-D shapes")
    return {"Out": _as(np.sum(x * y, axis=-1), x)}


def _dot_grad(c: Call):
    x, y, g = np.asarray(c.x("X")), np.asarray(c.x("Y")), np.asarray(c.x("Out@GRAD"))
    g = g.reshape(x.shape[:-1] + (1,))
    if np.iscomplexobj(x) or np.iscomplexobj(y):  # dX = dOut * conj(Y), dY = dOut * conj(X)
        x, y = np.conj(x), np.conj(y)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(g * y, x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _as(g * x, y)
    return res


def _dot_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r(5)], "Y": [r(5)]}, note="1-D -> 0-D"),
            Sample({"X": [r((3, 4))], "Y": [r((3, 4))]}, note="2-D rows -> [3]"),
            Sample({"X": [r(5) + 1j * r(5)], "Y": [r(5) + 1j * r(5)]}, note="complex, 1-D"),
            Sample({"X": [r((3, 4)) + 1j * r((3, 4))], "Y": [r((3, 4)) + 1j * r((3, 4))]}, note="complex, 2-D")]


register(paddle_opdef("dot", _dot, {"dot_grad": _dot_grad}, samples=_dot_samples,
                      doc="Out = sum(X * Y, last axis): 1-D -> 0-D, [B, N] -> [B]"))


def _mv(c: Call):
    x, v = np.asarray(c.x("X")), np.asarray(c.x("Vec"))
    _float(c, x, v)
    if x.ndim != 2 or v.ndim != 1 or x.shape[1] != v.shape[0]:
        raise ExecutionError(f"op mv: X must be [M, N] and Vec [N]; got {list(x.shape)} and {list(v.shape)}")
    return {"Out": _as(x @ v, x)}


def _mv_grad(c: Call):
    x, v, g = np.asarray(c.x("X")), np.asarray(c.x("Vec")), np.asarray(c.x("Out@GRAD"))
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(np.outer(g, v), x)
    if c.wants("Vec@GRAD"):
        res["Vec@GRAD"] = _as(x.T @ g, v)
    return res


register(paddle_opdef("mv", _mv, {"mv_grad": _mv_grad},
                      samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4))],
                                                   "Vec": [rng.standard_normal(4)]})],
                      doc="Out = X @ Vec (matrix times vector)"))


# --------------------------------------------------------------------------
# addmm, baddbmm: Beta * Input + Alpha * X @ Y
# --------------------------------------------------------------------------
def _addmm_kernel(batched: bool):
    rank = 3 if batched else 2

    def kernel(c: Call):
        inp, x, y = np.asarray(c.x("Input")), np.asarray(c.x("X")), np.asarray(c.x("Y"))
        _float(c, inp, x, y)
        if x.ndim != rank or y.ndim != rank or x.shape[-1] != y.shape[-2] or \
                (batched and x.shape[0] != y.shape[0]):
            raise ExecutionError(f"op {c.op_type}: X{list(x.shape)} and Y{list(y.shape)} must be "
                                 f"{rank}-D and multipliable")
        prod = x @ y
        try:
            np.broadcast_shapes(inp.shape, prod.shape)
        except ValueError:
            raise ExecutionError(f"op {c.op_type}: Input{list(inp.shape)} does not broadcast to "
                                 f"{list(prod.shape)}") from None
        out = c.attr("Beta", 1.0) * inp + c.attr("Alpha", 1.0) * prod
        return {"Out": _as(np.broadcast_to(out, prod.shape), x)}
    return kernel


def _addmm_grad(c: Call):
    inp, x, y, g = (np.asarray(c.x(s)) for s in ("Input", "X", "Y", "Out@GRAD"))
    alpha, beta = c.attr("Alpha", 1.0), c.attr("Beta", 1.0)
    res = {}
    if c.wants("Input@GRAD"):
        res["Input@GRAD"] = _as(unbroadcast(beta * g, inp.shape), inp)
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(alpha * (g @ _t(y)), x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _as(alpha * (_t(x) @ g), y)
    return res


def _addmm_samples(rng):
    r = rng.standard_normal
    return [Sample({"Input": [r((3, 2))], "X": [r((3, 4))], "Y": [r((4, 2))]}, {"Alpha": 1.0, "Beta": 1.0}),
            Sample({"Input": [r((1, 2))], "X": [r((3, 4))], "Y": [r((4, 2))]}, {"Alpha": 0.5, "Beta": 2.0},
                   note="Input [1, N] broadcast"),
            Sample({"Input": [r(2)], "X": [r((3, 4))], "Y": [r((4, 2))]}, {"Alpha": -1.5, "Beta": 0.3},
                   note="Input [N]")]


def _baddbmm_samples(rng):
    r = rng.standard_normal
    return [Sample({"Input": [r((2, 3, 2))], "X": [r((2, 3, 4))], "Y": [r((2, 4, 2))]},
                   {"Alpha": 1.0, "Beta": 1.0}),
            Sample({"Input": [r((2, 3, 2))], "X": [r((2, 3, 4))], "Y": [r((2, 4, 2))]},
                   {"Alpha": 0.7, "Beta": -2.0}, note="alpha beta")]


register(paddle_opdef("addmm", _addmm_kernel(False), {"addmm_grad": _addmm_grad}, samples=_addmm_samples,
                      attrs_handled=("Alpha", "Beta"), doc="Out = Beta * Input + Alpha * X @ Y (2-D)"))
register(paddle_opdef("baddbmm", _addmm_kernel(True), {"baddbmm_grad": _addmm_grad}, samples=_baddbmm_samples,
                      attrs_handled=("Alpha", "Beta"),
                      doc="Out = Beta * Input + Alpha * X[b] @ Y[b] (3-D batches)"))


# --------------------------------------------------------------------------
# multi_dot: a chain of matrix products (first / last operand may be 1-D)
# --------------------------------------------------------------------------
def _chain(ms):
    out = ms[0]
    for m in ms[1:]:
        out = out @ m
    return out


def _multi_dot_operands(c: Call):
    xs = [np.asarray(v) for v in c.xs("X")]
    if len(xs) < 2:
        raise ExecutionError("op multi_dot: X needs at least 2 tensors")
    _float(c, *xs)
    ms = list(xs)
    if ms[0].ndim == 1:
        ms[0] = ms[0][None, :]
    if ms[-1].ndim == 1:
        ms[-1] = ms[-1][:, None]
    for i, m in enumerate(ms):
        if m.ndim != 2:
            raise ExecutionError(f"op multi_dot: X[{i}] must be 2-D (only the first and last may be 1-D), "
                                 f"it has shape {list(xs[i].shape)}")
    for i in range(len(ms) - 1):
        if ms[i].shape[1] != ms[i + 1].shape[0]:
            raise ExecutionError(f"op multi_dot: X[{i}]{list(xs[i].shape)} and X[{i + 1}]"
                                 f"{list(xs[i + 1].shape)} cannot be multiplied")
    return xs, ms


def _multi_dot(c: Call):
    xs, ms = _multi_dot_operands(c)
    out = _chain(ms)
    if xs[-1].ndim == 1:
        out = out[:, 0]
    if xs[0].ndim == 1:
        out = out[0]
    return {"Out": _as(out, xs[0])}


def _multi_dot_grad(c: Call):
    xs, ms = _multi_dot_operands(c)
    g = np.asarray(c.x("Out@GRAD")).reshape(ms[0].shape[0], ms[-1].shape[1])
    names = c.outs.get("X@GRAD", ())
    grads = []
    for i in range(len(ms)):
        if i >= len(names) or names[i] == "@EMPTY@":
            grads.append(None)
            continue
        left = _chain(ms[:i]) if i > 0 else np.eye(ms[0].shape[0])
        right = _chain(ms[i + 1:]) if i < len(ms) - 1 else np.eye(ms[-1].shape[1])
        grads.append(_as((left.T @ g @ right.T).reshape(xs[i].shape), xs[i]))
    return {"X@GRAD": grads}


def _multi_dot_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 3)), r((3, 4)), r((4, 2))]}, note="3 matrices"),
            Sample({"X": [r(3), r((3, 4)), r((4, 2)), r(2)]}, note="1-D ends -> 0-D"),
            Sample({"X": [r((2, 3)), r(3)]}, note="matrix, vector")]


register(paddle_opdef("multi_dot", _multi_dot, {"multi_dot_grad": _multi_dot_grad},
                      samples=_multi_dot_samples,
                      doc="Out = X[0] @ X[1] @ ... (the first / last may be 1-D vectors)"))


# --------------------------------------------------------------------------
# cross
# --------------------------------------------------------------------------
def _cross_dim(c: Call, x: np.ndarray) -> int:
    d = int(c.attr("dim", 9))
    if d == 9:     # Paddle's DEFAULT_AXIS: the first axis of size 3
        for i, n in enumerate(x.shape):
            if n == 3:
                return i
        raise ExecutionError(f"op cross: X{list(x.shape)} has no axis of size 3")
    if not -x.ndim <= d < x.ndim:
        raise ExecutionError(f"op cross: dim {d} is out of range for rank {x.ndim}")
    d = d % x.ndim
    if x.shape[d] != 3:
        raise ExecutionError(f"op cross: axis {d} of X{list(x.shape)} must have size 3")
    return d


def _cross(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    if x.shape != y.shape:
        raise ExecutionError(f"op cross: X{list(x.shape)} and Y{list(y.shape)} must have the same shape")
    d = _cross_dim(c, x)
    return {"Out": _as(np.cross(x, y, axis=d), x)}


def _cross_grad(c: Call):
    x, y, g = (np.asarray(c.x(s)) for s in ("X", "Y", "Out@GRAD"))
    d = _cross_dim(c, x)
    xc, yc = (np.conj(x), np.conj(y)) if np.iscomplexobj(x) or np.iscomplexobj(y) else (x, y)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(np.cross(yc, g, axis=d), x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _as(np.cross(g, xc, axis=d), y)
    return res


def _cross_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))], "Y": [r((3, 4))]}, {"dim": 9}, note="default: first axis of size 3"),
            Sample({"X": [r((2, 3))], "Y": [r((2, 3))]}, {"dim": 1}),
            Sample({"X": [r((3, 2, 3))], "Y": [r((3, 2, 3))]}, {"dim": -1}, note="dim=-1"),
            Sample({"X": [r((3, 4)) + 1j * r((3, 4))], "Y": [r((3, 4)) + 1j * r((3, 4))]}, {"dim": 9},
                   note="complex"),
            Sample({"X": [r((2, 3)) + 1j * r((2, 3))], "Y": [r((2, 3)) + 1j * r((2, 3))]}, {"dim": 1},
                   note="complex, dim=1")]


register(paddle_opdef("cross", _cross, {"cross_grad": _cross_grad}, samples=_cross_samples,
                      attrs_handled=("dim",), doc="Out = X x Y (3-vectors along dim; 9: the first axis of size 3)"))


# --------------------------------------------------------------------------
# bilinear_tensor_product: Out[b, k] = X[b] W[k] Y[b] + Bias[k]
# --------------------------------------------------------------------------
def _btp(c: Call):
    x, y, w = np.asarray(c.x("X")), np.asarray(c.x("Y")), np.asarray(c.x("Weight"))
    _float(c, x, y, w)
    if x.ndim != 2 or y.ndim != 2 or w.ndim != 3 or x.shape[0] != y.shape[0] \
            or w.shape[1] != x.shape[1] or w.shape[2] != y.shape[1]:
        raise ExecutionError(f"op bilinear_tensor_product: X [B, M], Y [B, N], Weight [K, M, N] expected; "
                             f"got {list(x.shape)}, {list(y.shape)}, {list(w.shape)}")
    out = np.einsum("bm,kmn,bn->bk", x, w, y)
    if c.has("Bias"):
        out = out + np.asarray(c.x("Bias")).reshape(1, -1)
    return {"Out": _as(out, x)}


def _btp_grad(c: Call):
    x, y, w, g = (np.asarray(c.x(s)) for s in ("X", "Y", "Weight", "Out@GRAD"))
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(np.einsum("bk,kmn,bn->bm", g, w, y), x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _as(np.einsum("bk,kmn,bm->bn", g, w, x), y)
    if c.wants("Weight@GRAD"):
        res["Weight@GRAD"] = _as(np.einsum("bk,bm,bn->kmn", g, x, y), w)
    if c.wants("Bias@GRAD"):
        res["Bias@GRAD"] = _as(g.sum(axis=0, keepdims=True), x)
    return res


def _btp_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))], "Y": [r((3, 2))], "Weight": [r((5, 4, 2))], "Bias": [r((1, 5))]}),
            Sample({"X": [r((2, 3))], "Y": [r((2, 3))], "Weight": [r((2, 3, 3))]}, note="no Bias")]


register(paddle_opdef("bilinear_tensor_product", _btp, {"bilinear_tensor_product_grad": _btp_grad},
                      samples=_btp_samples, doc="Out[b, k] = X[b] @ Weight[k] @ Y[b] + Bias[0, k]"))


# --------------------------------------------------------------------------
# inverse, solve, triangular_solve, cholesky_solve
# --------------------------------------------------------------------------
def _inverse(c: Call):
    x = np.asarray(c.x("Input"))
    _float(c, x)
    _square(c, x, "Input")
    try:
        return {"Output": _as(np.linalg.inv(x), x)}
    except np.linalg.LinAlgError:
        raise ExecutionError("op inverse: the matrix is singular") from None


def _inverse_grad(c: Call):
    out, g = np.asarray(c.x("Output")), np.asarray(c.x("Output@GRAD"))
    if not c.wants("Input@GRAD"):
        return {}
    return {"Input@GRAD": _as(-_t(out) @ g @ _t(out), out)}


register(paddle_opdef("inverse", _inverse, {"inverse_grad": _inverse_grad},
                      samples=lambda rng: [Sample({"Input": [_well_conditioned(rng, (3, 3))]}),
                                           Sample({"Input": [_well_conditioned(rng, (2, 3, 3))]}, note="batch")],
                      doc="Output = Input^-1 (batched)"))


def _batch_broadcast(x: np.ndarray, y: np.ndarray):
    """x [..., M, M] and y [..., M, K] with their batch dims broadcast."""
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    return np.broadcast_to(x, batch + x.shape[-2:]), np.broadcast_to(y, batch + y.shape[-2:])


def _solve_operands(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    _float(c, x, y)
    _square(c, x)
    # Paddle's is_vector_rhs: Y is 1-D, or exactly X's shape without its last dim.
    vector = y.ndim == 1 or y.shape == x.shape[:-1]
    y2 = y[..., None] if vector else y
    if y2.ndim < 2 or y2.shape[-2] != x.shape[-1]:
        raise ExecutionError(f"op {c.op_type}: X{list(x.shape)} and Y{list(y.shape)} do not match")
    return x, y, y2, vector


def _solve(c: Call):
    x, y, y2, vector = _solve_operands(c)
    xb, yb = _batch_broadcast(x, y2)
    try:
        out = np.linalg.solve(xb, yb)
    except np.linalg.LinAlgError:
        raise ExecutionError("op solve: X is singular") from None
    return {"Out": _as(out[..., 0] if vector else out, x)}


def _solve_grad(c: Call):
    x, y, y2, vector = _solve_operands(c)
    out, g = np.asarray(c.x("Out")), np.asarray(c.x("Out@GRAD"))
    if vector:
        out, g = out[..., None], g[..., None]
    xb, _ = _batch_broadcast(x, y2)
    dy = np.linalg.solve(_t(xb), np.broadcast_to(g, out.shape))
    res = {}
    if c.wants("Y@GRAD"):
        dyr = unbroadcast(dy, y2.shape)
        res["Y@GRAD"] = _as(dyr[..., 0] if vector else dyr, y)
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(unbroadcast(-dy @ _t(out), x.shape), x)
    return res


def _solve_samples(rng):
    r = rng.standard_normal
    w = _well_conditioned
    return [Sample({"X": [w(rng, (3, 3))], "Y": [r((3, 2))]}),
            Sample({"X": [w(rng, (2, 3, 3))], "Y": [r((2, 3, 1))]}, note="batch"),
            Sample({"X": [w(rng, (3, 3))], "Y": [r(3)]}, note="Y vector"),
            Sample({"X": [w(rng, (2, 3, 3))], "Y": [r((2, 3))]}, note="Y batch of vectors"),
            Sample({"X": [w(rng, (2, 3, 3))], "Y": [r(3)]}, note="Y one vector, X batch"),
            Sample({"X": [w(rng, (2, 3, 3))], "Y": [r((3, 2))]}, note="Y batch broadcast"),
            Sample({"X": [w(rng, (1, 3, 3))], "Y": [r((2, 3, 2))]}, note="X batch broadcast")]


register(paddle_opdef("solve", _solve, {"solve_grad": _solve_grad}, samples=_solve_samples,
                      doc="Out = X^-1 Y (batched, broadcast batch dims; Y 1-D or X.shape[:-1]: vectors)"))


def _tri(a: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    """The triangle of `a` a triangular solve reads (unit diagonal: ones)."""
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        n = a.shape[-1]
        t = t * (1 - np.eye(n, dtype=a.dtype)) + np.eye(n, dtype=a.dtype)
    return t


def _tri_mask(n: int, upper: bool, unit: bool, dtype) -> np.ndarray:
    k = 1 if unit else 0
    return (np.triu(np.ones((n, n)), k) if upper else np.tril(np.ones((n, n)), -k)).astype(dtype)


def _triangular_solve_raw(x, y, upper, transpose, unit):
    a = _tri(x, upper, unit)
    if transpose:
        a = _t(a)
    a, y = _batch_broadcast(a, y)
    return np.linalg.solve(a, y)


def _triangular_solve(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    _float(c, x, y)
    _square(c, x)
    if y.ndim < 2 or y.shape[-2] != x.shape[-1]:
        raise ExecutionError(f"op triangular_solve: X{list(x.shape)} and Y{list(y.shape)} do not match")
    try:
        out = _triangular_solve_raw(x, y, c.attr("upper", True), c.attr("transpose", False),
                                    c.attr("unitriangular", False))
    except np.linalg.LinAlgError:
        raise ExecutionError("op triangular_solve: X is singular") from None
    return {"Out": _as(out, x)}


def _triangular_solve_grad(c: Call):
    x, y, out, g = (np.asarray(c.x(s)) for s in ("X", "Y", "Out", "Out@GRAD"))
    upper, transpose, unit = c.attr("upper", True), c.attr("transpose", False), c.attr("unitriangular", False)
    dy = _triangular_solve_raw(x, np.broadcast_to(g, out.shape), upper, not transpose, unit)
    res = {}
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _as(unbroadcast(dy, y.shape), y)
    if c.wants("X@GRAD"):
        dx = -(out @ _t(dy)) if transpose else -(dy @ _t(out))
        dx = dx * _tri_mask(x.shape[-1], upper, unit, dx.dtype)
        res["X@GRAD"] = _as(unbroadcast(dx, x.shape), x)
    return res


def _triangular_solve_samples(rng):
    r = rng.standard_normal
    w = _well_conditioned
    return [Sample({"X": [w(rng, (3, 3))], "Y": [r((3, 2))]}, {"upper": True, "transpose": False,
                                                                "unitriangular": False}),
            Sample({"X": [w(rng, (3, 3))], "Y": [r((3, 2))]}, {"upper": False}, note="lower"),
            Sample({"X": [w(rng, (2, 3, 3))], "Y": [r((2, 3, 2))]}, {"upper": True, "transpose": True},
                   note="batch, transpose"),
            Sample({"X": [w(rng, (3, 3))], "Y": [r((2, 3, 1))]}, {"upper": False, "transpose": True},
                   note="lower transpose, Y batch"),
            Sample({"X": [r((3, 3))], "Y": [r((3, 2))]}, {"upper": True, "unitriangular": True},
                   note="unit upper"),
            Sample({"X": [r((3, 3))], "Y": [r((3, 2))]}, {"upper": False, "unitriangular": True},
                   note="unit lower")]


register(paddle_opdef("triangular_solve", _triangular_solve, {"triangular_solve_grad": _triangular_solve_grad},
                      samples=_triangular_solve_samples, attrs_handled=("upper", "transpose", "unitriangular"),
                      doc="Out = op(T)^-1 Y with T the upper / lower triangle of X (unit diagonal if "
                          "unitriangular; op = transpose if transpose); batch dims broadcast"))


def _cholesky_solve(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    _float(c, x, y)
    _square(c, y, "Y")
    if x.ndim < 2 or x.shape[-2] != y.shape[-1]:
        raise ExecutionError(f"op cholesky_solve: X{list(x.shape)} and Y{list(y.shape)} do not match")
    upper = c.attr("upper", False)
    tri = np.triu(y) if upper else np.tril(y)
    a = _t(tri) @ tri if upper else tri @ _t(tri)
    a, b = _batch_broadcast(a, x)
    try:
        return {"Out": _as(np.linalg.solve(a, b), x)}
    except np.linalg.LinAlgError:
        raise ExecutionError("op cholesky_solve: the factor Y is singular") from None


def _cholesky_solve_grad(c: Call):
    x, y, out, g = (np.asarray(c.x(s)) for s in ("X", "Y", "Out", "Out@GRAD"))
    upper = c.attr("upper", False)
    tri = np.triu(y) if upper else np.tril(y)
    a = _t(tri) @ tri if upper else tri @ _t(tri)
    a, _ = _batch_broadcast(a, x)
    dx = np.linalg.solve(a, np.broadcast_to(g, out.shape))   # A is symmetric
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _as(unbroadcast(dx, x.shape), x)
    if c.wants("Y@GRAD"):
        common = -(dx @ _t(out) + out @ _t(dx))
        tb = np.broadcast_to(tri, common.shape[:-2] + tri.shape[-2:])
        dy = tb @ common if upper else common @ tb
        dy = np.triu(dy) if upper else np.tril(dy)
        res["Y@GRAD"] = _as(unbroadcast(dy, y.shape), y)
    return res


def _chol_factor(rng, shape, upper):
    n = shape[-1]
    f = rng.standard_normal(shape) * 0.3 + 1.5 * np.eye(n)
    return np.triu(f) if upper else np.tril(f)


def _cholesky_solve_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 2))], "Y": [_chol_factor(rng, (3, 3), False)]}, {"upper": False}),
            Sample({"X": [r((3, 2))], "Y": [_chol_factor(rng, (3, 3), True)]}, {"upper": True}, note="upper"),
            Sample({"X": [r((2, 3, 1))], "Y": [_chol_factor(rng, (2, 3, 3), False)]}, {"upper": False},
                   note="batch"),
            Sample({"X": [r((2, 3, 2))], "Y": [_chol_factor(rng, (3, 3), True)]}, {"upper": True},
                   note="Y batch broadcast")]


register(paddle_opdef("cholesky_solve", _cholesky_solve, {"cholesky_solve_grad": _cholesky_solve_grad},
                      samples=_cholesky_solve_samples, attrs_handled=("upper",),
                      doc="Out = (L L^T)^-1 X for the Cholesky factor L = tril(Y) (U^T U, U = triu(Y), "
                          "if upper); batch dims broadcast"))


# --------------------------------------------------------------------------
# determinant, slogdeterminant, matrix_power
# --------------------------------------------------------------------------
def _determinant(c: Call):
    x = np.asarray(c.x("Input"))
    _float(c, x)
    _square(c, x, "Input")
    return {"Out": _as(np.linalg.det(x), x)}


def _inv_t_or_none(x: np.ndarray, det: np.ndarray):
    """inv(X)^T, or None when some matrix of the batch is singular (Paddle's
    determinant grads are then all zeros)."""
    if np.any(np.asarray(det) == 0):
        return None
    return _t(np.linalg.inv(x))


def _determinant_grad(c: Call):
    x, out, g = (np.asarray(c.x(s)) for s in ("Input", "Out", "Out@GRAD"))
    if not c.wants("Input@GRAD"):
        return {}
    inv_t = _inv_t_or_none(x, out)
    if inv_t is None:
        return {"Input@GRAD": np.zeros_like(x)}
    return {"Input@GRAD": _as((g * out)[..., None, None] * inv_t, x)}


def _det_samples(rng):
    return [Sample({"Input": [_well_conditioned(rng, (3, 3), 1.0)]}),
            Sample({"Input": [_well_conditioned(rng, (2, 3, 3), 1.0)]}, note="batch"),
            Sample({"Input": [_well_conditioned(rng, (2, 2, 2, 2), 1.0)]}, note="2 batch dims")]


register(paddle_opdef("determinant", _determinant, {"determinant_grad": _determinant_grad},
                      samples=_det_samples, doc="Out = det(Input) over the batch dims"))


def _slogdeterminant(c: Call):
    x = np.asarray(c.x("Input"))
    _float(c, x)
    _square(c, x, "Input")
    sign, logabs = np.linalg.slogdet(x)
    return {"Out": _as(np.stack([sign, logabs]), x)}


def _slogdeterminant_grad(c: Call):
    x, out, g = (np.asarray(c.x(s)) for s in ("Input", "Out", "Out@GRAD"))
    if not c.wants("Input@GRAD"):
        return {}
    inv_t = _inv_t_or_none(x, out[0])
    if inv_t is None:
        return {"Input@GRAD": np.zeros_like(x)}
    return {"Input@GRAD": _as(np.asarray(g[1])[..., None, None] * inv_t, x)}


register(paddle_opdef("slogdeterminant", _slogdeterminant, {"slogdeterminant_grad": _slogdeterminant_grad},
                      samples=_det_samples,
                      doc="Out = [sign(det(Input)), log|det(Input)|] stacked on a new first axis"))


def _slogdet_v2(c: Call):
    x = np.asarray(c.x("x"))
    _float(c, x)
    _square(c, x, "x")
    sign, logabs = np.linalg.slogdet(x)
    return {"sign": _as(sign, x), "logdet": _as(logabs, x)}


def _slogdet_v2_grad(c: Call):
    x, sign, g = (np.asarray(c.x(s)) for s in ("x", "sign", "logdet@GRAD"))
    if not c.wants("x@GRAD"):
        return {}
    inv_t = _inv_t_or_none(x, sign)
    if inv_t is None:
        return {"x@GRAD": np.zeros_like(x)}
    return {"x@GRAD": _as(g[..., None, None] * inv_t, x)}


def _slogdet_v2_samples(rng):
    return [Sample({"x": [s.inputs["Input"][0]]}, wrt=("x",), note=s.note) for s in _det_samples(rng)]


register(paddle_opdef("slogdet_v2", _slogdet_v2, {"slogdet_v2_grad": _slogdet_v2_grad},
                      samples=_slogdet_v2_samples,
                      doc="sign = sign(det(x)), logdet = log|det(x)| (the sign has no gradient)"))


def _matrix_power(c: Call):
    x = np.asarray(c.x("X"))
    _float(c, x)
    _square(c, x)
    n = int(c.attr("n", 1))
    try:
        return {"Out": _as(np.linalg.matrix_power(x, n), x)}
    except np.linalg.LinAlgError:
        raise ExecutionError("op matrix_power: n < 0 needs an invertible X") from None


def _matrix_power_grad(c: Call):
    x, g = np.asarray(c.x("X")), np.asarray(c.x("Out@GRAD"))
    if not c.wants("X@GRAD"):
        return {}
    n = int(c.attr("n", 1))
    if n == 0:
        return {"X@GRAD": np.zeros_like(x)}
    base = x if n > 0 else np.linalg.inv(x)
    k = abs(n)
    powers = [np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)]
    for _ in range(k - 1):
        powers.append(powers[-1] @ base)
    d = sum(_t(powers[i]) @ g @ _t(powers[k - 1 - i]) for i in range(k))
    if n < 0:
        d = -_t(base) @ d @ _t(base)
    return {"X@GRAD": _as(d, x)}


def _matrix_power_samples(rng):
    w = lambda shape: rng.standard_normal(shape) * 0.4 + np.eye(shape[-1])  # noqa: E731
    return [Sample({"X": [w((3, 3))]}, {"n": 3}),
            Sample({"X": [w((2, 3, 3))]}, {"n": 2}, note="batch"),
            Sample({"X": [w((3, 3))]}, {"n": 1}, note="n=1"),
            Sample({"X": [w((3, 3))]}, {"n": 0}, note="n=0"),
            Sample({"X": [w((3, 3))]}, {"n": -1}, note="n=-1"),
            Sample({"X": [w((2, 3, 3))]}, {"n": -3}, note="n=-3 batch")]


register(paddle_opdef("matrix_power", _matrix_power, {"matrix_power_grad": _matrix_power_grad},
                      samples=_matrix_power_samples, attrs_handled=("n",),
                      doc="Out = X^n (batched; n < 0 uses X^-1, n = 0 the identity)"))
