"""Vision ops with gradients: unpool3d, fractional_max_pool3d, psroi_pool,
deformable_conv (v2, with Mask) and deformable_conv_v1.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels):

* unpool3d (max): `Out[Indices] = X` per (N, C) volume, Out of
  `output_size` (Paddle's shape inference reads it as the shape; the Python
  API computes `(in-1)*s - 2p + k`); the grad reads Out@GRAD at Indices.
* fractional_max_pool3d: fractional_max_pool2d one axis further - per axis
  `a = (in - k) / (out - 1)` (disjoint windows with u rescaled when k is 0),
  windows `[int((o+u)*a) - int(u*a), ...)` in float; out the window's first
  maximum, mask (int32) its flat index in the volume; the grad adds out@GRAD
  at mask. A random_u of 0 draws u from the interpreter's generator.
* psroi_pool: each box `round(x1)*scale .. (round(x2)+1)*scale` (at least
  0.1), bins `[floor(p*bin + start), ceil((p+1)*bin + start))` clipped to
  the input; output channel c of bin (ph, pw) averages input channel
  `(c*PH + ph)*PW + pw` over the bin (0 when empty). RoisNum (int32) gives
  each box's image (without it, one image).
* deformable_conv: the input sampled bilinearly at
  `(ho*s - p + i*d + dh, wo*s - p + j*d + dw)` per kernel tap, offsets
  `Offset[b, g*2*K + 2*k (+1), ho, wo]` per deformable group g (corners
  outside the input read 0; a point at or beyond -1 / size reads 0), times
  `Mask[b, g*K + k, ho, wo]` (v2), then a grouped convolution with Filter.
  The grads are the exact derivatives of that (bilinear in the offsets).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ExecutionError
from .paddle_table import paddle_opdef
from .pool import distinct
from .pool_more import fractional_windows, int_list, max_with_index, scatter_by_mask
from .registry import Call, Sample, register


# --------------------------------------------------------------------------
# unpool3d
# --------------------------------------------------------------------------
def _unpool3d_setup(c: Call, x):
    if x.ndim != 5:
        raise c.unsupported("X rank", x.ndim, "unpool3d takes a 5-D input")
    if c.attr("data_format", "NCDHW") != "NCDHW":
        raise c.unsupported("data_format", c.attr("data_format"), "unpool3d takes NCDHW")
    osz = [int(v) for v in (c.attr("output_size", []) or [])]
    if len(osz) != 3 or min(osz) < 1:
        # Paddle's shape inference takes output_size as the output's shape (zeros: an empty output)
        raise c.unsupported("output_size", osz, "three positive sizes (paddle.nn.functional.max_unpool3d "
                                                "computes them from ksize, strides and paddings)")
    shape = tuple(osz)
    idx = np.asarray(c.x("Indices")).astype(np.int64)
    if idx.shape != x.shape:
        raise ExecutionError(f"unpool3d: Indices {idx.shape} and X {x.shape} differ")
    vol = int(np.prod(shape))
    if idx.size and (idx.min() < 0 or idx.max() >= vol):
        raise ExecutionError(f"unpool3d: an index is outside the output volume of {vol}")
    return shape, idx.reshape(x.shape[0] * x.shape[1], -1), vol


def _unpool3d(c: Call):
    x = c.x("X")
    shape, idx, vol = _unpool3d_setup(c, x)
    out = np.zeros((idx.shape[0], vol), x.dtype)
    out[np.arange(idx.shape[0])[:, None], idx] = x.reshape(idx.shape)
    return {"Out": out.reshape(x.shape[:2] + shape)}


def _unpool3d_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    _, idx, vol = _unpool3d_setup(c, x)
    dy = np.asarray(c.x("Out@GRAD")).reshape(idx.shape[0], vol)
    return {"X@GRAD": np.take_along_axis(dy, idx, axis=1).reshape(x.shape).astype(x.dtype, copy=False)}


def _unpool3d_samples(rng):
    x = rng.standard_normal((1, 2, 2, 2, 3))
    # indices of a 2x2x2 stride-2 max pooling of a 4x4x6 volume: one per window
    od, oh, ow = np.meshgrid(np.arange(2), np.arange(2), np.arange(3), indexing="ij")
    pick = rng.integers(0, 2, (1, 2, 2, 2, 3, 3))
    idx = (((2 * od + pick[..., 0]) * 4 + (2 * oh + pick[..., 1])) * 6 + (2 * ow + pick[..., 2])).astype(np.int32)
    return [Sample({"X": [x], "Indices": [idx]}, {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0],
                                                  "output_size": [4, 4, 6], "data_format": "NCDHW"},
                   wrt=("X",), note="2x2x2 s2"),
            Sample({"X": [x], "Indices": [idx]}, {"ksize": [3, 3, 3], "strides": [2, 2, 2], "paddings": [1, 1, 1],
                                                  "output_size": [5, 4, 7], "data_format": "NCDHW"},
                   wrt=("X",), note="3x3x3 s2 pad 1, larger output")]


register(paddle_opdef("unpool3d", _unpool3d, {"unpool3d_grad": _unpool3d_grad}, samples=_unpool3d_samples,
                      attrs_handled=("ksize", "strides", "paddings", "output_size", "data_format"),
                      doc="3-D max unpooling: Out[Indices] = X in each volume"))


# --------------------------------------------------------------------------
# fractional_max_pool3d
# --------------------------------------------------------------------------
def _fractional_max_pool3d(c: Call):
    x = c.x("x")
    out, mask = max_with_index(x, fractional_windows(c, x, 3))
    return {"out": out, "mask": mask}


def _fractional_max_pool3d_grad(c: Call):
    if not c.wants("x@GRAD"):
        return {}
    x = c.x("x")
    return {"x@GRAD": scatter_by_mask(c, x, np.asarray(c.x("mask")), c.x("out@GRAD"))}


def _fractional3d_samples(rng):
    d = lambda *s: distinct(rng, s)  # noqa: E731
    return [
        Sample({"x": [d(1, 2, 5, 6, 5)]}, {"output_size": [2, 3, 2], "kernel_size": [0, 0, 0], "random_u": 0.3,
                                           "return_mask": True}, note="disjoint windows"),
        Sample({"x": [d(2, 1, 6, 5, 7)]}, {"output_size": [3, 2, 4], "kernel_size": [2, 2, 2], "random_u": 0.7,
                                           "return_mask": True}, note="kernel_size"),
    ]


register(paddle_opdef("fractional_max_pool3d", _fractional_max_pool3d,
                      {"fractional_max_pool3d_grad": _fractional_max_pool3d_grad}, samples=_fractional3d_samples,
                      attrs_handled=("output_size", "kernel_size", "random_u", "return_mask"),
                      doc="3-D fractional max pooling (windows from random_u; u drawn when 0)"))


# --------------------------------------------------------------------------
# psroi_pool
# --------------------------------------------------------------------------
def _c_round(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _psroi_setup(c: Call):
    x, rois = np.asarray(c.x("X")), np.asarray(c.x("ROIs"))
    ph, pw, oc = int(c.attr("pooled_height", 1)), int(c.attr("pooled_width", 1)), int(c.attr("output_channels", 1))
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
        raise ExecutionError(f"psroi_pool: X (N, C, H, W) and ROIs (R, 4) expected, got {x.shape}, {rois.shape}")
    if x.shape[1] != oc * ph * pw:
        raise ExecutionError(f"psroi_pool: X has {x.shape[1]} channels, output_channels*PH*PW is {oc * ph * pw}")
    if c.has("RoisNum"):
        counts = np.asarray(c.x("RoisNum")).reshape(-1).astype(np.int64)
        if counts.size != x.shape[0] or counts.sum() != rois.shape[0] or (counts < 0).any():
            raise ExecutionError(f"psroi_pool: RoisNum {counts.tolist()} does not split {rois.shape[0]} boxes "
                                 f"over {x.shape[0]} images")
        batch = np.repeat(np.arange(x.shape[0]), counts)
    elif x.shape[0] == 1:
        batch = np.zeros(rois.shape[0], np.int64)
    else:
        raise c.unsupported("ROIs", "LoD", "without RoisNum the boxes' LoD is needed; pass RoisNum")
    t = x.dtype.type
    scale = t(np.float32(c.attr("spatial_scale", 1.0)))
    h, w = x.shape[2:]
    weights = []
    for r in rois.astype(x.dtype):
        x1, y1 = t(_c_round(float(r[0]))) * scale, t(_c_round(float(r[1]))) * scale
        x2, y2 = t(_c_round(float(r[2])) + 1.0) * scale, t(_c_round(float(r[3])) + 1.0) * scale
        rh, rw = max(y2 - y1, t(0.1)), max(x2 - x1, t(0.1))
        bh, bw = rh / t(ph), rw / t(pw)

        def bins(start, size, n_bin, n):
            p = np.arange(n_bin).astype(x.dtype)
            lo = np.clip(np.floor(p * size + start).astype(np.int64), 0, n)
            hi = np.clip(np.ceil((p + t(1)) * size + start).astype(np.int64), 0, n)
            ar = np.arange(n)[None, :]
            return ((ar >= lo[:, None]) & (ar < hi[:, None])).astype(np.float64), hi - lo

        my, ly = bins(y1, bh, ph, h)
        mx, lx = bins(x1, bw, pw, w)
        area = np.outer(ly, lx).astype(np.float64)
        inv = np.where(area > 0, 1.0 / np.where(area > 0, area, 1), 0.0)
        weights.append((my, mx, inv))
    return x, batch, (oc, ph, pw), weights


def _psroi_pool(c: Call):
    x, batch, (oc, ph, pw), weights = _psroi_setup(c)
    h, w = x.shape[2:]
    out = np.zeros((len(weights), oc, ph, pw))
    for k, (my, mx, inv) in enumerate(weights):
        xs = x[batch[k]].astype(np.float64).reshape(oc, ph, pw, h, w)
        out[k] = np.einsum("cpqhw,ph,qw->cpq", xs, my, mx) * inv
    return {"Out": out.astype(x.dtype)}


def _psroi_pool_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, batch, (oc, ph, pw), weights = _psroi_setup(c)
    h, w = x.shape[2:]
    dy = np.asarray(c.x("Out@GRAD"), np.float64)
    dx = np.zeros((x.shape[0], oc, ph, pw, h, w))
    for k, (my, mx, inv) in enumerate(weights):
        dx[batch[k]] += np.einsum("cpq,ph,qw->cpqhw", dy[k] * inv, my, mx)
    return {"X@GRAD": dx.reshape(x.shape).astype(x.dtype)}


def _psroi_samples(rng):
    x = rng.standard_normal((2, 2 * 2 * 3, 6, 7))
    rois = np.array([[0.4, 0.6, 4.3, 5.2], [1.2, 0.3, 6.4, 3.9], [2.1, 2.2, 2.3, 2.6]])
    S = Sample
    return [S({"X": [x], "ROIs": [rois], "RoisNum": [np.array([2, 1], np.int32)]},
              {"pooled_height": 2, "pooled_width": 3, "output_channels": 2, "spatial_scale": 1.0}, wrt=("X",)),
            S({"X": [x], "ROIs": [rois * 2 + np.array([-3.0, -2.0, 4.0, 3.0])],
               "RoisNum": [np.array([1, 2], np.int32)]},
              {"pooled_height": 2, "pooled_width": 3, "output_channels": 2, "spatial_scale": 0.5}, wrt=("X",),
              note="spatial_scale, boxes past the edges")]


register(paddle_opdef("psroi_pool", _psroi_pool, {"psroi_pool_grad": _psroi_pool_grad}, samples=_psroi_samples,
                      attrs_handled=("pooled_height", "pooled_width", "output_channels", "spatial_scale"),
                      doc="position-sensitive RoI average pooling"))


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


# --------------------------------------------------------------------------
# yolov3_loss
# --------------------------------------------------------------------------
def _sce(x, label):
    """Sigmoid cross entropy, Paddle's stable form."""
    return np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _iou_cwh(x1, y1, w1, h1, x2, y2, w2, h2):
    """IoU of centre/size boxes (Paddle's CalcBoxIoU; broadcasts)."""
    ow = np.minimum(x1 + w1 / 2, x2 + w2 / 2) - np.maximum(x1 - w1 / 2, x2 - w2 / 2)
    oh = np.minimum(y1 + h1 / 2, y2 + h2 / 2) - np.maximum(y1 - h1 / 2, y2 - h2 / 2)
    inter = np.where((ow < 0) | (oh < 0), 0, ow * oh)
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / (w1 * h1 + w2 * h2 - inter)


