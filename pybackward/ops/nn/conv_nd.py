"""conv3d, conv3d_transpose and depthwise_conv2d_transpose, with their grads.

The 3-D ops use an N-D convolution written like conv.py's 2-D one: an
im2col over every spatial axis (`sliding_window_view`, strided by stride and
dilation) and one batched matmul over the groups; the input gradient is the
col2im, one vectorised scatter-add per kernel offset. A transposed
convolution is the input gradient of the convolution it transposes.

Paddle conventions (checked against Paddle 3.3.1 by testdata/kernels):
* `paddings` has 3 values (symmetric) or 6 (`[front, back, top, bottom,
  left, right]`); SAME pads `max((ceil(in/s)-1)*s + k - in, 0)`, the smaller
  half first, and resets dilations to 1; VALID zeroes the paddings;
* filters are `[out, in/groups, kd, kh, kw]` for conv3d and
  `[in, out/groups, kd, kh, kw]` for conv3d_transpose, in both layouts
  (NCDHW / NDHWC);
* the transposed output size is `(in-1)*s - p0 - p1 + d*(k-1) + 1`, plus
  `output_padding`, or `output_size` when given;
* depthwise_conv2d_transpose is conv2d_transpose's CPU kernel (groups =
  channels in practice); its `Bias` input is ignored, as there.
"""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import conv
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# attrs
# --------------------------------------------------------------------------
def _last(c: Call) -> bool:
    """Channels last? conv3d takes NDHWC (or NHWC); conv3d_transpose only
    NHWC - Paddle's Python API writes that, and Paddle's shape inference
    reads NDHWC as channels first there."""
    fmt = c.attr("data_format", "NCDHW")
    if c.op_type.startswith("conv3d_transpose") and fmt == "NDHWC":
        raise c.unsupported("data_format", fmt, "conv3d_transpose takes NHWC for channels last, as Paddle writes it")
    if fmt not in ("NCDHW", "NDHWC", "NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_format", fmt, "expected NCDHW or NDHWC")
    return fmt in ("NDHWC", "NHWC")


def _ints(c: Call, name: str, nd: int, default) -> list[int]:
    v = c.attr(name, default)
    v = [int(t) for t in (v if isinstance(v, (list, tuple)) else [v])]
    if len(v) == 1:
        v = v * nd
    if len(v) != nd:
        raise c.unsupported(name, v, f"expected {nd} values")
    return v


