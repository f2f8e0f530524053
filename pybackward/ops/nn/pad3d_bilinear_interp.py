"""pad3d and bilinear_interp_v2, with their grads: both separable per spatial axis.

Both ops here are separable per spatial axis: each axis gets an (out, in)
matrix (one-hot gathers for pad3d, interpolation weights for bilinear), the
forward applies them along their axes and the grad applies the transposes.

Paddle conventions (checked against Paddle 3.3.1 by testdata/ops/gen_nn.py):
* pad3d `paddings` are `[left, right, top, bottom, front, back]` (W first);
  a `Paddings` tensor overrides the attr; reflect excludes the edge, needs
  pads < dim; circular wraps.
* bilinear_interp_v2 size: SizeTensor, else OutSize, else the Scale tensor or
  a 2-value `scale` attr (out = int(in * scale)), else out_h/out_w. The
  source ratio is (in-1)/(out-1) with align_corners, else 1/scale when a
  scale was given (even if OutSize then set the size), else in/out; with
  align_mode 0 (and not align_corners) source = ratio*(o+0.5)-0.5 clamped at
  0, else ratio*o. An input already of the output size is copied.
"""
from __future__ import annotations

import numpy as np

from ..registry import Call, GradSpec, OpDef, Sample, register


def _apply(a: np.ndarray, m: np.ndarray, axis: int) -> np.ndarray:
    """Apply the (out, in) matrix `m` along `axis` of `a`."""
    return np.moveaxis(np.tensordot(m, a, axes=([1], [axis])), 0, axis)


# --------------------------------------------------------------------------
# pad3d
# --------------------------------------------------------------------------
def _pad3d_setup(c: Call, x: np.ndarray):
    if x.ndim != 5:
        raise c.unsupported("X rank", x.ndim, "pad3d needs a 5-D input")
    fmt = c.attr("data_format", "NCDHW")
    if fmt not in ("NCDHW", "NDHWC"):
        raise c.unsupported("data_format", fmt, "pad3d takes NCDHW or NDHWC")
    if c.has("Paddings"):
        pads = [int(t) for t in np.asarray(c.x("Paddings")).reshape(-1)]
    else:
        pads = [int(t) for t in c.attr("paddings", [0] * 6)]
    if len(pads) != 6:
        raise c.unsupported("paddings", pads, "pad3d needs 6 values")
    if min(pads) < 0:
        raise c.unsupported("paddings", pads, "negative padding")
    mode = c.attr("mode", "constant")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise c.unsupported("mode", mode, "expected constant, reflect, replicate or circular")
    spatial = (1, 2, 3) if fmt == "NDHWC" else (2, 3, 4)
    # (axis, before, after) for D, H, W
    axes = [(spatial[0], pads[4], pads[5]), (spatial[1], pads[2], pads[3]), (spatial[2], pads[0], pads[1])]
    return mode, axes


def _pad_matrix(c: Call, n: int, before: int, after: int, mode: str) -> np.ndarray:
    """(n + before + after, n) one-hot gather matrix of one axis (rows of
    constant padding are zero)."""
    o = np.arange(-before, n + after)
    if mode == "reflect":
        if before >= n or after >= n:
            raise c.unsupported("paddings", (before, after), f"reflect padding must be smaller than the dim ({n})")
        src = np.abs(o)
        src = np.minimum(src, 2 * (n - 1) - src)
    elif mode == "replicate":
        src = np.clip(o, 0, n - 1)
    elif mode == "circular":
        src = np.mod(o, n)
    else:
        src = o
    m = np.zeros((o.size, n))
    ok = (src >= 0) & (src < n)
    m[np.nonzero(ok)[0], src[ok]] = 1.0
    return m


