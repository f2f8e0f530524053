"""Optimizer ops: the parameter updates a saved training program ends with
(sgd, momentum, adam, adamw, adagrad, adamax, adadelta, rmsprop, lamb,
lars_momentum, nadam, radam, asgd, rprop, ftrl, decayed_adagrad, dpsgd,
merged_adam, merged_momentum).

Paddle runs these in place: a program names the same var as `Param` and
`ParamOut`, `Moment1` and `Moment1Out`, ...; a kernel here returns the new
values and the interpreter writes them over the old ones. The formulas and
the order of their operations are those of Paddle 3.3.1's dense CPU kernels
(phi/kernels/cpu/*, impl/*, funcs/jit/refer): everything is computed in the
parameter's dtype, float attrs are float32 values cast to it, and the
learning rate is the first element of its tensor. Where a CPU kernel
ignores an input or attr (MasterParam / multi_precision: CPU kernels are
float and double only; momentum's rescale_grad on CPU), so does this one.
Sparse (SelectedRows) gradients do not exist in the interpreter, so lazy_mode
and min_row_size_to_use_multithread have nothing to act on.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ._util import (
    adam_ins, arr, first, float_attr, like, one, param, pos, register_optimizer, rs, scalar, skip_update)
from ..registry import Call, Sample


# --------------------------------------------------------------------------
# sgd, momentum, lars_momentum, merged_momentum
# --------------------------------------------------------------------------
def _sgd(c: Call):
    p, dt = param(c)
    return {"ParamOut": p - first(c, "LearningRate", dt) * like(c, "Grad", p)}


def _sgd_samples(rng):
    return [Sample({"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "LearningRate": [one(0.1)]},
                   outputs={"ParamOut": 1}),
            Sample({"Param": [rs(rng, 5)], "Grad": [rs(rng, 5)], "LearningRate": [one(0.01)]},
                   outputs={"ParamOut": 1}, note="1-D")]


register_optimizer("sgd", _sgd, _sgd_samples, ("multi_precision",), "ParamOut = Param - lr * Grad")


def _reg(c: Call, method: str) -> bool:
    if method in ("", None):
        return False
    if method == "l2_decay":
        return True
    raise c.unsupported("regularization_method", method, "Paddle knows '' and 'l2_decay'")


def _momentum_update(p, g, v, lr, mu, nesterov, l2, coeff):
    """Paddle's CPUDenseMomentumFunctor (rescale_grad is not applied on CPU)."""
    if l2:
        g = p * coeff + g
    v_out = v * mu + g
    p_out = p - (g + v_out * mu) * lr if nesterov else p - lr * v_out
    return p_out, v_out


def _momentum(c: Call):
    p, dt = param(c)
    p_out, v_out = _momentum_update(
        p, like(c, "Grad", p), like(c, "Velocity", p), first(c, "LearningRate", dt),
        float_attr(c, "mu", 0.9, dt), bool(c.attr("use_nesterov", False)),
        _reg(c, c.attr("regularization_method", "")), float_attr(c, "regularization_coeff", 0.0, dt))
    return {"ParamOut": p_out, "VelocityOut": v_out}


_MOM_OUT = {"ParamOut": 1, "VelocityOut": 1}


def _momentum_samples(rng):
    ins = lambda: {"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "Velocity": [rs(rng, 3, 4)],  # noqa: E731
                   "LearningRate": [one(0.1)]}
    return [Sample(ins(), {"mu": 0.9}, outputs=_MOM_OUT),
            Sample(ins(), {"mu": 0.8, "use_nesterov": True}, outputs=_MOM_OUT, note="nesterov"),
            Sample(ins(), {"mu": 0.9, "regularization_method": "l2_decay", "regularization_coeff": 0.01},
                   outputs=_MOM_OUT, note="l2_decay"),
            Sample(ins(), {"mu": 0.9, "rescale_grad": 0.5}, outputs=_MOM_OUT,
                   note="rescale_grad (ignored by the CPU kernel)")]


register_optimizer("momentum", _momentum, _momentum_samples,
     ("mu", "use_nesterov", "regularization_method", "regularization_coeff", "rescale_grad", "multi_precision"),
     "VelocityOut = mu * Velocity + Grad (+ l2 coeff * Param); ParamOut = Param - lr * VelocityOut (or Nesterov)")


