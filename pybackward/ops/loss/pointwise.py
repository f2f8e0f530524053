"""More losses: kldiv_loss, nll_loss, bce_loss, hinge_loss, log_loss, the
legacy cross_entropy and warpctc, with their grads.

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels):
* kldiv_loss: `target * (log(target) - x)`, 0 where target <= 0 (with
  log_target: `exp(target) * (target - x)`); reduction none / sum / mean /
  batchmean (sum over X's first dim); the grad is `-target` (0 where
  target <= 0) or `-exp(target)`, times Loss@GRAD, divided by the element
  count (mean) or the first dim (batchmean);
* nll_loss: X (N, C) or (N, C, H, W), int64 Label, optional Weight (C);
  `-X[label] * weight[label]`, 0 at ignore_index; Total_weight is the sum of
  the weights used (0 for reduction none); mean divides by it when it is
  nonzero (the grad always does);
* bce_loss: `(label - 1) * max(log(1 - x), -100) - label * max(log(x), -100)`
  for x in [0, 1]; grad `(x - label) / max(x (1 - x), 1e-12)`;
* hinge_loss: `max(0, 1 - logits * (2 label - 1))`;
* log_loss: `-label log(p + eps) - (1 - label) log(1 - p + eps)`;
* cross_entropy (legacy): Y (X's shape, last dim 1) `-log(X[label])` over
  the last dim (log(0) taken as -1e20), 0 at ignore_index; soft_label sums
  `-label * log(X)`; the grad is `-dY / X[label]` or `-dY * label / X`;
* warpctc (padded form): Logits (T, B, C) soft-maxed over C, Label (B, L)
  padded, LogitsLength / LabelLength per sequence; Loss (B, 1) is the CTC
  negative log likelihood (alpha-beta recursion in log space, vectorised
  over batch and label positions), WarpCTCGrad its derivative w.r.t.
  Logits (0 past a sequence's end); the grad scales WarpCTCGrad by
  Loss@GRAD, and by 1/LogitsLength with norm_by_times.
"""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from .loss import hard_labels, tolerable_log
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register


# --------------------------------------------------------------------------
# kldiv_loss
# --------------------------------------------------------------------------
def _reduction(c: Call, allowed) -> str:
    r = c.attr("reduction", "mean")
    if r not in allowed:
        raise c.unsupported("reduction", r, f"expected one of {', '.join(allowed)}")
    return r


def _kldiv(c: Call):
    x, t = c.x("X"), np.asarray(c.x("Target")).astype(c.x("X").dtype, copy=False)
    red = _reduction(c, ("none", "batchmean", "mean", "sum"))
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
    red = _reduction(c, ("none", "batchmean", "mean", "sum"))
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
# nll_loss
# --------------------------------------------------------------------------
def _nll_setup(c: Call):
    x = c.x("X")
    if x.ndim not in (2, 4):
        raise c.unsupported("X rank", x.ndim, "nll_loss takes (N, C) or (N, C, H, W)")
    red = _reduction(c, ("none", "mean", "sum"))
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


# --------------------------------------------------------------------------
# warpctc (padded form: LogitsLength and LabelLength given)
# --------------------------------------------------------------------------
def _logsumexp(*arrs):
    m = arrs[0]
    for a in arrs[1:]:
        m = np.maximum(m, a)
    safe = np.where(np.isneginf(m), 0, m)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(a - safe) for a in arrs))


