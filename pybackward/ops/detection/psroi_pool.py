"""psroi_pool: position-sensitive RoI pooling (R-FCN), with its grad.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* psroi_pool: each box `round(x1)*scale .. (round(x2)+1)*scale` (at least
  0.1), bins `[floor(p*bin + start), ceil((p+1)*bin + start))` clipped to
  the input; output channel c of bin (ph, pw) averages input channel
  `(c*PH + ph)*PW + pw` over the bin (0 when empty). RoisNum (int32) gives
  each box's image (without it, one image).
"""
from __future__ import annotations

import math
import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


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
