"""Special functions: erf, erfinv, lgamma / gammaln, digamma, polygamma, the
modified Bessel functions i0, i0e, i1, i1e, and gammaincc, with their grads.

NumPy has none of these, so they are computed here, vectorised, to float64
accuracy and with Paddle 3.3.1's CPU behaviour at the edges (poles, zeros,
infinities), which was probed on a live Paddle:

* erf and lgamma use the C library (`math.erf`, `math.lgamma`), as Paddle's
  kernels do (std::erf, std::lgamma), element by element;
* erfinv is Paddle's `ndtri((x + 1) / 2) / sqrt(2)`: |x| > 1 gives +-inf, and
  (x + 1) / 2 is rounded first, so a tiny x gives 0;
* digamma follows Cephes' recurrence and asymptotic series (shift to x >= 10,
  reflection for x <= 0) in the two summation orders Paddle uses: the
  digamma and lgamma_grad kernels' (Eigen) and gammaln_grad's (PyTorch's);
  digamma(+-0) = -+inf, negative integers give NaN;
* polygamma(n, x) is (-1)^(n+1) n! zeta(n+1, x) with Cephes' Hurwitz zeta,
  for every n - so the op with n = 0 gives -inf, exactly as Paddle's kernel
  (paddle.polygamma calls digamma for n = 0 instead);
* gammaincc(x, y) is Cephes' igamc: 1 where x <= 0 or y <= 0; its grad
  (w.r.t. y only) is -e^-y y^(x-1) / Gamma(x).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...base.errors import ExecutionError
from .._unary import as_dtype, kinks, no_int_kernel, unary_op, uniform
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_MACHEP = 1.11022302462515654042e-16
_MAXLOG = 7.09782712893383996843e2
#: Bernoulli numbers B_2, B_4, ..., B_24
_BERNOULLI = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
              Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
              Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730)]
#: digamma's asymptotic series: B_2k / 2k for k = 7 .. 1 (Horner order)
_PSI_A = [float(_BERNOULLI[k - 1] / (2 * k)) for k in range(7, 0, -1)]
#: zeta's Euler-Maclaurin terms: (2j)! / B_2j for j = 1 .. 12
_ZETA_A = [float(math.factorial(2 * j) / _BERNOULLI[j - 1]) for j in range(1, 13)]
_PSI_10 = 2.25175258906672110764  # digamma(10)


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _c_lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):  # poles: C's lgamma gives +inf
        return math.inf


def _c_tgamma(v: float) -> float:
    try:
        return math.gamma(v)
    except OverflowError:
        return math.inf
    except ValueError:  # C: tgamma(+-0) = +-inf; negative integers and -inf: NaN
        return math.copysign(math.inf, v) if v == 0 else math.nan


_erf_u = np.frompyfunc(math.erf, 1, 1)
_erfc_u = np.frompyfunc(math.erfc, 1, 1)
_lgamma_u = np.frompyfunc(_c_lgamma, 1, 1)
_tgamma_u = np.frompyfunc(_c_tgamma, 1, 1)


def erf(x) -> np.ndarray:
    return _f64(_erf_u(_f64(x)))


def erfc(x) -> np.ndarray:
    return _f64(_erfc_u(_f64(x)))


def lgamma(x) -> np.ndarray:
    return _f64(_lgamma_u(_f64(x)))


def tgamma(x) -> np.ndarray:
    return _f64(_tgamma_u(_f64(x)))


# --------------------------------------------------------------------------
# digamma, zeta, polygamma
# --------------------------------------------------------------------------
def _psi_series(s: np.ndarray) -> np.ndarray:
    """z * P(z), z = 1 / s^2: the asymptotic tail of digamma (0 for s >= 1e17)."""
    z = 1.0 / (s * s)
    p = np.zeros_like(s)
    for a in _PSI_A:
        p = p * z + a
    return np.where(s < 1.0e17, z * p, 0.0)


def _shift_to_10(s: np.ndarray, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """psi(s) = psi(s + k) - sum 1/(s + i): shift s (> 0) up to >= 10."""
    w = np.zeros_like(s)
    while True:
        m = s < 10.0
        if not m.any():
            return s, w
        w = np.where(m, w + sign / np.where(m, s, 1.0), w)
        s = np.where(m, s + 1.0, s)


def digamma(x, torch_order: bool = False) -> np.ndarray:
    """psi(x); `torch_order` sums as gammaln_grad does, else as digamma does."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        neg = x < 0 if torch_order else x <= 0
        bad = neg & (x == np.floor(x))
        if torch_order:
            r = x - np.trunc(x)
            refl = np.pi / np.tan(np.pi * r)
        else:
            p = np.floor(x)
            nz = x - p
            nz = np.where(nz > 0.5, x - (p + 1.0), nz)
            refl = np.where(nz != 0.5, np.pi / np.tan(np.pi * nz), 0.0)
        s = np.where(neg, 1.0 - x, x)
        s = np.where(bad | np.isnan(s), 11.0, s)  # keep the loop finite; fixed below
        if torch_order:
            s, w = _shift_to_10(s, -1.0)
            y = np.where(s == 10.0, w + _PSI_10, (w + np.log(s)) - 0.5 / s - _psi_series(s))
        else:
            s, w = _shift_to_10(s, 1.0)
            y = np.log(s) - 0.5 / s - _psi_series(s) - w
        y = np.where(neg, y - refl, y)
        y = np.where(bad | np.isnan(x), np.nan, y)
        return np.where(x == 0, np.copysign(np.inf, -x), y)


