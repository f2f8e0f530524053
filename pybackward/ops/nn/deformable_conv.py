"""deformable_conv (v2, with Mask) and deformable_conv_v1, with their grads.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels):

* deformable_conv: the input sampled bilinearly at
  `(ho*s - p + i*d + dh, wo*s - p + j*d + dw)` per kernel tap, offsets
  `Offset[b, g*2*K + 2*k (+1), ho, wo]` per deformable group g (corners
  outside the input read 0; a point at or beyond -1 / size reads 0), times
  `Mask[b, g*K + k, ho, wo]` (v2), then a grouped convolution with Filter.
  The grads are the exact derivatives of that (bilinear in the offsets).

"""
from __future__ import annotations


import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from .pool_nd import int_list
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# deformable_conv (v2, with Mask) and deformable_conv_v1
# --------------------------------------------------------------------------
class _Deform:
    """The sampling of one deformable convolution: corner indices and weights
    per (batch, deformable group, tap, ho, wo)."""

    def __init__(self, c: Call, x, offset, filt, mask):
        if x.ndim != 4 or filt.ndim != 4 or offset.ndim != 4:
            raise c.unsupported("Input rank", x.ndim, "2-D deformable convolution (NCHW) only")
        self.s, self.p, self.d = (int_list(c, n, 2, dv) for n, dv in (("strides", [1, 1]), ("paddings", [0, 0]),
                                                                    ("dilations", [1, 1])))
        self.g = int(c.attr("groups", 1))
        self.dg = int(c.attr("deformable_groups", 1))
        n, ch, h, w = x.shape
        o, cg, kh, kw = filt.shape
        if self.g < 1 or ch != cg * self.g or o % self.g or ch % self.dg:
            raise ExecutionError(f"{c.op_type}: Filter {filt.shape} does not fit Input {x.shape} with groups "
                                 f"{self.g}, deformable_groups {self.dg}")
        ho = (h + 2 * self.p[0] - (self.d[0] * (kh - 1) + 1)) // self.s[0] + 1
        wo = (w + 2 * self.p[1] - (self.d[1] * (kw - 1) + 1)) // self.s[1] + 1
        k = kh * kw
        if offset.shape != (n, 2 * k * self.dg, ho, wo):
            raise ExecutionError(f"{c.op_type}: Offset {offset.shape}, expected {(n, 2 * k * self.dg, ho, wo)}")
        if mask is not None and mask.shape != (n, k * self.dg, ho, wo):
            raise ExecutionError(f"{c.op_type}: Mask {mask.shape}, expected {(n, k * self.dg, ho, wo)}")
        self.shape = (n, ch, h, w, o, kh, kw, ho, wo)
        t = x.dtype.type
        off = offset.reshape(n, self.dg, k, 2, ho, wo)
        ki, kj = np.divmod(np.arange(k), kw)
        base_h = (np.arange(ho) * self.s[0] - self.p[0])[None, :, None] + (ki * self.d[0])[:, None, None]
        base_w = (np.arange(wo) * self.s[1] - self.p[1])[None, None, :] + (kj * self.d[1])[:, None, None]
        ph = base_h.astype(x.dtype)[None, None] + off[:, :, :, 0]          # (N, DG, K, Ho, Wo)
        pw = base_w.astype(x.dtype)[None, None] + off[:, :, :, 1]
        self.inside = (ph > t(-1)) & (pw > t(-1)) & (ph < t(h)) & (pw < t(w))
        hl, wl = np.floor(ph).astype(np.int64), np.floor(pw).astype(np.int64)
        lh, lw = ph - hl.astype(x.dtype), pw - wl.astype(x.dtype)
        hh, hw = t(1) - lh, t(1) - lw
        self.lh, self.lw, self.hh, self.hw = lh, lw, hh, hw
        corners = [(hl, wl, hh * hw), (hl, wl + 1, hh * lw), (hl + 1, wl, lh * hw), (hl + 1, wl + 1, lh * lw)]
        self.corners = []
        for ci, cj, wt in corners:
            ok = self.inside & (ci >= 0) & (cj >= 0) & (ci <= h - 1) & (cj <= w - 1)
            self.corners.append((np.clip(ci, 0, h - 1), np.clip(cj, 0, w - 1), wt, ok))
        self.mask = None if mask is None else mask.reshape(n, self.dg, k, ho, wo)

    def corner_values(self, x):
        """Per corner: x at it, (N, DG, C/DG, K, Ho, Wo), 0 outside."""
        n, ch = x.shape[:2]
        xg = x.reshape(n, self.dg, ch // self.dg, x.shape[2], x.shape[3])
        bi = np.arange(n)[:, None, None, None, None, None]
        gi = np.arange(self.dg)[None, :, None, None, None, None]
        ci = np.arange(ch // self.dg)[None, None, :, None, None, None]
        out = []
        for hi, wi, _, ok in self.corners:
            v = xg[bi, gi, ci, hi[:, :, None], wi[:, :, None]]
            out.append(np.where(ok[:, :, None], v, 0))
        return out

    def columns(self, x):
        """(N, C, K, Ho, Wo): the sampled (masked) input per tap."""
        vals = self.corner_values(x)
        col = sum(wt[:, :, None] * v for (_, _, wt, _), v in zip(self.corners, vals))
        raw = col
        if self.mask is not None:
            col = col * self.mask[:, :, None]
        n, ch = x.shape[:2]
        return col.reshape(n, ch, *col.shape[3:]), raw, vals


def _deform_inputs(c: Call):
    x = np.asarray(c.x("Input"))
    mask = np.asarray(c.x("Mask")) if c.op_type.startswith("deformable_conv") and c.has("Mask") else None
    return x, np.asarray(c.x("Offset")), np.asarray(c.x("Filter")), mask


def _deform_conv(c: Call):
    x, offset, filt, mask = _deform_inputs(c)
    dfm = _Deform(c, x, offset, filt, mask)
    n, ch, h, w, o, kh, kw, ho, wo = dfm.shape
    col, _, _ = dfm.columns(x)
    g = dfm.g
    colg = col.reshape(n, g, ch // g, kh * kw, ho, wo)
    wg = filt.reshape(g, o // g, ch // g, kh * kw)
    out = np.einsum("gock,bgckhw->bgohw", wg, colg).reshape(n, o, ho, wo)
    return {"Output": out.astype(x.dtype)}


def _deform_conv_grad(c: Call):
    x, offset, filt, mask = _deform_inputs(c)
    dfm = _Deform(c, x, offset, filt, mask)
    n, ch, h, w, o, kh, kw, ho, wo = dfm.shape
    g, dg, k = dfm.g, dfm.dg, kh * kw
    dy = np.asarray(c.x("Output@GRAD")).reshape(n, g, o // g, ho, wo)
    col, raw, vals = dfm.columns(x)
    wg = filt.reshape(g, o // g, ch // g, k)
    res = {}
    if c.wants("Filter@GRAD"):
        dw = np.einsum("bgohw,bgckhw->gock", dy, col.reshape(n, g, ch // g, k, ho, wo))
        res["Filter@GRAD"] = dw.reshape(filt.shape).astype(filt.dtype)
    dcol = np.einsum("gock,bgohw->bgckhw", wg, dy).reshape(n, dg, ch // dg, k, ho, wo)
    m = dfm.mask[:, :, None] if dfm.mask is not None else 1
    if c.wants("Mask@GRAD") and dfm.mask is not None:
        res["Mask@GRAD"] = (dcol * raw).sum(axis=2).reshape(mask.shape).astype(mask.dtype)
    dval = dcol * m                                                       # (N, DG, C/DG, K, Ho, Wo)
    if c.wants("Input@GRAD"):
        dxg = np.zeros((n, dg, ch // dg, h * w), x.dtype)
        bi = np.arange(n)[:, None, None, None, None, None]
        gi = np.arange(dg)[None, :, None, None, None, None]
        ci = np.arange(ch // dg)[None, None, :, None, None, None]
        for hi, wi, wt, ok in dfm.corners:
            contrib = dval * np.where(ok, wt, 0)[:, :, None]
            flat = (hi * w + wi)[:, :, None]
            np.add.at(dxg, (bi, gi, ci, np.broadcast_to(flat, contrib.shape)), contrib)
        res["Input@GRAD"] = dxg.reshape(x.shape)
    if c.wants("Offset@GRAD"):
        v1, v2, v3, v4 = vals
        lh, lw, hh, hw = (a[:, :, None] for a in (dfm.lh, dfm.lw, dfm.hh, dfm.hw))
        inside = dfm.inside[:, :, None]
        d_h = np.where(inside, -hw * v1 - lw * v2 + hw * v3 + lw * v4, 0)
        d_w = np.where(inside, -hh * v1 + hh * v2 - lh * v3 + lh * v4, 0)
        goff = np.stack([(dval * d_h).sum(axis=2), (dval * d_w).sum(axis=2)], axis=3)   # (N, DG, K, 2, Ho, Wo)
        res["Offset@GRAD"] = goff.reshape(offset.shape).astype(offset.dtype)
    return res


def _deform_samples(rng, v2: bool):
    def case(n, ch, h, w, o, kh, kw, s, p, d, g, dg, step, note):
        ho = (h + 2 * p - (d * (kh - 1) + 1)) // s + 1
        wo = (w + 2 * p - (d * (kw - 1) + 1)) // s + 1
        # offsets away from integers (the bilinear kinks)
        off = (rng.integers(-2, 3, (n, 2 * kh * kw * dg, ho, wo)) + rng.uniform(0.15, 0.85, (n, 2 * kh * kw * dg, ho, wo)))
        ins = {"Input": [rng.standard_normal((n, ch, h, w))], "Offset": [off],
               "Filter": [rng.standard_normal((o, ch // g, kh, kw))]}
        if v2:
            ins["Mask"] = [rng.uniform(0.2, 1.0, (n, kh * kw * dg, ho, wo))]
        attrs = {"strides": [s, s], "paddings": [p, p], "dilations": [d, d], "groups": g, "deformable_groups": dg,
                 "im2col_step": step}
        return Sample(ins, attrs, note=note)
    # im2col_step only batches Paddle's work (the Python API passes 1); the last case keeps
    # Paddle's default 64, with which its grad kernel skips every image (PADDLE_WRONG)
    return [case(1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, "3x3 pad 1"),
            case(2, 4, 6, 5, 4, 2, 3, 2, 0, 1, 2, 2, 1, "stride 2, groups 2, deformable groups 2"),
            case(2, 2, 6, 6, 2, 2, 2, 1, 1, 2, 1, 1, 2, "dilation 2, im2col_step 2"),
            case(1, 2, 5, 4, 2, 3, 2, 1, 1, 1, 1, 1, 64, "im2col_step 64")]


_DC_ATTRS = ("strides", "paddings", "dilations", "groups", "deformable_groups", "im2col_step")
register(paddle_opdef("deformable_conv", _deform_conv, {"deformable_conv_grad": _deform_conv_grad},
                      samples=lambda rng: _deform_samples(rng, True), attrs_handled=_DC_ATTRS,
                      doc="modulated deformable convolution (DCNv2): bilinear samples at offsets times Mask"))
register(paddle_opdef("deformable_conv_v1", _deform_conv, {"deformable_conv_v1_grad": _deform_conv_grad},
                      samples=lambda rng: _deform_samples(rng, False), attrs_handled=_DC_ATTRS,
                      doc="deformable convolution (DCNv1): bilinear samples at learned offsets"))