def _merged_momentum(c: Call):
    ps = c.xs("Param")
    n = len(ps)
    for slot in ("Grad", "Velocity"):
        if len(c.xs(slot)) != n:
            raise ExecutionError(f"merged_momentum: {len(c.xs(slot))} '{slot}' for {n} 'Param'")
    lrs = c.xs("LearningRate")
    if len(lrs) not in (1, n):
        raise ExecutionError(f"merged_momentum: {len(lrs)} 'LearningRate' for {n} 'Param' (1 or {n} expected)")
    methods = list(c.attr("regularization_method", []) or [])
    coeffs = list(c.attr("regularization_coeff", []) or [])
    if methods and len(methods) != n:
        raise ExecutionError(f"merged_momentum: {len(methods)} regularization_method for {n} params")
    if coeffs and len(coeffs) != n:
        raise ExecutionError(f"merged_momentum: {len(coeffs)} regularization_coeff for {n} params")
    nesterov = bool(c.attr("use_nesterov", False))
    p_outs, v_outs = [], []
    for i in range(n):
        p, dt = param(c, "Param", i)
        lr = first(c, "LearningRate", dt, i if len(lrs) == n else 0)
        l2 = _reg(c, methods[i] if methods else "")
        coeff = dt.type(np.float32(coeffs[i])) if coeffs else dt.type(0)
        po, vo = _momentum_update(p, like(c, "Grad", p, i), like(c, "Velocity", p, i), lr,
                                  float_attr(c, "mu", 0.9, dt), nesterov, l2, coeff)
        p_outs.append(po)
        v_outs.append(vo)
    return {"ParamOut": p_outs, "VelocityOut": v_outs}


def _merged_momentum_samples(rng):
    shapes = [(3, 4), (5,)]
    ins = {"Param": [rs(rng, *s) for s in shapes], "Grad": [rs(rng, *s) for s in shapes],
           "Velocity": [rs(rng, *s) for s in shapes], "LearningRate": [one(0.1), one(0.05)]}
    return [Sample(ins, {"mu": 0.9, "regularization_method": ["", "l2_decay"],
                         "regularization_coeff": [0.0, 0.01]}, outputs={"ParamOut": 2, "VelocityOut": 2}),
            Sample(dict(ins, LearningRate=[one(0.1)]), {"mu": 0.9, "use_nesterov": True},
                   outputs={"ParamOut": 2, "VelocityOut": 2}, note="one lr, nesterov"),
            Sample(ins, {"mu": 0.9, "rescale_grad": 0.5}, outputs={"ParamOut": 2, "VelocityOut": 2},
                   note="rescale_grad (ignored by the CPU kernel)")]


register_optimizer("merged_momentum", _merged_momentum, _merged_momentum_samples,
     ("mu", "use_nesterov", "regularization_method", "regularization_coeff", "rescale_grad", "multi_precision"),
     "momentum over lists of params")


def _lars_momentum(c: Call):
    ps = c.xs("Param")
    n = len(ps)
    decay = [float(v) for v in (c.attr("lars_weight_decay", [0.0005]) or [])]
    if len(decay) not in (1, n):
        raise ExecutionError(f"lars_momentum: {len(decay)} lars_weight_decay values for {n} params")
    p_outs, v_outs = [], []
    for i in range(n):
        p, dt = param(c, "Param", i)
        t = dt.type
        g = like(c, "Grad", p, i)
        v = like(c, "Velocity", p, i)
        lr = first(c, "LearningRate", dt, i)
        wd = t(np.float32(decay[i] if len(decay) == n else decay[0]))
        mu = float_attr(c, "mu", 0.0, dt)
        coeff = float_attr(c, "lars_coeff", 0.001, dt)
        eps = float_attr(c, "epsilon", 0.0, dt)
        rg = float_attr(c, "rescale_grad", 1.0, dt) * g
        pn, gn = np.sqrt(np.sum(p * p)), np.sqrt(np.sum(rg * rg))
        local_lr = lr
        if wd > 0 and pn > 0 and gn > 0:
            local_lr = lr * coeff * pn / (gn + wd * pn + eps)
        vo = v * mu + local_lr * (rg + wd * p)
        p_outs.append(p - vo)
        v_outs.append(vo)
    return {"ParamOut": p_outs, "VelocityOut": v_outs}