def zeta(s, q) -> np.ndarray:
    """Hurwitz zeta(s, q) = sum_k (q + k)^-s, as Cephes computes it: direct
    terms until q + k > 9 (at least 9), then Euler-Maclaurin."""
    s, q = np.broadcast_arrays(_f64(s), _f64(q))
    s, q = s.astype(np.float64), q.astype(np.float64)
    with np.errstate(all="ignore"):
        # Cephes' order of checks; NaN operands propagate through the sums
        inf = s == 1.0
        nan = ~inf & (s < 1.0)
        inf |= ~nan & (q <= 0) & (q == np.floor(q))
        nan |= ~inf & (q <= 0) & (s != np.floor(s))
        lo = float(np.min(np.where(inf | nan, 0.0, q), initial=0.0))
        if lo < -1.0e6:
            raise ExecutionError(f"zeta: q = {lo} needs more than a million terms (Paddle loops for as long)")
        acc = q ** -s
        a, b = q.copy(), np.zeros_like(q)
        alive = ~(inf | nan)
        i = 0
        while True:
            step = alive & ((i < 9) | (a <= 9.0))
            if not step.any():
                break
            i += 1
            a = np.where(step, a + 1.0, a)
            b = np.where(step, a ** -s, b)
            acc = np.where(step, acc + b, acc)
            alive &= ~(step & (np.abs(b / acc) < _MACHEP))
        w = a
        acc = np.where(alive, acc + b * w / (s - 1.0) - 0.5 * b, acc)
        fac, k = np.ones_like(s), 0.0
        for coef in _ZETA_A:
            fac = fac * (s + k)
            b = b / w
            t = fac * b / coef
            acc = np.where(alive, acc + t, acc)
            alive &= ~(np.abs(t / acc) < _MACHEP)
            k += 1.0
            fac = fac * (s + k)
            b = b / w
            k += 1.0
        acc = np.where(inf, np.inf, acc)
        return np.where(nan, np.nan, acc)


def polygamma(n: int, x) -> np.ndarray:
    """Paddle's polygamma kernel: (-1)^(n+1) n! zeta(n + 1, x), for n = 0 too."""
    fact = math.exp(math.lgamma(n + 1.0))
    return (1.0 if n % 2 else -1.0) * fact * zeta(n + 1.0, x)


