"""affine_grid and grid_sampler: spatial transformer sampling, with their grads.

Paddle 3.3.1's CPU kernels, in NumPy terms:

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
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


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