def _lars_samples(rng):
    ins = {"Param": [rs(rng, 3, 4), rs(rng, 6)], "Grad": [rs(rng, 3, 4), rs(rng, 6)],
           "Velocity": [rs(rng, 3, 4), rs(rng, 6)], "LearningRate": [one(0.1), one(0.2)]}
    out = {"ParamOut": 2, "VelocityOut": 2}
    return [Sample(ins, {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": [0.0005, 0.001]}, outputs=out),
            Sample(ins, {"mu": 0.9, "lars_coeff": 0.01, "lars_weight_decay": [0.0, 0.01], "epsilon": 1e-6,
                         "rescale_grad": 0.5}, outputs=out, note="no decay on the first, rescale")]


register_optimizer("lars_momentum", _lars_momentum, _lars_samples,
     ("mu", "lars_coeff", "lars_weight_decay", "epsilon", "rescale_grad", "multi_precision"),
     "momentum with a layer-wise lr: lr * coeff * |p| / (|g| + decay |p| + eps)")


# --------------------------------------------------------------------------
# adam family
# --------------------------------------------------------------------------
_ADAM_OUT = {"ParamOut": 1, "Moment1Out": 1, "Moment2Out": 1, "Beta1PowOut": 1, "Beta2PowOut": 1}


def _adam_core(p, g, m1, m2, m2max, lr, b1p, b2p, beta1, beta2, eps, decayed_p=None):
    """Paddle's CPU adam (jit refer Adam/AdamW): lr and eps carry the bias corrections."""
    t = p.dtype.type
    one = t(1)
    lr_t = lr * (np.sqrt(one - b2p) / (one - b1p))
    eps_t = eps * np.sqrt(one - b2p)
    m1o = beta1 * m1 + (one - beta1) * g
    m2o = beta2 * m2 + (one - beta2) * g * g
    m2maxo = None
    den_m2 = m2o
    if m2max is not None:
        m2maxo = np.maximum(m2o, m2max)
        den_m2 = m2maxo
    base = p if decayed_p is None else decayed_p
    return base + (-lr_t) * (m1o / (np.sqrt(den_m2) + eps_t)), m1o, m2o, m2maxo


def _adam_like(c: Call, decoupled: bool):
    p, dt = param(c)
    t = dt.type
    amsgrad = bool(c.attr("amsgrad", False))
    b1p_in, b2p_in = arr(c, "Beta1Pow"), arr(c, "Beta2Pow")
    m2max = like(c, "Moment2Max", p) if amsgrad else None
    if amsgrad and not c.has("Moment2Max"):
        raise ExecutionError(f"{c.op_type}: amsgrad needs input 'Moment2Max'")
    keep = {"ParamOut": p, "Moment1Out": like(c, "Moment1", p), "Moment2Out": like(c, "Moment2", p)}
    global_pow = bool(c.attr("use_global_beta_pow", False))
    if skip_update(c):
        out = {k: v.copy() for k, v in keep.items()}
        if amsgrad:
            out["Moment2MaxOut"] = m2max.copy()
        out["Beta1PowOut"], out["Beta2PowOut"] = b1p_in.copy(), b2p_in.copy()
        return out
    beta1 = scalar(c, "Beta1Tensor", "beta1", 0.9, dt)
    beta2 = scalar(c, "Beta2Tensor", "beta2", 0.999, dt)
    eps = scalar(c, "EpsilonTensor", "epsilon", 1e-8, dt)
    b1p, b2p = first(c, "Beta1Pow", dt), first(c, "Beta2Pow", dt)
    g = like(c, "Grad", p)
    lr = first(c, "LearningRate", dt)
    decayed = None
    if decoupled and bool(c.attr("with_decay", False)):
        coeff, ratio = float_attr(c, "coeff", 0.01, dt), float_attr(c, "lr_ratio", 1.0, dt)
        decayed = p - lr * ratio * coeff * p
    p_out, m1o, m2o, m2maxo = _adam_core(p, g, keep["Moment1Out"], keep["Moment2Out"], m2max, lr, b1p, b2p,
                                         beta1, beta2, eps, decayed)
    out = {"ParamOut": p_out, "Moment1Out": m1o, "Moment2Out": m2o}
    if amsgrad:
        out["Moment2MaxOut"] = m2maxo
    if global_pow:
        out["Beta1PowOut"], out["Beta2PowOut"] = b1p_in.copy(), b2p_in.copy()
    else:
        out["Beta1PowOut"] = (beta1 * b1p_in.astype(dt)).astype(b1p_in.dtype)
        out["Beta2PowOut"] = (beta2 * b2p_in.astype(dt)).astype(b2p_in.dtype)
    return out


def _adam(c: Call):
    return _adam_like(c, decoupled=False)


def _adamw(c: Call):
    return _adam_like(c, decoupled=True)




def _adam_samples(rng):
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
    ams = dict(adam_ins(rng), Moment2Max=[pos(rng, 3, 4) * 0.1])
    return [Sample(adam_ins(rng), base, outputs=_ADAM_OUT),
            Sample(adam_ins(rng, (7,), 0.9, 0.999), {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6},
                   outputs=_ADAM_OUT, note="first step, other betas"),
            Sample(dict(adam_ins(rng), Beta1Tensor=[one(0.85)], Beta2Tensor=[one(0.995)],
                        EpsilonTensor=[one(1e-7)]), base, outputs=_ADAM_OUT, note="beta/epsilon tensors"),
            Sample(adam_ins(rng), dict(base, use_global_beta_pow=True), outputs=_ADAM_OUT,
                   note="use_global_beta_pow"),
            Sample(dict(adam_ins(rng), SkipUpdate=[np.array([True])]), base, outputs=_ADAM_OUT,
                   note="SkipUpdate"),
            Sample(dict(adam_ins(rng), SkipUpdate=[np.array([False])]), base, outputs=_ADAM_OUT,
                   note="SkipUpdate false"),
            Sample(ams, dict(base, amsgrad=True), outputs=dict(_ADAM_OUT, Moment2MaxOut=1), note="amsgrad"),
            Sample(adam_ins(rng), dict(base, lazy_mode=True, min_row_size_to_use_multithread=1000),
                   outputs=_ADAM_OUT, note="lazy_mode (dense grad: no effect)")]


_ADAM_ATTRS = ("beta1", "beta2", "epsilon", "lazy_mode", "min_row_size_to_use_multithread",
               "multi_precision", "use_global_beta_pow", "amsgrad")
register_optimizer("adam", _adam, _adam_samples, _ADAM_ATTRS,
     "Adam with bias corrections folded into lr and epsilon (Paddle's CPU arithmetic)")


def _adamw_samples(rng):
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "coeff": 0.01, "lr_ratio": 1.0, "with_decay": True}
    return [Sample(adam_ins(rng), base, outputs=_ADAM_OUT),
            Sample(adam_ins(rng), dict(base, coeff=0.1, lr_ratio=0.5), outputs=_ADAM_OUT, note="lr_ratio"),
            Sample(adam_ins(rng), dict(base, with_decay=False), outputs=_ADAM_OUT, note="no decay: adam"),
            Sample(dict(adam_ins(rng), Moment2Max=[pos(rng, 3, 4) * 0.1]), dict(base, amsgrad=True),
                   outputs=dict(_ADAM_OUT, Moment2MaxOut=1), note="amsgrad"),
            Sample(dict(adam_ins(rng), SkipUpdate=[np.array([True])]), base, outputs=_ADAM_OUT,
                   note="SkipUpdate")]


register_optimizer("adamw", _adamw, _adamw_samples, _ADAM_ATTRS + ("lr_ratio", "coeff", "with_decay"),
     "Adam with decoupled weight decay: Param - lr * lr_ratio * coeff * Param before the step")


# fused_adam: Paddle's CPU kernel is a loop of adam (or, with use_adamw, adamw with lr_ratio 1 and
# coeff = weight_decay) over the lists, sharing LearningRate and SkipUpdate.
_FUSED = (("Params", "Param", "ParamsOut", "ParamOut"), ("Grads", "Grad", None, None),
          ("Moments1", "Moment1", "Moments1Out", "Moment1Out"), ("Moments2", "Moment2", "Moments2Out", "Moment2Out"),
          ("Moments2Max", "Moment2Max", "Moments2MaxOut", "Moment2MaxOut"),
          ("Beta1Pows", "Beta1Pow", "Beta1PowsOut", "Beta1PowOut"),
          ("Beta2Pows", "Beta2Pow", "Beta2PowsOut", "Beta2PowOut"))


def _fused_adam(c: Call):
    params = c.xs("Params")
    for many, _, _, _ in _FUSED:
        if many != "Moments2Max" or c.attr("amsgrad", False):
            if len(c.xs(many)) != len(params):
                raise ExecutionError(f"fused_adam: {len(c.xs(many))} {many} for {len(params)} Params")
    use_adamw = bool(c.attr("use_adamw", False))
    attrs = {k: c.attr(k) for k in ("beta1", "beta2", "epsilon", "amsgrad", "use_global_beta_pow")
             if c.attr(k) is not None}
    if use_adamw:
        attrs.update(with_decay=True, coeff=c.attr("weight_decay", 0.0), lr_ratio=1.0)
    outs: dict[str, list] = {}
    for i in range(len(params)):
        ins = {one: [c.xs(many)[i]] for many, one, _, _ in _FUSED if len(c.xs(many)) > i}
        ins["LearningRate"] = c.xs("LearningRate")
        if c.has("SkipUpdate"):
            ins["SkipUpdate"] = c.xs("SkipUpdate")
        one_outs = {o: [o] for _, _, many_out, o in _FUSED if many_out and c.n_out(many_out) > i}
        res = _adam_like(Call("adamw" if use_adamw else "adam", ins, attrs, one_outs, c.rng, c.env), use_adamw)
        for _, _, many_out, o in _FUSED:
            if many_out and o in res and c.n_out(many_out) > i:
                outs.setdefault(many_out, []).append(res[o])
    return outs


def _fused_adam_samples(rng):
    def lists(n):
        per = [adam_ins(rng, shape) for shape in ((3, 4), (5,))[:n]]
        return {"Params": [d["Param"][0] for d in per], "Grads": [d["Grad"][0] for d in per],
                "LearningRate": per[0]["LearningRate"],
                "Moments1": [d["Moment1"][0] for d in per], "Moments2": [d["Moment2"][0] for d in per],
                "Beta1Pows": [d["Beta1Pow"][0] for d in per], "Beta2Pows": [d["Beta2Pow"][0] for d in per]}
    outs = {"ParamsOut": 2, "Moments1Out": 2, "Moments2Out": 2, "Beta1PowsOut": 2, "Beta2PowsOut": 2}
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "chunk_size": 16}
    return [Sample(lists(2), base, outputs=outs, note="adam over two params"),
            Sample(lists(2), dict(base, use_adamw=True, weight_decay=0.05), outputs=outs,
                   note="adamw, weight_decay")]


