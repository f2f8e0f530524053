"""Random ops: uniform_random, gaussian_random, truncated_gaussian_random,
seed and dropout (with dropout_grad).

Paddle's CPU kernels draw from `std::mt19937_64` through libstdc++'s
distributions. This module re-implements that engine and those
distributions, so for a nonzero seed (the `seed` attr, dropout's
`fix_seed`/`seed` or its `Seed` input) the values equal Paddle's bit for bit:
startup programs reproduce Paddle's initial parameters, and a recomputed
dropout reproduces its mask. (gaussian_random calls the C library's log, as
libstdc++ does; truncated_gaussian_random follows Paddle's arithmetic and
usually matches to the last bit.) With seed 0 Paddle draws from its global
generator, whose state a program file does not hold: the 64-bit words then
come from the interpreter's `Call.rng` instead.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

from ...base import dtypes
from ...base.errors import ExecutionError
from ..registry import Call, GradSpec, OpDef, Sample, register
from ..tensor.creation import ints_from, np_dtype

_MASK64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64, vectorised over the 312-word state."""

    N, M = 312, 156
    _A = np.uint64(0xB5026F5AA96619E9)
    _UPPER = np.uint64(0xFFFFFFFF80000000)
    _LOWER = np.uint64(0x7FFFFFFF)
    _ONE, _ZERO = np.uint64(1), np.uint64(0)
    _fresh: int | None = None  # the seed, until the engine's first draw (see raw)

    def __init__(self, seed: int):
        seed = int(seed) & _MASK64
        state = _SEEDED.get(seed)
        if state is None:  # the seeding loop is sequential: ~0.1 ms, so kept per seed
            mt = [seed]
            for i in range(1, self.N):
                prev = mt[-1]
                mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & _MASK64)
            state = np.array(mt, dtype=np.uint64)
            state.flags.writeable = False  # shared: _twist makes a new array
            if len(_SEEDED) >= 256:
                _SEEDED.clear()
            _SEEDED[seed] = state
        self._state = state
        self._buf = _EMPTY
        self._fresh = seed

    @classmethod
    def from_seed_seq(cls, seed: int) -> "MT19937_64":
        """`std::mt19937_64` seeded through `std::seed_seq({seed})`: Paddle's global
        CPU generator right after `paddle.seed(seed)`, which seed-0 random ops
        (a dropout without fix_seed) draw from."""
        engine = cls.__new__(cls)
        engine._state, engine._buf, engine._fresh = _seed_seq_state(int(seed) & 0xFFFFFFFF, cls.N), _EMPTY, None
        return engine

    def _twist(self) -> np.ndarray:
        mt, n, m = self._state, self.N, self.M
        a, upper, lower, one, zero = self._A, self._UPPER, self._LOWER, self._ONE, self._ZERO
        new = np.empty_like(mt)
        # words 0..n-m-1 read the old state only
        y = (mt[:n - m] & upper) | (mt[1:n - m + 1] & lower)
        new[:n - m] = mt[m:] ^ (y >> one) ^ ((zero - (y & one)) & a)
        # words n-m..n-1 read new words 0..m-1 (n - m == m); the last one's next word is new[0]
        y = (mt[n - m:] & upper) | (np.concatenate((mt[n - m + 1:], new[:1])) & lower)
        new[n - m:] = new[:m] ^ (y >> one) ^ ((zero - (y & one)) & a)
        self._state = new
        y = new ^ ((new >> np.uint64(29)) & np.uint64(0x5555555555555555))
        y ^= (y << np.uint64(17)) & np.uint64(0x71D67FFFEDA60000)
        y ^= (y << np.uint64(37)) & np.uint64(0xFFF7EEE000000000)
        return y ^ (y >> np.uint64(43))

    def raw(self, n: int) -> np.ndarray:
        """The next n 64-bit outputs (read-only)."""
        seed, self._fresh = self._fresh, None
        if seed is None:
            return self._draw(n)
        # A freshly seeded engine's first draw is the same every time: a
        # fixed-seed dropout makes the same mask at every step (Paddle's
        # fix_seed), so the words and the state after them are kept per (seed, n).
        key = (seed, n)
        hit = _FIRST_DRAWS.get(key)
        if hit is not None:
            words, self._state, self._buf = hit
            return words
        words = self._draw(n)
        global _FIRST_DRAWS_WORDS
        if n <= _FIRST_DRAWS_MAX:
            if _FIRST_DRAWS_WORDS + n > _FIRST_DRAWS_MAX:
                _FIRST_DRAWS.clear()
                _FIRST_DRAWS_WORDS = 0
            _FIRST_DRAWS[key] = (words, self._state, self._buf)
            _FIRST_DRAWS_WORDS += n
        return words

    def _draw(self, n: int) -> np.ndarray:
        parts, have = [self._buf], len(self._buf)
        while have < n:
            block = self._twist()
            parts.append(block)
            have += len(block)
        allv = np.concatenate(parts)
        allv.flags.writeable = False  # shared by the first-draw cache and the buffer
        self._buf = allv[n:]
        return allv[:n]

    def canonical(self, n: int, dt: np.dtype) -> np.ndarray:
        """std::generate_canonical<T>: one 64-bit draw per value, in [0, 1)."""
        dt = np.dtype(dt)
        u = self.raw(n).astype(dt) / dt.type(2.0 ** 64)
        return np.minimum(u, np.nextafter(dt.type(1), dt.type(0)))

    def uniform(self, n: int, lo: float, hi: float, dt: np.dtype) -> np.ndarray:
        """std::uniform_real_distribution<T>(lo, hi): u * (hi - lo) + lo in T."""
        t = np.dtype(dt).type
        return self.canonical(n, dt) * (t(hi) - t(lo)) + t(lo)


