"""Interpolation: nearest / bicubic / linear / trilinear _interp_v2 and the
legacy nearest_interp / bilinear_interp (bilinear_interp_v2 is in nn.py).

Every method is separable: each spatial axis gets an (out, in) weight
matrix, the forward applies them along their axes and the grad applies the
transposes. Paddle's CPU kernels (phi interpolate_kernel.cc, checked against
Paddle 3.3.1 by testdata/kernels), per axis:

* the input rank picks the axes (3-D: W; 4-D: H, W; 5-D: D, H, W);
  `data_layout` NHWC (or NWC / NDHWC) puts the channels last;
* size: SizeTensor (one 1-element tensor per axis), else the Scale tensor
  (1 value for every axis, or one per axis) or the `scale` attr (v2: a list,
  1 value enough for 1-D, one per axis else; legacy: one float), giving
  `out = int(float(in) * scale)`, then OutSize overrides, else
  out_d / out_h / out_w;
* ratio (float): `(in-1)/(out-1)` with align_corners, else `1/scale` when a
  scale was given (even if OutSize set the size), else `in/out`; 0 when
  out is 1. An input already of the output size is copied;
* nearest: source `int(ratio*o + 0.5)` with align_corners, else
  `int(ratio*o)`;
* linear: as bilinear_interp_v2 (nn.py): with align_mode 0 and not
  align_corners the source is `ratio*(o+0.5)-0.5` clamped at 0, else
  `ratio*o`; neighbours `lo` and `min(lo+1, in-1)`;
* bicubic: source `ratio*o` with align_corners, else `ratio*(o+0.5)-0.5`;
  the 4 neighbours `floor(src)-1 .. floor(src)+2` clamped to the input,
  Keys' cubic convolution weights with A = -0.75.
"""
from __future__ import annotations

import numpy as np

from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_NAMES = ("out_d", "out_h", "out_w")