register_optimizer("fused_adam", _fused_adam, _fused_adam_samples,
                   ("beta1", "beta2", "epsilon", "weight_decay", "use_adamw", "use_global_beta_pow", "amsgrad"),
                   "adam / adamw over lists of params (Paddle's CPU kernel loops the one-param kernels)")


def _merged_adam(c: Call):
    n = len(c.xs("Param"))
    for slot in ("Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow"):
        if len(c.xs(slot)) != n:
            raise ExecutionError(f"merged_adam: {len(c.xs(slot))} '{slot}' for {n} 'Param'")
    amsgrad = bool(c.attr("amsgrad", False))
    if amsgrad and len(c.xs("Moment2Max")) != n:
        raise ExecutionError(f"merged_adam: amsgrad needs {n} 'Moment2Max'")
    global_pow = bool(c.attr("use_global_beta_pow", False))
    out: dict[str, list] = {k: [] for k in ("ParamOut", "Moment1Out", "Moment2Out", "Moment2MaxOut",
                                            "Beta1PowOut", "Beta2PowOut")}
    for i in range(n):
        p, dt = param(c, "Param", i)
        t = dt.type
        beta1 = float_attr(c, "beta1", 0.9, dt)
        beta2 = float_attr(c, "beta2", 0.999, dt)
        eps = float_attr(c, "epsilon", 1e-8, dt)
        b1p, b2p = first(c, "Beta1Pow", dt, i), first(c, "Beta2Pow", dt, i)
        m1, m2 = like(c, "Moment1", p, i), like(c, "Moment2", p, i)
        g, lr = like(c, "Grad", p, i), first(c, "LearningRate", dt, i)
        # phi::funcs::AdamFunctor<T, CPUAdam>: Eigen arithmetic, lr scaled in place
        one = t(1)
        lr = lr * (np.sqrt(one - b2p) / (one - b1p))
        m1o = beta1 * m1 + (one - beta1) * g
        m2o = beta2 * m2 + (one - beta2) * g * g
        den = m2o
        if amsgrad:
            den = np.maximum(m2o, like(c, "Moment2Max", p, i))
            out["Moment2MaxOut"].append(den)
        out["ParamOut"].append(p - lr * (m1o / (np.sqrt(den) + eps * np.sqrt(one - b2p))))
        out["Moment1Out"].append(m1o)
        out["Moment2Out"].append(m2o)
        for k, slot, beta in (("Beta1PowOut", "Beta1Pow", beta1), ("Beta2PowOut", "Beta2Pow", beta2)):
            bp = arr(c, slot, i)
            out[k].append(bp.copy() if global_pow else (beta * bp.astype(dt)).astype(bp.dtype))
    if not amsgrad:
        del out["Moment2MaxOut"]
    return out


