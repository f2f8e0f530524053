"""In-place random fills and the draws from Paddle's global generator, through ops/random/engine.py's reimplementation of Paddle's
std::mt19937_64 engine:

* uniform_random_inplace, gaussian_inplace: X's shape and dtype filled from
  U[min, max) / N(mean, std^2); with a nonzero `seed` the values equal
  Paddle's bit for bit (its diag_* attrs are ignored by Paddle's CPU kernel,
  and here). Grads are zeros.
* exponential, poisson, random, rrelu (training), gumbel_softmax draw from
  Paddle's global generator, whose state a program does not hold: here the
  engine is seeded from the interpreter's `Call.rng`, so only the
  distributions match Paddle's (checked in tests/ops/test_kernel_cases.py). Their
  gradients are deterministic given the drawn noise.

gumbel_softmax_grad: Paddle's kernel is the plain softmax grad of Out,
without the 1/temperature the forward's softmax((X + G) / T) implies; here
the grad is the true one (docs/deviations.md); with T = 1, or hard = True
(a one-hot Out, grad 0), the two agree.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from .engine import engine, normal
from ..registry import Call, Sample, register


def _float_x(c: Call, slot: str) -> np.ndarray:
    x = np.asarray(c.x(slot))
    if x.dtype not in (np.float32, np.float64):
        raise ExecutionError(f"{c.op_type}: Paddle's CPU kernel takes float32 or float64, got {x.dtype}")
    return x


def _zeros_grad(in_slot: str, out_slot: str):
    def grad(c: Call):
        g = np.asarray(c.x(out_slot + "@GRAD"))
        return {in_slot + "@GRAD": np.zeros(g.shape, g.dtype)}
    return grad


def _x_samples(slot: str, attrs: dict, extra: list | None = None):
    def samples(rng):
        out = [Sample({slot: [rng.standard_normal((3, 4))]}, dict(attrs)),
               Sample({slot: [rng.standard_normal((2, 3, 2)).astype(np.float32)]}, dict(attrs), note="float32")]
        return out + [Sample({slot: [rng.standard_normal((2, 5))]}, a) for a in extra or ()]
    return samples


# --------------------------------------------------------------------------
# seeded in-place fills
# --------------------------------------------------------------------------
def _uniform_random_inplace(c: Call):
    x = _float_x(c, "X")
    lo, hi = np.float32(c.attr("min", -1.0)), np.float32(c.attr("max", 1.0))
    data = engine(c, int(c.attr("seed", 0))).uniform(x.size, lo, hi, x.dtype)
    return {"Out": data.reshape(x.shape)}


register(paddle_opdef("uniform_random_inplace", _uniform_random_inplace,
                      {"uniform_random_inplace_grad": _zeros_grad("X", "Out")},
                      samples=_x_samples("X", {"min": -1.0, "max": 2.0, "seed": 7},
                                         [{"min": 0.0, "max": 1.0, "seed": 0}]),
                      attrs_handled=("min", "max", "seed"),
                      doc="Out ~ U[min, max) in X's shape (Paddle's exact stream for seed != 0)"))


def _gaussian_inplace(c: Call):
    x = _float_x(c, "x")
    mean, std = np.float32(c.attr("mean", 0.0)), np.float32(c.attr("std", 1.0))
    data = normal(engine(c, int(c.attr("seed", 0))), x.size, mean, std, x.dtype)
    return {"out": data.reshape(x.shape)}


register(paddle_opdef("gaussian_inplace", _gaussian_inplace, {"gaussian_inplace_grad": _zeros_grad("x", "out")},
                      samples=_x_samples("x", {"mean": 1.0, "std": 2.0, "seed": 7},
                                         [{"mean": 0.0, "std": 1.0, "seed": 0}]),
                      attrs_handled=("mean", "std", "seed"),
                      doc="out ~ N(mean, std^2) in x's shape (Paddle's exact stream for seed != 0)"))


# --------------------------------------------------------------------------
# global-generator draws
# --------------------------------------------------------------------------
def _exponential(c: Call):
    x = _float_x(c, "X")
    lam = float(c.attr("lambda", 1.0))
    if not lam > 0:
        raise c.unsupported("lambda", lam, "must be positive")
    u = engine(c).canonical(x.size, x.dtype)
    return {"Out": (-np.log1p(-u) / x.dtype.type(lam)).astype(x.dtype).reshape(x.shape)}


# its grad op is fill_any_like (zeros), whose kernel ops/tensor/creation.py has
register(paddle_opdef("exponential", _exponential, samples=_x_samples("X", {"lambda": 2.0}),
                      attrs_handled=("lambda",), doc="Out ~ Exp(lambda) in X's shape (X's values unused)"))


def _poisson(c: Call):
    x = _float_x(c, "X")
    if np.any(x < 0) or not np.all(np.isfinite(x)):
        raise ExecutionError("poisson: rates must be finite and non-negative")
    rng = np.random.default_rng(int(engine(c).raw(1)[0]))
    return {"Out": rng.poisson(x).astype(x.dtype)}


register(paddle_opdef("poisson", _poisson, {"poisson_grad": _zeros_grad("X", "Out")},
                      samples=lambda rng: [Sample({"X": [rng.random((3, 4)) * 4]}),
                                           Sample({"X": [(rng.random((2, 3)) * 2).astype(np.float32)]},
                                                  note="float32")],
                      doc="Out ~ Poisson(X), elementwise, in X's dtype"))


_RANDOM_DTYPES = (np.float32, np.float64, np.float16, np.int32, np.int64)


def _random(c: Call):
    x = np.asarray(c.x("x"))
    if x.dtype not in _RANDOM_DTYPES:
        raise ExecutionError(f"random: Paddle's CPU kernel does not take {x.dtype}")
    lo, hi = int(c.attr("from", 0)), int(c.attr("to", 0))
    if lo >= hi:
        raise ExecutionError(f"random: 'from' ({lo}) must be less than 'to' ({hi})")
    rng = np.random.default_rng(int(engine(c).raw(1)[0]))
    return {"out": rng.integers(lo, hi, size=x.shape).astype(x.dtype)}


register(paddle_opdef("random", _random, {"random_grad": _zeros_grad("x", "out")},
                      samples=lambda rng: [Sample({"x": [rng.standard_normal((3, 4))]}, {"from": 0, "to": 5}),
                                           Sample({"x": [rng.standard_normal(6)]}, {"from": -3, "to": 2})],
                      attrs_handled=("from", "to"),
                      doc="out = integers uniform in [from, to), in x's shape and dtype"))


# --------------------------------------------------------------------------
# rrelu
# --------------------------------------------------------------------------
def _rrelu_bounds(c: Call) -> tuple[np.float32, np.float32]:
    lo, hi = np.float32(c.attr("lower", 1.0 / 8)), np.float32(c.attr("upper", 1.0 / 3))
    if not 0 <= lo <= hi <= 1:
        raise c.unsupported("lower/upper", (float(lo), float(hi)), "Paddle needs 0 <= lower <= upper <= 1")
    return lo, hi


def _rrelu(c: Call):
    x = np.asarray(c.x("X"))
    lo, hi = _rrelu_bounds(c)
    t = x.dtype.type
    if c.attr("is_test", False):
        noise = np.full(x.shape, t((lo + hi) / np.float32(2)))
    else:  # drawn as float, as Paddle's kernel does
        noise = engine(c).uniform(x.size, lo, hi, np.float32).astype(x.dtype).reshape(x.shape)
    noise = np.where(x >= 0, t(1), noise).astype(x.dtype)
    return {"Out": x * noise, "Noise": noise}


def _rrelu_grad(c: Call):
    x, g, noise = np.asarray(c.x("X")), np.asarray(c.x("Out@GRAD")), np.asarray(c.x("Noise"))
    return {"X@GRAD": np.where(x > 0, g, g * noise).astype(g.dtype)}


def _rrelu_samples(rng):
    x = rng.standard_normal((3, 4))
    x[np.abs(x) < 0.05] = 0.3
    return [Sample({"X": [x]}, {"lower": 0.1, "upper": 0.3, "is_test": True}),
            Sample({"X": [x]}, {"lower": 0.1, "upper": 0.3, "is_test": False}, note="training: drawn noise"),
            Sample({"X": [x[:2]]}, {"lower": 0.125, "upper": 0.25, "is_test": False})]


register(paddle_opdef("rrelu", _rrelu, {"rrelu_grad": _rrelu_grad}, samples=_rrelu_samples,
                      attrs_handled=("lower", "upper", "is_test"),
                      doc="Out = X * Noise, Noise = 1 where X >= 0, else U[lower, upper) "
                          "((lower + upper) / 2 when is_test)"))


# --------------------------------------------------------------------------
# gumbel_softmax
# --------------------------------------------------------------------------
def _gumbel_softmax(c: Call):
    x = _float_x(c, "X")
    t = float(c.attr("temperature", 1.0))
    if not t > 0:
        raise c.unsupported("temperature", t, "must be positive")
    axis = int(c.attr("axis", -1))
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise ExecutionError(f"gumbel_softmax: axis {axis} is out of range for rank {x.ndim}")
    if x.ndim == 0:
        return {"Out": np.ones((), x.dtype)}
    u = engine(c).canonical(x.size, x.dtype).reshape(x.shape)
    tiny = x.dtype.type(np.finfo(x.dtype).tiny)
    gumbel = -np.log(-np.log(np.maximum(u, tiny)))
    z = (x + gumbel) / x.dtype.type(t)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    out = e / e.sum(axis=axis, keepdims=True)
    if c.attr("hard", False):
        hot = np.zeros_like(out)
        np.put_along_axis(hot, np.expand_dims(np.argmax(out, axis=axis), axis), 1, axis=axis)
        out = hot
    return {"Out": out.astype(x.dtype, copy=False)}


def _gumbel_softmax_grad(c: Call):
    y, g = np.asarray(c.x("Out")), np.asarray(c.x("Out@GRAD"))
    if y.ndim == 0:
        return {"X@GRAD": np.zeros((), g.dtype)}
    axis = int(c.attr("axis", -1))
    t = g.dtype.type(float(c.attr("temperature", 1.0)))
    return {"X@GRAD": ((g - (g * y).sum(axis=axis, keepdims=True)) * y / t).astype(g.dtype)}


register(paddle_opdef("gumbel_softmax", _gumbel_softmax, {"gumbel_softmax_grad": _gumbel_softmax_grad},
                      samples=lambda rng: [
                          Sample({"X": [rng.standard_normal((3, 4))]}, {"temperature": 1.0, "hard": False, "axis": -1}),
                          Sample({"X": [rng.standard_normal((3, 4))]}, {"temperature": 0.5, "hard": False, "axis": 0},
                                 note="temperature: the true grad (Paddle omits 1/T)"),
                          Sample({"X": [rng.standard_normal((2, 5))]}, {"temperature": 2.0, "hard": True, "axis": 1},
                                 note="hard: one-hot, grad 0")],
                      attrs_handled=("temperature", "hard", "axis"),
                      doc="Out = softmax((X + Gumbel noise) / temperature) along axis (one-hot when hard)"))


# --------------------------------------------------------------------------
# shuffle_batch: rows (all dims but the last) moved by a random derangement
# --------------------------------------------------------------------------
_MINSTD_M = 2 ** 31 - 1


def _minstd_first(seed: int) -> int:
    """The first output of libstdc++'s std::default_random_engine (minstd_rand0) seeded with `seed`."""
    x = seed % _MINSTD_M
    return 16807 * (x or 1) % _MINSTD_M


