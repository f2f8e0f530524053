"""The asgd, rprop and dpsgd parameter updates."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ._util import arr, first, float_attr, like, one, param, register_optimizer, rs
from ..registry import Call, Sample


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
