"""Random draws with a distribution: uniform_random_batch_size_like and randint (Paddle's exact
stream for a nonzero seed, through ops/random/engine.py's mt19937_64), randperm, and
bernoulli, binomial, multinomial, standard_gamma, dirichlet.

The second group has no seed attr: Paddle draws them from its global
generator, whose state a program does not hold, so no program can
reproduce Paddle's values. They draw from the interpreter's generator
(`Call.rng`, seeded by `Executor(seed=...)`) with the distributions Paddle's
kernels sample; tests/ops/test_random_distributions.py checks the distributions.

randint reproduces libstdc++'s `uniform_int_distribution` (Lemire's
multiply-and-shift with rejection, for a 64-bit engine) over Paddle 3.3.1's
engine - which, for a nonzero seed, is seeded with the dtype attr (see
_randint). randperm's stream is not Paddle's.
"""
from __future__ import annotations

import numpy as np

from ...base import dtypes
from ...base.errors import ExecutionError
from ..tensor.constants import batch_shape
from .._inputs import dtype_attr, input_value
from ..paddle_table import paddle_opdef
from .engine import MT19937_64, engine, uniform_fill
from ..registry import Call, Sample, register

_U64 = (1 << 64) - 1


def _rng(c: Call) -> np.random.Generator:
    return c.rng if c.rng is not None else np.random.default_rng()


def uniform_ints(engine: MT19937_64, n: int, span: int) -> np.ndarray:
    """n draws of libstdc++'s uniform_int_distribution over [0, span) from a
    64-bit engine: high word of u * span, rejecting u whose low word is below
    (2^64 - span) % span. Returns uint64 (Python ints beyond 2^32 spans)."""
    if span <= 0:
        raise ExecutionError(f"uniform ints over an empty range ({span})")
    threshold = ((1 << 64) - span) % span
    out, have = [], 0
    while have < n:
        u = engine.raw(max(n - have, 1) + 8)
        if span < (1 << 32):
            s = np.uint64(span)
            low = u * s  # wraps: the low 64 bits of the product
            hi = ((u >> np.uint64(32)) * s + (((u & np.uint64(0xFFFFFFFF)) * s) >> np.uint64(32))) >> np.uint64(32)
            ok = low >= np.uint64(threshold)
        else:
            prods = [int(v) * span for v in u]
            hi = np.array([p >> 64 for p in prods], dtype=np.uint64)
            ok = np.array([(p & _U64) >= threshold for p in prods])
        got = hi[ok]
        out.append(got)
        have += got.size
    return np.concatenate(out)[:n]


# --------------------------------------------------------------------------
# seeded: Paddle's exact stream
# --------------------------------------------------------------------------
def _uniform_random_batch_size_like(c: Call):
    shape = batch_shape(c)
    out_dt = dtype_attr(c, dtypes.VarType.FP32)
    if out_dt.kind != "f":
        raise c.unsupported("dtype", int(c.attr("dtype")), "random ops make floating point tensors")
    work = np.dtype(np.float32) if out_dt == np.float16 else out_dt
    return {"Out": uniform_fill(c, shape, work, out_dt)}


def _urbsl_samples(rng):
    x = rng.standard_normal((4, 3))
    return [Sample({"Input": [x]}, {"shape": [-1, 5], "min": -2.0, "max": 3.0, "seed": 11,
                                    "dtype": dtypes.VarType.FP32}),
            Sample({"Input": [x]}, {"shape": [2, -1], "input_dim_idx": 1, "output_dim_idx": 1, "seed": 5,
                                    "dtype": dtypes.VarType.FP64, "diag_num": 2, "diag_step": 2,
                                    "diag_val": 7.0}, note="float64, diagonal")]


register(paddle_opdef("uniform_random_batch_size_like", _uniform_random_batch_size_like, samples=_urbsl_samples,
                      attrs_handled=("shape", "input_dim_idx", "output_dim_idx", "min", "max", "seed", "diag_num",
                                     "diag_step", "diag_val", "dtype"),
                      doc="uniform_random with dim output_dim_idx taken from Input (Paddle's stream for seed != 0)"))


def _shape(c: Call) -> tuple[int, ...]:
    if c.has("ShapeTensor"):
        shape = [int(v) for v in np.asarray(c.x("ShapeTensor")).reshape(-1)]
    elif c.has("ShapeTensorList"):
        shape = [int(np.asarray(t).reshape(-1)[0]) for t in c.xs("ShapeTensorList")]
    else:
        shape = [int(v) for v in c.attr("shape", [])]
    if any(d < 0 for d in shape):
        raise ExecutionError(f"{c.op_type}: shape {shape} has a negative dim")
    return tuple(shape)


def _randint(c: Call):
    low, high = int(c.attr("low", 0)), int(c.attr("high", 0))
    if low >= high:
        raise ExecutionError(f"randint: low ({low}) must be less than high ({high})")
    dt = dtype_attr(c, dtypes.VarType.INT64)
    if dt not in (np.int32, np.int64):
        raise c.unsupported("dtype", int(c.attr("dtype")), "Paddle's CPU randint makes int32 or int64")
    shape = _shape(c)
    n = int(np.prod(shape, dtype=np.int64))
    # Paddle 3.3.1's legacy randint seeds its engine with the dtype attr's value
    # (2 for int32, 3 for int64) whenever `seed` is nonzero - probed on a live Paddle:
    # every nonzero seed gives the same stream - and from its global generator for 0.
    seed = int(c.attr("seed", 0))
    vals = uniform_ints(engine(c, int(c.attr("dtype", dtypes.VarType.INT64)) if seed else 0), n, high - low)
    return {"Out": (vals.astype(np.int64) + low).astype(dt).reshape(shape)}