def _derangement(rng: np.random.Generator, n: int) -> np.ndarray:
    """A uniformly drawn permutation with no fixed point (Paddle seeds its own
    from std::random_device, so only the kind of permutation can match)."""
    if n < 2:
        raise ExecutionError(f"shuffle_batch: needs at least 2 rows to shuffle, got {n}")
    while True:
        p = rng.permutation(n)
        if not np.any(p == np.arange(n)):
            return p


def _shuffle_batch(c: Call):
    x = np.asarray(c.x("X"))
    if x.ndim < 2:
        raise ExecutionError(f"shuffle_batch: X must have rank >= 2, got {list(x.shape)}")
    rows = x.reshape(-1, x.shape[-1])
    seed = int(np.asarray(c.x("Seed")).reshape(-1)[0]) if c.has("Seed") else int(c.attr("startup_seed", 0))
    rng = c.rng if c.rng is not None else np.random.default_rng()
    idx = _derangement(rng, rows.shape[0])
    out = np.empty_like(rows)
    out[idx] = rows
    return {"Out": out.reshape(x.shape), "ShuffleIdx": idx.astype(np.int64),
            "SeedOut": np.array([_minstd_first(seed)], np.int64)}


def _shuffle_batch_grad(c: Call):
    g = np.asarray(c.x("Out@GRAD"))
    idx = np.asarray(c.x("ShuffleIdx")).astype(np.int64)
    rows = g.reshape(-1, g.shape[-1])
    return {"X@GRAD": rows[idx].reshape(g.shape)}


register(paddle_opdef("shuffle_batch", _shuffle_batch, {"shuffle_batch_grad": _shuffle_batch_grad},
                      samples=lambda rng: [
                          Sample({"X": [rng.standard_normal((4, 3))], "Seed": [np.array([5], np.int64)]},
                                 {"startup_seed": 0}, wrt=("X",)),
                          Sample({"X": [rng.standard_normal((2, 3, 2))], "Seed": [np.array([0], np.int64)]},
                                 {"startup_seed": 3}, wrt=("X",))],
                      attrs_handled=("startup_seed",),
                      doc="Out[ShuffleIdx[i]] = X[i] over the rows, a random derangement; SeedOut = "
                          "minstd_rand0(Seed)'s first draw"))
