"""warpctc: the CTC loss, padded form (LogitsLength and LabelLength given), with its grad.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* warpctc (padded form): Logits (T, B, C) soft-maxed over C, Label (B, L)
  padded, LogitsLength / LabelLength per sequence; Loss (B, 1) is the CTC
  negative log likelihood (alpha-beta recursion in log space, vectorised
  over batch and label positions), WarpCTCGrad its derivative w.r.t.
  Logits (0 past a sequence's end); the grad scales WarpCTCGrad by
  Loss@GRAD, and by 1/LogitsLength with norm_by_times.
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


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
