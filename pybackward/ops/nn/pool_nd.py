"""N-D pooling: pool3d, max_pool2d_with_index, max_pool3d_with_index, and
lp_pool2d and unpool.

Paddle's CPU pooling functors (phi funcs/pooling.cc), per spatial axis and
output position `o` (checked against Paddle 3.3.1 by testdata/kernels):

* pool3d follows pool2d (see pool.py) one axis further: `paddings` has 3
  values (symmetric) or 6 (`[front, back, top, bottom, left, right]`),
  SAME / VALID, global and adaptive pooling zero the paddings, the output
  size is `(in - k + p0 + p1 [+ s - 1 if ceil_mode]) / s + 1`, windows
  `[o*s - p0, min(o*s - p0 + k, in + p0))` clipped to the input, the
  non-exclusive average divides by the unclipped window size; max pooling
  runs with adaptive off (output size ksize, regular windows), as in 2-D.
* max_pool{2,3}d_with_index: `paddings` one value per axis; global pooling
  takes the whole input (paddings 0); adaptive windows are
  `[floor(o*in/out), ceil((o+1)*in/out))` with output size ksize; else
  windows `[o*s - p, min(o*s - p + k, in))` clipped at 0, output size
  `(in - k + 2p [+ s - 1 if ceil_mode]) / s + 1`. Out is the first maximum
  (row-major) greater than -FLT_MAX, Mask (int32) its flat index within the
  input plane (-1 and -FLT_MAX for a window with none). The grad adds
  Out@GRAD at Mask.
* lp_pool2d: `(sum of x^p over the window)^(1/p)` on pool2d's windows
  (padding adds nothing); the grad is `dy * (x / out)^(p-1)`.
* fractional_max_pool2d: windows `[int((o+u)*a) - int(u*a), ...)` with
  `a = (in - k) / (out - 1)` (k = kernel_size, or disjoint windows with u
  rescaled when k is 0), all in float; max and mask as with_index. A
  random_u of 0 makes Paddle draw u from its global generator: here from
  the interpreter's generator instead.
* unpool (max): `Out[Indices] = X` per plane, Out of `output_size` (else
  `(in-1)*s - 2p + k`); the grad reads Out@GRAD at Indices.

A window table per axis (outputs x longest window) turns each op into one
gather, one reduction and, for the grads, one scatter-add.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from .pool import distinct
from ..registry import Call, Sample, register

_FLT_MAX = float(np.finfo(np.float32).max)


def int_list(c: Call, name: str, nd: int, default=None) -> list[int]:
    """An int-list attr of `nd` values (one value stands for all of them)."""
    v = c.attr(name, default)
    v = [int(t) for t in (v if isinstance(v, (list, tuple)) else [v])]
    if len(v) == 1 and nd > 1:
        v = v * nd
    if len(v) != nd:
        raise c.unsupported(name, v, f"expected {nd} values")
    return v


def _pad_pairs(c: Call, nd: int) -> list[list[int]]:
    """`paddings` as [before, after] per axis (nd values mean symmetric)."""
    p = [int(t) for t in (c.attr("paddings", [0] * nd) or [0] * nd)]
    if len(p) == nd:
        return [[v, v] for v in p]
    if len(p) == 2 * nd:
        return [[p[2 * i], p[2 * i + 1]] for i in range(nd)]
    raise c.unsupported("paddings", p, f"expected {nd} or {2 * nd} values")


class Windows:
    """Per-axis windows: `idx` (O, L) input indices (clipped), `valid` (O, L),
    `size` (O,) the divisor of each output along the axis."""

    def __init__(self, starts, ends, divisors, in_shape):
        self.in_shape = tuple(in_shape)
        self.idx, self.valid = [], []
        for st, en, n in zip(starts, ends, in_shape):
            length = max(int((en - st).max(initial=1)), 1)
            idx = st[:, None] + np.arange(length)[None, :]
            self.valid.append(idx < en[:, None])
            self.idx.append(np.clip(idx, 0, n - 1))
        self.divisors = divisors
        self.out_shape = tuple(len(s) for s in starts)

    @property
    def nd(self) -> int:
        return len(self.idx)

    def _interleaved(self, arrs):
        """Per-axis (O_i, L_i) arrays broadcast to (O_1, L_1, O_2, L_2, ...)."""
        nd = self.nd
        out = []
        for i, a in enumerate(arrs):
            shape = [1] * (2 * nd)
            shape[2 * i], shape[2 * i + 1] = a.shape
            out.append(a.reshape(shape))
        return out

    def _o_then_l(self, a: np.ndarray, lead: int) -> np.ndarray:
        """(..., O1, L1, O2, L2, ...) -> (..., O1, O2, ..., L1*L2*...)."""
        nd = self.nd
        perm = list(range(lead)) + [lead + 2 * i for i in range(nd)] + [lead + 2 * i + 1 for i in range(nd)]
        a = a.transpose(perm)
        return a.reshape(a.shape[:lead + nd] + (-1,))

    def gather(self, x: np.ndarray) -> np.ndarray:
        """x (N, C, *S) -> (N, C, *O, L) windows (invalid slots hold a clipped copy)."""
        g = x[(slice(None), slice(None)) + tuple(self._interleaved(self.idx))]
        return self._o_then_l(g, 2)

    def mask(self) -> np.ndarray:
        m = np.ones((1,) * (2 * self.nd), dtype=bool)
        for v in self._interleaved(self.valid):
            m = m & v
        return self._o_then_l(m, 0)                       # (*O, L)

    def flat_index(self) -> np.ndarray:
        strides = np.cumprod((1,) + self.in_shape[::-1])[-2::-1]
        f = np.zeros((1,) * (2 * self.nd), dtype=np.int64)
        for s, ix in zip(strides, self._interleaved(self.idx)):
            f = f + ix * int(s)
        return self._o_then_l(f, 0)                       # (*O, L)

    def divisor(self) -> np.ndarray:
        d = np.ones((), dtype=np.int64)
        for s in self.divisors:
            d = np.multiply.outer(d, s)
        return d                                          # (*O)


def _adaptive(n: int, n_out: int):
    o = np.arange(n_out)
    return (o * n) // n_out, -((-(o + 1) * n) // n_out)


# --------------------------------------------------------------------------
# pool3d
# --------------------------------------------------------------------------
def _pool3d_layout(c: Call, x) -> str:
    if x.ndim != 5:
        raise c.unsupported("X rank", x.ndim, "pool3d needs a 5-D input")
    fmt = c.attr("data_format", "NCDHW")
    if fmt not in ("NCDHW", "NDHWC", "AnyLayout"):
        raise c.unsupported("data_format", fmt, "pool3d takes NCDHW or NDHWC")
    return "NDHWC" if fmt == "NDHWC" else "NCDHW"


def _pool_type(c: Call) -> str:
    t = c.attr("pooling_type", "")
    if t not in ("max", "avg"):
        raise c.unsupported("pooling_type", t, "pool3d supports max and avg")
    return t


def _pool_windows(c: Call, in_shape, kind: str) -> Windows:
    """pool2d/pool3d windows (Pool{2,3}dFunctor), any number of axes."""
    nd = len(in_shape)
    ksize = int_list(c, "ksize", nd, [1] * nd)
    strides = int_list(c, "strides", nd, [1] * nd)
    global_pooling = bool(c.attr("global_pooling", False))
    adaptive = bool(c.attr("adaptive", False))
    fixed_out = adaptive and kind == "max"   # Paddle runs max with adaptive off
    exclusive = bool(c.attr("exclusive", True))
    ceil_mode = bool(c.attr("ceil_mode", False))
    if global_pooling:
        ksize = list(in_shape)
    pads = _pad_pairs(c, nd)
    algo = c.attr("padding_algorithm", "EXPLICIT")
    if algo == "SAME":
        for i in range(nd):
            out = (in_shape[i] + strides[i] - 1) // strides[i]
            pad_sum = max((out - 1) * strides[i] + ksize[i] - in_shape[i], 0)
            pads[i] = [pad_sum // 2, pad_sum - pad_sum // 2]
    elif algo == "VALID":
        pads = [[0, 0] for _ in range(nd)]
    elif algo != "EXPLICIT":
        raise c.unsupported("padding_algorithm", algo, "expected EXPLICIT, SAME or VALID")
    if global_pooling or adaptive:
        pads = [[0, 0] for _ in range(nd)]
    if min(strides) < 1 or min(ksize) < 1:
        raise c.unsupported("ksize/strides", (ksize, strides), "must be positive")
    starts, ends, divs = [], [], []
    for i in range(nd):
        n, (p0, p1) = in_shape[i], pads[i]
        if adaptive and not fixed_out:
            st, en = _adaptive(n, ksize[i])
            size = en - st
        else:
            extra = strides[i] - 1 if ceil_mode else 0
            # C++ int division truncates toward zero (Paddle's PoolOutputSize), as in pool.py
            n_out = ksize[i] if fixed_out else int((n - ksize[i] + p0 + p1 + extra) / strides[i]) + 1
            if n_out < 1:
                raise ValueError(f"{c.op_type}: output size {n_out} is not positive (input {n}, "
                                 f"ksize {ksize[i]}, paddings {pads[i]}, stride {strides[i]})")
            o = np.arange(n_out)
            st = o * strides[i] - p0
            en = np.minimum(st + ksize[i], n + p0)
            size = en - st
            st, en = np.maximum(st, 0), np.minimum(en, n)
            if exclusive:
                size = en - st
        starts.append(st)
        ends.append(en)
        divs.append(size)
    return Windows(starts, ends, divs, in_shape)


def _to_first(x, last: bool):
    return np.moveaxis(x, -1, 1) if last else x


def _to_last(x, last: bool):
    return np.moveaxis(x, 1, -1) if last else x


def _pool3d(c: Call):
    x = c.x("X")
    last = _pool3d_layout(c, x) == "NDHWC"
    kind = _pool_type(c)
    xn = _to_first(x, last)
    win = _pool_windows(c, xn.shape[2:], kind)
    g, m = win.gather(xn), win.mask()
    if kind == "max":
        out = np.where(m, g, -np.inf).max(axis=-1)
        out = np.where(np.isneginf(out) & ~m.any(axis=-1), -_FLT_MAX, out)
    else:
        out = np.where(m, g, 0).sum(axis=-1) / win.divisor()
    return {"Out": _to_last(out, last).astype(x.dtype, copy=False)}


def _pool3d_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    last = _pool3d_layout(c, x) == "NDHWC"
    kind = _pool_type(c)
    xn, dy = _to_first(x, last), _to_first(c.x("Out@GRAD"), last)
    n, ch = xn.shape[:2]
    win = _pool_windows(c, xn.shape[2:], kind)
    if dy.shape[2:] != win.out_shape:
        raise ValueError(f"{c.op_type}: Out@GRAD spatial {dy.shape[2:]} != computed {win.out_shape}")
    m, flat = win.mask(), win.flat_index()             # (*O, L)
    plane = int(np.prod(xn.shape[2:]))
    dx = np.zeros((n * ch, plane), dtype=np.result_type(xn.dtype, dy.dtype))
    rows = np.arange(n * ch)[:, None]
    if kind == "max":   # the first window position equal to Out gets the grad
        g = win.gather(xn)
        out = _to_first(c.x("Out"), last) if c.has("Out") else np.where(m, g, -np.inf).max(axis=-1)
        hit = m & (g == out[..., None])
        ok, pick = hit.any(axis=-1), hit.argmax(axis=-1)
        pos = np.take_along_axis(np.broadcast_to(flat, g.shape), pick[..., None], axis=-1)[..., 0]
        np.add.at(dx, (rows, pos.reshape(n * ch, -1)), np.where(ok, dy, 0).reshape(n * ch, -1))
    else:
        scale = (np.float32(1.0) / win.divisor().astype(np.float32)).astype(dx.dtype)
        vals = (dy * scale)[..., None] * m
        np.add.at(dx, (rows, np.broadcast_to(flat, m.shape).reshape(1, -1)), vals.reshape(n * ch, -1))
    dx = dx.reshape(xn.shape)
    return {"X@GRAD": _to_last(dx, last).astype(x.dtype, copy=False)}


def _pool3d_samples(rng: np.random.Generator):
    d = lambda *s: distinct(rng, s)  # noqa: E731
    S = Sample
    return [
        S({"X": [d(1, 2, 4, 4, 4)]}, {"pooling_type": "max", "ksize": [2, 2, 2], "strides": [2, 2, 2]},
          note="max 2x2x2 s2"),
        S({"X": [d(1, 2, 3, 5, 4)]}, {"pooling_type": "max", "ksize": [2, 3, 2], "strides": [1, 2, 2],
                                      "paddings": [1, 1, 0]}, note="max pad"),
        S({"X": [d(1, 2, 3, 5, 4)]}, {"pooling_type": "avg", "ksize": [2, 3, 3], "strides": [1, 2, 2],
                                      "paddings": [1, 1, 1]}, note="avg exclusive"),
        S({"X": [d(1, 2, 3, 5, 4)]}, {"pooling_type": "avg", "ksize": [2, 3, 3], "strides": [1, 2, 2],
                                      "paddings": [0, 1, 1, 0, 1, 1], "exclusive": False},
          note="avg inclusive 6 paddings"),
        S({"X": [d(1, 1, 3, 5, 5)]}, {"pooling_type": "avg", "ksize": [2, 2, 2], "strides": [2, 2, 2],
                                      "ceil_mode": True, "exclusive": False}, note="avg ceil_mode"),
        S({"X": [d(2, 2, 2, 3, 4)]}, {"pooling_type": "max", "ksize": [1, 1, 1], "global_pooling": True},
          note="max global"),
        S({"X": [d(2, 2, 2, 3, 4)]}, {"pooling_type": "avg", "ksize": [1, 1, 1], "global_pooling": True},
          note="avg global"),
        S({"X": [d(1, 2, 3, 5, 7)]}, {"pooling_type": "avg", "ksize": [2, 2, 3], "adaptive": True},
          note="avg adaptive"),
        S({"X": [d(1, 2, 3, 4, 5)]}, {"pooling_type": "max", "ksize": [2, 2, 3], "adaptive": True},
          note="max adaptive (Paddle's regular windows)"),
        S({"X": [d(1, 2, 4, 5, 3)]}, {"pooling_type": "avg", "ksize": [2, 3, 2], "strides": [2, 2, 1],
                                      "padding_algorithm": "SAME", "exclusive": False}, note="avg SAME"),
        S({"X": [d(1, 3, 4, 4, 2)]}, {"pooling_type": "max", "ksize": [2, 2, 2], "strides": [1, 2, 1],
                                      "paddings": [0, 1, 0], "data_format": "NDHWC"}, note="max NDHWC"),
    ]


register(paddle_opdef(
    "pool3d", _pool3d, {"pool3d_grad": _pool3d_grad}, samples=_pool3d_samples,
    attrs_handled=("pooling_type", "ksize", "strides", "paddings", "global_pooling", "adaptive", "exclusive",
                   "ceil_mode", "padding_algorithm", "data_format"),
    doc="3-D max/avg pooling, Paddle's window and divisor rules"))


# --------------------------------------------------------------------------
# max_pool2d_with_index / max_pool3d_with_index
# --------------------------------------------------------------------------
def _index_windows(c: Call, in_shape) -> Windows:
    nd = len(in_shape)
    ksize = int_list(c, "ksize", nd)
    strides = int_list(c, "strides", nd, [1] * nd)
    pads = int_list(c, "paddings", nd, [0] * nd)
    adaptive = bool(c.attr("adaptive", False))
    ceil_mode = bool(c.attr("ceil_mode", False))
    if c.attr("global_pooling", False):
        ksize, pads = list(in_shape), [0] * nd
    if min(strides) < 1 or min(ksize) < 1:
        raise c.unsupported("ksize/strides", (ksize, strides), "must be positive")
    starts, ends = [], []
    for i, n in enumerate(in_shape):
        if adaptive:
            st, en = _adaptive(n, ksize[i])
        else:
            extra = strides[i] - 1 if ceil_mode else 0
            n_out = int((n - ksize[i] + 2 * pads[i] + extra) / strides[i]) + 1  # C++ truncation
            if n_out < 1:
                raise ValueError(f"{c.op_type}: output size {n_out} is not positive (input {n}, "
                                 f"ksize {ksize[i]}, padding {pads[i]}, stride {strides[i]})")
            st = np.arange(n_out) * strides[i] - pads[i]
            en = np.minimum(st + ksize[i], n)
            st = np.maximum(st, 0)
        starts.append(st)
        ends.append(en)
    return Windows(starts, ends, [e - s for s, e in zip(starts, ends)], in_shape)


def _check_rank(c: Call, x) -> int:
    nd = 2 if c.op_type.startswith("max_pool2d") else 3
    if x.ndim != nd + 2:
        raise c.unsupported("X rank", x.ndim, f"{c.op_type} needs a {nd + 2}-D input")
    return nd


def max_with_index(x, win: Windows):
    """First maximum above -FLT_MAX of each window and its flat index in the plane."""
    g, m = win.gather(x), win.mask()
    cand = np.where(m & (g > -_FLT_MAX), g, -np.inf)
    pick = cand.argmax(axis=-1)
    best = np.take_along_axis(cand, pick[..., None], axis=-1)[..., 0]
    ok = ~np.isneginf(best)
    flat = np.broadcast_to(win.flat_index(), g.shape)
    idx = np.take_along_axis(flat, pick[..., None], axis=-1)[..., 0]
    return np.where(ok, best, -_FLT_MAX).astype(x.dtype, copy=False), np.where(ok, idx, -1).astype(np.int32)


def _max_pool_with_index(c: Call):
    x = c.x("X")
    _check_rank(c, x)
    out, mask = max_with_index(x, _index_windows(c, x.shape[2:]))
    return {"Out": out, "Mask": mask}


def scatter_by_mask(c: Call, x, mask, dy):
    """X@GRAD: dy added at the flat plane indices in mask (-1: nowhere)."""
    n, ch = x.shape[:2]
    plane = int(np.prod(x.shape[2:]))
    if mask.shape != dy.shape:
        raise ValueError(f"{c.op_type}: mask {mask.shape} and the output grad {dy.shape} differ")
    m = mask.reshape(n * ch, -1).astype(np.int64)
    if m.size and (m.max() >= plane or m.min() < -1):
        raise ValueError(f"{c.op_type}: the mask holds an index outside the input plane of {plane}")
    dx = np.zeros((n * ch, plane + 1), dtype=dy.dtype)   # column `plane` takes the -1 (no max) entries
    np.add.at(dx, (np.arange(n * ch)[:, None], np.where(m < 0, plane, m)), dy.reshape(n * ch, -1))
    return dx[:, :plane].reshape(x.shape).astype(x.dtype, copy=False)


def _max_pool_with_index_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    _check_rank(c, x)
    return {"X@GRAD": scatter_by_mask(c, x, np.asarray(c.x("Mask")), c.x("Out@GRAD"))}


def _mpi_samples(rng: np.random.Generator, nd: int):
    d = lambda *s: distinct(rng, s)  # noqa: E731
    S = Sample
    if nd == 2:
        return [
            S({"X": [d(2, 2, 4, 4)]}, {"ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}, note="2x2 s2"),
            S({"X": [d(1, 2, 5, 5)]}, {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, note="3x3 pad"),
            S({"X": [d(1, 2, 5, 6)]}, {"ksize": [3, 2], "strides": [2, 2], "paddings": [1, 0], "ceil_mode": True},
              note="ceil_mode"),
            S({"X": [d(2, 3, 3, 4)]}, {"ksize": [1, 1], "strides": [1, 1], "paddings": [0, 0],
                                       "global_pooling": True}, note="global"),
            S({"X": [d(1, 2, 5, 7)]}, {"ksize": [2, 3], "strides": [1, 1], "paddings": [0, 0], "adaptive": True},
              note="adaptive"),
            S({"X": [d(1, 1, 4, 4)]}, {"ksize": [3, 3], "strides": [1, 1], "paddings": [1, 1]}, note="overlap"),
        ]
    return [
        S({"X": [d(1, 2, 4, 4, 4)]}, {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0]},
          note="2x2x2 s2"),
        S({"X": [d(1, 2, 3, 5, 4)]}, {"ksize": [2, 3, 2], "strides": [1, 2, 2], "paddings": [1, 1, 0]},
          note="pad"),
        S({"X": [d(1, 2, 2, 3, 4)]}, {"ksize": [1, 1, 1], "strides": [1, 1, 1], "paddings": [0, 0, 0],
                                      "global_pooling": True}, note="global"),
        S({"X": [d(1, 2, 3, 5, 4)]}, {"ksize": [2, 2, 3], "strides": [1, 1, 1], "paddings": [0, 0, 0],
                                      "adaptive": True}, note="adaptive"),
    ]


for _nd in (2, 3):
    _t = f"max_pool{_nd}d_with_index"
    register(paddle_opdef(
        _t, _max_pool_with_index, {f"{_t}_grad": _max_pool_with_index_grad},
        samples=(lambda rng, _n=_nd: _mpi_samples(rng, _n)),
        attrs_handled=("ksize", "strides", "paddings", "global_pooling", "adaptive", "ceil_mode"),
        doc=f"{_nd}-D max pooling; Mask = flat index of the max within each input plane (int32)"))


# --------------------------------------------------------------------------
# lp_pool2d: (sum over the window of x^p)^(1/p), pool2d's windows
# --------------------------------------------------------------------------
def _lp_setup(c: Call, x):
    if x.ndim != 4:
        raise c.unsupported("x rank", x.ndim, "lp_pool2d takes a 4-D input")
    fmt = c.attr("data_format", "NCHW")
    if fmt not in ("NCHW", "NHWC"):
        raise c.unsupported("data_format", fmt, "expected NCHW or NHWC")
    p = float(c.attr("norm_type", 0.0))
    if not np.isfinite(p) or p <= 0:
        raise c.unsupported("norm_type", p, "a finite positive norm is supported")
    if c.has("KernelSizeTensor"):
        ks = [int(v) for v in np.asarray(c.x("KernelSizeTensor")).reshape(-1)]
    elif c.xs("KernelSizeTensorList"):
        ks = [int(np.asarray(v).reshape(-1)[0]) for v in c.xs("KernelSizeTensorList")]
    else:
        ks = c.attr("kernel_size", [1, 1])
    last = fmt == "NHWC"
    xn = _to_first(x, last)
    attrs = dict(c.attrs, ksize=list(ks) if isinstance(ks, (list, tuple)) else [ks])
    win = _pool_windows(Call(c.op_type, c.ins, attrs, c.outs), xn.shape[2:], "avg")
    return last, xn, win, x.dtype.type(p)


def _lp_pool2d(c: Call):
    x = c.x("x")
    last, xn, win, p = _lp_setup(c, x)
    g, m = win.gather(xn), win.mask()
    s = np.where(m, np.power(g, p), 0).sum(axis=-1)
    return {"out": _to_last(np.power(s, 1 / p), last).astype(x.dtype, copy=False)}


def _lp_pool2d_grad(c: Call):
    if not c.wants("x@GRAD"):
        return {}
    x = c.x("x")
    last, xn, win, p = _lp_setup(c, x)
    out, dy = _to_first(c.x("out"), last), _to_first(c.x("out@GRAD"), last)
    n, ch = xn.shape[:2]
    g, m, flat = win.gather(xn), win.mask(), win.flat_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        vals = np.where(m, dy[..., None] * np.power(g, p - 1) / np.power(out, p - 1)[..., None], 0)
    dx = np.zeros((n * ch, int(np.prod(xn.shape[2:]))), dtype=vals.dtype)
    np.add.at(dx, (np.arange(n * ch)[:, None], np.broadcast_to(flat, m.shape).reshape(1, -1)),
              vals.reshape(n * ch, -1))
    return {"x@GRAD": _to_last(dx.reshape(xn.shape), last).astype(x.dtype, copy=False)}


def _lp_samples(rng: np.random.Generator):
    pos = lambda *s: rng.uniform(0.2, 2.0, s)  # noqa: E731
    S = Sample
    return [
        S({"x": [pos(1, 2, 4, 4)]}, {"kernel_size": [2, 2], "strides": [2, 2], "norm_type": 2.0,
                                     "pooling_type": "LP"}, note="p 2"),
        S({"x": [pos(1, 2, 5, 5)]}, {"kernel_size": [3, 3], "strides": [2, 2], "norm_type": 3.0,
                                     "pooling_type": "LP"}, note="p 3"),
        S({"x": [pos(1, 2, 5, 4)]}, {"kernel_size": [2, 3], "strides": [1, 1], "norm_type": 1.5,
                                     "pooling_type": "LP", "ceil_mode": True}, note="p 1.5 ceil_mode"),
        S({"x": [pos(1, 4, 4, 2)]}, {"kernel_size": [2, 2], "strides": [2, 2], "norm_type": 2.0,
                                     "pooling_type": "LP", "data_format": "NHWC"}, note="NHWC"),
    ]


register(paddle_opdef(
    "lp_pool2d", _lp_pool2d, {"lp_pool2d_grad": _lp_pool2d_grad}, samples=_lp_samples,
    attrs_handled=("kernel_size", "strides", "paddings", "ceil_mode", "norm_type", "data_format",
                   "padding_algorithm"),
    doc="power-average pooling: (sum of x^p over each window)^(1/p)"))


# --------------------------------------------------------------------------
# unpool: max unpooling by the indices max_pool2d_with_index wrote
# --------------------------------------------------------------------------
def _unpool_shape(c: Call, x):
    if x.ndim != 4:
        raise c.unsupported("X rank", x.ndim, "unpool takes a 4-D input")
    if c.attr("data_format", "NCHW") != "NCHW":
        raise c.unsupported("data_format", c.attr("data_format"), "unpool takes NCHW")
    if c.attr("unpooling_type", "max") != "max":
        raise c.unsupported("unpooling_type", c.attr("unpooling_type"), "only max unpooling exists")
    osz = [int(v) for v in (c.attr("output_size", []) or [])]
    if len(osz) == 2 and min(osz) > 0:
        return tuple(osz)
    k, s, p = (int_list(c, n, 2, d) for n, d in (("ksize", [1, 1]), ("strides", [1, 1]), ("paddings", [0, 0])))
    return tuple((x.shape[2 + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(2))


def _unpool_indices(c: Call, x, out_hw):
    idx = np.asarray(c.x("Indices")).astype(np.int64)
    if idx.shape != x.shape:
        raise ExecutionError(f"unpool: Indices {idx.shape} and X {x.shape} differ")
    plane = out_hw[0] * out_hw[1]
    if idx.size and (idx.min() < 0 or idx.max() >= plane):
        raise ExecutionError(f"unpool: an index is outside the output plane of {plane}")
    return idx.reshape(x.shape[0] * x.shape[1], -1), plane


def _unpool(c: Call):
    x = c.x("X")
    out_hw = _unpool_shape(c, x)
    idx, plane = _unpool_indices(c, x, out_hw)
    out = np.zeros((idx.shape[0], plane), x.dtype)
    out[np.arange(idx.shape[0])[:, None], idx] = x.reshape(idx.shape)
    return {"Out": out.reshape(x.shape[:2] + out_hw)}


def _unpool_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    out_hw = _unpool_shape(c, x)
    idx, plane = _unpool_indices(c, x, out_hw)
    dy = c.x("Out@GRAD").reshape(idx.shape[0], plane)
    return {"X@GRAD": np.take_along_axis(dy, idx, axis=1).reshape(x.shape).astype(x.dtype, copy=False)}


def _unpool_samples(rng: np.random.Generator):
    x = rng.standard_normal((2, 2, 2, 3))
    # the indices of a 2x2 stride-2 max pooling of a 4x6 input: one per window
    oh, ow = np.meshgrid(np.arange(2), np.arange(3), indexing="ij")
    pick = rng.integers(0, 2, (2, 2, 2, 3, 2))
    idx = ((2 * oh + pick[..., 0]) * 6 + (2 * ow + pick[..., 1])).astype(np.int32)
    x5 = rng.standard_normal((1, 1, 2, 2))
    idx5 = np.array([[[[0, 3], [10, 13]]]], np.int32)
    return [
        Sample({"X": [x], "Indices": [idx]}, {"ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0],
                                              "output_size": [4, 6], "unpooling_type": "max"}, wrt=("X",),
               note="2x2 s2"),
        Sample({"X": [x5], "Indices": [idx5]}, {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
                                                "output_size": [4, 5], "unpooling_type": "max"}, wrt=("X",),
               note="3x3 s2 pad, output_size"),
    ]


register(paddle_opdef(
    "unpool", _unpool, {"unpool_grad": _unpool_grad}, samples=_unpool_samples,
    attrs_handled=("ksize", "strides", "paddings", "output_size", "unpooling_type", "data_format"),
    doc="max unpooling: Out[Indices] = X in each plane (output_size, or (in-1)*s - 2p + k)"))


# --------------------------------------------------------------------------
# fractional_max_pool2d: pseudo-random windows from random_u
# --------------------------------------------------------------------------
def fractional_axis(u: np.float32, n_in: int, n_out: int, k: int):
    f32 = np.float32
    alpha = f32(f32(n_in - k) / f32(n_out - (1 if k > 0 else 0)))
    if k <= 0:
        base = n_in // n_out
        u_max1 = f32(f32(base + 2) / alpha - f32(1))
        u_max2 = f32(f32(n_in + 1 - base) / alpha - f32(n_out - 1))
        u = f32(u * min(u_max1, u_max2))
    i = np.arange(n_out).astype(f32)
    shift = int(f32(u * alpha))
    st = ((i + u) * alpha).astype(f32).astype(np.int64) - shift
    en = st + k if k > 0 else ((i + f32(1) + u) * alpha).astype(f32).astype(np.int64) - shift
    return np.maximum(st, 0), np.minimum(en, n_in)


def fractional_windows(c: Call, x, nd: int) -> Windows:
    """The windows of fractional_max_pool{2,3}d over x's last `nd` axes (from random_u)."""
    if x.ndim != nd + 2:
        raise c.unsupported("x rank", x.ndim, f"fractional_max_pool{nd}d takes a {nd + 2}-D input")
    osz = int_list(c, "output_size", nd)
    ks = int_list(c, "kernel_size", nd, [0] * nd)
    for i in range(nd):
        if osz[i] < 1 or x.shape[2 + i] < osz[i] - 1 + ks[i]:
            raise c.unsupported("output_size/kernel_size", (osz, ks), f"do not fit the input {x.shape[2:]}")
    u = np.float32(c.attr("random_u", 0.0))
    if u == 0:   # Paddle draws u from its global generator, which a program does not hold
        rng = c.rng if c.rng is not None else np.random.default_rng()
        u = np.float32(rng.random())
    starts, ends = zip(*(fractional_axis(u, x.shape[2 + i], osz[i], ks[i]) for i in range(nd)))
    return Windows(list(starts), list(ends), [e - s for s, e in zip(starts, ends)], x.shape[2:])