def _geometry(c: Call, in_sp, k_sp):
    """(pads [(before, after)] per axis, strides, dilations, groups)."""
    nd = len(in_sp)
    s = _ints(c, "strides", nd, [1] * nd)
    d = _ints(c, "dilations", nd, [1] * nd)
    if min(s) < 1 or min(d) < 1:
        raise c.unsupported("strides/dilations", (s, d), "must be positive")
    p = [int(t) for t in c.attr("paddings", [0] * nd)]
    if len(p) == nd:
        pads = [(v, v) for v in p]
    elif len(p) == 2 * nd:
        pads = [(p[2 * i], p[2 * i + 1]) for i in range(nd)]
    else:
        raise c.unsupported("paddings", p, f"expected {nd} or {2 * nd} values")
    algo = c.attr("padding_algorithm", "EXPLICIT")
    if algo == "SAME":
        pads = []
        for i in range(nd):
            out = (in_sp[i] + s[i] - 1) // s[i]
            pad_sum = max((out - 1) * s[i] + k_sp[i] - in_sp[i], 0)
            pads.append((pad_sum // 2, pad_sum - pad_sum // 2))
        d = [1] * nd
    elif algo == "VALID":
        pads = [(0, 0)] * nd
    elif algo != "EXPLICIT":
        raise c.unsupported("padding_algorithm", algo, "expected EXPLICIT, SAME or VALID")
    if min(min(q) for q in pads) < 0:
        raise c.unsupported("paddings", p, "negative padding")
    return pads, s, d, int(c.attr("groups", 1))


# --------------------------------------------------------------------------
# N-D convolution
# --------------------------------------------------------------------------
def _pad(x, pads):
    if not any(a or b for a, b in pads):
        return x
    return np.pad(x, [(0, 0), (0, 0)] + [tuple(q) for q in pads])


def _im2col(xp, ks, s, d, groups, out_sp=None):
    """Windows of padded (N, C, *S) `xp` as (G, N*prod(O), Cg*prod(K)), and O."""
    nd = len(ks)
    n, ch = xp.shape[:2]
    ext = [di * (k - 1) + 1 for k, di in zip(ks, d)]
    if any(xp.shape[2 + i] < ext[i] for i in range(nd)):
        raise ValueError(f"convolution: padded input {xp.shape[2:]} is smaller than the dilated kernel {ext}")
    v = sliding_window_view(xp, ext, axis=tuple(range(2, 2 + nd)))
    v = v[(slice(None), slice(None)) + tuple(slice(None, None, si) for si in s)
          + tuple(slice(None, None, di) for di in d)]
    if out_sp is not None:
        v = v[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_sp)]
    osp = v.shape[2:2 + nd]
    cg = ch // groups
    v = v.reshape((n, groups, cg) + osp + tuple(ks))
    perm = (1, 0) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    v = v.transpose(perm)
    return v.reshape(groups, n * int(np.prod(osp)), cg * int(np.prod(ks))), osp


def _col2im(cols, xp_shape, ks, s, d, groups, osp):
    nd = len(ks)
    n, ch = xp_shape[:2]
    cg = ch // groups
    c = cols.reshape((groups, n) + tuple(osp) + (cg,) + tuple(ks))
    # -> (N, G, Cg, *K, *O)
    perm = (1, 0, 2 + nd) + tuple(range(3 + nd, 3 + 2 * nd)) + tuple(range(2, 2 + nd))
    c = c.transpose(perm).reshape((n, ch) + tuple(ks) + tuple(osp))
    out = np.zeros(xp_shape, dtype=cols.dtype)
    for off in itertools.product(*[range(k) for k in ks]):
        sl = tuple(slice(o * di, o * di + si * (on - 1) + 1, si) for o, di, si, on in zip(off, d, s, osp))
        out[(slice(None), slice(None)) + sl] += c[(slice(None), slice(None)) + off]
    return out


def _split(y, groups):
    """(N, M, *O) -> (G, N*prod(O), M/G)."""
    n, m = y.shape[:2]
    nd = y.ndim - 2
    y = y.reshape((n, groups, m // groups) + y.shape[2:])
    return y.transpose((1, 0) + tuple(range(3, 3 + nd)) + (2,)).reshape(groups, -1, m // groups)


def _merge(yg, n, osp):
    g, _, mg = yg.shape
    nd = len(osp)
    y = yg.reshape((g, n) + tuple(osp) + (mg,))
    return y.transpose((1, 0, 2 + nd) + tuple(range(2, 2 + nd))).reshape((n, g * mg) + tuple(osp))


def _fmat(w, groups):
    m, cg = w.shape[:2]
    return w.reshape(groups, m // groups, -1).transpose(0, 2, 1)


def _check(ch, w, groups, what):
    if groups < 1 or ch % groups or w.shape[0] % groups or ch // groups != w.shape[1]:
        raise ValueError(f"{what}: input channels {ch}, filter {tuple(w.shape)} and groups={groups} do not fit")


def conv_nd(x, w, pads, s, d, groups, out_sp=None):
    _check(x.shape[1], w, groups, "convolution")
    cols, osp = _im2col(_pad(x, pads), w.shape[2:], s, d, groups, out_sp)
    return _merge(np.matmul(cols, _fmat(w, groups)), x.shape[0], osp)


def conv_nd_input_grad(dy, w, x_shape, pads, s, d, groups):
    osp = dy.shape[2:]
    cols = np.matmul(_split(dy, groups), _fmat(w, groups).transpose(0, 2, 1))
    xp_shape = tuple(x_shape[:2]) + tuple(n + a + b for n, (a, b) in zip(x_shape[2:], pads))
    xp = _col2im(cols, xp_shape, w.shape[2:], s, d, groups, osp)
    return xp[(slice(None), slice(None)) + tuple(slice(a, a + n) for n, (a, _) in zip(x_shape[2:], pads))]


def conv_nd_filter_grad(x, dy, w_shape, pads, s, d, groups):
    cols, osp = _im2col(_pad(x, pads), w_shape[2:], s, d, groups, dy.shape[2:])
    if tuple(osp) != tuple(dy.shape[2:]):
        raise ValueError(f"convolution grad: output grad spatial {dy.shape[2:]} != computed {osp}")
    gw = np.matmul(cols.transpose(0, 2, 1), _split(dy, groups))      # (G, Cg*K, Mg)
    return gw.transpose(0, 2, 1).reshape(w_shape)


# --------------------------------------------------------------------------
# conv3d
# --------------------------------------------------------------------------
def _first(x, last):
    return np.moveaxis(x, -1, 1) if last else x


def _back(x, last):
    return np.moveaxis(x, 1, -1) if last else x


def _inputs(c: Call, nd: int):
    last = _last(c)
    x, w = _first(c.x("Input"), last), c.x("Filter")
    if x.ndim != nd + 2 or w.ndim != nd + 2:
        raise c.unsupported("Input/Filter rank", (x.ndim, w.ndim), f"{c.op_type} needs {nd + 2}-D Input and Filter")
    return last, x, w


def _conv3d(c: Call):
    last, x, w = _inputs(c, 3)
    pads, s, d, groups = _geometry(c, x.shape[2:], w.shape[2:])
    out = conv_nd(x, w.astype(x.dtype, copy=False), pads, s, d, groups)
    return {"Output": _back(out, last).astype(x.dtype, copy=False)}


def _conv3d_grad(c: Call):
    last, x, w = _inputs(c, 3)
    dy = _first(c.x("Output@GRAD"), last)
    pads, s, d, groups = _geometry(c, x.shape[2:], w.shape[2:])
    res = {}
    if c.wants("Input@GRAD"):
        res["Input@GRAD"] = _back(conv_nd_input_grad(dy, w, x.shape, pads, s, d, groups), last).astype(x.dtype)
    if c.wants("Filter@GRAD"):
        res["Filter@GRAD"] = conv_nd_filter_grad(x, dy, w.shape, pads, s, d, groups).astype(w.dtype)
    return res


def _conv3d_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"Input": [r((2, 2, 3, 4, 4))], "Filter": [r((3, 2, 2, 3, 3))]},
          {"strides": [1, 1, 1], "paddings": [1, 1, 1]}, note="pad 1"),
        S({"Input": [r((1, 2, 4, 5, 5))], "Filter": [r((2, 2, 2, 3, 3))]},
          {"strides": [2, 2, 2], "paddings": [0, 1, 1, 0, 0, 1]}, note="stride 2, 6 paddings"),
        S({"Input": [r((1, 2, 3, 5, 5))], "Filter": [r((2, 2, 2, 3, 3))]},
          {"strides": [1, 2, 2], "padding_algorithm": "SAME"}, note="SAME"),
        S({"Input": [r((1, 2, 3, 5, 4))], "Filter": [r((2, 2, 2, 2, 3))]},
          {"strides": [1, 1, 2], "paddings": [1, 1, 1], "padding_algorithm": "VALID"}, note="VALID"),
        S({"Input": [r((1, 2, 4, 5, 5))], "Filter": [r((2, 2, 2, 2, 2))]},
          {"paddings": [1, 1, 1], "dilations": [1, 2, 2]}, note="dilation"),
        S({"Input": [r((1, 4, 2, 3, 3))], "Filter": [r((4, 2, 1, 2, 2))]},
          {"paddings": [0, 0, 0], "groups": 2}, note="groups 2"),
        S({"Input": [r((1, 3, 3, 4, 2))], "Filter": [r((3, 2, 2, 2, 2))]},
          {"paddings": [1, 0, 1], "data_format": "NDHWC"}, note="NDHWC"),
    ]


_CONV_ATTRS = ("strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format")

register(paddle_opdef("conv3d", _conv3d, {"conv3d_grad": _conv3d_grad}, samples=_conv3d_samples,
                      attrs_handled=_CONV_ATTRS, doc="3-D convolution (N-D im2col + batched matmul); filter OIDHW"))


# --------------------------------------------------------------------------
# conv3d_transpose
# --------------------------------------------------------------------------
def _t_geometry(c: Call, x, w):
    pads, s, d, groups = _geometry(c, x.shape[2:], w.shape[2:])
    nd = x.ndim - 2
    if groups < 1 or x.shape[1] != w.shape[0] or w.shape[0] % groups:
        raise ValueError(f"{c.op_type}: input channels {x.shape[1]}, filter {tuple(w.shape)} "
                         f"and groups={groups} do not fit")
    osz = [int(t) for t in (c.attr("output_size", []) or [])]
    opad = [int(t) for t in (c.attr("output_padding", []) or [])]
    if osz and len(osz) != nd:
        raise c.unsupported("output_size", osz, f"expected {nd} values")
    if opad and len(opad) != nd:
        raise c.unsupported("output_padding", opad, f"expected {nd} values")
    out = []
    for i in range(nd):
        infer = (x.shape[2 + i] - 1) * s[i] - pads[i][0] - pads[i][1] + d[i] * (w.shape[2 + i] - 1) + 1
        if osz:
            if not infer <= osz[i] < infer + s[i]:
                raise c.unsupported("output_size", osz, f"dim {i} must be in [{infer}, {infer + s[i]})")
            out.append(osz[i])
        elif opad:
            if not 0 <= opad[i] < max(s[i], d[i]):
                raise c.unsupported("output_padding", opad, "must be smaller than stride or dilation")
            out.append(infer + opad[i])
        else:
            out.append(infer)
    if min(out) < 1:
        raise ValueError(f"{c.op_type}: output size {out} is not positive")
    return pads, s, d, groups, out


def _conv3d_transpose(c: Call):
    last, x, w = _inputs(c, 3)
    pads, s, d, groups, out_sp = _t_geometry(c, x, w)
    shape = (x.shape[0], w.shape[1] * groups) + tuple(out_sp)
    out = conv_nd_input_grad(x, w.astype(x.dtype, copy=False), shape, pads, s, d, groups)
    return {"Output": _back(out, last).astype(x.dtype, copy=False)}


def _conv3d_transpose_grad(c: Call):
    last, x, w = _inputs(c, 3)
    dy = _first(c.x("Output@GRAD"), last)
    pads, s, d, groups, _ = _t_geometry(c, x, w)
    res = {}
    if c.wants("Input@GRAD"):
        gx = conv_nd(dy, w.astype(dy.dtype, copy=False), pads, s, d, groups, x.shape[2:])
        if gx.shape != x.shape:
            raise ValueError(f"{c.op_type} grad: Input@GRAD {gx.shape} != Input {x.shape}")
        res["Input@GRAD"] = _back(gx, last).astype(x.dtype, copy=False)
    if c.wants("Filter@GRAD"):
        res["Filter@GRAD"] = conv_nd_filter_grad(dy, x, w.shape, pads, s, d, groups).astype(w.dtype)
    return res


def _conv3d_transpose_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"Input": [r((1, 2, 2, 3, 3))], "Filter": [r((2, 3, 2, 3, 3))]},
          {"strides": [1, 1, 1], "paddings": [1, 1, 1]}, note="pad 1"),
        S({"Input": [r((1, 2, 2, 2, 3))], "Filter": [r((2, 2, 2, 3, 3))]},
          {"strides": [2, 2, 2], "paddings": [0, 1, 1], "output_padding": [1, 0, 1]}, note="stride 2 output_padding"),
        S({"Input": [r((1, 4, 2, 2, 2))], "Filter": [r((4, 1, 2, 2, 2))]},
          {"strides": [1, 2, 1], "paddings": [0, 1, 1, 0, 0, 0], "groups": 2, "dilations": [2, 1, 1]},
          note="groups dilation"),
        S({"Input": [r((1, 2, 2, 2, 3))], "Filter": [r((2, 2, 2, 3, 3))]},
          {"strides": [2, 2, 2], "paddings": [1, 1, 1], "output_size": [3, 4, 6]}, note="output_size"),
        S({"Input": [r((1, 2, 2, 3, 2))], "Filter": [r((2, 2, 2, 3, 3))]},
          {"strides": [1, 2, 2], "padding_algorithm": "SAME"}, note="SAME"),
        S({"Input": [r((1, 2, 2, 2, 3))], "Filter": [r((3, 2, 2, 2, 2))]},
          {"strides": [2, 2, 2], "data_format": "NHWC"}, note="channels last (NHWC, as Paddle writes it)"),
    ]