class _Yolo:
    """What yolov3_loss and its grad share: the matched boxes and masks."""

    def __init__(self, c: Call):
        x = np.asarray(c.x("X"))
        self.x = x
        t = x.dtype.type
        self.anchors = [int(a) for a in c.attr("anchors")]
        self.amask = [int(a) for a in c.attr("anchor_mask")]
        self.ncls = int(c.attr("class_num"))
        n, ch, h, w = x.shape
        m = len(self.amask)
        if ch != m * (5 + self.ncls) or len(self.anchors) % 2 or max(self.amask, default=0) * 2 >= len(self.anchors):
            raise ExecutionError(f"yolov3_loss: X {x.shape} does not fit {m} masked anchors and "
                                 f"{self.ncls} classes")
        box = np.asarray(c.x("GTBox")).astype(x.dtype)
        label = np.asarray(c.x("GTLabel")).astype(np.int64)
        b = box.shape[1]
        score = np.asarray(c.x("GTScore")).astype(x.dtype) if c.has("GTScore") else np.ones((n, b), x.dtype)
        self.input_size = int(c.attr("downsample_ratio", 32)) * h
        scale = np.float32(c.attr("scale_x_y", 1.0))
        bias = np.float32(-0.5 * (float(scale) - 1.0))
        smooth = bool(c.attr("use_label_smooth", True))
        sw = min(1.0 / self.ncls, 1.0 / 40) if smooth else 0.0
        self.pos, self.neg = t(1.0 - sw), t(sw)
        p = x.reshape(n, m, 5 + self.ncls, h, w)
        self.p = p
        aw = np.array([self.anchors[2 * a] for a in self.amask], x.dtype)[None, :, None, None]
        ah = np.array([self.anchors[2 * a + 1] for a in self.amask], x.dtype)[None, :, None, None]
        col = np.arange(w).astype(x.dtype)[None, None, None, :]
        row = np.arange(h).astype(x.dtype)[None, None, :, None]
        px = (col + _sigmoid(p[:, :, 0]) * t(scale) + t(bias)) / t(h)
        py = (row + _sigmoid(p[:, :, 1]) * t(scale) + t(bias)) / t(h)
        pw = np.exp(p[:, :, 2]) * aw / t(self.input_size)
        ph = np.exp(p[:, :, 3]) * ah / t(self.input_size)
        valid = ~((box[:, :, 2] < 1e-6) | (box[:, :, 3] < 1e-6))                   # (N, B)
        obj = np.zeros((n, m, h, w), x.dtype)
        best = np.zeros((n, m, h, w), x.dtype)
        for i in range(n):
            for k in np.nonzero(valid[i])[0]:
                g = box[i, k]
                best[i] = np.maximum(best[i], _iou_cwh(px[i], py[i], pw[i], ph[i], g[0], g[1], g[2], g[3]))
        obj[best > np.float32(c.attr("ignore_thresh", 0.7))] = -1
        match = np.full((n, b), -1, np.int32)
        self.pos_cells = []      # (i, mask index, gj, gi, anchor, gt box, label, score)
        all_w = np.array(self.anchors[0::2], x.dtype) / t(self.input_size)
        all_h = np.array(self.anchors[1::2], x.dtype) / t(self.input_size)
        for i in range(n):
            for k in range(b):
                if not valid[i, k]:
                    continue
                g = box[i, k]
                gi, gj = int(g[0] * t(w)), int(g[1] * t(h))
                ious = _iou_cwh(t(0), t(0), all_w, all_h, t(0), t(0), g[2], g[3]).astype(np.float32)
                best_n, best_iou = 0, np.float32(0)
                for a, v in enumerate(ious):
                    if v > best_iou:
                        best_n, best_iou = a, v
                mi = self.amask.index(best_n) if best_n in self.amask else -1
                match[i, k] = mi
                if mi >= 0:
                    self.pos_cells.append((i, mi, gj, gi, best_n, g, int(label[i, k]), score[i, k]))
                    obj[i, mi, gj, gi] = score[i, k]
        self.obj, self.match = obj, match
        self.shape = (n, m, h, w)

    def targets(self, g, gi, gj, an):
        t = self.x.dtype.type
        h = self.shape[2]
        tx = g[0] * t(h) - t(gi)
        ty = g[1] * t(h) - t(gj)
        tw = np.log(g[2] * t(self.input_size) / t(self.anchors[2 * an]))
        th = np.log(g[3] * t(self.input_size) / t(self.anchors[2 * an + 1]))
        return tx, ty, tw, th, (t(2.0) - g[2] * g[3])


