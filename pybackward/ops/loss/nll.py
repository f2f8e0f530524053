"""nll_loss and the legacy cross_entropy, with their grads.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* nll_loss: X (N, C) or (N, C, H, W), int64 Label, optional Weight (C);
  `-X[label] * weight[label]`, 0 at ignore_index; Total_weight is the sum of
  the weights used (0 for reduction none); mean divides by it when it is
  nonzero (the grad always does);
* cross_entropy (legacy): Y (X's shape, last dim 1) `-log(X[label])` over
  the last dim (log(0) taken as -1e20), 0 at ignore_index; soft_label sums
  `-label * log(X)`; the grad is `-dY / X[label]` or `-dY * label / X`;
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .cross_entropy import hard_labels, tolerable_log
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import reduction_attr


# --------------------------------------------------------------------------
# nll_loss
# --------------------------------------------------------------------------
def _nll_setup(c: Call):
    x = c.x("X")
    if x.ndim not in (2, 4):
        raise c.unsupported("X rank", x.ndim, "nll_loss takes (N, C) or (N, C, H, W)")
    red = reduction_attr(c, ("none", "mean", "sum"))
    xc = np.moveaxis(x, 1, -1)                                  # (N, [H, W,] C)
    n_class = x.shape[1]
    label = np.asarray(c.x("Label")).astype(np.int64)
    if label.shape != xc.shape[:-1]:
        raise ExecutionError(f"nll_loss: Label {label.shape} does not match X {x.shape}")
    ignore = label == int(c.attr("ignore_index", -100))
    bad = ~ignore & ((label < 0) | (label >= n_class))
    if bad.any():
        raise ExecutionError(f"nll_loss: label {label[bad][0]} is out of range [0, {n_class})")
    lbl = np.where(ignore, 0, label)
    w = c.x("Weight")
    wl = np.ones(label.shape, x.dtype) if w is None else np.asarray(w, x.dtype)[lbl]
    wl = np.where(ignore, 0, wl).astype(x.dtype)
    return x, xc, lbl, wl, red, ignore


def _nll(c: Call):
    x, xc, lbl, wl, red, _ = _nll_setup(c)
    picked = np.take_along_axis(xc, lbl[..., None], axis=-1)[..., 0]
    per = (-picked * wl).astype(x.dtype)
    if red == "none":
        return {"Out": per, "Total_weight": np.asarray(0, x.dtype)}
    total_w = wl.sum(dtype=x.dtype)
    out = per.sum(dtype=x.dtype)
    if red == "mean" and total_w != 0:
        out = out / total_w
    return {"Out": np.asarray(out, x.dtype), "Total_weight": np.asarray(total_w, x.dtype)}


def _nll_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, xc, lbl, wl, red, ignore = _nll_setup(c)
    dout = np.asarray(c.x("Out@GRAD"), x.dtype)
    if red == "none":
        g = -dout.reshape(lbl.shape) * wl
    else:
        g = -dout.reshape(-1)[0] * wl
        if red == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):
                g = np.where(ignore, 0, g / np.asarray(c.x("Total_weight"), x.dtype).reshape(-1)[0])
    dxc = np.zeros(xc.shape, x.dtype)
    np.put_along_axis(dxc, lbl[..., None], g[..., None].astype(x.dtype), axis=-1)
    dxc = np.where((np.arange(xc.shape[-1]) == lbl[..., None]), dxc, 0)
    return {"X@GRAD": np.moveaxis(dxc, -1, 1).astype(x.dtype, copy=False)}


def _nll_samples(rng):
    x = np.log(rng.dirichlet(np.ones(4), size=5))
    lbl = np.array([1, 3, 0, 2, 3], np.int64)
    w = rng.uniform(0.5, 2.0, 4)
    x4 = rng.standard_normal((2, 3, 2, 2))
    l4 = np.array([[[1, 0], [2, 2]], [[0, 2], [2, 0]]], np.int64)
    # Paddle's reduced kernels write 0 to Out[i] for an ignored label i (out of
    # bounds for i > 0: it corrupts the heap), so ignored labels stand first only
    S = Sample
    return [
        S({"X": [x], "Label": [lbl]}, {"reduction": "mean", "ignore_index": -100}, wrt=("X",), note="mean"),
        S({"X": [x], "Label": [lbl], "Weight": [w]}, {"reduction": "mean", "ignore_index": 1}, wrt=("X",),
          note="weight, ignore_index"),
        S({"X": [x], "Label": [lbl], "Weight": [w]}, {"reduction": "sum", "ignore_index": -100}, wrt=("X",),
          note="sum"),
        S({"X": [x], "Label": [lbl], "Weight": [w]}, {"reduction": "none", "ignore_index": 0}, wrt=("X",),
          note="none"),
        S({"X": [x4], "Label": [l4], "Weight": [rng.uniform(0.5, 2.0, 3)]}, {"reduction": "mean", "ignore_index": 1},
          wrt=("X",), note="4-D"),
        S({"X": [x4], "Label": [l4]}, {"reduction": "none", "ignore_index": -100}, wrt=("X",), note="4-D none"),
    ]


register(paddle_opdef("nll_loss", _nll, {"nll_loss_grad": _nll_grad}, samples=_nll_samples,
                      attrs_handled=("reduction", "ignore_index"),
                      doc="negative log likelihood of int64 Label under log-probabilities X; Total_weight"))


# --------------------------------------------------------------------------
# cross_entropy (legacy)
# --------------------------------------------------------------------------
def _ce(c: Call):
    x = np.asarray(c.x("X"))
    label = np.asarray(c.x("Label"))
    if c.attr("soft_label", False):
        if label.shape != x.shape:
            raise ExecutionError(f"cross_entropy: soft Label {label.shape} and X {x.shape} differ")
        y = -np.sum(label.astype(x.dtype) * tolerable_log(x), axis=-1, keepdims=True)
        return {"Y": y.astype(x.dtype, copy=False)}
    shape = x.shape[:-1] + (1,)
    lbl, ignore = hard_labels(c, label, shape, x.shape[-1])
    match = np.take_along_axis(x, lbl, axis=-1)
    y = -tolerable_log(np.where(ignore, 1, match).astype(x.dtype, copy=False))
    return {"Y": np.where(ignore, 0, y).astype(x.dtype, copy=False)}


def _ce_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = np.asarray(c.x("X"))
    dy = np.asarray(c.x("Y@GRAD"), x.dtype)
    label = np.asarray(c.x("Label"))
    shape = x.shape[:-1] + (1,)
    dy = dy.reshape(shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        if c.attr("soft_label", False):
            dx = -dy * label.astype(x.dtype) / x
        else:
            lbl, ignore = hard_labels(c, label, shape, x.shape[-1])
            onehot = (np.arange(x.shape[-1]) == lbl) & ~ignore
            dx = np.where(onehot, -dy / x, 0)
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _ce_samples(rng):
    S = Sample
    return [
        S({"X": [rng.dirichlet(np.ones(5), size=4)], "Label": [np.array([[1], [4], [0], [2]], np.int64)]},
          {"soft_label": False, "ignore_index": -100}, wrt=("X",), note="hard"),
        S({"X": [rng.dirichlet(np.ones(5), size=4)], "Label": [np.array([[1], [3], [0], [3]], np.int64)]},
          {"soft_label": False, "ignore_index": 3}, wrt=("X",), note="ignore_index"),
        S({"X": [rng.dirichlet(np.ones(4), size=3)], "Label": [rng.dirichlet(np.ones(4), size=3)]},
          {"soft_label": True}, wrt=("X",), note="soft_label"),
        S({"X": [rng.dirichlet(np.ones(3), size=(2, 2))], "Label": [np.array([[[0], [2]], [[1], [1]]], np.int64)]},
          {"soft_label": False, "ignore_index": -100}, wrt=("X",), note="3-D"),
    ]


register(paddle_opdef("cross_entropy", _ce, {"cross_entropy_grad": _ce_grad}, samples=_ce_samples,
                      attrs_handled=("soft_label", "ignore_index"),
                      doc="legacy cross entropy of probabilities X (last dim) against hard or soft Label"))