# --------------------------------------------------------------------------
# modified Bessel functions of the first kind, orders 0 and 1
# --------------------------------------------------------------------------
_BESSEL_SPLIT = 25.0


def _bessel_scaled(order: int, x: np.ndarray) -> np.ndarray:
    """I_order(|x|) * e^-|x|: power series below 25, asymptotic series above."""
    a = np.abs(x)
    small = np.where(a <= _BESSEL_SPLIT, a, 0.0)
    q = small * small / 4.0
    term = np.ones_like(a) if order == 0 else small / 2.0
    total = term.copy()
    for k in range(1, 90):
        term = term * q / (k * (k + order))
        total = total + term
    series = total * np.exp(-small)
    big = np.where(a > _BESSEL_SPLIT, a, _BESSEL_SPLIT + 1.0)
    mu = 4.0 * order * order
    term = np.ones_like(a)
    total = term.copy()
    for k in range(1, 40):
        term = term * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
        total = total + term
    asym = total / np.sqrt(2.0 * np.pi * big)
    return np.where(a <= _BESSEL_SPLIT, series, asym)


def i0e(x) -> np.ndarray:
    x = _f64(x)
    return np.where(np.isnan(x), np.nan, _bessel_scaled(0, x))


def i1e(x) -> np.ndarray:
    x = _f64(x)
    return np.where(np.isnan(x), np.nan, np.sign(x) * _bessel_scaled(1, x))


def i0(x) -> np.ndarray:
    x = _f64(x)
    with np.errstate(all="ignore"):
        return np.where(np.isinf(x), np.nan, np.exp(np.abs(x)) * i0e(x))


def i1(x) -> np.ndarray:
    x = _f64(x)
    with np.errstate(all="ignore"):
        return np.where(np.isinf(x), np.nan, np.exp(np.abs(x)) * i1e(x))


# --------------------------------------------------------------------------
# erfinv: Paddle's ndtri((x + 1) / 2) / sqrt(2)
# --------------------------------------------------------------------------
def ndtri(y) -> np.ndarray:
    """The standard normal quantile: Phi(z) = y; -inf at y <= 0, +inf at y >= 1."""
    y = _f64(y)
    with np.errstate(all="ignore"):
        p = np.where(y > 0.5, 1.0 - y, y)  # exact for y >= 0.5
        ok = (p > 0) & (y < 1)
        pc = np.where(ok, p, 0.25)
        t = np.sqrt(-2.0 * np.log(pc))  # Abramowitz & Stegun 26.2.23 (error < 4.5e-4)
        z = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
              / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t ** 3))
        for _ in range(4):  # Halley steps on Phi(z) - p, Phi(z) = erfc(-z / sqrt 2) / 2
            f = 0.5 * erfc(-z / math.sqrt(2.0)) - pc
            phi = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
            u = f / phi
            z = z - u / (1.0 + 0.5 * z * u)
        z = np.where(y > 0.5, -z, z)
        z = np.where(y == 0.5, 0.0, z)
        z = np.where(y <= 0, -np.inf, np.where(y >= 1, np.inf, z))
        return np.where(np.isnan(y), np.nan, z)


def erfinv(x: np.ndarray) -> np.ndarray:
    """In x's dtype the argument (x + 1) / 2 is rounded first, as in Paddle."""
    y = x * x.dtype.type(0.5) + x.dtype.type(0.5)
    return ndtri(y) * math.sqrt(0.5)