def _apply(a: np.ndarray, m: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(np.tensordot(m, a, axes=([1], [axis])), 0, axis)


def _method(c: Call) -> str:
    t = c.op_type
    want = t[: t.index("_interp")]
    method = c.attr("interp_method", want) or want
    if method != want:
        raise c.unsupported("interp_method", method, f"{t} computes {want} only")
    return want


def _axes(c: Call, x: np.ndarray, method: str) -> list[int]:
    allowed = {"linear": (3,), "bilinear": (4,), "bicubic": (4,), "trilinear": (5,), "nearest": (4, 5)}[method]
    if x.ndim not in allowed:
        raise c.unsupported("X rank", x.ndim, f"{method} interpolation takes {' or '.join(map(str, allowed))}-D input")
    layout = c.attr("data_layout", "NCHW")
    if layout in ("NHWC", "NWC", "NDHWC"):
        return list(range(1, x.ndim - 1))
    if layout in ("NCHW", "NCW", "NCDHW", "AnyLayout"):
        return list(range(2, x.ndim))
    raise c.unsupported("data_layout", layout, "expected NCHW or NHWC")


def _scales(c: Call, nd: int) -> list[float]:
    """Scale per axis, -1 where none was given."""
    if c.has("Scale"):
        sc = [float(t) for t in np.asarray(c.x("Scale"), np.float32).reshape(-1)]
        if not sc:
            raise c.unsupported("Scale", sc, "empty Scale tensor")
        sc = sc[:nd] if len(sc) > 1 else sc * nd
        if len(sc) != nd or min(sc) <= 0:
            raise c.unsupported("Scale", sc, f"expected 1 or {nd} positive values")
        return sc
    attr = c.attr("scale", [])
    if isinstance(attr, (int, float)):            # legacy ops: one float, used when > 0
        return [float(attr)] * nd if attr > 0 else [-1.0] * nd
    sc = [float(t) for t in (attr or [])]
    if not sc or (nd > 1 and len(sc) == 1):
        if sc:
            raise c.unsupported("scale", sc, f"Paddle reads {nd} values for a {nd}-D interpolation")
        return [-1.0] * nd
    if len(sc) < nd or min(sc[:nd]) <= 0:
        raise c.unsupported("scale", sc, f"expected {nd} positive values")
    return sc[:nd]


def _sizes(c: Call, in_sizes: list[int]):
    """(out sizes, scales) as Paddle's kernel works them out."""
    nd = len(in_sizes)
    scales = [-1.0] * nd
    out = [int(c.attr(n, 0)) for n in _NAMES[3 - nd:]]
    if c.xs("SizeTensor"):
        out = [int(np.asarray(t).reshape(-1)[0]) for t in c.xs("SizeTensor")]
        if len(out) != nd:
            raise c.unsupported("SizeTensor", out, f"expected {nd} tensors")
    else:
        scales = _scales(c, nd)
        if min(scales) > 0:
            out = [int(np.float32(n) * np.float32(s)) for n, s in zip(in_sizes, scales)]
        if c.has("OutSize"):
            osz = [int(t) for t in np.asarray(c.x("OutSize")).reshape(-1)]
            if len(osz) != nd:
                raise c.unsupported("OutSize", osz, f"expected {nd} values")
            out = osz
    if min(out) < 1:
        raise c.unsupported("output size", out, "must be positive")
    return out, scales


def _ratio(n_in: int, n_out: int, scale: float, align_corners: bool) -> np.float32:
    if n_out <= 1:
        return np.float32(0.0)
    if align_corners:
        return np.float32(np.float32(n_in - 1) / np.float32(n_out - 1))
    if scale > 0:
        return np.float32(1.0 / np.float64(np.float32(scale)))
    return np.float32(np.float32(n_in) / np.float32(n_out))


def _nearest_matrix(n_in, n_out, scale, align_corners):
    r = _ratio(n_in, n_out, scale, align_corners)
    k = np.arange(n_out)
    prod = (r * k.astype(np.float32)).astype(np.float32)
    src = np.floor(prod.astype(np.float64) + 0.5) if align_corners else prod   # lround of a non-negative
    src = src.astype(np.int64)
    m = np.zeros((n_out, n_in))
    m[k, np.minimum(src, n_in - 1)] = 1.0
    return m


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = t.dtype.type(-0.75)
    one = t.dtype.type(1)

    def conv1(x):
        return ((a + 2) * x - (a + 3)) * x * x + one

    def conv2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [conv2(t + one), conv1(t), conv1(one - t), conv2((one - t) + one)]


def _bicubic_matrix(n_in, n_out, scale, align_corners, dtype, grad: bool):
    """Paddle's forward computes the align_corners=False source in double,
    its grad in float."""
    r = _ratio(n_in, n_out, scale, align_corners)
    k = np.arange(n_out)
    k32 = k.astype(np.float32)
    if align_corners:
        src = (r * k32).astype(np.float32).astype(dtype)
    elif grad:
        src = ((r * (k32 + np.float32(0.5))).astype(np.float32) - np.float32(0.5)).astype(dtype)
    else:
        src = (np.float64(r) * (k + 0.5) - 0.5).astype(dtype)
    lo = np.floor(src.astype(np.float32)).astype(np.int64)
    t = (src - lo.astype(dtype)).astype(dtype)
    m = np.zeros((n_out, n_in))
    for i, w in enumerate(_cubic_weights(t)):
        np.add.at(m, (k, np.clip(lo - 1 + i, 0, n_in - 1)), w.astype(np.float64))
    return m


def _linear_matrix(n_in: int, n_out: int, scale: float, align_corners: bool, align_mode: int,
                   idx_double: bool, src: str, wdt) -> np.ndarray:
    """(n_out, n_in) linear weights of one axis in Paddle's arithmetic.

    With align_mode 0 and not align_corners, the neighbour `lo` truncates
    `ratio*(o+0.5)-0.5` computed in double (`idx_double`) or float, and the
    weight uses the same expression computed in float (`src="float"`), in
    double then stored as float (`"double_to_float"`) or stored in the
    weight type `wdt` (`"double"`). Else both use the float `ratio*o`."""
    r = _ratio(n_in, n_out, scale, align_corners)
    k = np.arange(n_out)
    k32 = k.astype(np.float32)
    f32 = np.float32
    plain = (r * k32).astype(f32)
    m = np.zeros((n_out, n_in))
    if align_mode == 0 and not align_corners:
        e_double = np.float64(r) * (k + 0.5) - 0.5
        e_float = (r * (k32 + f32(0.5))).astype(f32) - f32(0.5)
        lo = np.trunc(e_double if idx_double else e_float).astype(np.int64)
        e = {"float": e_float, "double_to_float": e_double.astype(f32), "double": e_double.astype(wdt)}[src]
        lo = np.maximum(lo, 0)
        d_hi = (np.maximum(e, 0) - lo.astype(e.dtype)).astype(wdt if src == "double" else f32)
    else:
        lo = np.maximum(np.trunc(plain).astype(np.int64), 0)
        d_hi = (plain - lo.astype(f32)).astype(wdt if src == "double" else f32)
    d_lo = (d_hi.dtype.type(1) - d_hi).astype(d_hi.dtype)
    hi = np.minimum(lo + 1, n_in - 1)
    np.add.at(m, (k, lo), d_lo.astype(np.float64))
    np.add.at(m, (k, hi), d_hi.astype(np.float64))
    return m


def _linear_modes(c: Call, nd: int, grad: bool):
    """(idx_double, src) per axis, as Paddle 3.3.1's CPU kernels compute them."""
    if grad:
        return [(False, "float")] * nd
    if c.op_type.startswith("bilinear"):          # legacy bilinear_interp: as bilinear_interp_v2
        return [(True, "double_to_float"), (True, "float")]
    if nd == 1:
        return [(True, "double")]
    return [(True, "float")] * nd


def _matrices(c: Call, method: str, in_sizes, out_sizes, scales, dtype, grad: bool):
    ac = bool(c.attr("align_corners", True))
    am = int(c.attr("align_mode", 1))
    ms = []
    modes = _linear_modes(c, len(in_sizes), grad)
    for i, (ni, no, s) in enumerate(zip(in_sizes, out_sizes, scales)):
        if method == "nearest":
            ms.append(_nearest_matrix(ni, no, s, ac))
        elif method == "bicubic":
            ms.append(_bicubic_matrix(ni, no, s, ac, dtype, grad))
        else:
            ms.append(_linear_matrix(ni, no, s, ac, am, *modes[i], dtype))
    return ms


def _interp(c: Call):
    x = c.x("X")
    method = _method(c)
    axes = _axes(c, x, method)
    in_sizes = [x.shape[a] for a in axes]
    out_sizes, scales = _sizes(c, in_sizes)
    if in_sizes == out_sizes:
        return {"Out": x.copy()}
    wdt = np.float64 if x.dtype == np.float64 else np.float32
    out = x.astype(np.float64)
    for a, m in zip(axes, _matrices(c, method, in_sizes, out_sizes, scales, wdt, grad=False)):
        out = _apply(out, m, a)
    return {"Out": out.astype(x.dtype, copy=False)}


def _interp_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, dy = c.x("X"), c.x("Out@GRAD")
    method = _method(c)
    axes = _axes(c, x, method)
    in_sizes = [x.shape[a] for a in axes]
    out_sizes, scales = _sizes(c, in_sizes)
    if [dy.shape[a] for a in axes] != out_sizes:
        raise ValueError(f"{c.op_type}_grad: Out@GRAD sizes {[dy.shape[a] for a in axes]} != computed {out_sizes}")
    if in_sizes == out_sizes:
        return {"X@GRAD": dy.astype(x.dtype, copy=True)}
    wdt = np.float64 if x.dtype == np.float64 else np.float32
    dx = dy.astype(np.float64)
    for a, m in zip(axes, _matrices(c, method, in_sizes, out_sizes, scales, wdt, grad=True)):
        dx = _apply(dx, m.T, a)
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


# --------------------------------------------------------------------------
# samples
# --------------------------------------------------------------------------
def _nearest_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 5, "out_w": 7, "align_corners": False, "interp_method": "nearest"},
          note="upsample"),
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 5, "out_w": 7, "align_corners": True, "interp_method": "nearest"},
          note="align_corners"),
        S({"X": [r((1, 2, 6, 7))]}, {"out_h": 4, "out_w": 3, "align_corners": False, "interp_method": "nearest"},
          note="downsample"),
        S({"X": [r((2, 1, 3, 4))]}, {"scale": [1.7, 2.0], "align_corners": False, "interp_method": "nearest"},
          note="scale attr"),
        S({"X": [r((1, 4, 3, 2))]}, {"out_h": 5, "out_w": 3, "align_corners": False, "data_layout": "NHWC",
                                     "interp_method": "nearest"}, note="NHWC"),
        S({"X": [r((1, 2, 2, 3, 3))]}, {"out_d": 3, "out_h": 5, "out_w": 4, "align_corners": False,
                                        "interp_method": "nearest"}, note="5-D"),
    ]


