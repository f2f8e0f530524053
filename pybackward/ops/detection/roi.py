"""Region-of-interest pooling: roi_align and roi_pool, with their grads.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels).
ROIs are (R, 4) boxes `[x1, y1, x2, y2]` in input coordinates; `RoisNum`
(int32, one count per image) says which image each box belongs to (a
program without it passes the boxes' LoD, which arrays here do not carry:
then every box must belong to a single image).

* roi_align: the box scaled by spatial_scale (minus 0.5 when `aligned`;
  else at least 1x1) is split into pooled_height x pooled_width bins, each
  sampled on a sampling_ratio (or ceil(bin size)) grid at the cell centres;
  a sample outside [-1, size] reads 0, else it is clamped at 0 and read
  bilinearly (at the last row / column exactly). Each bin is the mean of its
  samples. Sampling is separable: per box an (PH, H) and a (PW, W) weight
  matrix, so a box's output is `Wy @ X[b] @ Wx^T` and its grad the
  transposes. (Paddle's roi_align_grad clamps an aligned box to at least
  1x1 where its forward does not; the grad here is the forward's, as
  finite differences confirm: sample roi_align-1.)
* roi_pool: the box rounded after scaling (at least 1x1), bins
  `[floor(p*size/P), ceil((p+1)*size/P))` shifted by the box start and
  clipped to the input; Out is the bin's maximum (0 for an empty bin),
  Argmax (int64) its flat index in the plane (first in row-major, -1 when
  empty); the grad adds Out@GRAD at Argmax.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _batch_of_rois(c: Call, n_img: int, n_roi: int) -> np.ndarray:
    if c.has("RoisNum"):
        counts = np.asarray(c.x("RoisNum")).reshape(-1).astype(np.int64)
        if counts.size != n_img or counts.sum() != n_roi or (counts < 0).any():
            raise ExecutionError(f"{c.op_type}: RoisNum {counts.tolist()} does not split {n_roi} boxes "
                                 f"over {n_img} images")
        return np.repeat(np.arange(n_img), counts)
    if n_img != 1:
        raise c.unsupported("ROIs", "LoD", "without RoisNum the boxes' LoD is needed; pass RoisNum")
    return np.zeros(n_roi, np.int64)


def _pooled(c: Call) -> tuple[int, int]:
    ph, pw = int(c.attr("pooled_height", 1)), int(c.attr("pooled_width", 1))
    if ph < 1 or pw < 1:
        raise c.unsupported("pooled_height/pooled_width", (ph, pw), "must be positive")
    return ph, pw


# --------------------------------------------------------------------------
# roi_align
# --------------------------------------------------------------------------
def _align_axis(start, size_roi, pooled: int, grid: int, n: int, t) -> np.ndarray:
    """(pooled, n) mean sampling weights along one axis of one box."""
    bin_size = size_roi / t(pooled)
    p = np.arange(pooled, dtype=t)[:, None]
    i = np.arange(grid, dtype=t)[None, :]
    v = start + p * bin_size + (i + t(0.5)) * bin_size / t(grid)       # (pooled, grid)
    ok = (v >= t(-1)) & (v <= t(n))
    v = np.maximum(v, t(0))
    lo = v.astype(np.int64)
    last = lo >= n - 1
    lo = np.where(last, n - 1, lo)
    hi = np.where(last, n - 1, lo + 1)
    v = np.where(last, lo.astype(t), v)
    l = v - lo.astype(t)
    h = t(1) - l
    m = np.zeros((pooled, n))
    rows = np.broadcast_to(np.arange(pooled)[:, None], v.shape)
    np.add.at(m, (rows, lo), np.where(ok, h, 0))
    np.add.at(m, (rows, hi), np.where(ok, l, 0))
    return m


def _align_weights(c: Call, x, rois):
    """Per box: (Wy (PH, H), Wx (PW, W), 1/count)."""
    ph, pw = _pooled(c)
    t = x.dtype.type
    scale = t(c.attr("spatial_scale", 1.0))
    ratio = int(c.attr("sampling_ratio", -1))
    aligned = bool(c.attr("aligned", False))
    off = t(0.5) if aligned else t(0)
    h, w = x.shape[2], x.shape[3]
    out = []
    for r in np.asarray(rois, x.dtype):
        x1, y1, x2, y2 = (r[k] * scale - off for k in range(4))
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, t(1)), max(rh, t(1))
        gh = ratio if ratio > 0 else int(math.ceil(rh / t(ph)))
        gw = ratio if ratio > 0 else int(math.ceil(rw / t(pw)))
        count = max(gh * gw, 1)
        wy = _align_axis(y1, rh, ph, max(gh, 1), h, t) if gh > 0 else np.zeros((ph, h))
        wx = _align_axis(x1, rw, pw, max(gw, 1), w, t) if gw > 0 else np.zeros((pw, w))
        out.append((wy, wx, 1.0 / count))
    return out


def _roi_inputs(c: Call):
    x, rois = c.x("X"), np.asarray(c.x("ROIs"))
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
        raise c.unsupported("X/ROIs shape", (x.shape, rois.shape), "expected (N, C, H, W) and (R, 4)")
    return x, rois, _batch_of_rois(c, x.shape[0], rois.shape[0])


def _roi_align(c: Call):
    x, rois, batch = _roi_inputs(c)
    ph, pw = _pooled(c)
    out = np.zeros((rois.shape[0], x.shape[1], ph, pw))
    for k, (wy, wx, inv) in enumerate(_align_weights(c, x, rois)):
        out[k] = np.einsum("ph,chw,qw->cpq", wy, x[batch[k]].astype(np.float64), wx) * inv
    return {"Out": out.astype(x.dtype)}


def _roi_align_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, rois, batch = _roi_inputs(c)
    dy = c.x("Out@GRAD").astype(np.float64)
    dx = np.zeros(x.shape)
    for k, (wy, wx, inv) in enumerate(_align_weights(c, x, rois)):
        dx[batch[k]] += np.einsum("ph,cpq,qw->chw", wy, dy[k], wx) * inv
    return {"X@GRAD": dx.astype(x.dtype)}


def _rois_samples(rng, aligned_op: bool):
    x = rng.standard_normal((2, 2, 6, 7))
    rois = np.array([[0.5, 0.7, 4.3, 5.1], [1.2, 0.3, 6.4, 3.9], [2.1, 2.2, 3.3, 2.9]])
    num = np.array([2, 1], np.int32)
    S = Sample
    if aligned_op:
        return [
            S({"X": [x], "ROIs": [rois], "RoisNum": [num]},
              {"pooled_height": 2, "pooled_width": 3, "spatial_scale": 1.0, "sampling_ratio": 2, "aligned": False},
              wrt=("X",), note="sampling_ratio 2"),
            S({"X": [x], "ROIs": [rois], "RoisNum": [num]},
              {"pooled_height": 3, "pooled_width": 2, "spatial_scale": 1.0, "sampling_ratio": -1, "aligned": True},
              wrt=("X",), note="adaptive grid, aligned"),
            S({"X": [x], "ROIs": [rois * 2], "RoisNum": [num]},
              {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 0.5, "sampling_ratio": 1, "aligned": False},
              wrt=("X",), note="spatial_scale"),
            S({"X": [x], "ROIs": [np.array([[-1.5, -0.5, 7.8, 6.6], [5.0, 4.0, 9.0, 8.0], [0.2, 0.1, 1.0, 1.1]])],
               "RoisNum": [np.array([1, 2], np.int32)]},
              {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0, "sampling_ratio": 2, "aligned": False},
              wrt=("X",), note="boxes past the edges"),
        ]
    d = (rng.permutation(2 * 2 * 6 * 7).reshape(2, 2, 6, 7) * 0.1) + 0.01 * rng.random((2, 2, 6, 7))
    return [
        S({"X": [d], "ROIs": [rois], "RoisNum": [num]}, {"pooled_height": 2, "pooled_width": 3, "spatial_scale": 1.0},
          wrt=("X",), note="2x3"),
        S({"X": [d], "ROIs": [rois * 2], "RoisNum": [num]},
          {"pooled_height": 3, "pooled_width": 3, "spatial_scale": 0.5}, wrt=("X",), note="spatial_scale, small bins"),
        S({"X": [d], "ROIs": [np.array([[-2.0, -1.0, 8.0, 7.0], [5.0, 4.0, 12.0, 9.0], [1.0, 1.0, 1.0, 1.0]])],
           "RoisNum": [np.array([1, 2], np.int32)]},
          {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0}, wrt=("X",), note="boxes past the edges"),
    ]


register(paddle_opdef("roi_align", _roi_align, {"roi_align_grad": _roi_align_grad},
                      samples=lambda rng: _rois_samples(rng, True),
                      attrs_handled=("pooled_height", "pooled_width", "spatial_scale", "sampling_ratio", "aligned"),
                      doc="RoIAlign: mean of bilinear samples per bin of each box (RoisNum gives the boxes' images)"))


# --------------------------------------------------------------------------
# roi_pool
# --------------------------------------------------------------------------
def _pool_axis(start: int, size: int, pooled: int, n: int, t):
    """Bins of one box along one axis: (pooled,) clipped [lo, hi), in X's float type."""
    b = t(size) / t(pooled)
    p = np.arange(pooled).astype(t)
    lo = np.floor(p * b).astype(np.int64) + start
    hi = np.ceil((p + t(1)) * b).astype(np.int64) + start
    return np.clip(lo, 0, n), np.clip(hi, 0, n)