# --------------------------------------------------------------------------
# gammaincc: Cephes' igam / igamc, vectorised
# --------------------------------------------------------------------------
def _igam_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) by its power series (Cephes igam's inner loop)."""
    with np.errstate(all="ignore"):
        ax = a * np.log(x) - x - lgamma(a)
        r, c, ans = a.copy(), np.ones_like(a), np.ones_like(a)
        alive = np.isfinite(ans)
        for _ in range(100000):
            if not alive.any():
                break
            r = np.where(alive, r + 1.0, r)
            c = np.where(alive, c * x / r, c)
            ans = np.where(alive, ans + c, ans)
            alive &= (c / ans > _MACHEP)
        return np.where(ax < -_MAXLOG, 0.0, ans * np.exp(ax) / a)


def _igamc_fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) by its continued fraction (Cephes igamc), rescaled as it grows."""
    big, biginv = 4.503599627370496e15, 2.22044604925031308085e-16
    with np.errstate(all="ignore"):
        ax = a * np.log(x) - x - lgamma(a)
        y = 1.0 - a
        z = x + y + 1.0
        c = np.zeros_like(a)
        pkm2, qkm2, pkm1, qkm1 = np.ones_like(a), x.copy(), x + 1.0, z * x
        ans = pkm1 / qkm1
        alive = np.ones(a.shape, dtype=bool)
        for _ in range(100000):
            if not alive.any():
                break
            c, y, z = c + 1.0, y + 1.0, z + 2.0
            yc = y * c
            pk = pkm1 * z - pkm2 * yc
            qk = qkm1 * z - qkm2 * yc
            nz = qk != 0
            r = np.where(nz, pk / np.where(nz, qk, 1.0), ans)
            t = np.where(nz, np.abs((ans - r) / r), 1.0)
            ans = np.where(alive & nz, r, ans)
            pkm2, pkm1 = np.where(alive, pkm1, pkm2), np.where(alive, pk, pkm1)
            qkm2, qkm1 = np.where(alive, qkm1, qkm2), np.where(alive, qk, qkm1)
            scale = alive & (np.abs(pk) > big)
            pkm2, pkm1 = np.where(scale, pkm2 * biginv, pkm2), np.where(scale, pkm1 * biginv, pkm1)
            qkm2, qkm1 = np.where(scale, qkm2 * biginv, qkm2), np.where(scale, qkm1 * biginv, qkm1)
            alive &= t > _MACHEP
        return np.where(ax < -_MAXLOG, 0.0, ans * np.exp(ax))


def gammaincc(a, x) -> np.ndarray:
    """The regularised upper incomplete gamma function Q(a, x)."""
    a, x = np.broadcast_arrays(_f64(a), _f64(x))
    one = (x <= 0) | (a <= 0)
    series = ~one & ((x < 1.0) | (x < a))
    fine_a, fine_x = np.where(one, 1.0, a), np.where(one, 1.0, x)
    out = np.empty(a.shape)
    if series.any():
        out[series] = 1.0 - _igam_series(fine_a[series], fine_x[series])
    frac = ~one & ~series
    if frac.any():
        out[frac] = _igamc_fraction(fine_a[frac], fine_x[frac])
    return np.where(one, 1.0, out)


# --------------------------------------------------------------------------
# the ops
# --------------------------------------------------------------------------
def _bessel_gen(rng, shape):
    return np.asarray(rng.uniform(-4.0, 4.0, shape))


def _polygamma_n(c: Call) -> int:
    n = int(c.attr("n", 1))
    if n < 0:
        raise c.unsupported("n", n, "polygamma needs n >= 0")
    return n


def _i1_grad(c, x, o, g):
    with np.errstate(all="ignore"):
        return g * np.where(x == 0, 0.5, i0(x) - o / x)


def _i1e_grad(c, x, o, g):
    with np.errstate(all="ignore"):
        return g * np.where(x == 0, 0.5, i0e(x) - o * (np.copysign(1.0, x) + 1.0 / x))


_GAMMA_GEN = kinks(-1.0, -2.0, lo=-2.7, hi=5.0, gap=0.2)

# fmt: off
unary_op("erf", lambda x, c: erf(x), lambda c, x, o, g: g * (2.0 / math.sqrt(math.pi)) * np.exp(-x * x),
         doc="Out = erf(X)")
unary_op("erfinv", lambda x, c: erfinv(x), lambda c, x, o, g: g * (math.sqrt(math.pi) / 2.0) * np.exp(o * o),
         gen=uniform(-0.95, 0.95), doc="Out = erfinv(X); +-inf for |X| >= 1, as Paddle's ndtri((X + 1) / 2) / sqrt(2)")
unary_op("lgamma", lambda x, c: lgamma(x), lambda c, x, o, g: g * digamma(x), gen=_GAMMA_GEN,
         doc="Out = log|Gamma(X)|")
unary_op("gammaln", lambda x, c: lgamma(x), lambda c, x, o, g: g * digamma(x, torch_order=True), gen=_GAMMA_GEN,
         doc="out = log|Gamma(x)|")
unary_op("digamma", lambda x, c: digamma(x), lambda c, x, o, g: g * polygamma(1, x), gen=_GAMMA_GEN,
         doc="Out = digamma(X); -inf at +0, +inf at -0, NaN at negative integers")
unary_op("polygamma", lambda x, c: polygamma(_polygamma_n(c), x),
         lambda c, x, o, g: g * polygamma(_polygamma_n(c) + 1, x), gen=uniform(0.3, 5.0),
         attrs_list=({"n": 1}, {"n": 2}, {"n": 3}), attrs_handled=("n",),
         doc="out = (-1)^(n+1) n! zeta(n + 1, x) (so -inf for n = 0, as Paddle's kernel)")
unary_op("i0", lambda x, c: i0(x), lambda c, x, o, g: g * i1(x), gen=_bessel_gen, doc="out = I0(x)")
unary_op("i0e", lambda x, c: i0e(x), lambda c, x, o, g: g * (i1e(x) - np.copysign(1.0, x) * o), gen=_bessel_gen,
         doc="out = I0(x) e^-|x|")
unary_op("i1", lambda x, c: i1(x), _i1_grad, gen=_bessel_gen, doc="out = I1(x)")
unary_op("i1e", lambda x, c: i1e(x), _i1e_grad, gen=_bessel_gen, doc="out = I1(x) e^-|x|")
# fmt: on


def _gammaincc(c: Call):
    x, y = c.x("x"), c.x("y")
    no_int_kernel(c, x)
    if x.shape != y.shape:
        raise ExecutionError(f"op gammaincc: x{x.shape} and y{y.shape} must have the same shape")
    return {"out": as_dtype(gammaincc(x, y), x)}


def _gammaincc_grad(c: Call):
    if not c.wants("y@GRAD"):
        return {}
    x, y, g = c.x("x"), c.x("y"), c.x("out@GRAD")
    with np.errstate(all="ignore"):  # in the input's dtype: float32 overflows where Paddle's does
        d = -np.exp(-y) * np.power(y, x - 1) / as_dtype(tgamma(x), x)
        return {"y@GRAD": as_dtype(g * d, y)}


def _gammaincc_samples(rng):
    return [Sample({"x": [rng.uniform(0.5, 4.0, (3, 4))], "y": [rng.uniform(0.2, 6.0, (3, 4))]}),
            Sample({"x": [rng.uniform(0.5, 4.0, (2, 3))], "y": [rng.uniform(0.05, 0.9, (2, 3))]}, note="small y"),
            Sample({"x": [rng.uniform(5.0, 15.0, (2, 3))], "y": [rng.uniform(1.0, 20.0, (2, 3))]}, note="large"),
            Sample({"x": [np.asarray(rng.uniform(0.5, 3.0))], "y": [np.asarray(rng.uniform(0.5, 3.0))]}, note="0-D")]


register(paddle_opdef("gammaincc", _gammaincc, {"gammaincc_grad": _gammaincc_grad}, samples=_gammaincc_samples,
                      doc="out = Q(x, y), the regularised upper incomplete gamma function; "
                          "1 where x <= 0 or y <= 0 (Cephes)"))
