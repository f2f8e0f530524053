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

from ..errors import ExecutionError
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _arr(c: Call, slot: str, i: int = 0) -> np.ndarray:
    xs = c.xs(slot)
    if len(xs) <= i or xs[i] is None:
        raise ExecutionError(f"{c.op_type}: input '{slot}' has no value")
    return np.asarray(xs[i])


def _param(c: Call, slot: str = "Param", i: int = 0) -> tuple[np.ndarray, np.dtype]:
    p = _arr(c, slot, i)
    if p.dtype.kind != "f":
        raise ExecutionError(f"{c.op_type}: '{slot}' is {p.dtype}; Paddle's CPU kernel takes float or double")
    return p, p.dtype


def _like(c: Call, slot: str, p: np.ndarray, i: int = 0) -> np.ndarray:
    """Input `slot` in p's dtype, checked to have p's number of elements."""
    a = _arr(c, slot, i)
    if a.size != p.size:
        raise ExecutionError(f"{c.op_type}: '{slot}' has shape {list(a.shape)}, "
                             f"Param has {list(p.shape)}")
    return a.astype(p.dtype, copy=False).reshape(p.shape)


def _first(c: Call, slot: str, dt: np.dtype, i: int = 0):
    """The first element of a (scalar) tensor input, as a dt scalar."""
    a = _arr(c, slot, i)
    if a.size < 1:
        raise ExecutionError(f"{c.op_type}: '{slot}' is empty")
    return dt.type(a.reshape(-1)[0])


def _f(c: Call, name: str, default: float, dt: np.dtype):
    """A float attr (stored as float32 by Paddle) cast to dt."""
    return dt.type(np.float32(c.attr(name, default)))


def _scalar(c: Call, slot: str, attr: str, default: float, dt: np.dtype):
    """A Scalar argument: the tensor input if given, else the float attr."""
    return _first(c, slot, dt) if c.has(slot) else _f(c, attr, default, dt)


def _skip(c: Call) -> bool:
    if not c.has("SkipUpdate"):
        return False
    s = np.asarray(c.x("SkipUpdate"))
    if s.size != 1:
        raise ExecutionError(f"{c.op_type}: SkipUpdate must have one element, it has {s.size}")
    return bool(s.reshape(-1)[0])


def _opt(name, kernel, samples, attrs=(), doc=""):
    register(paddle_opdef(name, kernel, samples=samples, attrs_handled=tuple(attrs), doc=doc))


def _rs(rng, *shape):
    return rng.standard_normal(shape)


def _pos(rng, *shape):
    return rng.uniform(0.1, 1.0, shape)


def _one(v):
    return np.array([v], dtype=np.float64)


# --------------------------------------------------------------------------
# sgd, momentum, lars_momentum, merged_momentum
# --------------------------------------------------------------------------
def _sgd(c: Call):
    p, dt = _param(c)
    return {"ParamOut": p - _first(c, "LearningRate", dt) * _like(c, "Grad", p)}