def _merged_adam_samples(rng):
    a, b = adam_ins(rng), adam_ins(rng, (6,), 0.9, 0.999)
    ins = {k: a[k] + b[k] for k in a}
    outs = {k: 2 for k in _ADAM_OUT}
    return [Sample(ins, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}, outputs=outs),
            Sample(ins, {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "use_global_beta_pow": True},
                   outputs=outs, note="use_global_beta_pow")]


register_optimizer("merged_adam", _merged_adam, _merged_adam_samples,
     ("beta1", "beta2", "epsilon", "multi_precision", "use_global_beta_pow", "amsgrad"),
     "adam over lists of params")


def _adamax(c: Call):
    p, dt = param(c)
    t = dt.type
    beta1 = float_attr(c, "beta1", 0.9, dt)
    beta2 = float_attr(c, "beta2", 0.999, dt)
    eps = float_attr(c, "epsilon", 1e-8, dt)
    g = like(c, "Grad", p)
    m_out = beta1 * like(c, "Moment", p) + (t(1) - beta1) * g
    inf_out = np.maximum(np.abs(g), beta2 * like(c, "InfNorm", p) + eps)
    lr_t = first(c, "LearningRate", dt) / (t(1) - first(c, "Beta1Pow", dt))
    return {"ParamOut": p - lr_t * (m_out / inf_out), "MomentOut": m_out, "InfNormOut": inf_out}