@functools.lru_cache(maxsize=64)
def _seed_seq_state(seed: int, n: int) -> np.ndarray:
    """The n-word state std::seed_seq({seed}) gives a 64-bit engine (read-only: shared)."""
    words = seed_seq_generate([seed], 2 * n)
    state = np.array([words[2 * i] | (words[2 * i + 1] << 32) for i in range(n)], dtype=np.uint64)
    state.flags.writeable = False
    return state


def seed_seq_generate(values: list[int], n: int) -> list[int]:
    """`std::seed_seq(values).generate` of n 32-bit words (the standard's algorithm)."""
    m32 = 0xFFFFFFFF
    b, s = [0x8B8B8B8B] * n, len(values)
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    for k in range(max(s + 1, n)):
        x = b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n]
        r1 = (1664525 * (x ^ (x >> 27))) & m32
        r2 = (r1 + (s if k == 0 else (k % n + values[k - 1] if k <= s else k % n))) & m32
        b[(k + p) % n] = (b[(k + p) % n] + r1) & m32
        b[(k + q) % n] = (b[(k + q) % n] + r2) & m32
        b[k % n] = r2
    for k in range(max(s + 1, n), max(s + 1, n) + n):
        x = (b[k % n] + b[(k + p) % n] + b[(k - 1) % n]) & m32
        r3 = (1566083941 * (x ^ (x >> 27))) & m32
        r4 = (r3 - k % n) & m32
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    return b


_SEEDED: dict[int, np.ndarray] = {}
_FIRST_DRAWS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_FIRST_DRAWS_MAX = 1 << 22   # 64-bit words kept at most (32 MiB)
_FIRST_DRAWS_WORDS = 0
_EMPTY = np.zeros(0, dtype=np.uint64)


class _StreamEngine(MT19937_64):
    """The engine of a seed-0 op: Paddle draws from its global generator,
    whose state a program does not hold, so no value here could equal
    Paddle's; the 64-bit words come straight from the interpreter's
    generator (deterministic for a seeded Executor), with no engine to seed
    per op. The distributions on top are the same."""

    def __init__(self, rng: np.random.Generator):
        self._bits = rng.bit_generator
        self._buf = _EMPTY

    def _twist(self) -> np.ndarray:
        return self._bits.random_raw(self.N).astype(np.uint64, copy=False)


def _libm_log(dt: np.dtype):
    """The C library's log/logf as a ufunc-like (libstdc++'s normal_distribution
    calls it); NumPy's own log differs in the last bit now and then."""
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name) if name else None
        f = getattr(lib, "logf" if dt == np.float32 else "log")
    except (OSError, AttributeError):
        return lambda v: np.log(v.astype(np.float64)).astype(dt)
    ctype = ctypes.c_float if dt == np.float32 else ctypes.c_double
    f.restype, f.argtypes = ctype, [ctype]
    uf = np.frompyfunc(f, 1, 1)
    return lambda v: uf(v).astype(dt)


_LOGS: dict = {}


