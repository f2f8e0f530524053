"""Convolutions: conv2d, depthwise_conv2d, conv2d_transpose and their grads.

All kernels work on NCHW internally (NHWC is transposed at the edges). A
convolution is an im2col (a read-only strided view of the windows, by stride and
dilation) followed by one batched matmul over the groups; its input gradient
is the convolution of the output gradient (spread out by the stride) with the
flipped filter, again one gather and one matmul (a strided convolution on a
large map scatter-adds the columns of the output gradient times the filter,
KH*KW vectorised adds, instead). A transposed convolution is the
input gradient of the convolution it transposes, and vice versa.

Paddle conventions (checked against Paddle 3.3.1, see testdata/ops/gen_nn.py):
* `paddings` has 2 values (symmetric) or 4 (`[top, bottom, left, right]`);
* `padding_algorithm="SAME"` pads `max((ceil(in/s)-1)*s + k - in, 0)` split
  with the smaller half first, computed with the undilated kernel size, and
  resets dilations to 1; `"VALID"` zeroes the paddings;
* the filter is OIHW (`[out, in/groups, kh, kw]`) for both data formats;
  conv2d_transpose's is `[in, out/groups, kh, kw]`;
* conv2d_transpose's output size is `(in-1)*s - pad0 - pad1 + d*(k-1) + 1`,
  plus `output_padding`, or `output_size` when given; its `Bias` input is
  ignored by the kernel (Paddle's conv2d_transpose kernel has no bias).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..registry import Call, GradSpec, OpDef, Sample, register

_LAYOUTS = ("NCHW", "NHWC", "AnyLayout")


# --------------------------------------------------------------------------
# attrs
# --------------------------------------------------------------------------
def _layout(c: Call) -> str:
    fmt = c.attr("data_format", "NCHW")
    if fmt not in _LAYOUTS:
        raise c.unsupported("data_format", fmt, "conv2d takes NCHW, NHWC or AnyLayout")
    return "NHWC" if fmt == "NHWC" else "NCHW"


def _pair(c: Call, name: str, default) -> list[int]:
    v = c.attr(name, default)
    v = [int(t) for t in (v if isinstance(v, (list, tuple)) else [v])]
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise c.unsupported(name, v, "expected 2 values (height, width)")
    return v


def _to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    return x.transpose(0, 3, 1, 2) if layout == "NHWC" else x


def _from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if layout == "NHWC" else x


def four_paddings(c: Call) -> list[int]:
    """The `paddings` attr as [top, bottom, left, right] (2 values mean symmetric)."""
    p = [int(t) for t in c.attr("paddings", [0, 0])]
    if len(p) == 2:
        return [p[0], p[0], p[1], p[1]]
    if len(p) != 4:
        raise c.unsupported("paddings", p, "expected 2 or 4 values")
    return p


def update_padding(c: Call, in_hw, k_hw, strides, dilations=None):
    """Paddle's UpdatePaddingAndDilation: 4 paddings [top, bottom, left, right]
    and the dilations actually used."""
    p = four_paddings(c)
    algo = c.attr("padding_algorithm", "EXPLICIT")
    dil = list(dilations) if dilations is not None else [1, 1]
    if algo == "SAME":
        for i in range(2):
            out = (in_hw[i] + strides[i] - 1) // strides[i]
            pad_sum = max((out - 1) * strides[i] + k_hw[i] - in_hw[i], 0)
            p[2 * i], p[2 * i + 1] = pad_sum // 2, pad_sum - pad_sum // 2
            dil[i] = 1
    elif algo == "VALID":
        p = [0, 0, 0, 0]
    elif algo != "EXPLICIT":
        raise c.unsupported("padding_algorithm", algo, "expected EXPLICIT, SAME or VALID")
    if min(p) < 0:
        raise c.unsupported("paddings", p, "negative padding")
    return p, dil


# --------------------------------------------------------------------------
# im2col / col2im over groups, NCHW-native
# --------------------------------------------------------------------------
# The windows are laid out (N, C, KH, KW, OH, OW): gathering them copies rows
# along OW (long, regular strides), and the filter's (M, C*KH*KW) matrix times
# a sample's (C*KH*KW, OH*OW) columns is the sample's NCHW output, with no
# transpose on either side. Float32 / float16 operands are gathered straight
# into float64 (one pass) and multiplied there, rounded once (_precision).
_WIDEN = (np.dtype(np.float32), np.dtype(np.float16))


def _acc(dtype: np.dtype) -> np.dtype:
    """The dtype a GEMM of `dtype` operands accumulates in (float64 for float32 / float16)."""
    return np.dtype(np.float64) if dtype in _WIDEN else dtype


def _extent(k: int, d: int) -> int:
    return d * (k - 1) + 1


def _out_size(xp: np.ndarray, kh: int, kw: int, s, d, out_hw=None) -> tuple[int, int]:
    hp, wp = xp.shape[2:]
    eh, ew = _extent(kh, d[0]), _extent(kw, d[1])
    if hp < eh or wp < ew:
        raise ValueError(f"convolution: padded input {hp}x{wp} is smaller than the "
                         f"dilated kernel {eh}x{ew}")
    oh, ow = (hp - eh) // s[0] + 1, (wp - ew) // s[1] + 1
    if out_hw is not None:
        oh, ow = min(oh, out_hw[0]), min(ow, out_hw[1])
    return oh, ow


def _view(a: np.ndarray, shape, strides, offset: int = 0) -> np.ndarray:
    """A strided view of `a`'s memory starting `offset` bytes in, never
    written. On a C-contiguous array it is made by np.ndarray on the array's
    buffer (1 us; as_strided's Python costs 7 us a call, a tenth of a small
    convolution); anything else goes through as_strided."""
    if a.flags.c_contiguous and a.size:
        return np.ndarray(shape, a.dtype, a, offset, strides)
    if offset:
        raise ValueError("convolution: an offset view of a non-contiguous array")
    return as_strided(a, shape, strides, writeable=False)


def _windows(xp: np.ndarray, kh: int, kw: int, s, d, oh: int, ow: int) -> np.ndarray:
    """The windows of padded NCHW `xp` as a strided view (N, C, KH, KW, OH, OW), never written."""
    n, ch = xp.shape[:2]
    bn, bc, bh, bw = xp.strides
    return _view(xp, (n, ch, kh, kw, oh, ow), (bn, bc, bh * d[0], bw * d[1], bh * s[0], bw * s[1]))


def _col2im(c6: np.ndarray, xp_shape, s, d, oh: int, ow: int):
    """Scatter-add columns (N, C, KH, KW, OH, OW) back into a padded NCHW array."""
    kh, kw = c6.shape[2:4]
    out = np.zeros(xp_shape, dtype=c6.dtype)
    if oh * ow < kh * kw:
        # Fewer output positions than kernel taps (a text CNN's full-width
        # filter): one add per output position. Walking them backwards adds
        # each pixel's contributions in the kernel-tap order of the loop below
        # (a higher output row meets the pixel at a lower tap): the same sums.
        eh, ew = d[0] * (kh - 1) + 1, d[1] * (kw - 1) + 1
        for a in range(oh - 1, -1, -1):
            ha = a * s[0]
            for b in range(ow - 1, -1, -1):
                wb = b * s[1]
                out[:, :, ha:ha + eh:d[0], wb:wb + ew:d[1]] += c6[:, :, :, :, a, b]
        return out
    for i in range(kh):
        hi = i * d[0]
        for j in range(kw):
            wj = j * d[1]
            out[:, :, hi:hi + s[0] * (oh - 1) + 1:s[0], wj:wj + s[1] * (ow - 1) + 1:s[1]] += c6[:, :, i, j]
    return out


def _pad(x: np.ndarray, p) -> np.ndarray:
    """Zero padding of NCHW x's H and W (top, bottom, left, right)."""
    if not any(p):
        return x
    if min(p) < 0:
        raise ValueError(f"convolution: negative padding {list(p)}")
    n, ch, h, w = x.shape
    out = np.zeros((n, ch, h + p[0] + p[1], w + p[2] + p[3]), dtype=x.dtype)
    out[:, :, p[0]:p[0] + h, p[2]:p[2] + w] = x
    return out


