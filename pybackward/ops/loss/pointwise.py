"""Elementwise losses: kldiv_loss, bce_loss, hinge_loss, log_loss, huber_loss and label_smooth,
with their grads.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels):
* kldiv_loss: `target * (log(target) - x)`, 0 where target <= 0 (with
  log_target: `exp(target) * (target - x)`); reduction none / sum / mean /
  batchmean (sum over X's first dim); the grad is `-target` (0 where
  target <= 0) or `-exp(target)`, times Loss@GRAD, divided by the element
  count (mean) or the first dim (batchmean);
* bce_loss: `(label - 1) * max(log(1 - x), -100) - label * max(log(x), -100)`
  for x in [0, 1]; grad `(x - label) / max(x (1 - x), 1e-12)`;
* hinge_loss: `max(0, 1 - logits * (2 label - 1))`;
* log_loss: `-label log(p + eps) - (1 - label) log(1 - p + eps)`;

"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import reduction_attr


# --------------------------------------------------------------------------
# kldiv_loss
# --------------------------------------------------------------------------


def _kldiv(c: Call):
    x, t = c.x("X"), np.asarray(c.x("Target")).astype(c.x("X").dtype, copy=False)
    red = reduction_attr(c, ("none", "batchmean", "mean", "sum"))
    if t.shape != x.shape:
        raise ExecutionError(f"kldiv_loss: Target {t.shape} and X {x.shape} differ")
    if c.attr("log_target", False):
        loss = np.exp(t) * (t - x)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0)
    loss = loss.astype(x.dtype, copy=False)
    if red == "none":
        return {"Loss": loss}
    total = loss.sum(dtype=x.dtype)
    if red == "batchmean":
        out = total / x.dtype.type(x.shape[0]) if x.ndim and x.shape[0] > 0 else total
    elif red == "mean":
        out = total / x.dtype.type(loss.size)
    else:
        out = total
    return {"Loss": np.asarray(out, dtype=x.dtype)}


def _kldiv_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, dl = c.x("X"), np.asarray(c.x("Loss@GRAD"))
    t = np.asarray(c.x("Target")).astype(x.dtype, copy=False)
    red = reduction_attr(c, ("none", "batchmean", "mean", "sum"))
    g = np.broadcast_to(dl.reshape(-1)[0] if dl.size == 1 else dl.reshape(t.shape), t.shape)
    if c.attr("log_target", False):
        dx = -np.exp(t) * g
    else:
        dx = np.where(t > 0, -t * g, 0)
    if red == "mean":
        dx = dx / x.dtype.type(x.size)
    elif red == "batchmean":
        dx = dx / x.dtype.type(x.shape[0])
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _kldiv_samples(rng):
    x = rng.standard_normal((3, 4))
    t = rng.uniform(0.1, 1.0, (3, 4))
    t0 = t.copy()
    t0[0, 1] = 0.0
    t0[2, 3] = -0.5
    S = Sample
    return [
        S({"X": [x], "Target": [t]}, {"reduction": "mean", "log_target": False}, wrt=("X",), note="mean"),
        S({"X": [x], "Target": [t0]}, {"reduction": "none", "log_target": False}, wrt=("X",),
          note="none, target <= 0"),
        S({"X": [x], "Target": [t]}, {"reduction": "batchmean", "log_target": False}, wrt=("X",), note="batchmean"),
        S({"X": [x], "Target": [t0]}, {"reduction": "sum", "log_target": False}, wrt=("X",), note="sum"),
        S({"X": [x], "Target": [rng.standard_normal((3, 4))]}, {"reduction": "mean", "log_target": True},
          wrt=("X",), note="log_target"),
        S({"X": [rng.standard_normal((2, 3, 2))], "Target": [rng.uniform(0.1, 1, (2, 3, 2))]},
          {"reduction": "batchmean", "log_target": False}, wrt=("X",), note="3-D batchmean"),
    ]


register(paddle_opdef("kldiv_loss", _kldiv, {"kldiv_loss_grad": _kldiv_grad}, samples=_kldiv_samples,
                      attrs_handled=("reduction", "log_target"),
                      doc="Kullback-Leibler divergence of X (log-probabilities) from Target"))


# --------------------------------------------------------------------------
# bce_loss, hinge_loss, log_loss
# --------------------------------------------------------------------------
def _bce(c: Call):
    x = c.x("X")
    lbl = np.asarray(c.x("Label"), x.dtype)
    if (x < 0).any() or (x > 1).any():
        raise ExecutionError("bce_loss: input must be in [0, 1]")
    t = x.dtype.type
    with np.errstate(divide="ignore"):
        out = (lbl - t(1)) * np.maximum(np.log(t(1) - x), t(-100)) - lbl * np.maximum(np.log(x), t(-100))
    return {"Out": out.astype(x.dtype, copy=False)}


def _bce_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    t = x.dtype.type
    lbl, dout = np.asarray(c.x("Label"), x.dtype), np.asarray(c.x("Out@GRAD"), x.dtype)
    dx = dout * ((x - lbl) / np.maximum((t(1) - x) * x, t(1e-12)))
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}


def _hinge(c: Call):
    x = c.x("Logits")
    y = np.asarray(c.x("Labels"), x.dtype)
    t = x.dtype.type
    return {"Loss": np.maximum(t(1) - x * (t(2) * y - t(1)), t(0)).astype(x.dtype, copy=False)}


def _hinge_grad(c: Call):
    if not c.wants("Logits@GRAD"):
        return {}
    x = c.x("Logits")
    t = x.dtype.type
    y = np.asarray(c.x("Labels"), x.dtype)
    d = np.asarray(c.x("Loss@GRAD"), x.dtype)
    sign = t(2) * y - t(1)
    return {"Logits@GRAD": np.where(t(1) - x * sign > 0, -d * sign, t(0)).astype(x.dtype, copy=False)}


def _log_loss(c: Call):
    p = c.x("Predicted")
    t = p.dtype.type
    y = np.asarray(c.x("Labels"), p.dtype)
    eps = t(np.float32(c.attr("epsilon", 1e-4)))
    return {"Loss": (-y * np.log(p + eps) - (t(1) - y) * np.log(t(1) - p + eps)).astype(p.dtype, copy=False)}


def _log_loss_grad(c: Call):
    if not c.wants("Predicted@GRAD"):
        return {}
    p = c.x("Predicted")
    t = p.dtype.type
    y = np.asarray(c.x("Labels"), p.dtype)
    d = np.asarray(c.x("Loss@GRAD"), p.dtype)
    eps = t(np.float32(c.attr("epsilon", 1e-4)))
    dp = d * (-y / (p + eps) + (t(1) - y) / (t(1) - p + eps))
    return {"Predicted@GRAD": dp.astype(p.dtype, copy=False)}


def _bce_samples(rng):
    return [Sample({"X": [rng.uniform(0.05, 0.95, (3, 4))], "Label": [rng.uniform(0, 1, (3, 4))]}, wrt=("X",),
                   note="soft labels"),
            Sample({"X": [rng.uniform(0.05, 0.95, (5,))], "Label": [rng.integers(0, 2, (5,)).astype(np.float64)]},
                   wrt=("X",), note="hard labels")]


def _hinge_samples(rng):
    x = rng.standard_normal((6, 1))
    x[np.abs(1 - np.abs(x)) < 0.05] += 0.2      # away from the hinge
    return [Sample({"Logits": [x], "Labels": [np.array([[0.], [1.], [1.], [0.], [1.], [0.]])]}, wrt=("Logits",))]


def _log_loss_samples(rng):
    return [Sample({"Predicted": [rng.uniform(0.05, 0.95, (4, 1))], "Labels": [rng.uniform(0, 1, (4, 1))]},
                   {"epsilon": 1e-4}, wrt=("Predicted",)),
            Sample({"Predicted": [rng.uniform(0.05, 0.95, (3, 1))], "Labels": [np.array([[0.], [1.], [1.]])]},
                   {"epsilon": 0.01}, wrt=("Predicted",), note="epsilon")]


register(paddle_opdef("bce_loss", _bce, {"bce_loss_grad": _bce_grad}, samples=_bce_samples,
                      doc="binary cross entropy of probabilities X against Label (logs clipped at -100)"))
register(paddle_opdef("hinge_loss", _hinge, {"hinge_loss_grad": _hinge_grad}, samples=_hinge_samples,
                      doc="Loss = max(0, 1 - Logits * (2 Labels - 1))"))
register(paddle_opdef("log_loss", _log_loss, {"log_loss_grad": _log_loss_grad}, samples=_log_loss_samples,
                      attrs_handled=("epsilon",), doc="negative log likelihood of Labels under Predicted (+ epsilon)"))