def _roi_pool_windows(c: Call, x, rois):
    ph, pw = _pooled(c)
    t = x.dtype.type
    scale = t(c.attr("spatial_scale", 1.0))
    h, w = x.shape[2], x.shape[3]
    res = []
    for r in np.asarray(rois, x.dtype):
        # C's round: half away from zero
        sw, sh, ew, eh = (int(math.copysign(math.floor(abs(float(r[k] * scale)) + 0.5), float(r[k] * scale)))
                          for k in range(4))
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        hl, hh = _pool_axis(sh, rh, ph, h, t)
        wl, wh = _pool_axis(sw, rw, pw, w, t)
        my = (np.arange(h)[None, :] >= hl[:, None]) & (np.arange(h)[None, :] < hh[:, None])   # (PH, H)
        mx = (np.arange(w)[None, :] >= wl[:, None]) & (np.arange(w)[None, :] < wh[:, None])   # (PW, W)
        res.append((my, mx))
    return res


def _roi_pool(c: Call):
    x, rois, batch = _roi_inputs(c)
    ph, pw = _pooled(c)
    n_roi, ch, h, w = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    out = np.zeros((n_roi, ch, ph, pw), x.dtype)
    arg = np.full((n_roi, ch, ph, pw), -1, np.int64)
    for k, (my, mx) in enumerate(_roi_pool_windows(c, x, rois)):
        m = my[:, None, :, None] & mx[None, :, None, :]                  # (PH, PW, H, W)
        v = np.where(m, x[batch[k]][:, None, None], -np.inf).reshape(ch, ph, pw, h * w)
        empty = ~m.reshape(ph, pw, -1).any(axis=-1)
        idx = v.argmax(axis=-1)
        out[k] = np.where(empty, 0, np.take_along_axis(v, idx[..., None], axis=-1)[..., 0])
        arg[k] = np.where(empty, -1, idx)
    return {"Out": out, "Argmax": arg}


def _roi_pool_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, rois, batch = _roi_inputs(c)
    arg = np.asarray(c.x("Argmax")).astype(np.int64)
    dy = c.x("Out@GRAD")
    n, ch, h, w = x.shape
    dx = np.zeros((n, ch, h * w + 1), x.dtype)           # column h*w takes the empty bins
    rows = np.broadcast_to(batch[:, None, None, None], arg.shape)
    chans = np.broadcast_to(np.arange(ch)[None, :, None, None], arg.shape)
    np.add.at(dx, (rows, chans, np.where(arg < 0, h * w, arg)), dy)
    return {"X@GRAD": dx[..., :h * w].reshape(x.shape)}


register(paddle_opdef("roi_pool", _roi_pool, {"roi_pool_grad": _roi_pool_grad},
                      samples=lambda rng: _rois_samples(rng, False),
                      attrs_handled=("pooled_height", "pooled_width", "spatial_scale"),
                      doc="RoIPool: max per bin of each box; Argmax the flat index in the plane"))