def _pad3d(c: Call):
    x = c.x("X")
    mode, axes = _pad3d_setup(c, x)
    if mode == "constant":
        width = [(0, 0)] * 5
        for ax, b, a in axes:
            width[ax] = (b, a)
        out = np.pad(x, width, mode="constant", constant_values=float(c.attr("value", 0.0)))
        return {"Out": out.astype(x.dtype, copy=False)}
    out = x
    for ax, b, a in axes:
        out = _apply(out, _pad_matrix(c, x.shape[ax], b, a, mode).astype(x.dtype), ax)
    return {"Out": out.astype(x.dtype, copy=False)}


def _pad3d_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, dy = c.x("X"), c.x("Out@GRAD")
    mode, axes = _pad3d_setup(c, x)
    dx = dy
    for ax, b, a in axes:
        m = _pad_matrix(c, x.shape[ax], b, a, mode)
        if m.shape[0] != dx.shape[ax]:
            raise ValueError(f"pad3d_grad: Out@GRAD dim {ax} is {dx.shape[ax]}, expected {m.shape[0]}")
        dx = _apply(dx, m.T.astype(dy.dtype), ax)
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _pad3d_samples(rng: np.random.Generator):
    r = rng.standard_normal
    return [
        Sample({"X": [r((1, 2, 2, 3, 3))]}, {"paddings": [1, 0, 0, 2, 1, 1], "mode": "constant", "value": 0.5},
               note="constant"),
        Sample({"X": [r((1, 1, 3, 3, 4))]}, {"paddings": [2, 1, 1, 2, 0, 1], "mode": "reflect"}, note="reflect"),
        Sample({"X": [r((1, 2, 2, 3, 3))]}, {"paddings": [2, 1, 0, 2, 1, 0], "mode": "replicate"}, note="replicate"),
        Sample({"X": [r((1, 2, 2, 2, 3))]}, {"paddings": [2, 1, 1, 2, 1, 1], "mode": "circular"}, note="circular"),
        Sample({"X": [r((1, 2, 3, 3, 2))]}, {"paddings": [1, 1, 0, 1, 1, 0], "mode": "reflect",
                                             "data_format": "NDHWC"}, note="NDHWC"),
        Sample({"X": [r((1, 1, 2, 3, 3))], "Paddings": [np.array([1, 0, 2, 1, 0, 1], dtype=np.int32)]},
               {"paddings": [0] * 6, "mode": "replicate"}, wrt=("X",), note="Paddings tensor"),
    ]


register(OpDef(
    type="pad3d", inputs=("X", "Paddings"), outputs=("Out",), kernel=_pad3d,
    grad=GradSpec("pad3d_grad", ("X", "Paddings", "Out@GRAD"), ("X@GRAD",), kernel=_pad3d_grad),
    samples=_pad3d_samples, attrs_handled=("paddings", "mode", "value", "data_format"),
    doc="pads the 3 spatial dims of a 5-D tensor (constant / reflect / replicate / circular)"))


# --------------------------------------------------------------------------
# bilinear_interp_v2
# --------------------------------------------------------------------------
def _interp_layout(c: Call, x: np.ndarray) -> str:
    if x.ndim != 4:
        raise c.unsupported("X rank", x.ndim, "bilinear_interp_v2 needs a 4-D input")
    layout = c.attr("data_layout", "NCHW")
    if layout not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_layout", layout, "expected NCHW or NHWC")
    method = c.attr("interp_method", "bilinear")
    if method != "bilinear":
        raise c.unsupported("interp_method", method, "bilinear_interp_v2 computes bilinear only")
    return "NHWC" if layout == "NHWC" else "NCHW"


