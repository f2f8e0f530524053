"""Loss ops: softmax_with_cross_entropy, cross_entropy2,
sigmoid_cross_entropy_with_logits, huber_loss, label_smooth, and their grads.

The formulas follow Paddle's CPU kernels, including their quirks: the
softmax clips shifted logits at -64, log(0) is replaced by -1e20
(TolerableValue), soft-label grads assume rows of Label sum to 1 (p - y),
and sigmoid cross entropy's `normalize` divides by the number of labels not
equal to ignore_index (an int: all ignored gives 0/0 = NaN, as in Paddle).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..registry import Call, GradSpec, OpDef, Sample, register
from ..tensor.creation import norm_axis


def tolerable_log(p: np.ndarray) -> np.ndarray:
    """log(p) with +-inf replaced by +-1e20, as Paddle's TolerableValue does."""
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    big = lp.dtype.type(1e20)
    return np.where(lp == -np.inf, -big, np.where(lp == np.inf, big, lp))


def paddle_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """Paddle's CPU softmax: exp(max(x - max, -64)) normalised, in X's dtype."""
    x = np.asarray(x)
    shifted = np.maximum(x - x.max(axis=axis, keepdims=True), x.dtype.type(-64.0))
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def hard_labels(c: Call, label: np.ndarray, loss_shape: tuple[int, ...],
                 n_class: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels as int64 in loss_shape with ignored entries set to 0, the ignore mask)."""
    lbl = np.asarray(label)
    if lbl.size != int(np.prod(loss_shape, dtype=np.int64)):
        raise ExecutionError(f"{c.op_type}: Label of shape {list(lbl.shape)} does not match "
                             f"loss shape {list(loss_shape)}")
    lbl = lbl.reshape(loss_shape).astype(np.int64)  # static_cast<int> of the label
    ignore = lbl == int(c.attr("ignore_index", -100))
    bad = ~ignore & ((lbl < 0) | (lbl >= n_class))
    if bad.any():
        raise ExecutionError(f"{c.op_type}: label {lbl[bad][0]} is out of range [0, {n_class}) "
                             f"and not ignore_index")
    return np.where(ignore, 0, lbl), ignore


# --------------------------------------------------------------------------
# softmax_with_cross_entropy
# --------------------------------------------------------------------------
def _swce(c: Call):
    logits = np.asarray(c.x("Logits"))
    axis = norm_axis(c.attr("axis", -1), logits.ndim)
    prob = paddle_softmax(logits, axis) if c.attr("use_softmax", True) else logits.copy()
    label = np.asarray(c.x("Label"))
    if c.attr("soft_label", False):
        loss = -np.sum(label.astype(prob.dtype) * tolerable_log(prob), axis=axis, keepdims=True)
    else:
        shape = prob.shape[:axis] + (1,) + prob.shape[axis + 1:]
        lbl, ignore = hard_labels(c, label, shape, prob.shape[axis])
        loss = -tolerable_log(np.take_along_axis(prob, lbl, axis=axis))
        loss[ignore] = 0
    return {"Softmax": prob, "Loss": loss.astype(prob.dtype, copy=False)}


def _swce_grad(c: Call):
    sm = np.asarray(c.x("Softmax"))
    g = np.asarray(c.x("Loss@GRAD"))
    axis = norm_axis(c.attr("axis", -1), sm.ndim)
    label = np.asarray(c.x("Label"))
    use_softmax = c.attr("use_softmax", True)
    if c.attr("soft_label", False):
        label = label.astype(sm.dtype).reshape(sm.shape)
        dx = g * (sm - label) if use_softmax else g * (-label / sm)
        return {"Logits@GRAD": dx.astype(sm.dtype, copy=False)}
    shape = sm.shape[:axis] + (1,) + sm.shape[axis + 1:]
    lbl, ignore = hard_labels(c, label, shape, sm.shape[axis])
    g = g.reshape(shape)
    onehot = np.arange(sm.shape[axis]).reshape([-1 if i == axis else 1 for i in range(sm.ndim)]) == lbl
    if use_softmax:
        dx = sm * g - np.where(onehot, g, 0)  # (p - y) * dy
    else:
        p = np.take_along_axis(sm, lbl, axis=axis)
        dx = np.where(onehot, -g / p, 0)
    dx = np.where(ignore, 0, dx)
    return {"Logits@GRAD": dx.astype(sm.dtype, copy=False)}


def _swce_samples(rng):
    logits = rng.standard_normal((4, 5))
    hard = np.array([[1], [4], [0], [2]])
    soft = rng.dirichlet(np.ones(5), size=4)
    probs = rng.dirichlet(np.ones(5), size=4)
    return [
        Sample({"Logits": [logits], "Label": [hard]}),
        Sample({"Logits": [logits], "Label": [np.array([[1], [-1], [0], [-1]])]}, {"ignore_index": -1},
               note="ignore_index"),
        Sample({"Logits": [logits], "Label": [soft]}, {"soft_label": True}, wrt=("Logits",), note="soft"),
        Sample({"Logits": [rng.standard_normal((2, 3, 4))], "Label": [np.array([[[0, 2, 1, 2]], [[1, 1, 0, 2]]])]},
               {"axis": 1}, note="axis=1"),
        Sample({"Logits": [probs], "Label": [hard]}, {"use_softmax": False}, note="no softmax"),
        Sample({"Logits": [probs], "Label": [soft]}, {"use_softmax": False, "soft_label": True},
               wrt=("Logits",), note="no softmax, soft"),
    ]


register(OpDef(
    type="softmax_with_cross_entropy", inputs=("Logits", "Label"), outputs=("Softmax", "Loss"), kernel=_swce,
    grad=GradSpec("softmax_with_cross_entropy_grad", ("Label", "Softmax", "Loss@GRAD"), ("Logits@GRAD",),
                  kernel=_swce_grad, sets_lod_level=False),
    samples=_swce_samples, intermediate_outputs=("Softmax",),
    attrs_handled=("soft_label", "ignore_index", "axis", "use_softmax", "numeric_stable_mode"),
    doc="Softmax = softmax(Logits); Loss = cross entropy of Softmax against Label"))


# --------------------------------------------------------------------------
# cross_entropy2
# --------------------------------------------------------------------------
def _ce2(c: Call):
    x = np.asarray(c.x("X"))
    shape = x.shape[:-1] + (1,)
    lbl, ignore = hard_labels(c, c.x("Label"), shape, x.shape[-1])
    match = np.take_along_axis(x, lbl, axis=-1)
    match[ignore] = 0
    y = -tolerable_log(np.where(ignore, 1, match).astype(x.dtype, copy=False))
    y[ignore] = 0
    # XShape of cross_entropy2 is [*x.shape, 0] (appended, unlike reshape2's)
    return {"Y": y.astype(x.dtype, copy=False), "MatchX": match, "XShape": np.empty(x.shape + (0,), x.dtype)}


def _ce2_grad(c: Call):
    xshape = np.shape(c.x("XShape"))[:-1]
    match = np.asarray(c.x("MatchX"))
    g = np.asarray(c.x("Y@GRAD"))
    shape = tuple(xshape[:-1]) + (1,)
    lbl, ignore = hard_labels(c, c.x("Label"), shape, xshape[-1])
    onehot = np.arange(xshape[-1]) == lbl
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = np.where(onehot & ~ignore, -g.reshape(shape) / match.reshape(shape), 0)
    return {"X@GRAD": dx.astype(match.dtype, copy=False)}


register(OpDef(
    type="cross_entropy2", inputs=("X", "Label"), outputs=("Y", "MatchX", "XShape"), kernel=_ce2,
    grad=GradSpec("cross_entropy_grad2", ("Label", "MatchX", "XShape", "Y@GRAD"), ("X@GRAD",), kernel=_ce2_grad),
    samples=lambda rng: [
        Sample({"X": [rng.dirichlet(np.ones(5), size=4)], "Label": [np.array([[1], [4], [0], [2]])]}),
        Sample({"X": [rng.dirichlet(np.ones(5), size=4)], "Label": [np.array([[1], [7], [0], [7]])]},
               {"ignore_index": 7}, note="ignore_index")],
    intermediate_outputs=("MatchX", "XShape"), attrs_handled=("ignore_index",),
    doc="Y = -log(X[Label]) over the last dim (X holds probabilities)"))


# --------------------------------------------------------------------------
# sigmoid_cross_entropy_with_logits
# --------------------------------------------------------------------------
def _sce_masks(c: Call, label: np.ndarray):
    ii = int(c.attr("ignore_index", -100))
    ignored = np.trunc(label) == ii  # static_cast<int>(label) == ignore_index
    norm = None
    if c.attr("normalize", False):
        eps = label.dtype.type(1e-6)
        diff = label - label.dtype.type(ii)
        norm = int(np.count_nonzero((diff < -eps) | (diff > eps)))  # an int; 0 stays 0 as in Paddle
    return ignored, norm


def _sce(c: Call):
    x = np.asarray(c.x("X"))
    label = np.asarray(c.x("Label")).astype(x.dtype, copy=False)
    one = x.dtype.type(1)
    if c.has("pos_weight"):  # (1 - label) x + pos_weight * softplus(-x)
        max_val = np.where(x < 0, -x, 0)
        softplus = np.log(np.exp(-max_val) + np.exp(-x - max_val)) + max_val
        out = (one - label) * x + np.asarray(c.x("pos_weight")) * softplus
    else:
        out = np.maximum(x, 0) - x * label + np.log(one + np.exp(-np.abs(x)))
    ignored, norm = _sce_masks(c, label)
    out = np.where(ignored, 0, out).astype(x.dtype, copy=False)
    if norm is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (out / out.dtype.type(norm)).astype(x.dtype, copy=False)
    return {"Out": out}


def _sce_grad(c: Call):
    x = np.asarray(c.x("X"))
    label = np.asarray(c.x("Label")).astype(x.dtype, copy=False)
    g = np.asarray(c.x("Out@GRAD"))
    one = x.dtype.type(1)
    if c.has("pos_weight"):
        pw = np.asarray(c.x("pos_weight"))
        max_val = np.where(x < 0, -x, 0)
        term1 = np.where(x < 0, -one, 0)
        down1, down2 = np.exp(-max_val), np.exp(-x - max_val)
        term2 = down1 * (-term1) + down2 * (-one - term1)
        diff = pw * (term2 / (down1 + down2) + term1) + (one - label)
    else:
        e = np.exp(-np.abs(x))
        diff = np.where(x > 0, one, 0) - label + (-e * np.where(x >= 0, one, -one)) / (one + e)
    ignored, norm = _sce_masks(c, label)
    dx = np.where(ignored, 0, g * diff).astype(x.dtype, copy=False)
    if norm is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            dx = (dx / dx.dtype.type(norm)).astype(x.dtype, copy=False)
    return {"X@GRAD": dx}


def _sce_samples(rng):
    x = rng.standard_normal((3, 4)) * 2
    lab = rng.uniform(0, 1, (3, 4))
    lab_ign = lab.copy()
    lab_ign[0, 1] = lab_ign[2, 3] = -100.0
    return [Sample({"X": [x], "Label": [lab]}, wrt=("X",)),
            Sample({"X": [x], "Label": [lab_ign]}, {"normalize": True}, wrt=("X",), note="normalize, ignored"),
            Sample({"X": [x], "Label": [lab], "pos_weight": [rng.uniform(0.5, 2.0, (3, 4))]},
                   wrt=("X",), note="pos_weight")]


register(OpDef(
    type="sigmoid_cross_entropy_with_logits", inputs=("X", "Label", "pos_weight"), outputs=("Out",), kernel=_sce,
    grad=GradSpec("sigmoid_cross_entropy_with_logits_grad", ("X", "Label", "Out@GRAD", "pos_weight"),
                  ("X@GRAD",), kernel=_sce_grad),
    samples=_sce_samples, attrs_handled=("normalize", "ignore_index"),
    doc="Out = max(x,0) - x*label + log(1+exp(-|x|)) (with pos_weight: (1-label) x + pos_weight "
        "softplus(-x)), 0 where label == ignore_index"))


# --------------------------------------------------------------------------
# huber_loss / label_smooth
# --------------------------------------------------------------------------
def _huber(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    r = y - x
    d = r.dtype.type(c.attr("delta", 1.0))
    a = np.abs(r)
    half = r.dtype.type(0.5)
    out = np.where(a <= d, half * r * r, d * (a - half * d))
    return {"Out": out.astype(r.dtype, copy=False), "Residual": r}


def _huber_grad(c: Call):
    r = np.asarray(c.x("Residual"))
    g = np.asarray(c.x("Out@GRAD"))
    d = r.dtype.type(c.attr("delta", 1.0))
    dr = np.where(np.abs(r) <= d, r, np.where(r > 0, d, -d))
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = (-g * dr).astype(r.dtype, copy=False)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = (g * dr).astype(r.dtype, copy=False)
    return res


def _huber_samples(rng):
    x, y = rng.standard_normal((4, 1)), rng.standard_normal((4, 1))
    y[0] = x[0] + 2.5  # |residual| > delta
    y[1] = x[1] - 3.0
    return [Sample({"X": [x], "Y": [y]}, {"delta": 1.0}), Sample({"X": [x], "Y": [y]}, {"delta": 0.5})]


register(OpDef(
    type="huber_loss", inputs=("X", "Y"), outputs=("Out", "Residual"), kernel=_huber,
    grad=GradSpec("huber_loss_grad", ("Residual", "Out@GRAD"), ("X@GRAD", "Y@GRAD"), kernel=_huber_grad),
    samples=_huber_samples, intermediate_outputs=("Residual",), attrs_handled=("delta",),
    doc="Residual = Y - X; Out = 0.5 r^2 if |r| <= delta else delta (|r| - delta/2)"))


def _label_smooth(c: Call):
    x = np.asarray(c.x("X"))
    eps = float(c.attr("epsilon", 0.0))
    t = x.dtype.type
    if c.has("PriorDist"):
        prior = np.asarray(c.x("PriorDist")).reshape(-1)
        out = t(1 - eps) * x + t(eps) * prior.astype(x.dtype, copy=False)
    else:
        out = t(1 - eps) * x + t(eps / x.shape[-1])
    return {"Out": out.astype(x.dtype, copy=False)}


def _label_smooth_grad(c: Call):
    g = np.asarray(c.x("Out@GRAD"))
    return {"X@GRAD": (g * g.dtype.type(1 - float(c.attr("epsilon", 0.0)))).astype(g.dtype, copy=False)}


register(OpDef(
    type="label_smooth", inputs=("X", "PriorDist"), outputs=("Out",), kernel=_label_smooth,
    grad=GradSpec("label_smooth_grad", ("Out@GRAD",), ("X@GRAD",), kernel=_label_smooth_grad),
    attrs_handled=("epsilon",),
    samples=lambda rng: [
        Sample({"X": [rng.dirichlet(np.ones(5), size=4)]}, {"epsilon": 0.1}),
        Sample({"X": [rng.dirichlet(np.ones(5), size=4)], "PriorDist": [rng.dirichlet(np.ones(5), size=1)]},
               {"epsilon": 0.25}, wrt=("X",), note="PriorDist")],
    doc="Out = (1 - epsilon) X + epsilon * PriorDist (uniform 1/C if absent)"))
