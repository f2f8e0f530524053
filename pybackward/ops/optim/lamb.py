"""The lamb parameter update (layer-wise adaptive moments)."""
from __future__ import annotations

import numpy as np
from ._util import adam_ins, arr, first, float_attr, like, param, register_optimizer, skip_update
from ..registry import Call, Sample


# --------------------------------------------------------------------------
# lamb
# --------------------------------------------------------------------------
def _lamb(c: Call):
    p, dt = param(c)
    t = dt.type
    m1, m2 = like(c, "Moment1", p), like(c, "Moment2", p)
    b1p_in, b2p_in = arr(c, "Beta1Pow"), arr(c, "Beta2Pow")
    if skip_update(c):  # Paddle's CPU kernel returns at once: the in-place vars keep their values
        out = {"ParamOut": p.copy(), "Moment1Out": m1.copy(), "Moment2Out": m2.copy()}
        if c.wants("Beta1PowOut"):
            out["Beta1PowOut"] = b1p_in.copy()
        if c.wants("Beta2PowOut"):
            out["Beta2PowOut"] = b2p_in.copy()
        return out
    wd, beta1 = float_attr(c, "weight_decay", 0.01, dt), float_attr(c, "beta1", 0.9, dt)
    beta2, eps = float_attr(c, "beta2", 0.999, dt), float_attr(c, "epsilon", 1e-6, dt)
    b1p, b2p = first(c, "Beta1Pow", dt), first(c, "Beta2Pow", dt)
    g = like(c, "Grad", p)
    m1o = beta1 * m1 + (t(1) - beta1) * g
    m2o = beta2 * m2 + (t(1) - beta2) * g * g
    trust = (m1o / (t(1) - b1p)) / (np.sqrt(m2o / (t(1) - b2p)) + eps) + wd * p
    pn = tn = t(0)
    if wd > 0 or c.attr("always_adapt", False):
        pn, tn = np.sqrt(np.sum(p * p, dtype=dt)), np.sqrt(np.sum(trust * trust, dtype=dt))
    r = pn / tn if (pn > 0 and tn > 0) else t(1)
    lr = first(c, "LearningRate", dt) * r
    out = {"ParamOut": p - lr * trust, "Moment1Out": m1o, "Moment2Out": m2o}
    if c.wants("Beta1PowOut"):
        out["Beta1PowOut"] = (b1p_in.astype(dt) * beta1).astype(b1p_in.dtype)
    if c.wants("Beta2PowOut"):
        out["Beta2PowOut"] = (b2p_in.astype(dt) * beta2).astype(b2p_in.dtype)
    return out


def _lamb_samples(rng):
    def ins():
        a = adam_ins(rng)
        return {k: v for k, v in a.items()}
    outs = {"ParamOut": 1, "Moment1Out": 1, "Moment2Out": 1, "Beta1PowOut": 1, "Beta2PowOut": 1}
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}
    return [Sample(ins(), dict(base, weight_decay=0.01), outputs=outs),
            Sample(ins(), dict(base, weight_decay=0.0), outputs=outs, note="no decay: trust ratio 1"),
            Sample(ins(), dict(base, weight_decay=0.0, always_adapt=True), outputs=outs, note="always_adapt"),
            Sample(dict(ins(), SkipUpdate=[np.array([True])]), dict(base, weight_decay=0.01), outputs=outs,
                   note="SkipUpdate")]


register_optimizer("lamb", _lamb, _lamb_samples,
                   ("weight_decay", "beta1", "beta2", "epsilon", "always_adapt", "multi_precision"),
                   "LAMB: Adam direction plus weight decay, scaled by the trust ratio |p| / |update|")
