"""pool2d (max / avg, global, adaptive, ceil_mode, exclusive) and pool2d_grad.

Paddle's CPU pooling (phi Pool2dFunctor, checked against Paddle 3.3.1 by
testdata/ops/gen_nn.py), per output position and axis:

* paddings: 2 values or 4 (`[top, bottom, left, right]`); SAME / VALID as in
  conv; global_pooling sets ksize to the input size and adaptive or global
  pooling zeroes the paddings. The output size uses both pads
  (`(in - k + p0 + p1 [+ s - 1 if ceil_mode]) / s + 1`), the windows only the
  leading pad: `start = o*s - p0`, `end = min(start + k, in + p0)`;
* the non-exclusive average divides by `(end - start)` products taken before
  clipping the window to the input, the exclusive one (and adaptive pooling)
  by the clipped window's size;
* adaptive windows are `[floor(o*in/out), ceil((o+1)*in/out))`, ksize being
  the output size;
* max ignores padding; its grad goes to the first maximum of the window in
  row-major order;
* max with `adaptive`: Paddle's kernel runs the max functor with adaptive
  off, so the output has size ksize but its windows are the regular
  `[o*s, o*s + k)` ones clipped to the input (paddings zeroed); an empty
  window gives -FLT_MAX. Reproduced as is.

Each axis gets a table of window indices (output x max window length), so
the whole op is one gather and one reduction, and the grad one scatter-add.
"""
from __future__ import annotations

import numpy as np

from .conv import four_paddings
from ..registry import Call, GradSpec, OpDef, Sample, register

_FLT_MAX = float(np.finfo(np.float32).max)


def _ints2(c: Call, name: str, default) -> list[int]:
    v = [int(t) for t in (c.attr(name, default) or [])]
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise c.unsupported(name, v, "expected 2 values (height, width)")
    return v


def _layout(c: Call) -> str:
    fmt = c.attr("data_format", "NCHW")
    if fmt not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_format", fmt, "pool2d takes NCHW or NHWC")
    return "NHWC" if fmt == "NHWC" else "NCHW"


def _pool_type(c: Call) -> str:
    t = c.attr("pooling_type", "")
    if t not in ("max", "avg"):
        raise c.unsupported("pooling_type", t, "pool2d supports max and avg")
    return t