def _yolov3_loss(c: Call):
    y = _Yolo(c)
    x, p = y.x, y.p
    n = x.shape[0]
    loss = np.zeros(n, np.float64)
    for i, mi, gj, gi, an, g, lab, sc in y.pos_cells:
        tx, ty, tw, th, s2 = y.targets(g, gi, gj, an)
        v = p[i, mi, :, gj, gi]
        s = s2 * sc
        loss[i] += (_sce(v[0], tx) + _sce(v[1], ty) + abs(tw - v[2]) + abs(th - v[3])) * s
        lbl = np.where(np.arange(y.ncls) == lab, y.pos, y.neg)
        loss[i] += (_sce(v[5:], lbl) * sc).sum()
    o = p[:, :, 4]
    obj = y.obj
    lo = np.where(obj > 1e-5, _sce(o, 1.0) * obj, np.where(obj > -0.5, _sce(o, 0.0), 0))
    loss += lo.reshape(n, -1).sum(axis=1)
    return {"Loss": loss.astype(x.dtype), "ObjectnessMask": obj, "GTMatchMask": y.match}


def _yolov3_loss_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    y = _Yolo(c)
    x, p = y.x, y.p
    dl = np.asarray(c.x("Loss@GRAD"), np.float64).reshape(-1)
    dp = np.zeros(p.shape)
    for i, mi, gj, gi, an, g, lab, sc in y.pos_cells:
        tx, ty, tw, th, s2 = y.targets(g, gi, gj, an)
        v = p[i, mi, :, gj, gi].astype(np.float64)
        s = float(s2 * sc) * dl[i]
        dp[i, mi, 0, gj, gi] += (_sigmoid(v[0]) - tx) * s
        dp[i, mi, 1, gj, gi] += (_sigmoid(v[1]) - ty) * s
        dp[i, mi, 2, gj, gi] += (1.0 if v[2] > tw else -1.0) * s
        dp[i, mi, 3, gj, gi] += (1.0 if v[3] > th else -1.0) * s
        lbl = np.where(np.arange(y.ncls) == lab, y.pos, y.neg)
        dp[i, mi, 5:, gj, gi] += (_sigmoid(v[5:]) - lbl) * float(sc) * dl[i]
    o = p[:, :, 4].astype(np.float64)
    obj = y.obj
    d = np.where(obj > 1e-5, (_sigmoid(o) - 1.0) * obj, np.where(obj > -0.5, _sigmoid(o), 0))
    dp[:, :, 4] = d * dl[:, None, None, None]
    return {"X@GRAD": dp.reshape(x.shape).astype(x.dtype)}


