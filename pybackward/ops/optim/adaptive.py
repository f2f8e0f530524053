"""Adaptive-rate optimizer ops (see optim/optimizers.py for the conventions): nadam, radam,
decayed_adagrad and ftrl, with Paddle 3.3.1's dense CPU formulas.

dpsgd draws its noise from `std::minstd_rand` as Paddle's kernel does, so a
nonzero seed gives Paddle's values; seed 0 (Paddle: the clock) draws from the
interpreter's generator.
"""
from __future__ import annotations

import numpy as np

from ._util import arr, first, float_attr, like, one, param, pos, register_optimizer, rs
from ..registry import Call, Sample


def _nadam(c: Call):
    p, dt = param(c, "param")
    t = dt.type
    beta1 = float_attr(c, "beta1", 0.9, dt)
    beta2 = float_attr(c, "beta2", 0.999, dt)
    eps = float_attr(c, "epsilon", 1e-8, dt)
    md = float_attr(c, "momentum_decay", 0.004, dt)
    g = like(c, "grad", p)
    lr = first(c, "learning_rate", dt)
    mdp_out = arr(c, "momentum_decay_pow").astype(dt) * t(0.96)
    b2p_out = arr(c, "beta2_pow").astype(dt) * beta2
    mu_t = beta1 * (t(1) - t(0.5) * mdp_out ** md)
    mu_t1 = beta1 * (t(1) - t(0.5) * mdp_out ** md * t(0.96) ** md)
    mu_prod_out = arr(c, "mu_product").astype(dt) * mu_t
    mu_prod_t1 = mu_prod_out * mu_t1
    m1o = beta1 * like(c, "moment1", p) + (t(1) - beta1) * g
    m2o = beta2 * like(c, "moment2", p) + (t(1) - beta2) * g * g
    m1_hat = mu_t1 * m1o / (t(1) - mu_prod_t1) + (t(1) - mu_t) * g / (t(1) - mu_prod_out)
    m2_hat = m2o / (t(1) - b2p_out)
    return {"param_out": p - lr * m1_hat / (np.sqrt(m2_hat) + eps), "momentum_decay_pow_out": mdp_out,
            "beta2_pow_out": b2p_out, "mu_product_out": mu_prod_out, "moment1_out": m1o, "moment2_out": m2o}


def _nadam_samples(rng):
    # One-element params: Paddle's CPU kernel reads its 1-element pow tensors
    # unbroadcast, past their end, for any larger param (docs/deviations.md).
    def ins(step):
        return {"param": [rs(rng, 1)], "grad": [rs(rng, 1)], "learning_rate": [one(0.01)],
                "momentum_decay_pow": [one(0.96 ** step)], "beta2_pow": [one(0.999 ** step)],
                "mu_product": [one(0.9 ** step)], "moment1": [0.1 * rs(rng, 1)], "moment2": [0.1 * pos(rng, 1)]}
    outs = {s: 1 for s in ("param_out", "momentum_decay_pow_out", "beta2_pow_out", "mu_product_out",
                           "moment1_out", "moment2_out")}
    return [Sample(ins(2), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "momentum_decay": 0.004}, outputs=outs),
            Sample(ins(0), {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "momentum_decay": 0.01}, outputs=outs,
                   note="first step")]


register_optimizer("nadam", _nadam, _nadam_samples,
                   ("beta1", "beta2", "epsilon", "momentum_decay", "multi_precision"),
                   "NAdam (Dozat): Nesterov momentum in Adam, with the momentum-decay schedule")