def normal(engine: MT19937_64, n: int, mean: float, std: float, dt: np.dtype) -> np.ndarray:
    """std::normal_distribution<T>(mean, std) (libstdc++'s Marsaglia polar
    method: each accepted pair gives two values, y first; a fresh distribution
    per kernel call, so an odd count drops the last saved value)."""
    dt = np.dtype(dt)
    t = dt.type
    log = _LOGS.get(dt) or _LOGS.setdefault(dt, _libm_log(dt))
    need = (n + 1) // 2
    if need == 0:
        return np.zeros(0, dtype=dt)
    xs, ys = [], []
    got = 0
    while got < need:
        pairs = max(16, int((need - got) * 1.35) + 8)
        u = engine.canonical(2 * pairs, dt)
        x = t(2) * u[0::2] - t(1)
        y = t(2) * u[1::2] - t(1)
        r2 = x * x + y * y
        ok = (r2 <= 1) & (r2 != 0)
        xs.append(x[ok])
        ys.append(y[ok])
        got += int(ok.sum())
    # (draws past the last needed pair are harmless: Paddle's engine for a
    # seeded call, like this one, is discarded after the call)
    x, y = np.concatenate(xs)[:need], np.concatenate(ys)[:need]
    r2 = x * x + y * y
    mult = np.sqrt(t(-2) * log(r2) / r2)
    out = np.empty(2 * need, dtype=dt)
    out[0::2], out[1::2] = y * mult, x * mult
    return out[:n] * t(std) + t(mean)


# --------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------
def engine(c: Call, seed: int = 0) -> MT19937_64:
    """Paddle's engine for a seeded op; seed 0 (Paddle's global generator, whose
    state a program does not hold) is drawn from the interpreter's generator."""
    if seed == 0:
        return _StreamEngine(c.rng if c.rng is not None else np.random.default_rng())
    return MT19937_64(seed)


def _float_dtype(c: Call) -> tuple[np.dtype, np.dtype]:
    """(the dtype to compute in, the output dtype): fp16 is drawn as float."""
    d = int(c.attr("dtype", dtypes.VarType.FP32))
    out = np_dtype(c, "dtype", d)
    if out.kind != "f":
        raise c.unsupported("dtype", d, "random ops make floating point tensors")
    return (np.dtype(np.float32) if out == np.float16 else out), out


def _shape(c: Call) -> tuple[int, ...]:
    """Paddle's rule for the random ops: ShapeTensorList wins; ShapeTensor is
    read only when the shape attr is empty."""
    if c.has("ShapeTensorList") or not c.attr("shape", ()):
        shape = tuple(ints_from(c, "ShapeTensor", "ShapeTensorList", "shape"))
        if c.has("ShapeTensorList"):
            shape = tuple(ints_from(c, None, "ShapeTensorList", "shape"))
    else:
        shape = tuple(int(v) for v in c.attr("shape"))
    if any(d < 0 for d in shape):
        raise ExecutionError(f"{c.op_type}: shape {list(shape)} has a negative dim")
    return shape


def uniform_fill(c: Call, shape, work: np.dtype, out_dt: np.dtype) -> np.ndarray:
    """uniform_random's values of `shape`: U[min, max) drawn in `work`, the
    diag_num / diag_step / diag_val entries set, cast to `out_dt`."""
    n = int(np.prod(shape, dtype=np.int64))
    lo, hi = np.float32(c.attr("min", -1.0)), np.float32(c.attr("max", 1.0))
    data = engine(c, int(c.attr("seed", 0))).uniform(n, lo, hi, work)
    diag_num, diag_step = int(c.attr("diag_num", 0)), int(c.attr("diag_step", 0))
    if diag_num > 0:
        if n <= (diag_num - 1) * (diag_step + 1):
            raise ExecutionError(f"{c.op_type}: diag_num={diag_num}, diag_step={diag_step} exceed {n} elements")
        data[np.arange(diag_num) * (diag_step + 1)] = work.type(np.float32(c.attr("diag_val", 1.0)))
    return data.astype(out_dt, copy=False).reshape(shape)


def _uniform_random(c: Call):
    work, out_dt = _float_dtype(c)
    return {"Out": uniform_fill(c, _shape(c), work, out_dt)}


register(OpDef(type="uniform_random", inputs=("ShapeTensor", "ShapeTensorList"), outputs=("Out",),
               kernel=_uniform_random, grad=None,
               attrs_handled=("shape", "min", "max", "seed", "dtype", "diag_num", "diag_step", "diag_val"),
               doc="Out ~ U[min, max) (Paddle's exact stream for seed != 0)"))


def _gaussian_random(c: Call):
    shape = _shape(c)
    work, out_dt = _float_dtype(c)
    n = int(np.prod(shape, dtype=np.int64))
    mean, std = np.float32(c.attr("mean", 0.0)), np.float32(c.attr("std", 1.0))
    data = normal(engine(c, int(c.attr("seed", 0))), n, mean, std, work)
    return {"Out": data.astype(out_dt, copy=False).reshape(shape)}