def _yolov3_samples(rng):
    an = [10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119]
    x = rng.standard_normal((2, 3 * (5 + 3), 4, 4)) * 0.8
    box = np.array([[[0.30, 0.40, 0.20, 0.25], [0.70, 0.60, 0.10, 0.15], [0.55, 0.20, 0.05, 0.08]],
                    [[0.15, 0.80, 0.30, 0.40], [0.62, 0.35, 0.12, 0.10], [0.0, 0.0, 0.0, 0.0]]])
    label = np.array([[0, 2, 1], [1, 0, 2]], np.int32)
    score = np.array([[0.9, 0.7, 1.0], [0.8, 0.6, 1.0]])
    base = {"anchors": an, "anchor_mask": [0, 1, 2], "class_num": 3, "ignore_thresh": 0.7, "downsample_ratio": 32,
            "use_label_smooth": True, "scale_x_y": 1.0}
    return [
        Sample({"X": [x], "GTBox": [box], "GTLabel": [label]}, dict(base), wrt=("X",), note="label smoothing"),
        Sample({"X": [x], "GTBox": [box], "GTLabel": [label], "GTScore": [score]},
               dict(base, anchor_mask=[3, 4, 5], use_label_smooth=False, scale_x_y=1.2, ignore_thresh=0.5),
               wrt=("X",), note="GTScore, other anchors, scale_x_y"),
        Sample({"X": [x], "GTBox": [box * np.array([1, 1, 3, 3])], "GTLabel": [label]},
               dict(base, anchor_mask=[1, 3, 4], downsample_ratio=16, ignore_thresh=0.3), wrt=("X",),
               note="boxes matched to other masks"),
        Sample({"X": [x], "GTBox": [np.array([[[0.30, 0.40, 0.20, 0.25], [0.33, 0.45, 0.22, 0.24],
                                               [0.70, 0.60, 0.10, 0.15]]] * 2)],
                "GTLabel": [np.array([[0, 2, 1], [1, 1, 0]], np.int32)]}, dict(base), wrt=("X",),
               note="two boxes in one cell and anchor"),
    ]


register(paddle_opdef("yolov3_loss", _yolov3_loss, {"yolov3_loss_grad": _yolov3_loss_grad}, samples=_yolov3_samples,
                      attrs_handled=("anchors", "anchor_mask", "class_num", "ignore_thresh", "downsample_ratio",
                                     "use_label_smooth", "scale_x_y"),
                      doc="YOLOv3 loss per image (location, class, objectness); gradient for X only"))