def _check_groups(xch: int, w: np.ndarray, groups: int, what: str) -> None:
    if groups < 1 or xch % groups or w.shape[0] % groups or xch // groups != w.shape[1]:
        raise ValueError(f"{what}: input channels {xch}, filter {tuple(w.shape)} and groups={groups} do not fit")


def conv_forward(x, w, p, s, d, groups, out_hw=None):
    """NCHW convolution of x (N, C, H, W) with OIHW w; p = 4 paddings."""
    _check_groups(x.shape[1], w, groups, "conv2d")
    n, ch = x.shape[:2]
    m, cg, kh, kw = w.shape
    xp = _pad(x, p)
    oh, ow = _out_size(xp, kh, kw, s, d, out_hw)
    out_dtype = np.result_type(x, w)
    acc = _acc(out_dtype)
    if kh == 1 and kw == 1 and s[0] == 1 and s[1] == 1 and xp.shape[2:] == (oh, ow):
        cols = np.asarray(xp, dtype=acc, order="C")     # the windows are the input itself
    else:
        cols = np.empty((n, ch, kh, kw, oh, ow), dtype=acc)
        np.copyto(cols, _windows(xp, kh, kw, s, d, oh, ow), casting="unsafe")
    wm = w.reshape(groups, m // groups, cg * kh * kw).astype(acc, copy=False)
    y = np.matmul(wm, cols.reshape(n, groups, cg * kh * kw, oh * ow))      # (N, G, M/G, OH*OW)
    return y.reshape(n, m, oh, ow).astype(out_dtype, copy=False)


#: Past this many multiply-adds (gathered dy elements x (Cg + 1)) a strided
#: input gradient scatters instead of spreading dy out: measured on the models'
#: shapes, the spread-out gather wins below it (e.g. (2, 6, 7, 7) * (6, 6, 3, 3)
#: stride 2: 46 -> 26 us) and loses above (a 7x7 stride-2 conv on 224x224:
#: 12.6 -> 41 ms).
_SPREAD_MAX = 1 << 18


def conv_input_grad(dy, w, x_shape, p, s, d, groups):
    """d conv / d x, cropped to x_shape (NCHW): the convolution of dy,
    spread out by the stride (zeros between its rows and columns) and
    zero-padded, with the flipped filter at stride 1 - a gather and one GEMM,
    each pixel's grad one float64 sum rounded once. A strided conv on a large
    map (or with fewer output positions than filter taps) takes col2im of dy
    times the filter instead: KH*KW scatter-adds of rounded columns, where
    the spread-out GEMM would do stride**2 times the work."""
    n, ch, h, wd = x_shape
    m, cg, kh, kw = w.shape
    oh, ow = dy.shape[2], dy.shape[3]
    out_dtype = np.result_type(dy, w)
    acc = _acc(out_dtype)
    mg = m // groups
    if (s[0] > 1 or s[1] > 1) and (oh * ow < kh * kw or n * m * kh * kw * h * wd * (cg + 1) > _SPREAD_MAX):
        # Past a stride, on a large map (the zeros would multiply the GEMM by
        # the stride squared) or with fewer output positions than taps: the
        # scatter-add of dy's columns times the filter.
        wt = w.reshape(groups, mg, cg * kh * kw).transpose(0, 2, 1).astype(acc, copy=False)
        dyg = dy.reshape(n, groups, mg, oh * ow).astype(acc, copy=False)
        cols = np.matmul(wt, dyg).astype(out_dtype, copy=False)                # (N, G, Cg*KH*KW, OH*OW)
        xp = _col2im(cols.reshape(n, ch, kh, kw, oh, ow), (n, ch, h + p[0] + p[1], wd + p[2] + p[3]),
                     s, d, oh, ow)
        return xp[:, :, p[0]:p[0] + h, p[2]:p[2] + wd]
    if ow == 1 and kw == wd and d[1] == 1 and p[2] == 0 and p[3] == 0 and s[0] == 1:
        # A filter as wide as the input (a text CNN's): along W nothing is
        # convolved, dx[.., y, x] = sum over (m, i) of dy[.., y + p0 - i*d0] w[m, .., i, x] -
        # the general gather's terms without its zero ones (kw times fewer).
        eh = _extent(kh, d[0])
        dyp = np.zeros((n, m, max(oh + 2 * (eh - 1), p[0] + h + eh - 1)), dtype=dy.dtype)
        dyp[:, :, eh - 1:eh - 1 + oh] = dy[:, :, :, 0]
        bn, bc, bh = dyp.strides
        v = _view(dyp, (n, m, kh, h), (bn, bc, bh * d[0], bh), p[0] * bh)
        cols = np.empty((n, m, kh, h), dtype=acc)
        np.copyto(cols, v, casting="unsafe")
        wf = w[:, :, ::-1].reshape(groups, mg, cg, kh, kw).transpose(0, 2, 4, 1, 3)
        wf = wf.reshape(groups, cg * kw, mg * kh).astype(acc)
        dx = np.matmul(wf, cols.reshape(n, groups, mg * kh, h))              # (N, G, Cg*KW, H)
        dx = dx.reshape(n, ch, kw, h).transpose(0, 1, 3, 2)
        return dx.astype(out_dtype, order="C")
    if kh == 1 and kw == 1 and s[0] == 1 and s[1] == 1 and not any(p) and (oh, ow) == (h, wd):
        cols = np.asarray(dy, dtype=acc, order="C")      # the gather below would copy dy as it is
    else:
        eh, ew = _extent(kh, d[0]), _extent(kw, d[1])
        # dx[y] = sum_i dyz[y + p0 - i*d0] w[i], dyz = dy with row o at o*s0: dyz padded by
        # eh - 1 in front, read at y + p0 + i'*d0 for the flipped tap i' = kh - 1 - i.
        sh, sw = (oh - 1) * s[0] + 1, (ow - 1) * s[1] + 1
        dyp = np.zeros((n, m, max(sh + 2 * (eh - 1), p[0] + h + eh - 1),
                        max(sw + 2 * (ew - 1), p[2] + wd + ew - 1)), dtype=dy.dtype)
        dyp[:, :, eh - 1:eh - 1 + sh:s[0], ew - 1:ew - 1 + sw:s[1]] = dy
        bn, bc, bh, bw = dyp.strides
        v = _view(dyp, (n, m, kh, kw, h, wd), (bn, bc, bh * d[0], bw * d[1], bh, bw), p[0] * bh + p[2] * bw)
        cols = np.empty((n, m, kh, kw, h, wd), dtype=acc)
        np.copyto(cols, v, casting="unsafe")
    wf = w[:, :, ::-1, ::-1].reshape(groups, mg, cg, kh, kw).transpose(0, 2, 1, 3, 4)
    wf = wf.reshape(groups, cg, mg * kh * kw).astype(acc)
    dx = np.matmul(wf, cols.reshape(n, groups, mg * kh * kw, h * wd))    # (N, G, Cg, H*W)
    return dx.reshape(n, ch, h, wd).astype(out_dtype, copy=False)


def conv_filter_grad(x, dy, w_shape, p, s, d, groups):
    """d conv / d w (OIHW): per group, dy (M/G, N*OH*OW) times the windows
    (N*OH*OW, Cg*KH*KW), one long sum over the batch and the positions."""
    m, cg, kh, kw = w_shape
    n, ch = x.shape[:2]
    xp = _pad(x, p)
    oh, ow = _out_size(xp, kh, kw, s, d, dy.shape[2:])
    if (oh, ow) != dy.shape[2:]:
        raise ValueError(f"conv2d grad: Output@GRAD spatial {dy.shape[2:]} != computed {(oh, ow)}")
    out_dtype = np.result_type(x, dy)
    acc = _acc(out_dtype)
    cols = np.empty((ch, kh, kw, n, oh, ow), dtype=acc)
    np.copyto(cols, _windows(xp, kh, kw, s, d, oh, ow).transpose(1, 2, 3, 0, 4, 5), casting="unsafe")
    cols = cols.reshape(groups, cg * kh * kw, n * oh * ow)
    dyg = np.empty((m, n, oh, ow), dtype=acc)
    np.copyto(dyg, dy.transpose(1, 0, 2, 3), casting="unsafe")
    gw = np.matmul(dyg.reshape(groups, m // groups, n * oh * ow), cols.transpose(0, 2, 1))  # (G, M/G, Cg*KH*KW)
    return gw.reshape(m, cg, kh, kw).astype(out_dtype, copy=False)


# --------------------------------------------------------------------------
# conv2d / depthwise_conv2d
# --------------------------------------------------------------------------
#: (attrs as hashable values, input H W, filter H W) -> (paddings, strides, dilations, groups)
_GEOMETRY: dict[tuple, tuple] = {}


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


def _conv_geometry(c: Call, x_nchw, w):
    """(4 paddings, strides, dilations, groups) as tuples, worked out once per
    attr values and shapes: the parsing costs more than a small convolution's GEMM."""
    a = c.attrs
    key = (_hashable(a.get("strides")), _hashable(a.get("dilations")), _hashable(a.get("paddings")),
           a.get("padding_algorithm"), a.get("groups"), x_nchw.shape[2:], w.shape[2:])
    try:
        return _GEOMETRY[key]
    except (KeyError, TypeError):       # TypeError: an attr value that does not hash
        pass
    g = _parse_geometry(c, x_nchw, w)
    try:
        if len(_GEOMETRY) > 4096:
            _GEOMETRY.clear()
        _GEOMETRY[key] = g
    except TypeError:
        pass
    return g


def _parse_geometry(c: Call, x_nchw, w):
    s = _pair(c, "strides", [1, 1])
    d = _pair(c, "dilations", [1, 1])
    if min(s) < 1 or min(d) < 1:
        raise c.unsupported("strides/dilations", (s, d), "must be positive")
    p, d = update_padding(c, x_nchw.shape[2:], w.shape[2:], s, d)
    groups = int(c.attr("groups", 1))
    return tuple(p), tuple(s), tuple(d), groups


def _check_conv_attrs(c: Call) -> None:
    if c.attr("fuse_relu_before_depthwise_conv", False):
        raise c.unsupported("fuse_relu_before_depthwise_conv", True)


def _conv2d(c: Call):
    _check_conv_attrs(c)
    layout = _layout(c)
    x, w = _to_nchw(c.x("Input"), layout), c.x("Filter")
    if x.ndim != 4 or w.ndim != 4:
        raise c.unsupported("Input/Filter rank", (x.ndim, w.ndim), "conv2d needs 4-D Input and Filter")
    p, s, d, groups = _conv_geometry(c, x, w)
    out = conv_forward(x, w.astype(x.dtype, copy=False), p, s, d, groups)
    return {"Output": _from_nchw(out, layout).astype(x.dtype, copy=False)}


def _conv2d_grad(c: Call):
    _check_conv_attrs(c)
    layout = _layout(c)
    x, w = _to_nchw(c.x("Input"), layout), c.x("Filter")
    dy = _to_nchw(c.x("Output@GRAD"), layout)
    p, s, d, groups = _conv_geometry(c, x, w)
    res = {}
    if c.wants("Input@GRAD"):
        gx = conv_input_grad(dy, w, x.shape, p, s, d, groups)
        res["Input@GRAD"] = _from_nchw(gx, layout).astype(x.dtype, copy=False)
    if c.wants("Filter@GRAD"):
        res["Filter@GRAD"] = conv_filter_grad(x, dy, w.shape, p, s, d, groups).astype(w.dtype, copy=False)
    return res


_CONV_ATTRS = ("strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format")


def _conv_samples(rng: np.random.Generator, depthwise: bool = False):
    r = rng.standard_normal
    if depthwise:
        return [
            Sample({"Input": [r((2, 2, 4, 4))], "Filter": [r((4, 1, 3, 3))]},
                   {"strides": [1, 1], "paddings": [1, 1], "groups": 2}, note="multiplier 2"),
            Sample({"Input": [r((1, 3, 5, 5))], "Filter": [r((3, 1, 2, 2))]},
                   {"strides": [2, 2], "paddings": [0, 1], "groups": 3}, note="stride 2"),
            Sample({"Input": [r((1, 4, 4, 2))], "Filter": [r((2, 1, 3, 2))]},
                   {"paddings": [1, 1], "groups": 2, "data_format": "NHWC", "dilations": [1, 2]}, note="NHWC"),
        ]
    return [
        Sample({"Input": [r((2, 2, 4, 4))], "Filter": [r((3, 2, 3, 3))]},
               {"strides": [1, 1], "paddings": [1, 1]}, note="pad 1"),
        Sample({"Input": [r((2, 2, 5, 5))], "Filter": [r((2, 2, 3, 3))]},
               {"strides": [2, 2], "paddings": [1, 0, 0, 1]}, note="stride 2 asym pad"),
        Sample({"Input": [r((1, 2, 5, 5))], "Filter": [r((2, 2, 3, 3))]},
               {"strides": [2, 2], "padding_algorithm": "SAME"}, note="SAME"),
        Sample({"Input": [r((2, 2, 5, 4))], "Filter": [r((2, 2, 2, 3))]},
               {"strides": [1, 2], "paddings": [1, 1], "padding_algorithm": "VALID"}, note="VALID"),
        Sample({"Input": [r((1, 2, 6, 6))], "Filter": [r((2, 2, 2, 2))]},
               {"strides": [1, 1], "paddings": [1, 1], "dilations": [2, 2]}, note="dilation 2"),
        Sample({"Input": [r((1, 4, 4, 4))], "Filter": [r((4, 2, 2, 2))]},
               {"strides": [1, 1], "paddings": [0, 0], "groups": 2}, note="groups 2"),
        Sample({"Input": [r((2, 4, 3, 2))], "Filter": [r((3, 2, 2, 2))]},
               {"strides": [1, 1], "paddings": [1, 0], "data_format": "NHWC"}, note="NHWC"),
    ]


for _t in ("conv2d", "depthwise_conv2d"):
    register(OpDef(
        type=_t, inputs=("Input", "Filter"), outputs=("Output",), kernel=_conv2d,
        grad=GradSpec(f"{_t}_grad", ("Input", "Filter", "Output@GRAD"), ("Input@GRAD", "Filter@GRAD"),
                      kernel=_conv2d_grad),
        samples=(lambda rng, _d=(_t == "depthwise_conv2d"): _conv_samples(rng, _d)),
        attrs_handled=_CONV_ATTRS,
        doc="2-D convolution (im2col + batched matmul over groups); filter OIHW"))


# --------------------------------------------------------------------------
# conv2d_transpose
# --------------------------------------------------------------------------
def _transpose_geometry(c: Call, x_nchw, w):
    p, s, d, groups = _conv_geometry(c, x_nchw, w)
    if groups < 1 or x_nchw.shape[1] != w.shape[0] or w.shape[0] % groups:
        raise ValueError(f"conv2d_transpose: input channels {x_nchw.shape[1]}, filter {tuple(w.shape)} "
                         f"and groups={groups} do not fit")
    osz = [int(t) for t in (c.attr("output_size", []) or [])]
    opad = [int(t) for t in (c.attr("output_padding", []) or [])]
    out_hw = []
    for i in range(2):
        infer = (x_nchw.shape[2 + i] - 1) * s[i] - p[2 * i] - p[2 * i + 1] + _extent(w.shape[2 + i], d[i])
        if osz:
            if len(osz) != 2:
                raise c.unsupported("output_size", osz, "expected 2 values")
            if not infer <= osz[i] < infer + s[i]:
                raise c.unsupported("output_size", osz, f"dim {i} must be in [{infer}, {infer + s[i]})")
            out_hw.append(osz[i])
        elif opad:
            if len(opad) != 2:
                raise c.unsupported("output_padding", opad, "expected 2 values")
            if not 0 <= opad[i] < max(s[i], d[i]):
                raise c.unsupported("output_padding", opad, "must be smaller than stride or dilation")
            out_hw.append(infer + opad[i])
        else:
            out_hw.append(infer)
    if min(out_hw) < 1:
        raise ValueError(f"conv2d_transpose: output size {out_hw} is not positive")
    return p, s, d, groups, out_hw


def conv2d_transpose_kernel(c: Call):
    layout = _layout(c)
    x, w = _to_nchw(c.x("Input"), layout), c.x("Filter")
    if x.ndim != 4 or w.ndim != 4:
        raise c.unsupported("Input/Filter rank", (x.ndim, w.ndim), "conv2d_transpose needs 4-D Input and Filter")
    p, s, d, groups, (oh, ow) = _transpose_geometry(c, x, w)
    out_shape = (x.shape[0], w.shape[1] * groups, oh, ow)
    out = conv_input_grad(x, w.astype(x.dtype, copy=False), out_shape, p, s, d, groups)
    return {"Output": _from_nchw(out, layout).astype(x.dtype, copy=False)}


def conv2d_transpose_grad_kernel(c: Call):
    layout = _layout(c)
    x, w = _to_nchw(c.x("Input"), layout), c.x("Filter")
    dy = _to_nchw(c.x("Output@GRAD"), layout)
    p, s, d, groups, _ = _transpose_geometry(c, x, w)
    res = {}
    if c.wants("Input@GRAD"):
        gx = conv_forward(dy, w.astype(dy.dtype, copy=False), p, s, d, groups, x.shape[2:])
        if gx.shape != x.shape:
            raise ValueError(f"conv2d_transpose grad: Input@GRAD {gx.shape} != Input {x.shape}")
        res["Input@GRAD"] = _from_nchw(gx, layout).astype(x.dtype, copy=False)
    if c.wants("Filter@GRAD"):
        res["Filter@GRAD"] = conv_filter_grad(dy, x, w.shape, p, s, d, groups).astype(w.dtype, copy=False)
    return res


def _transpose_samples(rng: np.random.Generator):
    r = rng.standard_normal
    return [
        Sample({"Input": [r((2, 2, 3, 3))], "Filter": [r((2, 3, 3, 3))]},
               {"strides": [1, 1], "paddings": [1, 1]}, note="pad 1"),
        Sample({"Input": [r((1, 2, 3, 3))], "Filter": [r((2, 2, 3, 3))]},
               {"strides": [2, 2], "paddings": [1, 1], "output_padding": [1, 0]}, note="stride 2 output_padding"),
        Sample({"Input": [r((1, 4, 2, 3))], "Filter": [r((4, 1, 2, 2))]},
               {"strides": [2, 1], "paddings": [0, 1, 1, 0], "groups": 2, "dilations": [2, 1]}, note="groups dilation"),
        Sample({"Input": [r((1, 2, 2, 3))], "Filter": [r((2, 2, 3, 3))]},
               {"strides": [2, 2], "paddings": [1, 1], "output_size": [4, 6]}, note="output_size"),
        Sample({"Input": [r((1, 2, 3, 2))], "Filter": [r((2, 2, 3, 3))]},
               {"strides": [2, 2], "padding_algorithm": "SAME"}, note="SAME"),
        Sample({"Input": [r((1, 3, 2, 2))], "Filter": [r((2, 2, 2, 2))]},
               {"strides": [2, 2], "data_format": "NHWC"}, note="NHWC"),
    ]


register(OpDef(
    type="conv2d_transpose", inputs=("Input", "Filter", "Bias"), outputs=("Output",),
    kernel=conv2d_transpose_kernel,
    grad=GradSpec("conv2d_transpose_grad", ("Input", "Filter", "Output@GRAD", "Bias"),
                  ("Input@GRAD", "Filter@GRAD"), kernel=conv2d_transpose_grad_kernel),
    samples=_transpose_samples,
    attrs_handled=_CONV_ATTRS + ("output_size", "output_padding"),
    doc="2-D transposed convolution (col2im); filter [in, out/groups, kh, kw]; Bias ignored as in Paddle"))
