"""Loss scaling and clipping of mixed-precision training: check_finite_and_unscale,
update_loss_scaling and clip_by_norm.

Every formula follows Paddle 3.3.1's CPU kernel, including its dtype rules
(bool outputs of the reductions, int32 Correct/Total of accuracy, ...) and
the in-place convention of the loss-scaling ops: outputs a kernel leaves
unwritten keep the value of the input var Paddle aliases them to.
"""
from __future__ import annotations


import numpy as np

from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# loss scaling and clipping
# --------------------------------------------------------------------------
def _check_finite_and_unscale(c: Call):
    scale = input_value(c, "Scale")
    xs = [np.asarray(x) for x in c.xs("X")]
    outs, found = [], False
    for x in xs:
        if x.dtype.kind != "f":
            raise ExecutionError(f"check_finite_and_unscale: X is {x.dtype}; Paddle takes float tensors")
        t = x.dtype.type
        if not found:
            found = not bool(np.all(np.isfinite(x)))
        if found:  # this tensor and every later one: x * 0 (NaN stays NaN, inf gives NaN)
            with np.errstate(invalid="ignore"):
                outs.append(x * t(0))
        else:
            inv = t(1.0 / float(scale.reshape(-1)[0].astype(x.dtype)))
            outs.append(x * inv)
    return {"Out": outs, "FoundInfinite": np.array([found])}


def _cfu_samples(rng):
    # (an inf input gives NaN outputs, which the float32 comparison cannot take:
    # tests/ops/test_loss_scaling_constants_metrics.py checks that case)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(5)
    return [Sample({"X": [a, b], "Scale": [np.array([1024.0])]}, outputs={"Out": 2, "FoundInfinite": 1}),
            Sample({"X": [b], "Scale": [np.array([0.3])]}, outputs={"Out": 1, "FoundInfinite": 1},
                   note="one tensor")]


register_plain("check_finite_and_unscale", _check_finite_and_unscale, _cfu_samples, (),
     "Out = X / Scale; FoundInfinite if any X has a NaN or inf (then that X and later ones are X * 0)")


def _update_loss_scaling(c: Call):
    found = bool(input_value(c, "FoundInfinite").reshape(-1)[0])
    xs = [np.asarray(x) for x in c.xs("X")]
    outs = [np.zeros_like(x) if found else x.copy() for x in xs]
    stop = bool(np.asarray(c.x("StopUpdate")).reshape(-1)[0]) if c.has("StopUpdate") else \
        bool(c.attr("stop_update", False))
    prev = input_value(c, "PrevLossScaling")
    good, bad = input_value(c, "InGoodSteps"), input_value(c, "InBadSteps")
    if stop:
        return {"Out": outs, "LossScaling": prev.copy(), "OutGoodSteps": good.copy(), "OutBadSteps": bad.copy()}
    t = prev.dtype.type
    p = t(prev.reshape(-1)[0])
    g, b = int(good.reshape(-1)[0]), int(bad.reshape(-1)[0])
    incr_n, decr_n = int(c.attr("incr_every_n_steps", 1000)), int(c.attr("decr_every_n_nan_or_inf", 2))
    incr, decr = np.float32(c.attr("incr_ratio", 2.0)), np.float32(c.attr("decr_ratio", 0.5))
    new = p
    if found:
        g, b = 0, b + 1
        if b == decr_n:
            s = t(p * t(decr))
            new, b = (t(1) if s < t(1) else s), 0
    else:
        g, b = g + 1, 0
        if g == incr_n:
            with np.errstate(over="ignore"):
                s = t(p * t(incr))
            new, g = (s if np.isfinite(s) else p), 0
    return {"Out": outs, "LossScaling": np.full(prev.shape, new, dtype=prev.dtype),
            "OutGoodSteps": np.full(good.shape, g, dtype=good.dtype),
            "OutBadSteps": np.full(bad.shape, b, dtype=bad.dtype)}


def _uls_samples(rng):
    def ins(found, good, bad, scale=1024.0):
        return {"X": [rng.standard_normal((2, 3)), rng.standard_normal(4)], "FoundInfinite": [np.array([found])],
                "PrevLossScaling": [np.array([scale])], "InGoodSteps": [np.array([good], np.int32)],
                "InBadSteps": [np.array([bad], np.int32)]}
    attrs = {"incr_every_n_steps": 3, "decr_every_n_nan_or_inf": 2, "incr_ratio": 2.0, "decr_ratio": 0.5}
    outs = {"Out": 2, "LossScaling": 1, "OutGoodSteps": 1, "OutBadSteps": 1}
    return [Sample(ins(False, 0, 0), attrs, outputs=outs, note="finite, no change"),
            Sample(ins(False, 2, 0), attrs, outputs=outs, note="finite, scale grows"),
            Sample(ins(True, 1, 0), attrs, outputs=outs, note="inf, counted"),
            Sample(ins(True, 0, 1), attrs, outputs=outs, note="inf, scale shrinks"),
            Sample(ins(True, 0, 1, 1.5), attrs, outputs=outs, note="shrink floors at 1"),
            Sample(ins(True, 0, 1), dict(attrs, stop_update=True), outputs=outs, note="stop_update")]


register_plain("update_loss_scaling", _update_loss_scaling, _uls_samples,
     ("incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_ratio", "decr_ratio", "stop_update"),
     "dynamic loss scaling: zero the grads on inf/NaN; grow the scale after n good steps, shrink after m bad")


def _clip_by_norm(c: Call):
    x = input_value(c, "X")
    if x.dtype.kind != "f":
        raise ExecutionError(f"clip_by_norm: X is {x.dtype}; Paddle takes float tensors")
    t = x.dtype.type
    max_norm = t(np.float32(c.attr("max_norm", 1.0)))
    norm = np.sqrt(np.sum(x * x, dtype=x.dtype))
    if norm <= max_norm:
        return {"Out": x.copy()}
    eps = t(1e-6) if norm <= t(1e-30) else t(0)
    return {"Out": x * (max_norm / (norm + eps))}


def _clip_by_norm_samples(rng):
    return [Sample({"X": [rng.standard_normal((3, 4))]}, {"max_norm": 1.0}, note="clipped"),
            Sample({"X": [0.1 * rng.standard_normal(5)]}, {"max_norm": 5.0}, note="within the norm")]


register_plain("clip_by_norm", _clip_by_norm, _clip_by_norm_samples, ("max_norm",),
     "Out = X * max_norm / |X| where |X| > max_norm, else X (Paddle's CPU kernel is float32 only)")