def _fractional_max_pool2d(c: Call):
    x = c.x("x")
    out, mask = max_with_index(x, fractional_windows(c, x, 2))
    return {"out": out, "mask": mask}


def _fractional_max_pool2d_grad(c: Call):
    if not c.wants("x@GRAD"):
        return {}
    x = c.x("x")
    return {"x@GRAD": scatter_by_mask(c, x, np.asarray(c.x("mask")), c.x("out@GRAD"))}


def _fractional_samples(rng: np.random.Generator):
    d = lambda *s: distinct(rng, s)  # noqa: E731
    S = Sample
    return [
        S({"x": [d(1, 2, 7, 7)]}, {"output_size": [3, 3], "kernel_size": [0, 0], "random_u": 0.3,
                                   "return_mask": True}, note="disjoint windows"),
        S({"x": [d(2, 2, 8, 7)]}, {"output_size": [3, 4], "kernel_size": [2, 2], "random_u": 0.7,
                                   "return_mask": True}, note="kernel_size"),
        S({"x": [d(1, 1, 9, 6)]}, {"output_size": [4, 5], "kernel_size": [0, 0], "random_u": 0.55,
                                   "return_mask": True}, note="overlapping output"),
    ]


register(paddle_opdef(
    "fractional_max_pool2d", _fractional_max_pool2d, {"fractional_max_pool2d_grad": _fractional_max_pool2d_grad},
    samples=_fractional_samples, attrs_handled=("output_size", "kernel_size", "random_u", "return_mask"),
    doc="fractional max pooling (windows from random_u; u drawn when 0); mask = flat index in the plane"))