register(paddle_opdef("conv3d_transpose", _conv3d_transpose, {"conv3d_transpose_grad": _conv3d_transpose_grad},
                      samples=_conv3d_transpose_samples, attrs_handled=_CONV_ATTRS + ("output_size", "output_padding"),
                      doc="3-D transposed convolution (col2im); filter [in, out/groups, kd, kh, kw]"))


# --------------------------------------------------------------------------
# depthwise_conv2d_transpose: conv2d_transpose's kernels
# --------------------------------------------------------------------------
def _dw_transpose_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"Input": [r((1, 3, 3, 3))], "Filter": [r((3, 1, 3, 3))]},
          {"strides": [1, 1], "paddings": [1, 1], "groups": 3}, note="pad 1"),
        S({"Input": [r((2, 2, 2, 3))], "Filter": [r((2, 2, 3, 3))]},
          {"strides": [2, 2], "paddings": [1, 1], "groups": 2, "output_padding": [1, 0]},
          note="multiplier 2, output_padding"),
        S({"Input": [r((1, 2, 3, 2))], "Filter": [r((2, 1, 2, 2))]},
          {"strides": [2, 1], "paddings": [0, 1], "groups": 2, "dilations": [1, 2]}, note="dilation"),
        S({"Input": [r((1, 3, 2, 2))], "Filter": [r((2, 1, 2, 2))]},
          {"strides": [2, 2], "groups": 2, "data_format": "NHWC"}, note="NHWC"),
    ]


register(paddle_opdef("depthwise_conv2d_transpose", conv.conv2d_transpose_kernel,
                      {"depthwise_conv2d_transpose_grad": conv.conv2d_transpose_grad_kernel},
                      samples=_dw_transpose_samples, family="conv_more", attrs_handled=_CONV_ATTRS + ("output_size", "output_padding"),
                      doc="depthwise 2-D transposed convolution (conv2d_transpose's kernel); Bias ignored"))
