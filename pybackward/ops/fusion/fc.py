"""fc (the fused inference op) and average_accumulates (ModelAverage's running sums)."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# fc (the fused inference op) and average_accumulates (ModelAverage)
# --------------------------------------------------------------------------
def _fc(c: Call):
    x, w = input_value(c, "Input"), input_value(c, "W")
    k = int(c.attr("in_num_col_dims", 1))
    if not 1 <= k < max(x.ndim, 2):
        raise ExecutionError(f"fc: in_num_col_dims {k} does not fit Input of rank {x.ndim}")
    if c.attr("padding_weights", False):
        w = w[:-4, :-4]
    act = c.attr("activation_type", "")
    if act not in ("", "relu"):
        raise c.unsupported("activation_type", act, "Paddle's CPU fc applies '' or 'relu'")
    lead = x.shape[:k]
    x2 = x.reshape(int(np.prod(lead, dtype=np.int64)), -1)
    if w.ndim != 2 or x2.shape[1] != w.shape[0]:
        raise ExecutionError(f"fc: Input {list(x.shape)} flattened at {k} is {list(x2.shape)}, "
                             f"which does not multiply W {list(w.shape)}")
    out = x2 @ w
    if c.has("Bias"):
        out = out + np.asarray(c.x("Bias")).reshape(1, -1)
    if act == "relu":
        out = np.maximum(out, out.dtype.type(0))
    return {"Out": out.astype(x.dtype, copy=False).reshape(lead + (w.shape[1],))}


def _fc_samples(rng):
    x = rng.standard_normal((2, 3, 4))
    w = rng.standard_normal((12, 5))
    return [Sample({"Input": [x], "W": [w], "Bias": [rng.standard_normal(5)]}, {"in_num_col_dims": 1}),
            Sample({"Input": [x], "W": [rng.standard_normal((4, 3))], "Bias": [rng.standard_normal((1, 3))]},
                   {"in_num_col_dims": 2, "activation_type": "relu"}, note="relu, 2 col dims"),
            Sample({"Input": [x], "W": [rng.standard_normal((16, 9))]},
                   {"in_num_col_dims": 1, "padding_weights": True}, note="padded weights, no bias")]


register_plain("fc", _fc, _fc_samples, ("in_num_col_dims", "activation_type", "padding_weights"),
     "Out = act(flatten(Input, in_num_col_dims) @ W + Bias)")

_MAX_NUM_ACCUMULATES = 16384


def _average_accumulates(c: Call):
    p = input_value(c, "param")
    s1, s2, s3 = (input_value(c, s).astype(p.dtype, copy=False).reshape(p.shape) for s in ("in_sum_1", "in_sum_2",
                                                                                   "in_sum_3"))
    counters = {s: input_value(c, s) for s in ("in_num_accumulates", "in_old_num_accumulates", "in_num_updates")}
    n_acc = int(counters["in_num_accumulates"].reshape(-1)[0]) + 1
    old = int(counters["in_old_num_accumulates"].reshape(-1)[0])
    n_upd = int(counters["in_num_updates"].reshape(-1)[0]) + 1
    window = float(np.float32(c.attr("average_window", 0.0)))
    max_w, min_w = int(c.attr("max_average_window", 10000)), int(c.attr("min_average_window", 10000))
    if min_w > max_w:
        raise ExecutionError(f"average_accumulates: min_average_window {min_w} > max_average_window {max_w}")
    # Paddle runs it in place (out_sum_i is in_sum_i): each step reads the sums as updated so far
    s1 = s1 + p
    if n_upd % _MAX_NUM_ACCUMULATES == 0:
        s2, s1 = s2 + s1, np.zeros_like(s1)
    if n_acc >= min_w and n_acc >= min(max_w, int(n_upd * np.float32(window))):
        s3, s1, s2 = s1 + s2, np.zeros_like(s1), np.zeros_like(s2)
        old, n_acc = n_acc, 0

    def counter(slot, v):
        a = counters[slot]
        return np.full(a.shape, v, dtype=a.dtype)
    return {"out_sum_1": s1, "out_sum_2": s2, "out_sum_3": s3,
            "out_num_accumulates": counter("in_num_accumulates", n_acc),
            "out_old_num_accumulates": counter("in_old_num_accumulates", old),
            "out_num_updates": counter("in_num_updates", n_upd)}


def _average_accumulates_samples(rng):
    def ins(n_acc, old, n_upd):
        return {"param": [rng.standard_normal((3, 2))], "in_sum_1": [rng.standard_normal((3, 2))],
                "in_sum_2": [rng.standard_normal((3, 2))], "in_sum_3": [rng.standard_normal((3, 2))],
                "in_num_accumulates": [np.array([n_acc], np.int64)],
                "in_old_num_accumulates": [np.array([old], np.int64)],
                "in_num_updates": [np.array([n_upd], np.int64)]}
    attrs = {"average_window": 0.15, "max_average_window": 20, "min_average_window": 4}
    return [Sample(ins(1, 0, 5), attrs, note="accumulate"),
            Sample(ins(9, 3, 40), attrs, note="window full: restart"),
            Sample(ins(2, 0, _MAX_NUM_ACCUMULATES - 1), attrs, note="move sum_1 to sum_2")]


register_plain("average_accumulates", _average_accumulates, _average_accumulates_samples,
     ("average_window", "max_average_window", "min_average_window"),
     "ModelAverage's running sums of a param (in place, as Paddle runs it)")
