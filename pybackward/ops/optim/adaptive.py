"""More optimizer ops (see optimizer.py for the conventions): nadam, radam,
decayed_adagrad, ftrl, asgd, rprop, dpsgd and lamb, with Paddle 3.3.1's
dense CPU formulas.

dpsgd draws its noise from `std::minstd_rand` as Paddle's kernel does, so a
nonzero seed gives Paddle's values; seed 0 (Paddle: the clock) draws from the
interpreter's generator.
"""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ._optim_util import (adam_ins, arr, first, float_attr, like, one, param, pos, register_optimizer, rs,
                          skip_update)
from .registry import Call, Sample


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


# --------------------------------------------------------------------------
# asgd, rprop, dpsgd
# --------------------------------------------------------------------------
def _asgd(c: Call):
    p, dt = param(c, "param")
    g = like(c, "grad", p)
    d_out = like(c, "d", p) - like(c, "y", p) + g
    lr, n = first(c, "learning_rate", dt), first(c, "n", dt)
    return {"param_out": p - (lr / n) * d_out, "d_out": d_out, "y_out": g.copy()}


def _asgd_samples(rng):
    return [Sample({"param": [rs(rng, 3, 4)], "grad": [rs(rng, 3, 4)], "learning_rate": [one(0.1)],
                    "d": [rs(rng, 3, 4)], "y": [rs(rng, 3, 4)], "n": [one(3.0)]},
                   outputs={"param_out": 1, "d_out": 1, "y_out": 1})]


register_optimizer("asgd", _asgd, _asgd_samples, ("multi_precision",),
     "averaged SGD: d += grad - y; y = grad; param -= lr / n * d")


def _rprop(c: Call):
    p, dt = param(c, "param")
    t = dt.type
    g = like(c, "grad", p)
    prev = like(c, "prev", p)
    lr = like(c, "learning_rate", p)
    rng_, etas = arr(c, "learning_rate_range").astype(dt).reshape(-1), arr(c, "etas").astype(dt).reshape(-1)
    if rng_.size < 2 or etas.size < 2:
        raise ExecutionError("rprop: learning_rate_range and etas need two values each")
    prod = g * prev
    eta = np.where(prod > 0, etas[1], np.where(prod < 0, etas[0], t(1))).astype(dt)
    g = np.where(prod < 0, t(0), g).astype(dt)
    lr = lr * eta
    lr = np.where(lr > rng_[1], rng_[1], np.where(lr < rng_[0], rng_[0], lr)).astype(dt)
    return {"param_out": p - np.sign(g) * lr, "prev_out": g, "learning_rate_out": lr}


def _rprop_samples(rng):
    prev = rs(rng, 3, 4)
    prev[0, :2] = 0.0
    return [Sample({"param": [rs(rng, 3, 4)], "grad": [rs(rng, 3, 4)], "prev": [prev],
                    "learning_rate": [rng.uniform(0.001, 0.05, (3, 4))],
                    "learning_rate_range": [np.array([1e-5, 0.04])], "etas": [np.array([0.5, 1.2])]},
                   outputs={"param_out": 1, "prev_out": 1, "learning_rate_out": 1})]


register_optimizer("rprop", _rprop, _rprop_samples, ("multi_precision",),
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
    p, dt = param(c)
    g = like(c, "Grad", p)
    sq = (g * g).reshape(-1)
    if dt == np.float32:  # Paddle sums in a float, element by element
        l2 = np.cumsum(sq, dtype=np.float32)[-1] if sq.size else np.float32(0)
    else:
        l2 = np.float32(0)
        for v in sq:  # float += double, rounded to float each step: not a NumPy reduction
            l2 = np.float32(np.float64(l2) + v)
    l2 = np.float32(np.sqrt(l2))
    clip = float_attr(c, "clip", 10.0, dt)
    scale = np.float32(l2 / np.float32(clip)) if l2 > clip else np.float32(1)
    seed = int(c.attr("seed", 0)) & 0xFFFFFFFF
    if seed == 0:  # Paddle seeds from the clock: not reproducible
        rng = c.rng if c.rng is not None else np.random.default_rng()
        seed = int(rng.integers(1, 2 ** 31))
    noise = _dpsgd_noise(seed, float(np.float32(c.attr("sigma", 1.0))), dt)
    t = dt.type
    out = p - first(c, "LearningRate", dt) * (g / t(scale) + t(noise) / float_attr(c, "batch_size", 16.0, dt))
    return {"ParamOut": out.astype(dt, copy=False)}


def _dpsgd_samples(rng):
    ins = lambda: {"Param": [rs(rng, 3, 4)], "Grad": [rs(rng, 3, 4)], "LearningRate": [one(0.1)]}  # noqa: E731
    return [Sample(ins(), {"clip": 10.0, "batch_size": 16.0, "sigma": 1.0, "seed": 7}, outputs={"ParamOut": 1}),
            Sample(ins(), {"clip": 0.5, "batch_size": 4.0, "sigma": 2.0, "seed": 12345},
                   outputs={"ParamOut": 1}, note="clipped")]


register_optimizer("dpsgd", _dpsgd, _dpsgd_samples, ("clip", "batch_size", "sigma", "seed"),
     "SGD with the gradient clipped to norm `clip` and one Gaussian noise value (Paddle's minstd_rand "
     "stream for seed != 0; seed 0 draws from the interpreter's generator)")


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