register(OpDef(type="gaussian_random", inputs=("ShapeTensor", "ShapeTensorList"), outputs=("Out",),
               kernel=_gaussian_random, grad=None, attrs_handled=("shape", "mean", "std", "seed", "dtype"),
               doc="Out ~ N(mean, std^2) (Paddle's exact stream for seed != 0)"))


# Paddle's Erfinv (funcs/truncated_normal.h), coefficients A..F.
_ERFINV = {
    "A": [1.1975323115670912564578e0, 4.7072688112383978012285e1, 6.9706266534389598238465e2,
          4.8548868893843886794648e3, 1.6235862515167575384252e4, 2.3782041382114385731252e4,
          1.1819493347062294404278e4, 8.8709406962545514830200e2],
    "B": [1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
          2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4, 5.2264952788528545610e3],
    "C": [1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
          3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
          2.27238449892691845833e-2, 7.74545014278341407640e-4],
    "D": [1.4142135623730950488016887e0, 2.9036514445419946173133295e0, 2.3707661626024532365971225e0,
          9.7547832001787427186894837e-1, 2.0945065210512749128288442e-1, 2.1494160384252876777097297e-2,
          7.7441459065157709165577218e-4, 1.4859850019840355905497876e-9],
    "E": [6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
          2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
          2.71155556874348757815e-5, 2.01033439929228813265e-7],
    "F": [1.414213562373095048801689e0, 8.482908416595164588112026e-1, 1.936480946950659106176712e-1,
          2.103693768272068968719679e-2, 1.112800997078859844711555e-3, 2.611088405080593625138020e-5,
          2.010321207683943062279931e-7, 2.891024605872965461538222e-15],
}


def _horner(name: str, r: np.ndarray) -> np.ndarray:
    t = r.dtype.type
    coef = [t(v) for v in _ERFINV[name]]
    acc = coef[7] * r + coef[6]
    for k in range(5, -1, -1):
        acc = acc * r + coef[k]
    return acc


def _erfinv(x: np.ndarray) -> np.ndarray:
    """Paddle's Erfinv<T>, with its mix of T and double arithmetic."""
    t = x.dtype.type
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax <= 0.85
    xs = x[small].astype(np.float64)
    r = (0.180625 - 0.25 * xs * xs).astype(x.dtype)
    out[small] = x[small] * _horner("A", r) / _horner("B", r)
    big = ~small & (ax < 1)
    if big.any():
        xb = x[big]
        lg = np.frompyfunc(math.log, 1, 1)(1.0 - np.abs(xb).astype(np.float64)).astype(np.float64)
        r = np.sqrt(np.float64(t(0.6931471805599453)) - lg).astype(x.dtype)
        mid = r <= 5.0
        num, den = np.empty_like(r), np.empty_like(r)
        rm = (r[mid].astype(np.float64) - 1.6).astype(x.dtype)
        num[mid], den[mid] = _horner("C", rm), _horner("D", rm)
        rt = (r[~mid].astype(np.float64) - 5.0).astype(x.dtype)
        num[~mid], den[~mid] = _horner("E", rt), _horner("F", rt)
        out[big] = np.where(xb < 0, -num / den, num / den)
    out[ax == 1] = np.copysign(np.inf, x[ax == 1])
    out[ax > 1] = np.nan
    return out


def _truncated_gaussian_random(c: Call):
    shape = tuple(int(v) for v in c.attr("shape", ()))
    work, out_dt = _float_dtype(c)
    t = work.type
    n = int(np.prod(shape, dtype=np.int64))
    mean, std = t(c.attr("mean", 0.0)), t(c.attr("std", 1.0))
    a, b = t(c.attr("a", -2.0)), t(c.attr("b", 2.0))

    def cdf(v):  # double arithmetic, stored in T
        return t((1.0 + math.erf(float(t((v - mean) / std)) / math.sqrt(2.0))) / 2.0)
    a_cdf, b_cdf = cdf(a), cdf(b)
    eng = engine(c, int(c.attr("seed", 0)))
    value = eng.uniform(n, np.finfo(np.float32).tiny, 1.0, work)
    p = a_cdf + (b_cdf - a_cdf) * value
    e = _erfinv(t(2) * p - t(1))
    ret = (math.sqrt(2.0) * e.astype(np.float64) * np.float64(std) + np.float64(mean)).astype(work)
    return {"Out": np.clip(ret, a, b).astype(out_dt, copy=False).reshape(shape)}


register(OpDef(type="truncated_gaussian_random", inputs=(), outputs=("Out",),
               kernel=_truncated_gaussian_random, grad=None,
               attrs_handled=("shape", "mean", "std", "seed", "a", "b", "dtype"),
               doc="Out ~ N(mean, std^2) truncated to [a, b] by inverse CDF"))