def _ctc(c: Call):
    """(log softmax (T, B, C), extended labels (B, S), their lengths, time
    lengths, alpha (T, B, S), beta (T, B, S), log p (B,))."""
    logits = np.asarray(c.x("Logits"), np.float64)
    if not (c.has("LogitsLength") and c.has("LabelLength")):
        raise c.unsupported("LogitsLength/LabelLength", None, "the LoD form of warpctc is not supported; "
                            "pass LogitsLength and LabelLength")
    if logits.ndim != 3:
        raise c.unsupported("Logits rank", logits.ndim, "expected (max_time, batch, classes)")
    n_t, n_b, n_c = logits.shape
    t_len = np.asarray(c.x("LogitsLength")).reshape(-1).astype(np.int64)
    l_len = np.asarray(c.x("LabelLength")).reshape(-1).astype(np.int64)
    label = np.asarray(c.x("Label")).astype(np.int64).reshape(n_b, -1)
    blank = int(c.attr("blank", 0))
    if t_len.size != n_b or l_len.size != n_b or (t_len < 1).any() or (t_len > n_t).any() \
            or (l_len < 0).any() or (l_len > label.shape[1]).any():
        raise ExecutionError(f"warpctc: lengths {t_len.tolist()} / {l_len.tolist()} do not fit Logits "
                             f"{logits.shape} and Label {label.shape}")
    valid_lbl = np.arange(label.shape[1])[None, :] < l_len[:, None]
    if ((label == blank) & valid_lbl).any() or ((label < 0) | (label >= n_c))[valid_lbl].any():
        raise ExecutionError(f"warpctc: a label is the blank ({blank}) or outside [0, {n_c})")
    lp = logits - logits.max(axis=-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(axis=-1, keepdims=True))
    n_s = 2 * label.shape[1] + 1
    ext = np.full((n_b, n_s), blank, np.int64)
    ext[:, 1::2] = np.where(valid_lbl, label, blank)
    s_len = 2 * l_len + 1
    s_idx = np.arange(n_s)[None, :]
    in_seq = s_idx < s_len[:, None]
    skip = np.zeros((n_b, n_s), bool)               # s may come from s-2
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    emit = np.take_along_axis(lp, np.broadcast_to(ext[None], (n_t, n_b, n_s)), axis=2)   # (T, B, S)
    ninf = -np.inf
    alpha = np.full((n_t, n_b, n_s), ninf)
    alpha[0, :, 0] = emit[0, :, 0]
    alpha[0, :, 1] = np.where(s_len > 1, emit[0, :, 1], ninf)
    for t in range(1, n_t):
        a = alpha[t - 1]
        a1 = np.concatenate([np.full((n_b, 1), ninf), a[:, :-1]], axis=1)
        a2 = np.where(skip, np.concatenate([np.full((n_b, 2), ninf), a[:, :-2]], axis=1), ninf)
        alpha[t] = np.where(in_seq, _logsumexp(a, a1, a2) + emit[t], ninf)
    beta = np.full((n_t, n_b, n_s), ninf)
    last = s_len - 1
    bidx = np.arange(n_b)
    for t in range(n_t - 1, -1, -1):
        if t < n_t - 1:
            b = beta[t + 1]
            b1 = np.concatenate([b[:, 1:], np.full((n_b, 1), ninf)], axis=1)
            skip_next = np.concatenate([skip[:, 2:], np.zeros((n_b, 2), bool)], axis=1)
            b2 = np.where(skip_next, np.concatenate([b[:, 2:], np.full((n_b, 2), ninf)], axis=1), ninf)
            rec = np.where(in_seq, _logsumexp(b, b1, b2) + emit[t], ninf)
        else:
            rec = np.full((n_b, n_s), ninf)
        init = np.full((n_b, n_s), ninf)
        init[bidx, last] = emit[t, bidx, last]
        has_prev = last >= 1
        init[bidx[has_prev], last[has_prev] - 1] = emit[t, bidx[has_prev], last[has_prev] - 1]
        ends = (t_len - 1 == t)[:, None]
        beta[t] = np.where(ends, init, np.where((t < t_len - 1)[:, None], rec, ninf))
    end_a = alpha[t_len - 1, bidx]                               # (B, S)
    logp = _logsumexp(end_a[bidx, last], np.where(last >= 1, end_a[bidx, np.maximum(last - 1, 0)], ninf))
    return lp, ext, t_len, alpha, beta, emit, logp


def _warpctc(c: Call):
    dt = c.x("Logits").dtype
    lp, ext, t_len, alpha, beta, emit, logp = _ctc(c)
    n_t, n_b, n_c = lp.shape
    occ = np.exp(alpha + beta - emit - logp[None, :, None])       # (T, B, S), 0 off the paths
    occ = np.where(np.isfinite(occ), occ, 0)
    grad = np.zeros((n_t, n_b, n_c))
    np.add.at(grad, (np.arange(n_t)[:, None, None], np.arange(n_b)[None, :, None],
                     np.broadcast_to(ext[None], occ.shape)), occ)
    grad = np.exp(lp) - grad
    grad = np.where((np.arange(n_t)[:, None] < t_len[None, :])[..., None], grad, 0)
    return {"Loss": (-logp).reshape(n_b, 1).astype(dt), "WarpCTCGrad": grad.astype(dt)}


def _warpctc_grad(c: Call):
    if not c.wants("Logits@GRAD"):
        return {}
    g = np.asarray(c.x("WarpCTCGrad"))
    dl = np.asarray(c.x("Loss@GRAD"), g.dtype).reshape(1, -1, 1)
    out = g * dl
    if c.attr("norm_by_times", False):
        if not c.has("LogitsLength"):
            raise c.unsupported("LogitsLength", None, "the LoD form of warpctc is not supported")
        t_len = np.asarray(c.x("LogitsLength")).reshape(1, -1, 1).astype(g.dtype)
        out = out / t_len
    return {"Logits@GRAD": out.astype(g.dtype, copy=False)}


def _warpctc_samples(rng):
    def case(n_t, n_b, n_c, t_len, labels, blank=0):
        lmax = max(1, max(len(x) for x in labels))
        lab = np.zeros((n_b, lmax), np.int32)
        for i, x in enumerate(labels):
            lab[i, :len(x)] = x
        return {"Logits": [rng.standard_normal((n_t, n_b, n_c))], "Label": [lab],
                "LogitsLength": [np.array(t_len, np.int64)],
                "LabelLength": [np.array([len(x) for x in labels], np.int64)]}
    S = Sample
    return [
        S(case(5, 2, 4, [5, 4], [[1, 2], [3]]), {"blank": 0, "norm_by_times": False}, wrt=("Logits",),
          note="two sequences"),
        S(case(6, 3, 5, [6, 5, 3], [[1, 1, 2], [4, 3], [2]]), {"blank": 0, "norm_by_times": False},
          wrt=("Logits",), note="repeated label"),
        S(case(4, 2, 4, [4, 3], [[0, 2], [1]], blank=3), {"blank": 3, "norm_by_times": False}, wrt=("Logits",),
          note="blank 3"),
    ]


register(paddle_opdef("warpctc", _warpctc, {"warpctc_grad": _warpctc_grad}, samples=_warpctc_samples,
                      attrs_handled=("blank", "norm_by_times"),
                      doc="CTC loss of padded Logits (T, B, C) against padded Label (LogitsLength, LabelLength)"))