class _Windows:
    """Per-axis window tables: idx (O, L) clipped input indices, valid (O, L),
    and the divisor of each output for average pooling (OH, OW)."""

    def __init__(self, c: Call, in_hw, kind: str):
        ksize = _ints2(c, "ksize", [1, 1])
        strides = _ints2(c, "strides", [1, 1])
        global_pooling = bool(c.attr("global_pooling", False))
        adaptive = bool(c.attr("adaptive", False))
        # Paddle's max pooling runs its functor with adaptive=false: the
        # output size is ksize, but the windows are the regular ones.
        fixed_out = adaptive and kind == "max"
        exclusive = bool(c.attr("exclusive", True))
        ceil_mode = bool(c.attr("ceil_mode", False))
        if global_pooling:
            ksize = list(in_hw)
        p = four_paddings(c)
        algo = c.attr("padding_algorithm", "EXPLICIT")
        if algo == "SAME":
            for i in range(2):
                out = (in_hw[i] + strides[i] - 1) // strides[i]
                pad_sum = max((out - 1) * strides[i] + ksize[i] - in_hw[i], 0)
                p[2 * i], p[2 * i + 1] = pad_sum // 2, pad_sum - pad_sum // 2
        elif algo == "VALID":
            p = [0, 0, 0, 0]
        elif algo != "EXPLICIT":
            raise c.unsupported("padding_algorithm", algo, "expected EXPLICIT, SAME or VALID")
        if global_pooling or adaptive:
            p = [0, 0, 0, 0]
        if min(strides) < 1 or min(ksize) < 1:
            raise c.unsupported("ksize/strides", (ksize, strides), "must be positive")
        #: (ksize, strides, leading pads) when every window is the regular
        #: [o*s - p0, o*s - p0 + k) clipped to the input (not adaptive): the
        #: op can then run tap by tap on strided slices of a padded input.
        self.regular = None if adaptive else (tuple(ksize), tuple(strides), (p[0], p[2]))
        self.idx, self.valid, starts, ends, sizes = [], [], [], [], []
        for i in range(2):
            n = in_hw[i]
            if adaptive and not fixed_out:
                o = np.arange(ksize[i])
                st = (o * n) // ksize[i]
                en = -((-(o + 1) * n) // ksize[i])
                size = en - st
            else:
                extra = strides[i] - 1 if ceil_mode else 0
                # C++ int division truncates toward zero: a window larger than
                # the padded input still gives one output (Paddle's PoolOutputSize).
                n_out = int((n - ksize[i] + p[2 * i] + p[2 * i + 1] + extra) / strides[i]) + 1
                if fixed_out:
                    n_out = ksize[i]
                if n_out < 1:
                    raise ValueError(f"pool2d: output size {n_out} is not positive "
                                     f"(input {n}, ksize {ksize[i]}, paddings {p}, stride {strides[i]})")
                o = np.arange(n_out)
                st = o * strides[i] - p[2 * i]
                en = np.minimum(st + ksize[i], n + p[2 * i])
                size = en - st
                st, en = np.maximum(st, 0), np.minimum(en, n)
            length = max(int((en - st).max(initial=1)), 1)
            idx = st[:, None] + np.arange(length)[None, :]
            valid = idx < en[:, None]
            self.idx.append(np.clip(idx, 0, n - 1))
            self.valid.append(valid)
            starts.append(st)
            ends.append(en)
            sizes.append(size)
        if exclusive or (adaptive and not fixed_out):
            sizes = [ends[0] - starts[0], ends[1] - starts[1]]
        self.divisor = np.outer(sizes[0], sizes[1])  # (OH, OW)
        self.out_hw = (len(starts[0]), len(starts[1]))
        #: (kh, kw) when the windows tile the input exactly - full, disjoint,
        #: covering it (a 2x2 stride-2 pool of an even map, global pooling):
        #: the op is then a reshape and a reduction, its grad a reshape.
        self.tiles: tuple[int, int] | None = tuple(self.idx[i].shape[1] for i in range(2))  # type: ignore[assignment]
        for i in range(2):
            k, st, en = self.tiles[i], starts[i], ends[i]  # type: ignore[index]
            if not (len(st) * k == in_hw[i] and np.array_equal(st, np.arange(len(st)) * k)
                    and np.array_equal(en - st, np.full(len(st), k)) and np.array_equal(sizes[i], en - st)):
                self.tiles = None
                break
        self._mask: np.ndarray | None = None
        self._flat: dict[int, np.ndarray] = {}

    def gather(self, x: np.ndarray) -> np.ndarray:
        """x (N, C, H, W) -> windows (N, C, OH, OW, LH, LW)."""
        ih, iw = self.idx
        g = x[:, :, ih[:, :, None, None], iw[None, None, :, :]]  # N, C, OH, LH, OW, LW
        return g.transpose(0, 1, 2, 4, 3, 5)

    def mask(self) -> np.ndarray:
        if self._mask is None:
            vh, vw = self.valid
            self._mask = vh[:, None, :, None] & vw[None, :, None, :]  # OH, OW, LH, LW
        return self._mask

    def flat_index(self, width: int) -> np.ndarray:
        f = self._flat.get(width)
        if f is None:
            ih, iw = self.idx
            f = self._flat[width] = ih[:, None, :, None] * width + iw[None, :, None, :]  # OH, OW, LH, LW
        return f

    def taps(self, x: np.ndarray, fill) -> tuple[np.ndarray, list]:
        """x (N, C, H, W) padded with `fill` so that every regular window lies
        inside, and the (KH*KW) strided slices (N, C, OH, OW) that are the
        windows' taps, row by row: tap (i, j) of every window at once."""
        (kh, kw), (sh, sw), (ph, pw) = self.regular
        (oh, ow), (n, ch, h, w) = self.out_hw, x.shape
        hp = max(h + ph, (oh - 1) * sh + kh)
        wp = max(w + pw, (ow - 1) * sw + kw)
        xp = np.full((n, ch, hp, wp), fill, dtype=x.dtype)
        xp[:, :, ph:ph + h, pw:pw + w] = x
        return xp, [(i, j, xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
                    for i in range(kh) for j in range(kw)]

    def tiled(self, x: np.ndarray) -> np.ndarray:
        """x (N, C, H, W) -> its windows (N, C, OH, OW, KH, KW) as a view,
        laid out as `gather` lays them out (same reductions, same results)."""
        n, ch, h, w = x.shape
        (oh, ow), (kh, kw) = self.out_hw, self.tiles
        return x.reshape(n, ch, oh, kh, ow, kw).transpose(0, 1, 2, 4, 3, 5)


_WINDOW_ATTRS = ("ksize", "strides", "global_pooling", "adaptive", "exclusive", "ceil_mode", "paddings",
                 "padding_algorithm")
_WINDOWS: dict[tuple, _Windows] = {}


def _windows(c: Call, in_hw, kind: str) -> _Windows:
    """The window tables for these attrs and input size, made once (a step
    runs the same pools on the same shapes every time)."""
    key = (kind, tuple(in_hw)) + tuple(_frozen(c.attr(n)) for n in _WINDOW_ATTRS)
    win = _WINDOWS.get(key)
    if win is None:
        win = _Windows(c, in_hw, kind)
        if len(_WINDOWS) >= 1024:
            _WINDOWS.clear()
        _WINDOWS[key] = win
    return win


def _frozen(v):
    return tuple(v) if isinstance(v, list) else v


def _to_nchw(x, layout):
    return x.transpose(0, 3, 1, 2) if layout == "NHWC" else x


def _from_nchw(x, layout):
    return x.transpose(0, 2, 3, 1) if layout == "NHWC" else x


def _check_x(c: Call, x) -> None:
    if x.ndim != 4:
        raise c.unsupported("X rank", x.ndim, "pool2d needs a 4-D input")


def _pool2d(c: Call):
    layout, kind = _layout(c), _pool_type(c)
    x = c.x("X")
    _check_x(c, x)
    xn = _to_nchw(x, layout)
    win = _windows(c, xn.shape[2:], kind)
    if win.tiles is not None:
        g = win.tiled(xn)
        out = g.max(axis=(4, 5)) if kind == "max" else _window_sums(g) / win.divisor
        return {"Out": _from_nchw(out, layout).astype(x.dtype, copy=False)}
    if kind == "max" and win.regular is not None and xn.dtype.kind == "f":
        # Tap by tap over an input padded with -inf (a padded position is
        # never a window's max): KH*KW passes over the output, no gathered copy.
        _, taps = win.taps(xn, -np.inf)
        out = taps[0][2].copy()
        for _, _, t in taps[1:]:
            np.maximum(out, t, out=out)
        empty = ~win.mask().any(axis=(2, 3))
        if empty.any():
            out = np.where(np.isneginf(out) & empty, -_FLT_MAX, out)
        return {"Out": _from_nchw(out, layout).astype(x.dtype, copy=False)}
    g = win.gather(xn)
    m = win.mask()
    if kind == "max":
        out = np.where(m, g, -np.inf).max(axis=(4, 5))
        out = np.where(np.isneginf(out) & ~m.any(axis=(2, 3)), -_FLT_MAX, out)
    else:
        out = np.where(m, g, 0).sum(axis=(4, 5)) / win.divisor
    return {"Out": _from_nchw(out, layout).astype(x.dtype, copy=False)}


def _pool2d_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    layout, kind = _layout(c), _pool_type(c)
    x = c.x("X")
    _check_x(c, x)
    xn = _to_nchw(x, layout)
    dy = _to_nchw(c.x("Out@GRAD"), layout)
    n, ch, h, w = xn.shape
    win = _windows(c, (h, w), kind)
    if dy.shape[2:] != win.out_hw:
        raise ValueError(f"pool2d_grad: Out@GRAD spatial {dy.shape[2:]} != computed {win.out_hw}")
    if win.tiles is not None:
        dx = _tiled_grad(c, win, xn, dy, kind, layout)
        return {"X@GRAD": _from_nchw(dx, layout).astype(x.dtype, copy=False)}
    if win.regular is not None and xn.dtype.kind == "f" and (kind == "avg" or c.has("Out")):
        dx = _regular_grad(c, win, xn, dy, kind, layout)
        return {"X@GRAD": _from_nchw(dx, layout).astype(x.dtype, copy=False)}
    m = win.mask()                           # OH, OW, LH, LW
    flat = win.flat_index(w)                 # OH, OW, LH, LW
    oh, ow, lh, lw = m.shape
    dx = np.zeros((n * ch, h * w), dtype=np.result_type(xn.dtype, dy.dtype))
    rows = np.arange(n * ch)[:, None]
    if kind == "max":
        g = win.gather(xn).reshape(n, ch, oh, ow, lh * lw)
        mk = m.reshape(oh, ow, lh * lw)
        if c.has("Out"):   # Paddle: the first window position equal to Out gets the grad
            hit = mk & (g == _to_nchw(c.x("Out"), layout)[..., None])
            ok, pick = hit.any(axis=-1), hit.argmax(axis=-1)
        else:
            ok, pick = np.broadcast_to(mk.any(axis=-1), dy.shape), np.where(mk, g, -np.inf).argmax(axis=-1)
        pos = np.take_along_axis(np.broadcast_to(flat.reshape(oh, ow, lh * lw), g.shape), pick[..., None],
                                 axis=-1)[..., 0]
        vals = np.where(ok, dy, 0).reshape(n * ch, oh * ow)
        np.add.at(dx, (rows, pos.reshape(n * ch, oh * ow)), vals)
    else:
        # Paddle scales by float(1/pool_size)
        scale = (np.float32(1.0) / win.divisor.astype(np.float32)).astype(dx.dtype)
        vals = (dy * scale)[..., None, None] * m                     # N, C, OH, OW, LH, LW
        idx = np.broadcast_to(flat, m.shape).reshape(-1)
        np.add.at(dx, (rows, idx[None, :]), vals.reshape(n * ch, -1))
    dx = dx.reshape(n, ch, h, w)
    return {"X@GRAD": _from_nchw(dx, layout).astype(x.dtype, copy=False)}


def _regular_grad(c: Call, win: _Windows, xn: np.ndarray, dy: np.ndarray, kind: str, layout: str) -> np.ndarray:
    """pool2d_grad over regular windows, tap by tap on strided slices of a
    padded grad (what lands in the padding is dropped). Max: the grad goes to
    the first tap, row by row, equal to Out (Paddle's rule). The taps are
    added in reverse order, so each pixel receives its windows' shares in
    ascending window order: the same sums, in the same order, as a
    scatter-add over the windows."""
    n, ch, h, w = xn.shape
    (oh, ow), ((kh, kw), (sh, sw), (ph, pw)) = win.out_hw, win.regular
    dtype = np.result_type(xn.dtype, dy.dtype)
    hp = max(h + ph, (oh - 1) * sh + kh)
    wp = max(w + pw, (ow - 1) * sw + kw)
    dxp = np.zeros((n, ch, hp, wp), dtype=dtype)
    if kind == "max":
        _, taps = win.taps(xn, np.nan)      # a padded tap equals no Out, not even -inf
        out = _to_nchw(c.x("Out"), layout)
        pick = np.full(out.shape, -1, dtype=np.int32)
        for k, (_, _, t) in enumerate(taps):
            pick[(pick < 0) & (t == out)] = k
        share = dy.astype(dtype, copy=False)
        zero = np.zeros((), dtype)
        for k in range(len(taps) - 1, -1, -1):
            i, j = divmod(k, kw)
            dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += np.where(pick == k, share, zero)
    else:
        # Paddle scales by float(1/pool_size)
        scale = (np.float32(1.0) / win.divisor.astype(np.float32)).astype(dtype)
        share = (dy * scale).astype(dtype, copy=False)
        for i in range(kh - 1, -1, -1):
            for j in range(kw - 1, -1, -1):
                dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += share
    return dxp[:, :, ph:ph + h, pw:pw + w]


def _window_sums(g: np.ndarray) -> np.ndarray:
    """Sum each (KH, KW) window of g in Paddle's order - row by row, one
    element after another (its avg functor's loop) - for windows of up to 16
    elements; larger ones (global pooling of a big map) in NumPy's."""
    kh, kw = g.shape[4:]
    if kh * kw > 16:
        return g.sum(axis=(4, 5))
    acc = g[..., 0, 0].copy()
    for i in range(kh):
        for j in range(kw):
            if i or j:
                acc += g[..., i, j]
    return acc


def _tiled_grad(c: Call, win: _Windows, xn: np.ndarray, dy: np.ndarray, kind: str, layout: str) -> np.ndarray:
    """pool2d_grad when the windows tile the input: each input position is in
    one window, so the grad is written, not added (as `_pool2d_grad` would
    add it to zeros: the same values)."""
    n, ch, h, w = xn.shape
    (oh, ow), (kh, kw) = win.out_hw, win.tiles
    dtype = np.result_type(xn.dtype, dy.dtype)
    if kind == "max":
        g = win.tiled(xn).reshape(n, ch, oh, ow, kh * kw)
        if c.has("Out"):   # Paddle: the first window position equal to Out gets the grad
            hit = g == _to_nchw(c.x("Out"), layout)[..., None]
            ok, pick = hit.any(axis=-1), hit.argmax(axis=-1)
            vals = np.where(ok, dy, 0)
        else:
            pick, vals = g.argmax(axis=-1), dy
        d = (np.arange(kh * kw) == pick[..., None]) * vals[..., None].astype(dtype, copy=False)
    else:
        # Paddle scales by float(1/pool_size)
        scale = (np.float32(1.0) / win.divisor.astype(np.float32)).astype(dtype)
        d = np.broadcast_to((dy * scale)[..., None], (n, ch, oh, ow, kh * kw))
    d = d.astype(dtype, copy=False).reshape(n, ch, oh, ow, kh, kw).transpose(0, 1, 2, 4, 3, 5)
    return d.reshape(n, ch, h, w)


def distinct(rng: np.random.Generator, shape) -> np.ndarray:
    """Values at least 0.05 apart (no ties for max pooling)."""
    v = rng.permutation(int(np.prod(shape))).astype(np.float64) * 0.1
    return (v + 0.01 * rng.random(v.shape)).reshape(shape) - v.mean()


def _pool_samples(rng: np.random.Generator):
    d = lambda *s: distinct(rng, s)  # noqa: E731
    S = Sample
    return [
        S({"X": [d(2, 2, 4, 4)]}, {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]}, note="max 2x2 s2"),
        S({"X": [d(1, 2, 5, 5)]}, {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
          note="max 3x3 pad"),
        S({"X": [d(1, 2, 5, 5)]}, {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
          note="avg exclusive"),
        S({"X": [d(1, 2, 5, 5)]}, {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
                                   "exclusive": False}, note="avg inclusive"),
        S({"X": [d(1, 2, 5, 5)]}, {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "ceil_mode": True,
                                   "exclusive": False}, note="avg ceil_mode"),
        S({"X": [d(1, 2, 5, 5)]}, {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "ceil_mode": True},
          note="max ceil_mode"),
        S({"X": [d(2, 2, 3, 4)]}, {"pooling_type": "max", "ksize": [1, 1], "global_pooling": True}, note="max global"),
        S({"X": [d(2, 2, 3, 4)]}, {"pooling_type": "avg", "ksize": [1, 1], "global_pooling": True}, note="avg global"),
        S({"X": [d(1, 2, 5, 7)]}, {"pooling_type": "avg", "ksize": [3, 3], "adaptive": True}, note="avg adaptive"),
        S({"X": [d(1, 2, 5, 6)]}, {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2],
                                   "padding_algorithm": "SAME", "exclusive": False}, note="avg SAME"),
        S({"X": [d(1, 2, 4, 5)]}, {"pooling_type": "max", "ksize": [2, 3], "adaptive": True},
          note="max adaptive (Paddle's regular windows)"),
        S({"X": [d(1, 2, 5, 6)]}, {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [1, 1],
                                   "padding_algorithm": "VALID"}, note="max VALID"),
        S({"X": [d(1, 4, 4, 2)]}, {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 1], "paddings": [0, 1],
                                   "data_format": "NHWC"}, note="max NHWC"),
        S({"X": [d(1, 5, 6, 2)]}, {"pooling_type": "avg", "ksize": [3, 2], "strides": [2, 2],
                                   "paddings": [0, 2, 1, 0], "exclusive": False}, note="avg asym pad"),
    ]


register(OpDef(
    type="pool2d", inputs=("X",), outputs=("Out",), kernel=_pool2d,
    grad=GradSpec("pool2d_grad", ("X", "Out", "Out@GRAD"), ("X@GRAD",), kernel=_pool2d_grad),
    samples=_pool_samples,
    attrs_handled=("pooling_type", "ksize", "strides", "paddings", "global_pooling", "adaptive", "exclusive",
                   "ceil_mode", "padding_algorithm", "data_format"),
    doc="2-D max/avg pooling, Paddle's window and divisor rules"))
