"""More nn ops: maxout, affine_channel, lrn, affine_grid, grid_sampler,
spectral_norm.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels):
* maxout: channels split into C/groups runs of `groups` consecutive
  channels (axis 1, or 3 / -1 for NHWC); Out is each run's max, the grad
  goes to the first input equal to Out;
* affine_channel: `X * Scale[c] + Bias[c]`, c the channel axis (1, or the
  last for NHWC);
* lrn: `mid = k + alpha * sum(x^2 over the n channels c-(n-1)/2 .. c+n/2)`
  (MidOut), `Out = X * mid^-beta`, NCHW or NHWC, n odd (float32 only in
  Paddle);
* affine_grid: the base grid `[x, y, 1]` over `linspace(-1, 1, W)` and
  `linspace(-1, 1, H)` (scaled by (W-1)/W and (H-1)/H unless
  align_corners), times Theta^T: Output (N, H, W, 2) (3-D: (N, D, H, W, 3));
  output_shape from OutputShape or the attr;
* grid_sampler (4-D): grid (x, y) in [-1, 1] unnormalised to
  `(g+1)/2*(in-1)` (align_corners) or `((g+1)*in-1)/2`, then border clips to
  [0, in-1] and reflection folds at the edges; bilinear mixes the 4
  neighbours, zero outside the input; nearest rounds (half away from zero)
  and reads zero outside. The Grid grad carries the unnormalise factor and
  the fold's sign (0 where border clipped); nearest has none;
* spectral_norm: the weight as a matrix (dim first, the rest flattened),
  power_iters rounds of `v = W^T u / (|W^T u| + eps)`, `u = W v / (|W v| +
  eps)` from the U, V inputs, `sigma = u . W v`, Out = W / sigma; the grad
  holds u and v fixed: `dW = dOut / sigma - u v^T sum(dOut * W) / sigma^2`
  (Paddle's grad kernel computes `dOut * (1 - u v^T sum(W / sigma)) /
  sigma`, which finite differences refute: see PADDLE_WRONG in
  tests/test_kernels_vs_paddle.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register


# --------------------------------------------------------------------------
# maxout
# --------------------------------------------------------------------------
def _maxout_view(c: Call, x):
    if x.ndim != 4:
        raise c.unsupported("X rank", x.ndim, "maxout takes a 4-D input")
    axis = int(c.attr("axis", 1))
    if axis not in (1, 3, -1):
        raise c.unsupported("axis", axis, "maxout takes axis 1 or 3 (-1)")
    axis = axis % 4
    groups = int(c.attr("groups"))
    if groups < 1 or x.shape[axis] % groups:
        raise c.unsupported("groups", groups, f"must divide the {x.shape[axis]} channels")
    xm = np.moveaxis(x, axis, -1)
    return axis, xm.reshape(xm.shape[:-1] + (x.shape[axis] // groups, groups))


def _maxout(c: Call):
    x = c.x("X")
    axis, v = _maxout_view(c, x)
    return {"Out": np.moveaxis(v.max(axis=-1), -1, axis).astype(x.dtype, copy=False)}


def _maxout_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    axis, v = _maxout_view(c, x)
    out = np.moveaxis(c.x("Out"), axis, -1)
    dout = np.moveaxis(c.x("Out@GRAD"), axis, -1)
    hit = v == out[..., None]
    first = hit & (np.cumsum(hit, axis=-1) == 1)
    dv = np.where(first, dout[..., None], 0)
    dx = np.moveaxis(dv.reshape(dv.shape[:-2] + (-1,)), -1, axis)
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _distinct(rng, shape):
    v = rng.permutation(int(np.prod(shape))).astype(np.float64) * 0.1
    return (v + 0.01 * rng.random(v.shape)).reshape(shape) - v.mean()


def _maxout_samples(rng):
    return [Sample({"X": [_distinct(rng, (2, 6, 2, 3))]}, {"groups": 2, "axis": 1}, note="groups 2"),
            Sample({"X": [_distinct(rng, (1, 6, 3, 2))]}, {"groups": 3, "axis": 1}, note="groups 3"),
            Sample({"X": [_distinct(rng, (1, 2, 3, 4))]}, {"groups": 2, "axis": -1}, note="NHWC axis -1"),
            Sample({"X": [_distinct(rng, (1, 2, 2, 6))]}, {"groups": 3, "axis": 3}, note="axis 3")]


register(paddle_opdef("maxout", _maxout, {"maxout_grad": _maxout_grad}, samples=_maxout_samples,
                      attrs_handled=("groups", "axis"), doc="max over runs of `groups` consecutive channels"))


# --------------------------------------------------------------------------
# affine_channel
# --------------------------------------------------------------------------
def _channel_shape(c: Call, x):
    layout = c.attr("data_layout", "AnyLayout")
    if layout not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_layout", layout, "expected NCHW or NHWC")
    if x.ndim < 2:
        raise c.unsupported("X rank", x.ndim, "affine_channel needs at least 2 dims")
    axis = x.ndim - 1 if layout == "NHWC" else 1
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return axis, tuple(shape)


def _affine_channel(c: Call):
    x = c.x("X")
    _, shape = _channel_shape(c, x)
    s, b = np.asarray(c.x("Scale"), x.dtype).reshape(shape), np.asarray(c.x("Bias"), x.dtype).reshape(shape)
    return {"Out": (x * s + b).astype(x.dtype, copy=False)}


def _affine_channel_grad(c: Call):
    x, dy = c.x("X"), c.x("Out@GRAD")
    axis, shape = _channel_shape(c, x)
    scale = np.asarray(c.x("Scale"))
    others = tuple(i for i in range(x.ndim) if i != axis)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = (dy * scale.astype(x.dtype).reshape(shape)).astype(x.dtype, copy=False)
    if c.wants("Scale@GRAD"):
        res["Scale@GRAD"] = (dy * x).sum(axis=others).reshape(scale.shape).astype(scale.dtype)
    if c.wants("Bias@GRAD"):
        res["Bias@GRAD"] = dy.sum(axis=others).reshape(np.shape(c.x("Bias"))).astype(scale.dtype)
    return res


def _affine_channel_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 3, 2, 2))], "Scale": [r(3)], "Bias": [r(3)]}, {"data_layout": "NCHW"}, note="NCHW"),
            Sample({"X": [r((2, 2, 3, 4))], "Scale": [r(4)], "Bias": [r(4)]}, {"data_layout": "NHWC"}, note="NHWC"),
            Sample({"X": [r((3, 4))], "Scale": [r(4)], "Bias": [r(4)]}, {"data_layout": "NCHW"}, note="2-D")]


register(paddle_opdef("affine_channel", _affine_channel, {"affine_channel_grad": _affine_channel_grad},
                      samples=_affine_channel_samples, attrs_handled=("data_layout",),
                      doc="Out = X * Scale + Bias per channel"))


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


# --------------------------------------------------------------------------
# affine_grid
# --------------------------------------------------------------------------
def _linspace(n: int, align_corners: bool, dtype):
    v = np.linspace(-1.0, 1.0, n) if n > 1 else np.full(n, -1.0)
    if not align_corners:
        v = v * (n - 1) / n
    return v.astype(dtype)


def _affine_grid_base(c: Call, theta):
    if c.has("OutputShape"):
        shape = [int(v) for v in np.asarray(c.x("OutputShape")).reshape(-1)]
    else:
        shape = [int(v) for v in c.attr("output_shape", [])]
    ac = bool(c.attr("align_corners", True))
    dt = theta.dtype
    if len(shape) == 4 and theta.shape[1:] == (2, 3):
        h, w = shape[2], shape[3]
        xs, ys = _linspace(w, ac, dt), _linspace(h, ac, dt)
        base = np.stack([np.broadcast_to(xs[None, :], (h, w)), np.broadcast_to(ys[:, None], (h, w)),
                         np.ones((h, w), dt)], axis=-1)                         # (H, W, 3)
        return base, (shape[0], h, w)
    if len(shape) == 5 and theta.shape[1:] == (3, 4):
        d, h, w = shape[2], shape[3], shape[4]
        xs, ys, zs = _linspace(w, ac, dt), _linspace(h, ac, dt), _linspace(d, ac, dt)
        g = np.meshgrid(zs, ys, xs, indexing="ij")
        base = np.stack([g[2], g[1], g[0], np.ones((d, h, w), dt)], axis=-1)   # (D, H, W, 4)
        return base, (shape[0], d, h, w)
    raise ExecutionError(f"affine_grid: output_shape {shape} and Theta {theta.shape} do not fit "
                         "((N, 2, 3) with 4 values or (N, 3, 4) with 5)")


def _affine_grid(c: Call):
    theta = c.x("Theta")
    base, _ = _affine_grid_base(c, theta)
    out = np.einsum("...k,njk->n...j", base, theta)
    return {"Output": out.astype(theta.dtype, copy=False)}


def _affine_grid_grad(c: Call):
    if not c.wants("Theta@GRAD"):
        return {}
    theta, dout = c.x("Theta"), c.x("Output@GRAD")
    base, _ = _affine_grid_base(c, theta)
    sp = tuple(range(1, dout.ndim - 1))
    letters = "abc"[:len(sp)]
    dtheta = np.einsum(f"n{letters}j,{letters}k->njk", dout, base)
    return {"Theta@GRAD": dtheta.astype(theta.dtype, copy=False)}


def _affine_grid_samples(rng):
    r = rng.standard_normal
    return [Sample({"Theta": [r((2, 2, 3))]}, {"output_shape": [2, 3, 4, 5], "align_corners": True},
                   note="align_corners"),
            Sample({"Theta": [r((1, 2, 3))]}, {"output_shape": [1, 1, 3, 3], "align_corners": False},
                   note="not align_corners"),
            Sample({"Theta": [r((1, 3, 4))]}, {"output_shape": [1, 2, 2, 3, 4], "align_corners": False},
                   note="3-D")]


register(paddle_opdef("affine_grid", _affine_grid, {"affine_grid_grad": _affine_grid_grad},
                      samples=_affine_grid_samples, attrs_handled=("output_shape", "align_corners"),
                      doc="sampling grid of the affine maps Theta over [-1, 1]"))


# --------------------------------------------------------------------------
# grid_sampler
# --------------------------------------------------------------------------
def _gs_setup(c: Call, x, grid):
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise c.unsupported("X/Grid rank", (x.ndim, grid.ndim), "grid_sampler takes 4-D X and (N, H, W, 2) Grid")
    mode = c.attr("mode", "bilinear")
    pad = c.attr("padding_mode", "zeros")
    if mode not in ("bilinear", "nearest"):
        raise c.unsupported("mode", mode, "expected bilinear or nearest")
    if pad not in ("zeros", "border", "reflection"):
        raise c.unsupported("padding_mode", pad, "expected zeros, border or reflection")
    return mode, pad, bool(c.attr("align_corners", True))


def _source(g, size: int, ac: bool, pad: str):
    """Unnormalised, padded coordinates and d coord / d g (Paddle's ClipWithMask)."""
    t = g.dtype.type
    mx = size - 1
    factor = t(mx * 0.5) if ac else t((mx + 1) * 0.5)
    v = (g + t(1)) * factor if ac else (g + t(1)) * factor - t(0.5)
    scale = np.full(g.shape, factor, g.dtype)
    if pad == "border":
        r = np.clip(v, t(0), t(mx))
        scale = scale * (r == v)
        v = r
    elif pad == "reflection":
        if ac:
            rng2 = t(mx * 2)
            neg = v < 0
            a = np.abs(v)
            with np.errstate(invalid="ignore", divide="ignore"):
                extra = a - np.floor(a / rng2) * rng2 if mx else np.zeros_like(a)
            flip = extra > (rng2 - extra)
            scale = scale * np.where(neg == flip, t(1), t(-1))
            v = np.minimum(extra, rng2 - extra) if mx else np.zeros_like(v)
        else:
            rng2 = t((mx + 1) * 2)
            s = v + t(0.5)
            neg = s < 0
            a = np.abs(s)
            extra = a - np.floor(a / rng2) * rng2
            flip = extra > (rng2 - extra)
            refl = np.minimum(extra, rng2 - extra) - t(0.5)
            clipped = np.clip(refl, t(0), t(mx))
            scale = scale * np.where(neg == flip, t(1), t(-1)) * (clipped == refl)
            v = clipped
    return v, scale


def _corners(x, gx, gy):
    """The 4 neighbours: [(ix, iy, inside, weight)], weights as Paddle forms them."""
    h, w = x.shape[2], x.shape[3]
    xw, yn = np.floor(gx), np.floor(gy)
    xe, ys = xw + 1, yn + 1
    dw, de, dn, ds = gx - xw, xe - gx, gy - yn, ys - gy
    out = []
    for cx, cy, wt in ((xw, yn, de * ds), (xe, yn, dw * ds), (xw, ys, de * dn), (xe, ys, dw * dn)):
        inside = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
        out.append((np.clip(cx, 0, w - 1).astype(np.int64), np.clip(cy, 0, h - 1).astype(np.int64), inside, wt))
    return out, (dw, de, dn, ds)


def _gather(x, ix, iy):
    """x (N, C, H, W) at per-batch (N, Ho, Wo) indices -> (N, C, Ho, Wo)."""
    nidx = np.arange(x.shape[0])[:, None, None]
    return np.moveaxis(x[nidx, :, iy, ix], -1, 1)


def _round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _grid_sampler(c: Call):
    x, grid = c.x("X"), c.x("Grid")
    mode, pad, ac = _gs_setup(c, x, grid)
    h, w = x.shape[2], x.shape[3]
    gx, _ = _source(grid[..., 0], w, ac, pad)
    gy, _ = _source(grid[..., 1], h, ac, pad)
    if mode == "nearest":
        rx, ry = _round_half_away(gx), _round_half_away(gy)
        inside = (rx >= 0) & (rx <= w - 1) & (ry >= 0) & (ry <= h - 1)
        v = _gather(x, np.clip(rx, 0, w - 1).astype(np.int64), np.clip(ry, 0, h - 1).astype(np.int64))
        return {"Output": np.where(inside[:, None], v, 0).astype(x.dtype, copy=False)}
    corners, _ = _corners(x, gx, gy)
    out = np.zeros((x.shape[0], x.shape[1]) + gx.shape[1:], x.dtype)
    for ix, iy, inside, wt in corners:
        out = out + np.where(inside[:, None], _gather(x, ix, iy), 0) * wt[:, None]
    return {"Output": out.astype(x.dtype, copy=False)}


def _grid_sampler_grad(c: Call):
    x, grid, dout = c.x("X"), c.x("Grid"), c.x("Output@GRAD")
    mode, pad, ac = _gs_setup(c, x, grid)
    n, ch, h, w = x.shape
    gx, sx = _source(grid[..., 0], w, ac, pad)
    gy, sy = _source(grid[..., 1], h, ac, pad)
    res = {}
    dx = np.zeros((n, h * w, ch), x.dtype)
    nidx = np.arange(n)[:, None, None]
    dflat = np.moveaxis(dout, 1, -1)                                   # (N, Ho, Wo, C)
    if mode == "nearest":
        rx, ry = _round_half_away(gx), _round_half_away(gy)
        inside = (rx >= 0) & (rx <= w - 1) & (ry >= 0) & (ry <= h - 1)
        flat = (np.clip(ry, 0, h - 1) * w + np.clip(rx, 0, w - 1)).astype(np.int64)
        np.add.at(dx, (np.broadcast_to(nidx, flat.shape), flat), np.where(inside[..., None], dflat, 0))
        if c.wants("Grid@GRAD"):
            res["Grid@GRAD"] = np.zeros_like(grid)
    else:
        corners, (dw, de, dn, ds) = _corners(x, gx, gy)
        vals = []
        for ix, iy, inside, wt in corners:
            flat = iy * w + ix
            np.add.at(dx, (np.broadcast_to(nidx, flat.shape), flat),
                      np.where(inside[..., None], dflat * wt[..., None], 0))
            vals.append(np.where(inside[:, None], _gather(x, ix, iy), 0))
        if c.wants("Grid@GRAD"):
            v_wn, v_en, v_ws, v_es = vals
            ggx = (dout * ((v_en - v_wn) * ds[:, None] + (v_es - v_ws) * dn[:, None])).sum(axis=1)
            ggy = (dout * ((v_ws - v_wn) * de[:, None] + (v_es - v_en) * dw[:, None])).sum(axis=1)
            res["Grid@GRAD"] = np.stack([ggx * sx, ggy * sy], axis=-1).astype(grid.dtype, copy=False)
    if c.wants("X@GRAD"):
        res["X@GRAD"] = np.moveaxis(dx.reshape(n, h, w, ch), -1, 1).astype(x.dtype, copy=False)
    return res


def _gs_samples(rng):
    x = rng.standard_normal((2, 2, 3, 4))

    def grid(lo, hi, shape=(2, 3, 3, 2)):
        return rng.uniform(lo, hi, shape)
    S = Sample
    return [
        S({"X": [x], "Grid": [grid(-0.9, 0.9)]}, {"mode": "bilinear", "padding_mode": "zeros", "align_corners": True},
          note="bilinear zeros align_corners"),
        S({"X": [x], "Grid": [grid(-1.2, 1.2)]}, {"mode": "bilinear", "padding_mode": "zeros",
                                                  "align_corners": False}, note="bilinear zeros"),
        S({"X": [x], "Grid": [grid(-1.3, 1.3)]}, {"mode": "bilinear", "padding_mode": "border",
                                                  "align_corners": False}, note="bilinear border"),
        S({"X": [x], "Grid": [grid(-1.6, 1.6)]}, {"mode": "bilinear", "padding_mode": "reflection",
                                                  "align_corners": True}, note="bilinear reflection align_corners"),
        S({"X": [x], "Grid": [grid(-1.6, 1.6)]}, {"mode": "bilinear", "padding_mode": "reflection",
                                                  "align_corners": False}, note="bilinear reflection"),
        S({"X": [x], "Grid": [grid(-1.1, 1.1)]}, {"mode": "nearest", "padding_mode": "zeros",
                                                  "align_corners": False}, wrt=("X",), note="nearest zeros"),
        S({"X": [x], "Grid": [grid(-1.4, 1.4)]}, {"mode": "nearest", "padding_mode": "border",
                                                  "align_corners": True}, wrt=("X",), note="nearest border"),
    ]


register(paddle_opdef("grid_sampler", _grid_sampler, {"grid_sampler_grad": _grid_sampler_grad},
                      samples=_gs_samples, attrs_handled=("mode", "padding_mode", "align_corners"),
                      doc="samples X at Grid's normalised (x, y) points: bilinear or nearest, 3 padding modes"))


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