def _radam(c: Call):
    p, dt = param(c, "param")
    t = dt.type
    beta1 = float_attr(c, "beta1", 0.9, dt)
    beta2 = float_attr(c, "beta2", 0.999, dt)
    eps = float_attr(c, "epsilon", 1e-8, dt)
    g = like(c, "grad", p)
    lr = first(c, "learning_rate", dt)
    rho_inf = t(2) / (t(1) - beta2) - t(1)
    b1p_out = arr(c, "beta1_pow").astype(dt) * beta1
    b2p_out = arr(c, "beta2_pow").astype(dt) * beta2
    rho_out = (arr(c, "rho").astype(dt) * (beta2 - b2p_out) + b2p_out) / (t(1) - b2p_out)
    m1o = beta1 * like(c, "moment1", p) + (t(1) - beta1) * g
    m2o = beta2 * like(c, "moment2", p) + (t(1) - beta2) * g * g
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
        return {"param": [rs(rng, 1)], "grad": [rs(rng, 1)], "learning_rate": [one(0.01)],
                "beta1_pow": [one(0.9 ** step)], "beta2_pow": [one(0.999 ** step)], "rho": [one(rho)],
                "moment1": [0.1 * rs(rng, 1)], "moment2": [0.1 * pos(rng, 1)]}
    outs = {s: 1 for s in ("param_out", "beta1_pow_out", "beta2_pow_out", "rho_out", "moment1_out", "moment2_out")}
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
    return [Sample(ins(1, 1000.0), attrs, outputs=outs, note="rho_t <= 5: no rectification"),
            Sample(ins(20, 0.0), attrs, outputs=outs, note="rectified step")]


register_optimizer("radam", _radam, _radam_samples, ("beta1", "beta2", "epsilon", "multi_precision"),
     "RAdam: Adam with variance rectification once rho_t > 5")


def _decayed_adagrad(c: Call):
    p, dt = param(c)
    t = dt.type
    decay, eps = float_attr(c, "decay", 0.95, dt), float_attr(c, "epsilon", 1e-6, dt)
    g = like(c, "Grad", p)
    m_out = decay * like(c, "Moment", p) + (t(1) - decay) * g * g
    return {"ParamOut": p - first(c, "LearningRate", dt) * g / (np.sqrt(m_out) + eps), "MomentOut": m_out}


def _decayed_adagrad_samples(rng):
    return [Sample({"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "Moment": [pos(rng, 3, 4)],
                    "LearningRate": [one(0.1)]}, {"decay": 0.95, "epsilon": 1e-6},
                   outputs={"ParamOut": 1, "MomentOut": 1})]


register_optimizer("decayed_adagrad", _decayed_adagrad, _decayed_adagrad_samples, ("decay", "epsilon"),
     "MomentOut = decay Moment + (1 - decay) g^2; ParamOut = Param - lr g / (sqrt(MomentOut) + eps)")


def _ftrl(c: Call):
    p, dt = param(c)
    t = dt.type
    l1 = float_attr(c, "l1", 0.0, dt) + t(1e-10)
    l2 = float_attr(c, "l2", 0.0, dt) + t(1e-10)
    lr_power = float_attr(c, "lr_power", -0.5, dt)
    g = like(c, "Grad", p)
    lr = first(c, "LearningRate", dt)
    sq = like(c, "SquaredAccumulator", p)
    new_acc = sq + g * g
    if lr_power == t(-0.5):
        lin_out = like(c, "LinearAccumulator", p) + g - (np.sqrt(new_acc) - np.sqrt(sq)) / lr * p
        y = np.sqrt(new_acc) / lr + t(2) * l2
    else:
        lin_out = like(c, "LinearAccumulator", p) + g - (new_acc ** -lr_power - sq ** -lr_power) / lr * p
        y = new_acc ** -lr_power / lr + t(2) * l2
    x = l1 * np.sign(lin_out) - lin_out
    p_out = np.where(np.abs(lin_out) > l1, x / y, t(0)).astype(dt)
    return {"ParamOut": p_out, "SquaredAccumOut": new_acc, "LinearAccumOut": lin_out}


def _ftrl_samples(rng):
    ins = lambda: {"Param": [rs(rng, 3, 4)], "SquaredAccumulator": [pos(rng, 3, 4)],  # noqa: E731
                   "LinearAccumulator": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "LearningRate": [one(0.1)]}
    outs = {"ParamOut": 1, "SquaredAccumOut": 1, "LinearAccumOut": 1}
    return [Sample(ins(), {"l1": 0.1, "l2": 0.2, "lr_power": -0.5}, outputs=outs),
            Sample(ins(), {"l1": 0.05, "l2": 0.0, "lr_power": -0.3}, outputs=outs, note="other lr_power")]


register_optimizer("ftrl", _ftrl, _ftrl_samples, ("l1", "l2", "lr_power"),
     "FTRL-proximal (Paddle's CPU kernel is float32 only)")
