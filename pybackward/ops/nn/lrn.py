"""lrn: local response normalisation across channels, with its grad.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* lrn: `mid = k + alpha * sum(x^2 over the n channels c-(n-1)/2 .. c+n/2)`
  (MidOut), `Out = X * mid^-beta`, NCHW or NHWC, n odd (float32 only in
  Paddle);
"""
from __future__ import annotations

import numpy as np
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# lrn
# --------------------------------------------------------------------------
def _lrn_setup(c: Call, x):
    if x.ndim != 4:
        raise c.unsupported("X rank", x.ndim, "lrn takes a 4-D input")
    fmt = c.attr("data_format", "AnyLayout")
    if fmt not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_format", fmt, "expected NCHW or NHWC")
    n = int(c.attr("n", 5))
    if n < 1 or n % 2 == 0:
        raise c.unsupported("n", n, "Paddle takes a positive odd n")
    t = x.dtype.type
    return (3 if fmt == "NHWC" else 1), n, t(c.attr("k", 2.0)), t(c.attr("alpha", 1e-4)), t(c.attr("beta", 0.75))


def _window_sum(a, n: int, axis: int, pre: int):
    """Sum over the channels [c - pre, c + n - 1 - pre] (zero outside)."""
    a = np.moveaxis(a, axis, -1)
    pad = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(pre, n - 1 - pre)])
    cs = np.concatenate([np.zeros(a.shape[:-1] + (1,), a.dtype), np.cumsum(pad, axis=-1)], axis=-1)
    ch = a.shape[-1]
    return np.moveaxis(cs[..., n:n + ch] - cs[..., :ch], -1, axis)


def _lrn(c: Call):
    x = c.x("X")
    axis, n, k, alpha, beta = _lrn_setup(c, x)
    mid = (k + alpha * _window_sum(x * x, n, axis, (n - 1) // 2)).astype(x.dtype)
    return {"Out": (x * np.power(mid, -beta)).astype(x.dtype, copy=False), "MidOut": mid}


def _lrn_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, dy = c.x("X"), c.x("Out@GRAD")
    axis, n, k, alpha, beta = _lrn_setup(c, x)
    mid = c.x("MidOut") if c.has("MidOut") else (k + alpha * _window_sum(x * x, n, axis, (n - 1) // 2))
    out = c.x("Out") if c.has("Out") else x * np.power(mid, -beta)
    acc = _window_sum(dy * out / mid, n, axis, n - 1 - (n - 1) // 2)   # the transpose
    dx = dy * np.power(mid, -beta) - 2 * alpha * beta * x * acc
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _lrn_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 6, 2, 2))]}, {"n": 5, "k": 2.0, "alpha": 0.1, "beta": 0.75}, note="n 5"),
            Sample({"X": [r((1, 4, 2, 3))]}, {"n": 3, "k": 1.0, "alpha": 0.5, "beta": 0.5}, note="n 3"),
            Sample({"X": [r((1, 2, 3, 5))]}, {"n": 3, "k": 2.0, "alpha": 0.2, "beta": 0.75, "data_format": "NHWC"},
                   note="NHWC")]


# MidOut is a buffer for the grad (Paddle's lrn_grad reads no MidOut@GRAD)
register(paddle_opdef("lrn", _lrn, {"lrn_grad": _lrn_grad}, samples=_lrn_samples, intermediate_outputs=("MidOut",),
                      attrs_handled=("n", "k", "alpha", "beta", "data_format"),
                      doc="local response normalisation across channels; MidOut = k + alpha * window sum of X^2"))