def _seed(c: Call):
    s = int(c.attr("seed", 0))
    if s == 0:
        rng = c.rng if c.rng is not None else np.random.default_rng()
        s = int(rng.integers(1, 2 ** 31))
    return {"Out": np.array([s], dtype=np.int32)}


register(OpDef(type="seed", inputs=(), outputs=("Out",), kernel=_seed, grad=None, attrs_handled=("seed",),
               doc="Out = [seed] (int32; a random nonzero value when seed is 0)"))


# --------------------------------------------------------------------------
# dropout
# --------------------------------------------------------------------------
def _dropout_p(c: Call) -> np.float32:
    p = np.float32(c.attr("dropout_prob", 0.5))
    if not 0 <= p <= 1:
        raise c.unsupported("dropout_prob", float(p), "must be in [0, 1]")
    return p


def _mode(c: Call) -> bool:
    """True for upscale_in_train."""
    mode = c.attr("dropout_implementation", "downgrade_in_infer")
    if mode not in ("downgrade_in_infer", "upscale_in_train"):
        raise c.unsupported("dropout_implementation", mode)
    return mode == "upscale_in_train"


def _dropout(c: Call):
    x = np.asarray(c.x("X"))
    p, upscale = _dropout_p(c), _mode(c)
    t = x.dtype.type
    if c.attr("is_test", False):
        return {"Out": x.copy() if upscale else x * t(np.float32(1) - p)}
    if p == 1:
        return {"Out": np.zeros_like(x), "Mask": np.zeros(x.shape, np.uint8)}
    if c.has("Seed"):
        seed = int(np.asarray(c.x("Seed")).reshape(-1)[0])
    else:
        seed = int(c.attr("seed", 0)) if c.attr("fix_seed", False) else 0
    keep = engine(c, seed).canonical(x.size, np.float32).reshape(x.shape) >= p
    kept = x / t(np.float32(1) - p) if upscale else x
    return {"Out": np.where(keep, kept, t(0)).astype(x.dtype, copy=False), "Mask": keep.astype(np.uint8)}


def _dropout_grad(c: Call):
    g = c.x("Out@GRAD")
    if g is None:
        raise ExecutionError("dropout_grad: input 'Out@GRAD' has no value")
    g = np.asarray(g)
    p, upscale = _dropout_p(c), _mode(c)
    t = g.dtype.type
    if c.attr("is_test", False):  # Paddle's test-mode forward writes no Mask and its grad reads none
        return {"X@GRAD": g.copy() if upscale else g * t(np.float32(1) - p)}
    if c.x("Mask") is None:
        raise ExecutionError("dropout_grad: input 'Mask' has no value (a training-mode dropout "
                             "writes it; is the forward dropout missing from the program?)")
    m = np.asarray(c.x("Mask")).astype(g.dtype)
    if upscale:
        return {"X@GRAD": g * t(0) if p == 1 else g * m / t(np.float32(1) - p)}
    return {"X@GRAD": g * m}


def _dropout_samples(rng):
    x = rng.standard_normal((4, 6))
    return [Sample({"X": [x]}, {"dropout_prob": 0.35, "fix_seed": True, "seed": 77}),
            Sample({"X": [x]}, {"dropout_prob": 0.35, "fix_seed": True, "seed": 77,
                                "dropout_implementation": "upscale_in_train"}, note="upscale"),
            Sample({"X": [x], "Seed": [np.array([5], np.int32)]}, {"dropout_prob": 0.5}, note="Seed input")]


# Declared before dropout so it can take an uninitialised Mask: in test mode
# Paddle's dropout leaves Mask unwritten and dropout_grad never reads it
# (Paddle 3.3.1: fetching that Mask gives None; the grad is dY or dY*(1-p)).
register(OpDef(type="dropout_grad", inputs=("Mask", "Out@GRAD"), outputs=("X@GRAD",), kernel=_dropout_grad,
               grad_of="dropout", allow_missing_inputs=True, doc="gradient of dropout"))
register(OpDef(
    type="dropout", inputs=("X", "Seed"), outputs=("Out", "Mask"), kernel=_dropout,
    grad=GradSpec("dropout_grad", ("Mask", "Out@GRAD"), ("X@GRAD",), kernel=_dropout_grad),
    samples=_dropout_samples, intermediate_outputs=("Mask",),
    attrs_handled=("dropout_prob", "is_test", "dropout_implementation", "fix_seed", "seed"),
    doc="Out = X * Mask (scaled by 1/(1-p) for upscale_in_train); Mask from the seed"))