def _adamax_samples(rng):
    ins = {"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "LearningRate": [one(0.01)],
           "Moment": [0.1 * rs(rng, 3, 4)], "InfNorm": [pos(rng, 3, 4)], "Beta1Pow": [one(0.9 ** 2)]}
    return [Sample(ins, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
                   outputs={"ParamOut": 1, "MomentOut": 1, "InfNormOut": 1})]


register_optimizer("adamax", _adamax, _adamax_samples, ("beta1", "beta2", "epsilon", "multi_precision"),
     "Adamax: infinity-norm second moment; Beta1Pow is not updated (the program scales it)")


# --------------------------------------------------------------------------
# adagrad family, adadelta, rmsprop, ftrl
# --------------------------------------------------------------------------
def _adagrad(c: Call):
    p, dt = param(c)
    g = like(c, "Grad", p)
    m_out = like(c, "Moment", p) + g * g
    p_out = p - first(c, "LearningRate", dt) * g / (np.sqrt(m_out) + float_attr(c, "epsilon", 1e-6, dt))
    return {"ParamOut": p_out, "MomentOut": m_out}


def _adagrad_samples(rng):
    return [Sample({"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "Moment": [pos(rng, 3, 4)],
                    "LearningRate": [one(0.1)]}, {"epsilon": 1e-6}, outputs={"ParamOut": 1, "MomentOut": 1})]