def _interp_size(c: Call, in_h: int, in_w: int):
    """(out_h, out_w, scale_h, scale_w) as Paddle's bilinear kernel works them out."""
    scale_h = scale_w = -1.0
    out_h, out_w = int(c.attr("out_h", 0)), int(c.attr("out_w", 0))
    if c.xs("SizeTensor"):
        sizes = [int(np.asarray(t).reshape(-1)[0]) for t in c.xs("SizeTensor")]
        if len(sizes) != 2:
            raise c.unsupported("SizeTensor", sizes, "expected 2 tensors (out_h, out_w)")
        out_h, out_w = sizes
    else:
        if c.has("Scale"):
            sc = [float(t) for t in np.asarray(c.x("Scale"), np.float32).reshape(-1)]
            if not sc:
                raise c.unsupported("Scale", sc, "empty Scale tensor")
            scale_h, scale_w = (sc[0], sc[1]) if len(sc) > 1 else (sc[0], sc[0])
            if scale_h <= 0 or scale_w <= 0:
                raise c.unsupported("Scale", sc, "scale must be positive")
        else:
            sc = [float(t) for t in (c.attr("scale", []) or [])]
            if len(sc) == 1:
                raise c.unsupported("scale", sc, "Paddle reads 2 values (scale_h, scale_w) for bilinear")
            if len(sc) > 1:
                scale_h, scale_w = sc[0], sc[1]
                if scale_h <= 0 or scale_w <= 0:
                    raise c.unsupported("scale", sc, "scale must be positive")
        if scale_h > 0 and scale_w > 0:
            out_h = int(np.float32(in_h) * np.float32(scale_h))
            out_w = int(np.float32(in_w) * np.float32(scale_w))
        if c.has("OutSize"):
            osz = [int(t) for t in np.asarray(c.x("OutSize")).reshape(-1)]
            if len(osz) != 2:
                raise c.unsupported("OutSize", osz, "expected 2 values")
            out_h, out_w = osz
    if out_h < 1 or out_w < 1:
        raise c.unsupported("out_h/out_w", (out_h, out_w), "output size must be positive")
    return out_h, out_w, scale_h, scale_w


def interp_matrix(n_in: int, n_out: int, scale: float, align_corners: bool, align_mode: int,
                   double_src: bool = False) -> np.ndarray:
    """(n_out, n_in) weights of one axis, in Paddle's float32 arithmetic.
    `double_src`: the align_mode-0 source index `ratio * (k + 0.5) - 0.5` is
    computed in double and then stored as float (else all in float)."""
    if n_out > 1:
        if align_corners:
            ratio = np.float32(np.float32(n_in - 1) / np.float32(n_out - 1))
        elif scale > 0:
            ratio = np.float32(1.0 / np.float64(np.float32(scale)))
        else:
            ratio = np.float32(np.float32(n_in) / np.float32(n_out))
    else:
        ratio = np.float32(0.0)
    k = np.arange(n_out)
    align_flag = align_mode == 0 and not align_corners
    k32 = k.astype(np.float32)
    if align_flag and double_src:
        src_d = np.float64(ratio) * (k + 0.5) - 0.5
        src = src_d.astype(np.float32)
    elif align_flag:
        src = (ratio * (k32 + np.float32(0.5))).astype(np.float32) - np.float32(0.5)
    else:
        src = (ratio * k32).astype(np.float32)
    lo = np.maximum(np.trunc(src_d if align_flag and double_src else src).astype(np.int64), 0)
    hi = np.where(lo + 1 < n_in - 1, lo + 1, n_in - 1)
    d_hi = (np.maximum(src, np.float32(0)) - lo.astype(np.float32)).astype(np.float32)
    d_lo = (np.float32(1) - d_hi).astype(np.float32)
    m = np.zeros((n_out, n_in))
    np.add.at(m, (k, lo), d_lo.astype(np.float64))
    np.add.at(m, (k, hi), d_hi.astype(np.float64))
    return m


def _interp_matrices(c: Call, in_h, in_w, out_h, out_w, scale_h, scale_w, grad: bool = False):
    """Weights of the H and W axes. Paddle's forward kernel computes the H
    source index in double and the W one in float; its grad kernel both in
    float (measured: they differ in the last float bit)."""
    ac = bool(c.attr("align_corners", True))
    am = int(c.attr("align_mode", 1))
    return (interp_matrix(in_h, out_h, scale_h, ac, am, double_src=not grad),
            interp_matrix(in_w, out_w, scale_w, ac, am))