def _randint_samples(rng):
    return [Sample({}, {"low": -5, "high": 17, "shape": [3, 4], "seed": 3, "dtype": dtypes.VarType.INT64}),
            Sample({}, {"low": 0, "high": 1000, "shape": [50], "seed": 99, "dtype": dtypes.VarType.INT32},
                   note="int32"),
            Sample({"ShapeTensor": [np.array([2, 3], np.int64)]},
                   {"low": 1, "high": 3, "shape": [], "seed": 1234567, "dtype": dtypes.VarType.INT64},
                   note="ShapeTensor")]


register(paddle_opdef("randint", _randint, samples=_randint_samples,
                      attrs_handled=("low", "high", "shape", "dtype", "seed"),
                      doc="Out ~ U{low, ..., high - 1} (Paddle's stream for seed != 0)"))


def _randperm(c: Call):
    n = int(c.attr("n", 0))
    if n < 0:
        raise ExecutionError(f"randperm: n is {n}; it must be >= 0")
    dt = dtype_attr(c, dtypes.VarType.INT64)
    seed = int(c.attr("seed", 0))
    rng = np.random.default_rng(seed) if seed else _rng(c)
    return {"Out": rng.permutation(n).astype(dt)}


# randperm's stream was not reproduced (neither libstdc++'s std::shuffle nor a
# Fisher-Yates over mt19937_64 / torch's mt19937 gives Paddle 3.3.1's values):
# a seeded randperm is a fixed permutation, but not Paddle's.
register(paddle_opdef("randperm", _randperm, attrs_handled=("n", "dtype", "seed"),
                      doc="Out = a random permutation of 0..n-1 (not Paddle's stream; fixed for seed != 0)"))


# --------------------------------------------------------------------------
# Paddle's global generator: the interpreter's instead
# --------------------------------------------------------------------------
def _float_in(c: Call, slot: str) -> np.ndarray:
    x = input_value(c, slot)
    if x.dtype.kind != "f":
        raise ExecutionError(f"{c.op_type}: '{slot}' is {x.dtype}; Paddle's CPU kernel takes float or double")
    return x


def _bernoulli(c: Call):
    x = _float_in(c, "X")
    if np.any((x < 0) | (x > 1)):
        raise ExecutionError("bernoulli: probabilities must be in [0, 1]")
    u = _rng(c).random(x.shape).astype(x.dtype)
    return {"Out": (u < x).astype(x.dtype)}


def _binomial(c: Call):
    count, prob = input_value(c, "count"), _float_in(c, "prob")
    if np.any((prob < 0) | (prob > 1)) or np.any(count < 0):
        raise ExecutionError("binomial: need count >= 0 and prob in [0, 1]")
    count, prob = np.broadcast_arrays(count, prob)
    return {"out": _rng(c).binomial(count.astype(np.int64), prob.astype(np.float64)).astype(np.int64)}


def _standard_gamma(c: Call):
    x = _float_in(c, "x")
    if np.any(x <= 0):
        raise ExecutionError("standard_gamma: concentrations must be positive")
    return {"out": _rng(c).standard_gamma(x.astype(np.float64)).astype(x.dtype)}


def _dirichlet(c: Call):
    a = _float_in(c, "Alpha")
    if np.any(a <= 0):
        raise ExecutionError("dirichlet: Alpha must be positive")
    g = _rng(c).standard_gamma(a.astype(np.float64))
    return {"Out": (g / g.sum(axis=-1, keepdims=True)).astype(a.dtype)}


def _multinomial(c: Call):
    p = _float_in(c, "X")
    if p.ndim not in (1, 2):
        raise ExecutionError(f"multinomial: X must be 1-D or 2-D, it is {p.ndim}-D")
    k = int(c.attr("num_samples", 1))
    replace = bool(c.attr("replacement", False))
    rows = p.reshape(-1, p.shape[-1]).astype(np.float64)
    if np.any(rows < 0) or np.any(rows.sum(axis=1) <= 0):
        raise ExecutionError("multinomial: each row needs non-negative weights with a positive sum")
    if not replace and k > int(np.min(np.count_nonzero(rows, axis=1))):
        raise ExecutionError(f"multinomial: {k} samples without replacement exceed a row's nonzero weights")
    rng = _rng(c)
    out = np.stack([rng.choice(rows.shape[1], size=k, replace=replace, p=r / r.sum()) for r in rows])
    return {"Out": out.astype(np.int64).reshape(p.shape[:-1] + (k,))}


for _name, _kernel, _doc in (
        ("bernoulli", _bernoulli, "Out ~ Bernoulli(X), elementwise (X's dtype)"),
        ("binomial", _binomial, "out ~ Binomial(count, prob), elementwise (int64)"),
        ("standard_gamma", _standard_gamma, "out ~ Gamma(x, 1), elementwise"),
        ("dirichlet", _dirichlet, "Out ~ Dirichlet(Alpha) over the last axis"),
        ("multinomial", _multinomial, "Out = num_samples category indices per row drawn with weights X (int64)")):
    register(paddle_opdef(_name, _kernel, attrs_handled=("num_samples", "replacement") if _name == "multinomial"
                          else (), doc=_doc + "; Paddle's global generator: not reproducible, the interpreter's"))