def _bicubic_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 5, "out_w": 7, "align_corners": False, "interp_method": "bicubic"},
          note="upsample"),
        S({"X": [r((1, 2, 3, 4))]}, {"out_h": 6, "out_w": 6, "align_corners": True, "interp_method": "bicubic"},
          note="align_corners"),
        S({"X": [r((1, 1, 6, 7))]}, {"out_h": 4, "out_w": 3, "align_corners": False, "interp_method": "bicubic"},
          note="downsample"),
        S({"X": [r((1, 2, 3, 4))]}, {"scale": [1.5, 2.0], "align_corners": False, "interp_method": "bicubic"},
          note="scale attr"),
        S({"X": [r((1, 4, 3, 2))]}, {"out_h": 5, "out_w": 4, "align_corners": False, "data_layout": "NHWC",
                                     "interp_method": "bicubic"}, note="NHWC"),
    ]


def _linear_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"X": [r((2, 3, 4))]}, {"out_w": 7, "align_corners": True, "interp_method": "linear"}, note="align_corners"),
        S({"X": [r((2, 3, 4))]}, {"out_w": 7, "align_corners": False, "align_mode": 0, "interp_method": "linear"},
          note="align_mode 0"),
        S({"X": [r((2, 3, 5))]}, {"out_w": 3, "align_corners": False, "align_mode": 1, "interp_method": "linear"},
          note="align_mode 1 downsample"),
        S({"X": [r((1, 2, 4))]}, {"scale": [1.5], "align_corners": False, "align_mode": 0, "interp_method": "linear"},
          note="scale attr"),
        S({"X": [r((1, 5, 3))]}, {"out_w": 6, "align_corners": False, "align_mode": 0, "data_layout": "NHWC",
                                  "interp_method": "linear"}, note="NWC"),
    ]