def _bilinear(c: Call):
    x = c.x("X")
    layout = _interp_layout(c, x)
    ha, wa = (1, 2) if layout == "NHWC" else (2, 3)
    in_h, in_w = x.shape[ha], x.shape[wa]
    out_h, out_w, sh, sw = _interp_size(c, in_h, in_w)
    if (in_h, in_w) == (out_h, out_w):
        return {"Out": x.copy()}
    mh, mw = _interp_matrices(c, in_h, in_w, out_h, out_w, sh, sw)
    out = _apply(_apply(x.astype(np.float64), mh, ha), mw, wa)
    return {"Out": out.astype(x.dtype, copy=False)}


def _bilinear_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, dy = c.x("X"), c.x("Out@GRAD")
    layout = _interp_layout(c, x)
    ha, wa = (1, 2) if layout == "NHWC" else (2, 3)
    in_h, in_w = x.shape[ha], x.shape[wa]
    out_h, out_w, sh, sw = _interp_size(c, in_h, in_w)
    if (dy.shape[ha], dy.shape[wa]) != (out_h, out_w):
        raise ValueError(f"bilinear_interp_v2_grad: Out@GRAD spatial {(dy.shape[ha], dy.shape[wa])} "
                         f"!= computed {(out_h, out_w)}")
    if (in_h, in_w) == (out_h, out_w):
        return {"X@GRAD": dy.astype(x.dtype, copy=True)}
    mh, mw = _interp_matrices(c, in_h, in_w, out_h, out_w, sh, sw, grad=True)
    dx = _apply(_apply(dy.astype(np.float64), mh.T, ha), mw.T, wa)
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _bilinear_samples(rng: np.random.Generator):
    r = rng.standard_normal
    i32 = lambda *v: np.array(v, dtype=np.int32)  # noqa: E731
    S = Sample
    return [
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 5, "out_w": 7, "align_corners": True}, note="align_corners"),
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 5, "out_w": 7, "align_corners": False, "align_mode": 0},
          note="align_mode 0"),
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 5, "out_w": 3, "align_corners": False, "align_mode": 1},
          note="align_mode 1"),
        S({"X": [r((1, 1, 6, 7))]}, {"out_h": 4, "out_w": 3, "align_corners": False, "align_mode": 0},
          note="downsample"),
        S({"X": [r((1, 2, 3, 4))]}, {"scale": [1.5, 2.0], "align_corners": False, "align_mode": 0}, note="scale attr"),
        S({"X": [r((1, 2, 3, 3))], "OutSize": [i32(5, 4)]}, {"out_h": 2, "out_w": 2, "align_corners": False},
          wrt=("X",), note="OutSize"),
        S({"X": [r((1, 2, 3, 3))], "SizeTensor": [i32(4), i32(5)]}, {"align_corners": True}, wrt=("X",),
          outputs=None, note="SizeTensor"),
        S({"X": [r((1, 1, 3, 4))], "Scale": [np.array([1.5, 2.5], np.float32)]},
          {"align_corners": False, "align_mode": 0}, wrt=("X",), note="Scale tensor"),
        S({"X": [r((1, 4, 3, 2))]}, {"out_h": 5, "out_w": 3, "align_corners": False, "data_layout": "NHWC"},
          note="NHWC"),
    ]


register(OpDef(
    type="bilinear_interp_v2", inputs=("X", "OutSize", "SizeTensor", "Scale"), outputs=("Out",), kernel=_bilinear,
    grad=GradSpec("bilinear_interp_v2_grad", ("X", "OutSize", "SizeTensor", "Scale", "Out@GRAD"), ("X@GRAD",),
                  kernel=_bilinear_grad),
    samples=_bilinear_samples,
    attrs_handled=("out_h", "out_w", "scale", "interp_method", "align_corners", "align_mode", "data_layout"),
    doc="bilinear resize of a 4-D tensor, Paddle's size and source-index rules"))