register_optimizer("adagrad", _adagrad, _adagrad_samples, ("epsilon", "multi_precision"),
     "MomentOut = Moment + g^2; ParamOut = Param - lr g / (sqrt(MomentOut) + eps)")


def _adadelta(c: Call):
    p, dt = param(c)
    t = dt.type
    rho, eps = float_attr(c, "rho", 0.95, dt), float_attr(c, "epsilon", 1e-6, dt)
    g = like(c, "Grad", p)
    asg = like(c, "AvgSquaredGrad", p)
    asu = like(c, "AvgSquaredUpdate", p)
    asg_out = rho * asg + (t(1) - rho) * (g * g)
    update = -(np.sqrt(asu + eps) / np.sqrt(asg_out + eps) * g)
    p_out = p + first(c, "LearningRate", dt) * update
    return {"ParamOut": p_out, "AvgSquaredGradOut": asg_out,
            "AvgSquaredUpdateOut": rho * asu + (t(1) - rho) * (update * update)}


def _adadelta_samples(rng):
    return [Sample({"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "AvgSquaredGrad": [pos(rng, 3, 4)],
                    "AvgSquaredUpdate": [pos(rng, 3, 4)], "LearningRate": [one(1.0)]},
                   {"rho": 0.95, "epsilon": 1e-6},
                   outputs={"ParamOut": 1, "AvgSquaredGradOut": 1, "AvgSquaredUpdateOut": 1})]


register_optimizer("adadelta", _adadelta, _adadelta_samples, ("rho", "epsilon", "multi_precision"),
     "Adadelta: update = -sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) g, scaled by lr")


def _rmsprop(c: Call):
    p, dt = param(c)
    t = dt.type
    eps = float_attr(c, "epsilon", 1e-10, dt)
    rho = float_attr(c, "decay", 0.9, dt)
    mom = float_attr(c, "momentum", 0.0, dt)
    g = like(c, "Grad", p)
    lr = first(c, "LearningRate", dt)
    ms_out = rho * like(c, "MeanSquare", p) + (t(1) - rho) * g * g
    out = {"MeanSquareOut": ms_out}
    if c.attr("centered", False):
        if not c.has("MeanGrad"):
            raise ExecutionError("rmsprop: centered needs input 'MeanGrad'")
        mg_out = rho * like(c, "MeanGrad", p) + (t(1) - rho) * g
        mom_out = mom * like(c, "Moment", p) + lr * g / np.sqrt(ms_out - mg_out * mg_out + eps)
        out["MeanGradOut"] = mg_out
    else:
        mom_out = mom * like(c, "Moment", p) + lr * g / np.sqrt(ms_out + eps)
    out.update(ParamOut=p - mom_out, MomentOut=mom_out)
    return out


def _rmsprop_samples(rng):
    ins = lambda: {"Param": [rs(rng, 3, 4)], "MeanSquare": [pos(rng, 3, 4)], "Grad": [rs(rng, 3, 4)],  # noqa: E731
                   "Moment": [0.1 * rs(rng, 3, 4)], "LearningRate": [one(0.01)]}
    outs = {"ParamOut": 1, "MomentOut": 1, "MeanSquareOut": 1, "MeanGradOut": 1}
    return [Sample(ins(), {"epsilon": 1e-10, "decay": 0.9, "momentum": 0.0}, outputs=outs),
            Sample(ins(), {"epsilon": 1e-6, "decay": 0.95, "momentum": 0.9}, outputs=outs, note="momentum"),
            Sample(dict(ins(), MeanGrad=[0.1 * rs(rng, 3, 4)]),
                   {"epsilon": 1e-6, "decay": 0.9, "momentum": 0.5, "centered": True},
                   outputs=outs, note="centered")]


register_optimizer("rmsprop", _rmsprop, _rmsprop_samples,
                   ("epsilon", "decay", "momentum", "centered", "multi_precision"),
                   "RMSProp (optionally centered), with momentum")