def _sgd_samples(rng):
    return [Sample({"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "LearningRate": [_one(0.1)]},
                   outputs={"ParamOut": 1}),
            Sample({"Param": [_rs(rng, 5)], "Grad": [_rs(rng, 5)], "LearningRate": [_one(0.01)]},
                   outputs={"ParamOut": 1}, note="1-D")]


_opt("sgd", _sgd, _sgd_samples, ("multi_precision",), "ParamOut = Param - lr * Grad")


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
    p, dt = _param(c)
    p_out, v_out = _momentum_update(
        p, _like(c, "Grad", p), _like(c, "Velocity", p), _first(c, "LearningRate", dt),
        _f(c, "mu", 0.9, dt), bool(c.attr("use_nesterov", False)),
        _reg(c, c.attr("regularization_method", "")), _f(c, "regularization_coeff", 0.0, dt))
    return {"ParamOut": p_out, "VelocityOut": v_out}


_MOM_OUT = {"ParamOut": 1, "VelocityOut": 1}


def _momentum_samples(rng):
    ins = lambda: {"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "Velocity": [_rs(rng, 3, 4)],  # noqa: E731
                   "LearningRate": [_one(0.1)]}
    return [Sample(ins(), {"mu": 0.9}, outputs=_MOM_OUT),
            Sample(ins(), {"mu": 0.8, "use_nesterov": True}, outputs=_MOM_OUT, note="nesterov"),
            Sample(ins(), {"mu": 0.9, "regularization_method": "l2_decay", "regularization_coeff": 0.01},
                   outputs=_MOM_OUT, note="l2_decay"),
            Sample(ins(), {"mu": 0.9, "rescale_grad": 0.5}, outputs=_MOM_OUT,
                   note="rescale_grad (ignored by the CPU kernel)")]


_opt("momentum", _momentum, _momentum_samples,
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
        p, dt = _param(c, "Param", i)
        lr = _first(c, "LearningRate", dt, i if len(lrs) == n else 0)
        l2 = _reg(c, methods[i] if methods else "")
        coeff = dt.type(np.float32(coeffs[i])) if coeffs else dt.type(0)
        po, vo = _momentum_update(p, _like(c, "Grad", p, i), _like(c, "Velocity", p, i), lr,
                                  _f(c, "mu", 0.9, dt), nesterov, l2, coeff)
        p_outs.append(po)
        v_outs.append(vo)
    return {"ParamOut": p_outs, "VelocityOut": v_outs}


def _merged_momentum_samples(rng):
    shapes = [(3, 4), (5,)]
    ins = {"Param": [_rs(rng, *s) for s in shapes], "Grad": [_rs(rng, *s) for s in shapes],
           "Velocity": [_rs(rng, *s) for s in shapes], "LearningRate": [_one(0.1), _one(0.05)]}
    return [Sample(ins, {"mu": 0.9, "regularization_method": ["", "l2_decay"],
                         "regularization_coeff": [0.0, 0.01]}, outputs={"ParamOut": 2, "VelocityOut": 2}),
            Sample(dict(ins, LearningRate=[_one(0.1)]), {"mu": 0.9, "use_nesterov": True},
                   outputs={"ParamOut": 2, "VelocityOut": 2}, note="one lr, nesterov")]


_opt("merged_momentum", _merged_momentum, _merged_momentum_samples,
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
        p, dt = _param(c, "Param", i)
        t = dt.type
        g = _like(c, "Grad", p, i)
        v = _like(c, "Velocity", p, i)
        lr = _first(c, "LearningRate", dt, i)
        wd = t(np.float32(decay[i] if len(decay) == n else decay[0]))
        mu, coeff, eps = _f(c, "mu", 0.0, dt), _f(c, "lars_coeff", 0.001, dt), _f(c, "epsilon", 0.0, dt)
        rg = _f(c, "rescale_grad", 1.0, dt) * g
        pn, gn = np.sqrt(np.sum(p * p)), np.sqrt(np.sum(rg * rg))
        local_lr = lr
        if wd > 0 and pn > 0 and gn > 0:
            local_lr = lr * coeff * pn / (gn + wd * pn + eps)
        vo = v * mu + local_lr * (rg + wd * p)
        p_outs.append(p - vo)
        v_outs.append(vo)
    return {"ParamOut": p_outs, "VelocityOut": v_outs}


def _lars_samples(rng):
    ins = {"Param": [_rs(rng, 3, 4), _rs(rng, 6)], "Grad": [_rs(rng, 3, 4), _rs(rng, 6)],
           "Velocity": [_rs(rng, 3, 4), _rs(rng, 6)], "LearningRate": [_one(0.1), _one(0.2)]}
    out = {"ParamOut": 2, "VelocityOut": 2}
    return [Sample(ins, {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": [0.0005, 0.001]}, outputs=out),
            Sample(ins, {"mu": 0.9, "lars_coeff": 0.01, "lars_weight_decay": [0.0, 0.01], "epsilon": 1e-6,
                         "rescale_grad": 0.5}, outputs=out, note="no decay on the first, rescale")]


_opt("lars_momentum", _lars_momentum, _lars_samples,
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
    p, dt = _param(c)
    t = dt.type
    amsgrad = bool(c.attr("amsgrad", False))
    b1p_in, b2p_in = _arr(c, "Beta1Pow"), _arr(c, "Beta2Pow")
    m2max = _like(c, "Moment2Max", p) if amsgrad else None
    if amsgrad and not c.has("Moment2Max"):
        raise ExecutionError(f"{c.op_type}: amsgrad needs input 'Moment2Max'")
    keep = {"ParamOut": p, "Moment1Out": _like(c, "Moment1", p), "Moment2Out": _like(c, "Moment2", p)}
    global_pow = bool(c.attr("use_global_beta_pow", False))
    if _skip(c):
        out = {k: v.copy() for k, v in keep.items()}
        if amsgrad:
            out["Moment2MaxOut"] = m2max.copy()
        out["Beta1PowOut"], out["Beta2PowOut"] = b1p_in.copy(), b2p_in.copy()
        return out
    beta1 = _scalar(c, "Beta1Tensor", "beta1", 0.9, dt)
    beta2 = _scalar(c, "Beta2Tensor", "beta2", 0.999, dt)
    eps = _scalar(c, "EpsilonTensor", "epsilon", 1e-8, dt)
    b1p, b2p = _first(c, "Beta1Pow", dt), _first(c, "Beta2Pow", dt)
    g = _like(c, "Grad", p)
    lr = _first(c, "LearningRate", dt)
    decayed = None
    if decoupled and bool(c.attr("with_decay", False)):
        coeff, ratio = _f(c, "coeff", 0.01, dt), _f(c, "lr_ratio", 1.0, dt)
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


def _adam_ins(rng, shape=(3, 4), b1p=0.9 ** 3, b2p=0.999 ** 3):
    return {"Param": [_rs(rng, *shape)], "Grad": [_rs(rng, *shape)], "LearningRate": [_one(0.01)],
            "Moment1": [0.1 * _rs(rng, *shape)], "Moment2": [_pos(rng, *shape) * 0.1],
            "Beta1Pow": [_one(b1p)], "Beta2Pow": [_one(b2p)]}


def _adam_samples(rng):
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
    ams = dict(_adam_ins(rng), Moment2Max=[_pos(rng, 3, 4) * 0.1])
    return [Sample(_adam_ins(rng), base, outputs=_ADAM_OUT),
            Sample(_adam_ins(rng, (7,), 0.9, 0.999), {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6},
                   outputs=_ADAM_OUT, note="first step, other betas"),
            Sample(dict(_adam_ins(rng), Beta1Tensor=[_one(0.85)], Beta2Tensor=[_one(0.995)],
                        EpsilonTensor=[_one(1e-7)]), base, outputs=_ADAM_OUT, note="beta/epsilon tensors"),
            Sample(_adam_ins(rng), dict(base, use_global_beta_pow=True), outputs=_ADAM_OUT,
                   note="use_global_beta_pow"),
            Sample(dict(_adam_ins(rng), SkipUpdate=[np.array([True])]), base, outputs=_ADAM_OUT,
                   note="SkipUpdate"),
            Sample(dict(_adam_ins(rng), SkipUpdate=[np.array([False])]), base, outputs=_ADAM_OUT,
                   note="SkipUpdate false"),
            Sample(ams, dict(base, amsgrad=True), outputs=dict(_ADAM_OUT, Moment2MaxOut=1), note="amsgrad"),
            Sample(_adam_ins(rng), dict(base, lazy_mode=True, min_row_size_to_use_multithread=1000),
                   outputs=_ADAM_OUT, note="lazy_mode (dense grad: no effect)")]


_ADAM_ATTRS = ("beta1", "beta2", "epsilon", "lazy_mode", "min_row_size_to_use_multithread",
               "multi_precision", "use_global_beta_pow", "amsgrad")
_opt("adam", _adam, _adam_samples, _ADAM_ATTRS,
     "Adam with bias corrections folded into lr and epsilon (Paddle's CPU arithmetic)")


def _adamw_samples(rng):
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "coeff": 0.01, "lr_ratio": 1.0, "with_decay": True}
    return [Sample(_adam_ins(rng), base, outputs=_ADAM_OUT),
            Sample(_adam_ins(rng), dict(base, coeff=0.1, lr_ratio=0.5), outputs=_ADAM_OUT, note="lr_ratio"),
            Sample(_adam_ins(rng), dict(base, with_decay=False), outputs=_ADAM_OUT, note="no decay: adam"),
            Sample(dict(_adam_ins(rng), Moment2Max=[_pos(rng, 3, 4) * 0.1]), dict(base, amsgrad=True),
                   outputs=dict(_ADAM_OUT, Moment2MaxOut=1), note="amsgrad"),
            Sample(dict(_adam_ins(rng), SkipUpdate=[np.array([True])]), base, outputs=_ADAM_OUT,
                   note="SkipUpdate")]


_opt("adamw", _adamw, _adamw_samples, _ADAM_ATTRS + ("lr_ratio", "coeff", "with_decay"),
     "Adam with decoupled weight decay: Param - lr * lr_ratio * coeff * Param before the step")


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
        p, dt = _param(c, "Param", i)
        t = dt.type
        beta1, beta2, eps = _f(c, "beta1", 0.9, dt), _f(c, "beta2", 0.999, dt), _f(c, "epsilon", 1e-8, dt)
        b1p, b2p = _first(c, "Beta1Pow", dt, i), _first(c, "Beta2Pow", dt, i)
        m1, m2 = _like(c, "Moment1", p, i), _like(c, "Moment2", p, i)
        g, lr = _like(c, "Grad", p, i), _first(c, "LearningRate", dt, i)
        # phi::funcs::AdamFunctor<T, CPUAdam>: Eigen arithmetic, lr scaled in place
        one = t(1)
        lr = lr * (np.sqrt(one - b2p) / (one - b1p))
        m1o = beta1 * m1 + (one - beta1) * g
        m2o = beta2 * m2 + (one - beta2) * g * g
        den = m2o
        if amsgrad:
            den = np.maximum(m2o, _like(c, "Moment2Max", p, i))
            out["Moment2MaxOut"].append(den)
        out["ParamOut"].append(p - lr * (m1o / (np.sqrt(den) + eps * np.sqrt(one - b2p))))
        out["Moment1Out"].append(m1o)
        out["Moment2Out"].append(m2o)
        for k, slot, beta in (("Beta1PowOut", "Beta1Pow", beta1), ("Beta2PowOut", "Beta2Pow", beta2)):
            bp = _arr(c, slot, i)
            out[k].append(bp.copy() if global_pow else (beta * bp.astype(dt)).astype(bp.dtype))
    if not amsgrad:
        del out["Moment2MaxOut"]
    return out


def _merged_adam_samples(rng):
    a, b = _adam_ins(rng), _adam_ins(rng, (6,), 0.9, 0.999)
    ins = {k: a[k] + b[k] for k in a}
    outs = {k: 2 for k in _ADAM_OUT}
    return [Sample(ins, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}, outputs=outs),
            Sample(ins, {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "use_global_beta_pow": True},
                   outputs=outs, note="use_global_beta_pow")]


_opt("merged_adam", _merged_adam, _merged_adam_samples,
     ("beta1", "beta2", "epsilon", "multi_precision", "use_global_beta_pow", "amsgrad"),
     "adam over lists of params")


def _adamax(c: Call):
    p, dt = _param(c)
    t = dt.type
    beta1, beta2, eps = _f(c, "beta1", 0.9, dt), _f(c, "beta2", 0.999, dt), _f(c, "epsilon", 1e-8, dt)
    g = _like(c, "Grad", p)
    m_out = beta1 * _like(c, "Moment", p) + (t(1) - beta1) * g
    inf_out = np.maximum(np.abs(g), beta2 * _like(c, "InfNorm", p) + eps)
    lr_t = _first(c, "LearningRate", dt) / (t(1) - _first(c, "Beta1Pow", dt))
    return {"ParamOut": p - lr_t * (m_out / inf_out), "MomentOut": m_out, "InfNormOut": inf_out}


def _adamax_samples(rng):
    ins = {"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "LearningRate": [_one(0.01)],
           "Moment": [0.1 * _rs(rng, 3, 4)], "InfNorm": [_pos(rng, 3, 4)], "Beta1Pow": [_one(0.9 ** 2)]}
    return [Sample(ins, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
                   outputs={"ParamOut": 1, "MomentOut": 1, "InfNormOut": 1})]


_opt("adamax", _adamax, _adamax_samples, ("beta1", "beta2", "epsilon", "multi_precision"),
     "Adamax: infinity-norm second moment; Beta1Pow is not updated (the program scales it)")


def _nadam(c: Call):
    p, dt = _param(c, "param")
    t = dt.type
    beta1, beta2, eps = _f(c, "beta1", 0.9, dt), _f(c, "beta2", 0.999, dt), _f(c, "epsilon", 1e-8, dt)
    md = _f(c, "momentum_decay", 0.004, dt)
    g = _like(c, "grad", p)
    lr = _first(c, "learning_rate", dt)
    mdp_out = _arr(c, "momentum_decay_pow").astype(dt) * t(0.96)
    b2p_out = _arr(c, "beta2_pow").astype(dt) * beta2
    mu_t = beta1 * (t(1) - t(0.5) * mdp_out ** md)
    mu_t1 = beta1 * (t(1) - t(0.5) * mdp_out ** md * t(0.96) ** md)
    mu_prod_out = _arr(c, "mu_product").astype(dt) * mu_t
    mu_prod_t1 = mu_prod_out * mu_t1
    m1o = beta1 * _like(c, "moment1", p) + (t(1) - beta1) * g
    m2o = beta2 * _like(c, "moment2", p) + (t(1) - beta2) * g * g
    m1_hat = mu_t1 * m1o / (t(1) - mu_prod_t1) + (t(1) - mu_t) * g / (t(1) - mu_prod_out)
    m2_hat = m2o / (t(1) - b2p_out)
    return {"param_out": p - lr * m1_hat / (np.sqrt(m2_hat) + eps), "momentum_decay_pow_out": mdp_out,
            "beta2_pow_out": b2p_out, "mu_product_out": mu_prod_out, "moment1_out": m1o, "moment2_out": m2o}


def _nadam_samples(rng):
    # One-element params: Paddle's CPU kernel reads its 1-element pow tensors
    # unbroadcast, past their end, for any larger param (docs/deviations.md).
    def ins(step):
        return {"param": [_rs(rng, 1)], "grad": [_rs(rng, 1)], "learning_rate": [_one(0.01)],
                "momentum_decay_pow": [_one(0.96 ** step)], "beta2_pow": [_one(0.999 ** step)],
                "mu_product": [_one(0.9 ** step)], "moment1": [0.1 * _rs(rng, 1)], "moment2": [0.1 * _pos(rng, 1)]}
    outs = {s: 1 for s in ("param_out", "momentum_decay_pow_out", "beta2_pow_out", "mu_product_out",
                           "moment1_out", "moment2_out")}
    return [Sample(ins(2), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "momentum_decay": 0.004}, outputs=outs),
            Sample(ins(0), {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "momentum_decay": 0.01}, outputs=outs,
                   note="first step")]


_opt("nadam", _nadam, _nadam_samples, ("beta1", "beta2", "epsilon", "momentum_decay", "multi_precision"),
     "NAdam (Dozat): Nesterov momentum in Adam, with the momentum-decay schedule")


def _radam(c: Call):
    p, dt = _param(c, "param")
    t = dt.type
    beta1, beta2, eps = _f(c, "beta1", 0.9, dt), _f(c, "beta2", 0.999, dt), _f(c, "epsilon", 1e-8, dt)
    g = _like(c, "grad", p)
    lr = _first(c, "learning_rate", dt)
    rho_inf = t(2) / (t(1) - beta2) - t(1)
    b1p_out = _arr(c, "beta1_pow").astype(dt) * beta1
    b2p_out = _arr(c, "beta2_pow").astype(dt) * beta2
    rho_out = (_arr(c, "rho").astype(dt) * (beta2 - b2p_out) + b2p_out) / (t(1) - b2p_out)
    m1o = beta1 * _like(c, "moment1", p) + (t(1) - beta1) * g
    m2o = beta2 * _like(c, "moment2", p) + (t(1) - beta2) * g * g
    b1 = t(b1p_out.reshape(-1)[0])
    b2 = t(b2p_out.reshape(-1)[0])
    m1_hat = m1o / (t(1) - b1)
    rho_t = rho_inf - t(2) * t(rho_out.reshape(-1)[0])
    if rho_t > t(5):
        l_t = np.sqrt(t(1) - b2) / (np.sqrt(m2o) + eps)
        r_t = np.sqrt(((rho_t - t(4)) * (rho_t - t(2)) * rho_inf) / ((rho_inf - t(4)) * (rho_inf - t(2)) * rho_t))
        p_out = p - lr * m1_hat * r_t * l_t
    else:
        p_out = p - lr * m1_hat
    return {"param_out": p_out, "beta1_pow_out": b1p_out, "beta2_pow_out": b2p_out, "rho_out": rho_out,
            "moment1_out": m1o, "moment2_out": m2o}


def _radam_samples(rng):
    # One-element params, as for nadam (docs/deviations.md).
    def ins(step, rho):
        return {"param": [_rs(rng, 1)], "grad": [_rs(rng, 1)], "learning_rate": [_one(0.01)],
                "beta1_pow": [_one(0.9 ** step)], "beta2_pow": [_one(0.999 ** step)], "rho": [_one(rho)],
                "moment1": [0.1 * _rs(rng, 1)], "moment2": [0.1 * _pos(rng, 1)]}
    outs = {s: 1 for s in ("param_out", "beta1_pow_out", "beta2_pow_out", "rho_out", "moment1_out", "moment2_out")}
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
    return [Sample(ins(1, 1000.0), attrs, outputs=outs, note="rho_t <= 5: no rectification"),
            Sample(ins(20, 0.0), attrs, outputs=outs, note="rectified step")]


_opt("radam", _radam, _radam_samples, ("beta1", "beta2", "epsilon", "multi_precision"),
     "RAdam: Adam with variance rectification once rho_t > 5")


# --------------------------------------------------------------------------
# adagrad family, adadelta, rmsprop, ftrl
# --------------------------------------------------------------------------
def _adagrad(c: Call):
    p, dt = _param(c)
    g = _like(c, "Grad", p)
    m_out = _like(c, "Moment", p) + g * g
    p_out = p - _first(c, "LearningRate", dt) * g / (np.sqrt(m_out) + _f(c, "epsilon", 1e-6, dt))
    return {"ParamOut": p_out, "MomentOut": m_out}


def _adagrad_samples(rng):
    return [Sample({"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "Moment": [_pos(rng, 3, 4)],
                    "LearningRate": [_one(0.1)]}, {"epsilon": 1e-6}, outputs={"ParamOut": 1, "MomentOut": 1})]


_opt("adagrad", _adagrad, _adagrad_samples, ("epsilon", "multi_precision"),
     "MomentOut = Moment + g^2; ParamOut = Param - lr g / (sqrt(MomentOut) + eps)")


def _decayed_adagrad(c: Call):
    p, dt = _param(c)
    t = dt.type
    decay, eps = _f(c, "decay", 0.95, dt), _f(c, "epsilon", 1e-6, dt)
    g = _like(c, "Grad", p)
    m_out = decay * _like(c, "Moment", p) + (t(1) - decay) * g * g
    return {"ParamOut": p - _first(c, "LearningRate", dt) * g / (np.sqrt(m_out) + eps), "MomentOut": m_out}


def _decayed_adagrad_samples(rng):
    return [Sample({"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "Moment": [_pos(rng, 3, 4)],
                    "LearningRate": [_one(0.1)]}, {"decay": 0.95, "epsilon": 1e-6},
                   outputs={"ParamOut": 1, "MomentOut": 1})]


_opt("decayed_adagrad", _decayed_adagrad, _decayed_adagrad_samples, ("decay", "epsilon"),
     "MomentOut = decay Moment + (1 - decay) g^2; ParamOut = Param - lr g / (sqrt(MomentOut) + eps)")


def _adadelta(c: Call):
    p, dt = _param(c)
    t = dt.type
    rho, eps = _f(c, "rho", 0.95, dt), _f(c, "epsilon", 1e-6, dt)
    g = _like(c, "Grad", p)
    asg = _like(c, "AvgSquaredGrad", p)
    asu = _like(c, "AvgSquaredUpdate", p)
    asg_out = rho * asg + (t(1) - rho) * (g * g)
    update = -(np.sqrt(asu + eps) / np.sqrt(asg_out + eps) * g)
    p_out = p + _first(c, "LearningRate", dt) * update
    return {"ParamOut": p_out, "AvgSquaredGradOut": asg_out,
            "AvgSquaredUpdateOut": rho * asu + (t(1) - rho) * (update * update)}


def _adadelta_samples(rng):
    return [Sample({"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "AvgSquaredGrad": [_pos(rng, 3, 4)],
                    "AvgSquaredUpdate": [_pos(rng, 3, 4)], "LearningRate": [_one(1.0)]},
                   {"rho": 0.95, "epsilon": 1e-6},
                   outputs={"ParamOut": 1, "AvgSquaredGradOut": 1, "AvgSquaredUpdateOut": 1})]


_opt("adadelta", _adadelta, _adadelta_samples, ("rho", "epsilon", "multi_precision"),
     "Adadelta: update = -sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) g, scaled by lr")


def _rmsprop(c: Call):
    p, dt = _param(c)
    t = dt.type
    eps, rho, mom = _f(c, "epsilon", 1e-10, dt), _f(c, "decay", 0.9, dt), _f(c, "momentum", 0.0, dt)
    g = _like(c, "Grad", p)
    lr = _first(c, "LearningRate", dt)
    ms_out = rho * _like(c, "MeanSquare", p) + (t(1) - rho) * g * g
    out = {"MeanSquareOut": ms_out}
    if c.attr("centered", False):
        if not c.has("MeanGrad"):
            raise ExecutionError("rmsprop: centered needs input 'MeanGrad'")
        mg_out = rho * _like(c, "MeanGrad", p) + (t(1) - rho) * g
        mom_out = mom * _like(c, "Moment", p) + lr * g / np.sqrt(ms_out - mg_out * mg_out + eps)
        out["MeanGradOut"] = mg_out
    else:
        mom_out = mom * _like(c, "Moment", p) + lr * g / np.sqrt(ms_out + eps)
    out.update(ParamOut=p - mom_out, MomentOut=mom_out)
    return out


def _rmsprop_samples(rng):
    ins = lambda: {"Param": [_rs(rng, 3, 4)], "MeanSquare": [_pos(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)],  # noqa: E731
                   "Moment": [0.1 * _rs(rng, 3, 4)], "LearningRate": [_one(0.01)]}
    outs = {"ParamOut": 1, "MomentOut": 1, "MeanSquareOut": 1, "MeanGradOut": 1}
    return [Sample(ins(), {"epsilon": 1e-10, "decay": 0.9, "momentum": 0.0}, outputs=outs),
            Sample(ins(), {"epsilon": 1e-6, "decay": 0.95, "momentum": 0.9}, outputs=outs, note="momentum"),
            Sample(dict(ins(), MeanGrad=[0.1 * _rs(rng, 3, 4)]),
                   {"epsilon": 1e-6, "decay": 0.9, "momentum": 0.5, "centered": True},
                   outputs=outs, note="centered")]


_opt("rmsprop", _rmsprop, _rmsprop_samples, ("epsilon", "decay", "momentum", "centered", "multi_precision"),
     "RMSProp (optionally centered), with momentum")


def _ftrl(c: Call):
    p, dt = _param(c)
    t = dt.type
    l1 = _f(c, "l1", 0.0, dt) + t(1e-10)
    l2 = _f(c, "l2", 0.0, dt) + t(1e-10)
    lr_power = _f(c, "lr_power", -0.5, dt)
    g = _like(c, "Grad", p)
    lr = _first(c, "LearningRate", dt)
    sq = _like(c, "SquaredAccumulator", p)
    new_acc = sq + g * g
    if lr_power == t(-0.5):
        lin_out = _like(c, "LinearAccumulator", p) + g - (np.sqrt(new_acc) - np.sqrt(sq)) / lr * p
        y = np.sqrt(new_acc) / lr + t(2) * l2
    else:
        lin_out = _like(c, "LinearAccumulator", p) + g - (new_acc ** -lr_power - sq ** -lr_power) / lr * p
        y = new_acc ** -lr_power / lr + t(2) * l2
    x = l1 * np.sign(lin_out) - lin_out
    p_out = np.where(np.abs(lin_out) > l1, x / y, t(0)).astype(dt)
    return {"ParamOut": p_out, "SquaredAccumOut": new_acc, "LinearAccumOut": lin_out}


def _ftrl_samples(rng):
    ins = lambda: {"Param": [_rs(rng, 3, 4)], "SquaredAccumulator": [_pos(rng, 3, 4)],  # noqa: E731
                   "LinearAccumulator": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "LearningRate": [_one(0.1)]}
    outs = {"ParamOut": 1, "SquaredAccumOut": 1, "LinearAccumOut": 1}
    return [Sample(ins(), {"l1": 0.1, "l2": 0.2, "lr_power": -0.5}, outputs=outs),
            Sample(ins(), {"l1": 0.05, "l2": 0.0, "lr_power": -0.3}, outputs=outs, note="other lr_power")]


_opt("ftrl", _ftrl, _ftrl_samples, ("l1", "l2", "lr_power"),
     "FTRL-proximal (Paddle's CPU kernel is float32 only)")


# --------------------------------------------------------------------------
# asgd, rprop, dpsgd
# --------------------------------------------------------------------------
def _asgd(c: Call):
    p, dt = _param(c, "param")
    g = _like(c, "grad", p)
    d_out = _like(c, "d", p) - _like(c, "y", p) + g
    lr, n = _first(c, "learning_rate", dt), _first(c, "n", dt)
    return {"param_out": p - (lr / n) * d_out, "d_out": d_out, "y_out": g.copy()}


def _asgd_samples(rng):
    return [Sample({"param": [_rs(rng, 3, 4)], "grad": [_rs(rng, 3, 4)], "learning_rate": [_one(0.1)],
                    "d": [_rs(rng, 3, 4)], "y": [_rs(rng, 3, 4)], "n": [_one(3.0)]},
                   outputs={"param_out": 1, "d_out": 1, "y_out": 1})]


_opt("asgd", _asgd, _asgd_samples, ("multi_precision",),
     "averaged SGD: d += grad - y; y = grad; param -= lr / n * d")


def _rprop(c: Call):
    p, dt = _param(c, "param")
    t = dt.type
    g = _like(c, "grad", p)
    prev = _like(c, "prev", p)
    lr = _like(c, "learning_rate", p)
    rng_, etas = _arr(c, "learning_rate_range").astype(dt).reshape(-1), _arr(c, "etas").astype(dt).reshape(-1)
    if rng_.size < 2 or etas.size < 2:
        raise ExecutionError("rprop: learning_rate_range and etas need two values each")
    prod = g * prev
    eta = np.where(prod > 0, etas[1], np.where(prod < 0, etas[0], t(1))).astype(dt)
    g = np.where(prod < 0, t(0), g).astype(dt)
    lr = lr * eta
    lr = np.where(lr > rng_[1], rng_[1], np.where(lr < rng_[0], rng_[0], lr)).astype(dt)
    return {"param_out": p - np.sign(g) * lr, "prev_out": g, "learning_rate_out": lr}


def _rprop_samples(rng):
    prev = _rs(rng, 3, 4)
    prev[0, :2] = 0.0
    return [Sample({"param": [_rs(rng, 3, 4)], "grad": [_rs(rng, 3, 4)], "prev": [prev],
                    "learning_rate": [rng.uniform(0.001, 0.05, (3, 4))],
                    "learning_rate_range": [np.array([1e-5, 0.04])], "etas": [np.array([0.5, 1.2])]},
                   outputs={"param_out": 1, "prev_out": 1, "learning_rate_out": 1})]


_opt("rprop", _rprop, _rprop_samples, ("multi_precision",),
     "Rprop: per-element step sizes grown or shrunk by the sign agreement of grad and prev")


def _dpsgd_noise(seed: int, sigma: float, dt: np.dtype) -> np.float32:
    """Paddle's dpsgd noise: one Marsaglia-polar normal from std::minstd_rand
    through std::uniform_real_distribution<T>, kept in float."""
    x = seed % 2147483647 or 1

    def draw() -> int:
        nonlocal x
        x = x * 48271 % 2147483647
        return x - 1

    def canonical():  # std::generate_canonical<T, digits(T)> on a 31-bit engine
        if dt == np.float32:
            return min(np.float32(draw()) / np.float32(2147483646.0), np.nextafter(np.float32(1), np.float32(0)))
        s = np.float64(draw()) + np.float64(draw()) * np.float64(2147483646.0)
        return min(s / np.float64(2147483646.0) ** 2, np.nextafter(1.0, 0.0))

    while True:
        v1 = np.float32(2) * np.float32(canonical()) - np.float32(1)
        v2 = np.float32(2) * np.float32(canonical()) - np.float32(1)
        s = v1 * v1 + v2 * v2
        if s < 1 and s != 0:
            break
    xv = np.float32(float(v1) * np.sqrt(-2.0 * np.log(float(s)) / float(s)))
    return np.float32(xv * np.float32(sigma))


def _dpsgd(c: Call):
    p, dt = _param(c)
    g = _like(c, "Grad", p)
    sq = (g * g).reshape(-1)
    if dt == np.float32:  # Paddle sums in a float, element by element
        l2 = np.cumsum(sq, dtype=np.float32)[-1] if sq.size else np.float32(0)
    else:
        l2 = np.float32(0)
        for v in sq:  # float += double, rounded to float each step: not a NumPy reduction
            l2 = np.float32(np.float64(l2) + v)
    l2 = np.float32(np.sqrt(l2))
    clip = _f(c, "clip", 10.0, dt)
    scale = np.float32(l2 / np.float32(clip)) if l2 > clip else np.float32(1)
    seed = int(c.attr("seed", 0)) & 0xFFFFFFFF
    if seed == 0:  # Paddle seeds from the clock: not reproducible
        rng = c.rng if c.rng is not None else np.random.default_rng()
        seed = int(rng.integers(1, 2 ** 31))
    noise = _dpsgd_noise(seed, float(np.float32(c.attr("sigma", 1.0))), dt)
    t = dt.type
    out = p - _first(c, "LearningRate", dt) * (g / t(scale) + t(noise) / _f(c, "batch_size", 16.0, dt))
    return {"ParamOut": out.astype(dt, copy=False)}


def _dpsgd_samples(rng):
    ins = lambda: {"Param": [_rs(rng, 3, 4)], "Grad": [_rs(rng, 3, 4)], "LearningRate": [_one(0.1)]}  # noqa: E731
    return [Sample(ins(), {"clip": 10.0, "batch_size": 16.0, "sigma": 1.0, "seed": 7}, outputs={"ParamOut": 1}),
            Sample(ins(), {"clip": 0.5, "batch_size": 4.0, "sigma": 2.0, "seed": 12345},
                   outputs={"ParamOut": 1}, note="clipped")]


_opt("dpsgd", _dpsgd, _dpsgd_samples, ("clip", "batch_size", "sigma", "seed"),
     "SGD with the gradient clipped to norm `clip` and one Gaussian noise value (Paddle's minstd_rand "
     "stream for seed != 0; seed 0 draws from the interpreter's generator)")


# --------------------------------------------------------------------------
# lamb
# --------------------------------------------------------------------------
def _lamb(c: Call):
    p, dt = _param(c)
    t = dt.type
    m1, m2 = _like(c, "Moment1", p), _like(c, "Moment2", p)
    b1p_in, b2p_in = _arr(c, "Beta1Pow"), _arr(c, "Beta2Pow")
    if _skip(c):  # Paddle's CPU kernel returns at once: the in-place vars keep their values
        out = {"ParamOut": p.copy(), "Moment1Out": m1.copy(), "Moment2Out": m2.copy()}
        if c.wants("Beta1PowOut"):
            out["Beta1PowOut"] = b1p_in.copy()
        if c.wants("Beta2PowOut"):
            out["Beta2PowOut"] = b2p_in.copy()
        return out
    wd, beta1 = _f(c, "weight_decay", 0.01, dt), _f(c, "beta1", 0.9, dt)
    beta2, eps = _f(c, "beta2", 0.999, dt), _f(c, "epsilon", 1e-6, dt)
    b1p, b2p = _first(c, "Beta1Pow", dt), _first(c, "Beta2Pow", dt)
    g = _like(c, "Grad", p)
    m1o = beta1 * m1 + (t(1) - beta1) * g
    m2o = beta2 * m2 + (t(1) - beta2) * g * g
    trust = (m1o / (t(1) - b1p)) / (np.sqrt(m2o / (t(1) - b2p)) + eps) + wd * p
    pn = tn = t(0)
    if wd > 0 or c.attr("always_adapt", False):
        pn, tn = np.sqrt(np.sum(p * p, dtype=dt)), np.sqrt(np.sum(trust * trust, dtype=dt))
    r = pn / tn if (pn > 0 and tn > 0) else t(1)
    lr = _first(c, "LearningRate", dt) * r
    out = {"ParamOut": p - lr * trust, "Moment1Out": m1o, "Moment2Out": m2o}
    if c.wants("Beta1PowOut"):
        out["Beta1PowOut"] = (b1p_in.astype(dt) * beta1).astype(b1p_in.dtype)
    if c.wants("Beta2PowOut"):
        out["Beta2PowOut"] = (b2p_in.astype(dt) * beta2).astype(b2p_in.dtype)
    return out


def _lamb_samples(rng):
    def ins():
        a = _adam_ins(rng)
        return {k: v for k, v in a.items()}
    outs = {"ParamOut": 1, "Moment1Out": 1, "Moment2Out": 1, "Beta1PowOut": 1, "Beta2PowOut": 1}
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}
    return [Sample(ins(), dict(base, weight_decay=0.01), outputs=outs),
            Sample(ins(), dict(base, weight_decay=0.0), outputs=outs, note="no decay: trust ratio 1"),
            Sample(ins(), dict(base, weight_decay=0.0, always_adapt=True), outputs=outs, note="always_adapt"),
            Sample(dict(ins(), SkipUpdate=[np.array([True])]), dict(base, weight_decay=0.01), outputs=outs,
                   note="SkipUpdate")]


_opt("lamb", _lamb, _lamb_samples, ("weight_decay", "beta1", "beta2", "epsilon", "always_adapt", "multi_precision"),
     "LAMB: Adam direction plus weight decay, scaled by the trust ratio |p| / |update|")
