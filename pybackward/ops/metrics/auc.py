"""Auc (streaming, with a sliding window of slide_steps batches)."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# auc (streaming, with a sliding window of slide_steps batches)
# --------------------------------------------------------------------------
def _auc_from(pos: np.ndarray, neg: np.ndarray) -> float:
    """Paddle's calcAuc: trapezoids from the highest threshold down."""
    tp, fp = np.cumsum(pos[::-1].astype(np.float64)), np.cumsum(neg[::-1].astype(np.float64))
    tp_prev, fp_prev = np.concatenate([[0.0], tp[:-1]]), np.concatenate([[0.0], fp[:-1]])
    area = float(np.sum(np.abs(fp - fp_prev) * (tp + tp_prev) / 2.0))
    return area / tp[-1] / fp[-1] if tp[-1] > 0 and fp[-1] > 0 else area


def _auc(c: Call):
    pred, label = input_value(c, "Predict"), input_value(c, "Label")
    if c.attr("curve", "ROC") != "ROC":
        raise c.unsupported("curve", c.attr("curve"), "Paddle's CPU auc computes the ROC curve only")
    nt, steps = int(c.attr("num_thresholds", 2 ** 12 - 1)), int(c.attr("slide_steps", 1))
    pos_in, neg_in = input_value(c, "StatPos"), input_value(c, "StatNeg")
    bucket = nt + 1
    size = (1 + steps) * bucket + (1 if steps > 0 else 0)
    pos, neg = pos_in.reshape(-1).astype(np.int64), neg_in.reshape(-1).astype(np.int64)
    if pos.size < size or neg.size < size:
        raise ExecutionError(f"auc: StatPos/StatNeg need {size} counters for num_thresholds={nt}, "
                             f"slide_steps={steps}; they have {pos.size}, {neg.size}")
    pos, neg = pos.copy(), neg.copy()
    fake = c.has("InsTagWeight") and float(np.asarray(c.x("InsTagWeight")).reshape(-1)[0]) == 0
    p = pred.reshape(pred.shape[0], -1)[:, -1]
    if np.any((p < 0) | (p > 1)):
        raise ExecutionError("auc: predictions must be in [0, 1]")
    lab = label.reshape(-1).astype(np.int64)
    bins = (p * p.dtype.type(nt)).astype(np.uint32).astype(np.int64)
    add_pos = np.bincount(bins[lab > 0], minlength=bucket)[:bucket]
    add_neg = np.bincount(bins[lab == 0], minlength=bucket)[:bucket]

    def out(auc_value):
        return {"AUC": np.array(auc_value, np.float64), "StatPosOut": pos.reshape(pos_in.shape),
                "StatNegOut": neg.reshape(neg_in.shape)}
    if steps == 0:
        if not fake:
            pos[:bucket] += add_pos
            neg[:bucket] += add_neg
        return out(_auc_from(pos[:bucket], neg[:bucket]))
    cur = int(pos[(steps + 1) * bucket]) % steps
    cur_sl, sum_sl = slice(cur * bucket, (cur + 1) * bucket), slice(steps * bucket, (steps + 1) * bucket)
    for s in (pos, neg):
        s[sum_sl] -= s[cur_sl]
    pos[cur_sl], neg[cur_sl] = add_pos, add_neg
    if not fake:
        pos[sum_sl] += pos[cur_sl]
        neg[sum_sl] += neg[cur_sl]
    value = _auc_from(pos[sum_sl], neg[sum_sl])
    pos[(steps + 1) * bucket] += 1
    neg[(steps + 1) * bucket] += 1
    return out(value)


def _auc_samples(rng):
    p1 = rng.random(12)
    pred = np.stack([1 - p1, p1], axis=1)
    label = (rng.random((12, 1)) < p1[:, None]).astype(np.int64)
    nt = 20

    def stats(steps):
        if not steps:  # the shapes Paddle's shape inference gives the stat vars
            return tuple(rng.integers(0, 3, (1, nt + 1)).astype(np.int64) for _ in range(2))
        size = (1 + steps) * (nt + 1) + 1
        a, b = rng.integers(0, 3, size).astype(np.int64), rng.integers(0, 3, size).astype(np.int64)
        a[-1] = b[-1] = 5
        return a, b
    outs = {"AUC": 1, "StatPosOut": 1, "StatNegOut": 1}
    sp, sn = stats(0)
    wp, wn = stats(3)
    return [Sample({"Predict": [pred], "Label": [label], "StatPos": [sp], "StatNeg": [sn]},
                   {"curve": "ROC", "num_thresholds": nt, "slide_steps": 0}, outputs=outs, note="global"),
            Sample({"Predict": [pred], "Label": [label], "StatPos": [wp], "StatNeg": [wn]},
                   {"curve": "ROC", "num_thresholds": nt, "slide_steps": 3}, outputs=outs, note="sliding window")]


register_plain("auc", _auc, _auc_samples, ("curve", "num_thresholds", "slide_steps"),
     "AUC of the ROC curve from bucketed positive/negative counts, updated with this batch (in place)")
