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


def _lse3(a, a1, a2):
    """_logsumexp(a, a1, a2), the same operations in the same order, with
    fewer NumPy calls (the caller sets errstate once for its whole loop)."""
    m = np.maximum(np.maximum(a, a1), a2)
    safe = np.where(m == -np.inf, 0, m)
    e = np.exp(a - safe)
    e += np.exp(a1 - safe)
    e += np.exp(a2 - safe)
    e = np.log(e, out=e)
    e += safe               # log(..) + safe: the same sum as safe + log(..)
    return e


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
    last = s_len - 1
    bidx = np.arange(n_b)
    skip_next = np.zeros((n_b, n_s), bool)          # s + 2 may follow s
    skip_next[:, :-2] = skip[:, 2:]
    at_end = (s_idx == last[:, None]) | ((s_idx == last[:, None] - 1) & (last[:, None] >= 1))
    init = np.where(at_end, emit, ninf)                              # (T, B, S): where a path may end
    times = np.arange(n_t)[:, None]
    ends = (t_len[None, :] - 1 == times)[..., None]                  # (T, B, 1)
    live = (times < t_len[None, :] - 1)[..., None]
    # The alpha recursion (forward in time, reading positions s-1, s-2) and
    # the beta one (backward in time, reading s+1, s+2) run side by side:
    # step j computes alpha at t = j and beta at t = T-1-j, beta's positions
    # stored reversed so that it too reads the two before - the same
    # operations on the same values, one set of NumPy calls for both.
    # z[j, 0] is alpha(j), z[j, 1] beta(T-1-j) reversed, each after two -inf columns.
    z = np.full((n_t, 2, n_b, n_s + 2), ninf)
    z[0, 0, :, 2] = emit[0, :, 0]
    z[0, 0, :, 3] = np.where(s_len > 1, emit[0, :, 1], ninf)
    z[0, 1, :, 2:] = np.where(ends[n_t - 1], init[n_t - 1], ninf)[:, ::-1]
    skips = np.stack([skip, skip_next[:, ::-1]])                     # (2, B, S)
    in_seqs = np.stack([in_seq, in_seq[:, ::-1]])
    emits = np.stack([emit, emit[::-1, :, ::-1]], axis=1)           # (T, 2, B, S), step order
    inits = np.stack([np.full_like(init, ninf), init[::-1, :, ::-1]], axis=1)
    # What a step writes where: a sequence's last step takes its end values
    # (beta only), a live step inside the sequence the recursion, the rest -inf.
    ends2 = np.stack([np.zeros_like(ends), ends[::-1]], axis=1)      # (T, 2, B, 1); alpha never ends
    lives2 = np.stack([np.ones_like(live), live[::-1]], axis=1)      # alpha always live
    recurs = ~ends2 & lives2 & in_seqs                               # (T, 2, B, S)
    base = np.where(ends2, inits, ninf)
    with np.errstate(divide="ignore"):
        for j in range(1, n_t):
            prev = z[j - 1]
            a2 = np.where(skips, prev[..., :-2], ninf)
            rec = _lse3(prev[..., 2:], prev[..., 1:-1], a2)
            rec += emits[j]
            z[j, :, :, 2:] = np.where(recurs[j], rec, base[j])
    alpha = z[:, 0, :, 2:]
    beta = z[::-1, 1, :, :1:-1]                                      # time and positions in order
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