def _trilinear_samples(rng):
    r = rng.standard_normal
    S = Sample
    return [
        S({"X": [r((1, 2, 2, 3, 4))]}, {"out_d": 3, "out_h": 5, "out_w": 6, "align_corners": True,
                                        "interp_method": "trilinear"}, note="align_corners"),
        S({"X": [r((1, 2, 2, 3, 4))]}, {"out_d": 4, "out_h": 4, "out_w": 3, "align_corners": False, "align_mode": 0,
                                        "interp_method": "trilinear"}, note="align_mode 0"),
        S({"X": [r((1, 1, 3, 3, 2))]}, {"out_d": 2, "out_h": 5, "out_w": 4, "align_corners": False, "align_mode": 1,
                                        "interp_method": "trilinear"}, note="align_mode 1"),
        S({"X": [r((1, 2, 2, 2, 3))]}, {"scale": [1.5, 2.0, 1.5], "align_corners": False, "align_mode": 0,
                                        "interp_method": "trilinear"}, note="scale attr"),
        S({"X": [r((1, 2, 3, 2, 3))]}, {"out_d": 3, "out_h": 4, "out_w": 4, "align_corners": False,
                                        "data_layout": "NDHWC", "interp_method": "trilinear"}, note="NDHWC"),
    ]


def _legacy_samples(rng, method: str):
    r = rng.standard_normal
    S = Sample
    base = {"interp_method": method}
    if method == "bilinear":
        return [
            S({"X": [r((1, 2, 3, 4))]}, {**base, "out_h": 5, "out_w": 7, "align_corners": True}, note="align_corners"),
            S({"X": [r((1, 2, 3, 4))]}, {**base, "out_h": 5, "out_w": 3, "align_corners": False, "align_mode": 0},
              note="align_mode 0"),
            S({"X": [r((1, 2, 3, 4))]}, {**base, "scale": 1.5, "align_corners": False, "align_mode": 1},
              note="scale"),
            S({"X": [r((1, 4, 3, 2))]}, {**base, "out_h": 5, "out_w": 3, "align_corners": False,
                                         "data_layout": "NHWC"}, note="NHWC"),
        ]
    return [
        S({"X": [r((1, 2, 3, 4))]}, {**base, "out_h": 5, "out_w": 7, "align_corners": False}, note="upsample"),
        S({"X": [r((1, 2, 3, 4))]}, {**base, "out_h": 5, "out_w": 7, "align_corners": True}, note="align_corners"),
        S({"X": [r((1, 2, 3, 4))]}, {**base, "scale": 1.7, "align_corners": False}, note="scale"),
    ]


_ATTRS = ("out_d", "out_h", "out_w", "scale", "interp_method", "align_corners", "align_mode", "data_layout")
_DOCS = {"nearest": "nearest-neighbour resize of a 4-D or 5-D tensor",
         "bicubic": "bicubic resize of a 4-D tensor (Keys, A=-0.75)",
         "linear": "linear resize of a 3-D tensor",
         "trilinear": "trilinear resize of a 5-D tensor"}
_SAMPLES = {"nearest": _nearest_samples, "bicubic": _bicubic_samples, "linear": _linear_samples,
            "trilinear": _trilinear_samples}

for _m in ("nearest", "bicubic", "linear", "trilinear"):
    _t = f"{_m}_interp_v2"
    register(paddle_opdef(_t, _interp, {f"{_t}_grad": _interp_grad}, samples=_SAMPLES[_m], attrs_handled=_ATTRS,
                          doc=_DOCS[_m] + ", Paddle's size and source-index rules"))
for _m in ("nearest", "bilinear"):
    _t = f"{_m}_interp"
    register(paddle_opdef(_t, _interp, {f"{_t}_grad": _interp_grad},
                          samples=(lambda rng, _mm=_m: _legacy_samples(rng, _mm)), attrs_handled=_ATTRS,
                          doc=f"legacy {_m} resize of a 4-D tensor (scale is one float)"))
