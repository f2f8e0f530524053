"""spectral_norm: a weight divided by its largest singular value (power iteration), with its grad.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* spectral_norm: the weight as a matrix (dim first, the rest flattened),
  power_iters rounds of `v = W^T u / (|W^T u| + eps)`, `u = W v / (|W v| +
  eps)` from the U, V inputs, `sigma = u . W v`, Out = W / sigma; the grad
  holds u and v fixed: `dW = dOut / sigma - u v^T sum(dOut * W) / sigma^2`
  (Paddle's grad kernel computes `dOut * (1 - u v^T sum(W / sigma)) /
  sigma`, which finite differences refute: see PADDLE_WRONG in
  tests/ops/test_kernels_vs_paddle.py).
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# spectral_norm
# --------------------------------------------------------------------------
def _sn_setup(c: Call):
    w = c.x("Weight")
    dim = int(c.attr("dim", 0))
    if not -w.ndim <= dim < w.ndim:
        raise c.unsupported("dim", dim, f"Weight has {w.ndim} dims")
    dim %= w.ndim
    wm = np.moveaxis(w, dim, 0)
    mat = wm.reshape(wm.shape[0], -1)
    u = np.asarray(c.x("U"), w.dtype).reshape(-1)
    v = np.asarray(c.x("V"), w.dtype).reshape(-1)
    if u.size != mat.shape[0] or v.size != mat.shape[1]:
        raise ExecutionError(f"spectral_norm: U ({u.size}) and V ({v.size}) do not fit the "
                             f"{mat.shape[0]}x{mat.shape[1]} weight matrix")
    t = w.dtype.type
    eps = t(c.attr("eps", 1e-12))
    for _ in range(int(c.attr("power_iters", 1))):
        v = mat.T @ u
        v = v / (np.sqrt((v * v).sum()) + eps)
        u = mat @ v
        u = u / (np.sqrt((u * u).sum()) + eps)
    sigma = (u * (mat @ v)).sum()
    return w, dim, wm.shape, mat, u, v, sigma


def _spectral_norm(c: Call):
    w, dim, wshape, mat, _, _, sigma = _sn_setup(c)
    return {"Out": np.moveaxis((mat / sigma).reshape(wshape), 0, dim).astype(w.dtype, copy=False)}


def _spectral_norm_grad(c: Call):
    if not c.wants("Weight@GRAD"):
        return {}
    w, dim, wshape, mat, u, v, sigma = _sn_setup(c)
    dout = np.moveaxis(c.x("Out@GRAD"), dim, 0).reshape(mat.shape)
    dmat = dout / sigma - np.outer(u, v) * (dout * mat).sum() / (sigma * sigma)
    return {"Weight@GRAD": np.moveaxis(dmat.reshape(wshape), 0, dim).astype(w.dtype, copy=False)}


def _sn_samples(rng):
    r = rng.standard_normal
    # a clear gap between the two largest singular values: the power iterations
    # converge, so the grad (u, v held fixed, as in Paddle) is the derivative
    q1, _ = np.linalg.qr(r((4, 4)))
    q2, _ = np.linalg.qr(r((3, 3)))
    w = q1[:, :3] @ np.diag([3.0, 1.0, 0.5]) @ q2.T
    q3, _ = np.linalg.qr(r((3, 3)))
    q4, _ = np.linalg.qr(r((4, 4)))
    m = q3 @ np.diag([2.5, 0.7, 0.2]) @ q4[:, :3].T                  # the (3, 4) matrix of dim 1
    w4 = np.ascontiguousarray(np.moveaxis(m.reshape(3, 2, 2, 1), 0, 1))   # Weight (2, 3, 2, 1)
    return [Sample({"Weight": [w], "U": [r(4)], "V": [r(3)]}, {"dim": 0, "power_iters": 60, "eps": 1e-12},
                   wrt=("Weight",), note="2-D"),
            Sample({"Weight": [w4], "U": [r(3)], "V": [r(4)]}, {"dim": 1, "power_iters": 60, "eps": 1e-12},
                   wrt=("Weight",), note="4-D, dim 1")]


register(paddle_opdef("spectral_norm", _spectral_norm, {"spectral_norm_grad": _spectral_norm_grad},
                      samples=_sn_samples, attrs_handled=("dim", "power_iters", "eps"),
                      doc="Weight / sigma, sigma from power_iters power iterations on U, V"))
