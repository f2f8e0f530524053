"""Activation ops (unary, elementwise), clip / pow / prelu, and the
comparison and logical ops (no gradient).

Formulas follow Paddle 3.3.1's phi kernels, including which forward slots
each grad op reads (`relu_grad` reads Out, `gelu_grad` reads X, `elu_grad`
both), and the attrs Paddle 3.3.1 ignores: `relu6.threshold` (fixed 6),
`swish.beta` (fixed 1), `hard_swish.threshold/scale/offset` (fixed 6/6/3).
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .._unary import cj, complex_box, kinks, no_complex_kernel, unary_op, uniform
from .._util import broadcast_pair, unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, GradSpec, OpDef, Sample, register

_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_erf_obj = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf_obj(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _sigmoid(x):
    if np.iscomplexobj(x):  # Paddle's complex kernels: 1 / (1 + e^-x) as written
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(-np.abs(x))  # stable for large |x|
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _arr(v, like: np.ndarray) -> np.ndarray:
    """`v` as an ndarray of `like`'s dtype (0-D results stay arrays)."""
    return np.asarray(v).astype(like.dtype, copy=False)


def _no_int(c: Call, x: np.ndarray) -> None:
    if x.dtype.kind not in "fc":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel for it")


# --------------------------------------------------------------------------
# sample helpers: values kept away from kinks so finite differences hold
# --------------------------------------------------------------------------
def _away(rng, shape, kinks=(0.0,), lo=-3.0, hi=3.0, gap=0.15):
    x = rng.uniform(lo, hi, shape)
    for k in kinks:
        near = np.abs(x - k) < gap
        x = np.where(near, k + np.where(x >= k, gap, -gap) * 2, x)
    return x


def _pos(rng, shape, lo=0.3, hi=2.5):
    return rng.uniform(lo, hi, shape)


def _std_samples(gen, attrs_list=({},), cgen=None):
    def samples(rng):
        out = []
        for attrs in attrs_list:
            out.append(Sample({"X": [gen(rng, (3, 4))]}, dict(attrs), note=_note(attrs)))
        out.append(Sample({"X": [gen(rng, (2, 3, 2))]}, dict(attrs_list[-1]), note="3-D"))
        out.append(Sample({"X": [np.asarray(gen(rng, ()))]}, dict(attrs_list[0]), note="0-D"))
        if cgen is not None:  # Paddle has complex kernels: after the real samples, so their draws stay
            for attrs in attrs_list:
                out.append(Sample({"X": [cgen(rng, (3, 4))]}, dict(attrs),
                                  note=",".join(filter(None, ("complex", _note(attrs))))))
            out.append(Sample({"X": [np.asarray(cgen(rng, ()))]}, dict(attrs_list[0]), note="complex 0-D"))
        return out
    return samples


def _off_zero(rng, shape):
    """Complex inputs with |Re| >= 0.3 (abs, reciprocal, softsign: clear of 0)."""
    a = rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return np.asarray(a + 1j * rng.uniform(-1.5, 1.5, shape))


def _hswish_complex(rng, shape):
    """Re clear of hard_swish's kinks at -3 and 3."""
    return np.asarray(_away(rng, shape, (-3.0, 3.0), -6.0, 6.0) + 1j * rng.uniform(-1.0, 1.0, shape))


# Complex sample generators of the ops Paddle has complex kernels for (boxes clear of
# branch cuts, poles and kinks; softplus: Re(beta X) clear of its threshold 3 at beta 2).
_CANY = complex_box((-2.0, 2.0), (-1.5, 1.5))
_CGEN = {"sigmoid": _CANY, "tanh": complex_box((-2.0, 2.0), (-1.0, 1.0)), "exp": _CANY,
         "sqrt": complex_box((0.3, 2.5), (-1.5, 1.5)), "reciprocal": _off_zero,
         "log": complex_box((0.3, 2.5), (-1.5, 1.5)), "square": _CANY, "abs": _off_zero,
         "hard_swish": _hswish_complex, "softplus": complex_box((-3.0, 1.2), (-1.5, 1.5)), "silu": _CANY}


def _note(attrs):
    return ",".join(f"{k}={v}" for k, v in attrs.items())


# --------------------------------------------------------------------------
# unary activations
# --------------------------------------------------------------------------
def _unary(name, fwd, dx, reads, attrs=(), gen=None, attrs_list=({},), ints=False, int_to_float=False,
           doc="", grad_grad=None):
    """Declare `name` (X -> Out) and `name_grad` (reads + Out@GRAD -> X@GRAD).

    fwd(x, c) -> out; dx(c, x, out, g) -> X@GRAD, with x / out None when the
    grad op does not read them. `ints`: Paddle has integer kernels (dtype
    kept); `int_to_float`: integer input gives float32 (exp, log).
    """
    def kernel(c: Call):
        x = c.x("X")
        if x.dtype.kind in "iub":
            if int_to_float:
                x = x.astype(np.float32)
            elif not ints:
                _no_int(c, x)
        no_complex_kernel(c, x)
        with np.errstate(all="ignore"):
            out = fwd(x, c)
            if name == "abs" and x.dtype.kind == "c":  # |z|: float32 for complex64, float64 for complex128
                return {"Out": np.asarray(out)}
            return {"Out": _arr(out, x)}

    def grad_kernel(c: Call):
        if not c.wants("X@GRAD"):
            return {}
        x, out, g = c.x("X"), c.x("Out"), c.x("Out@GRAD")
        with np.errstate(all="ignore"):
            return {"X@GRAD": _arr(dx(c, x, out, g), x if x is not None else out)}

    register(OpDef(
        type=name, inputs=("X",), outputs=("Out",), kernel=kernel,
        grad=GradSpec(f"{name}_grad", tuple(reads) + ("Out@GRAD",), ("X@GRAD",), kernel=grad_kernel,
                      grad=grad_grad),
        samples=_std_samples(gen or (lambda rng, s: _away(rng, s)), attrs_list, _CGEN.get(name)),
        attrs_handled=attrs, doc=doc or f"Out = {name}(X)"))


def _gelu(x, c):
    if c.attr("approximate", False):
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_PI * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_grad(c, x, out, g):
    if c.attr("approximate", False):
        t = np.tanh(_SQRT_2_PI * (x + 0.044715 * x ** 3))
        return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_PI * (1.0 + 3 * 0.044715 * x * x))
    return g * (0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


def _leaky(x, c):
    return np.where(x >= 0, x, c.attr("alpha", 0.02) * x)


def _elu(x, c):
    return np.where(x > 0, x, c.attr("alpha", 1.0) * np.expm1(np.minimum(x, 0)))


def _hard_swish(x, c):
    if np.iscomplexobj(x):  # Paddle compares complex values by their real parts
        t = x + 3.0
        return x * np.where(t.real > 0, np.where(t.real < 6.0, t, 6.0), 0.0) / 6.0
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _hard_swish_grad(c, x, out, g):
    t = x + 3.0
    if np.iscomplexobj(x):
        return g * np.conj(np.where(t.real < 6.0, (t.real > 0) * (2.0 * x + 3.0) / 6.0, 1.0))
    return g * np.where(t < 6.0, (t > 0) * (2.0 * x + 3.0) / 6.0, 1.0)


def _softplus(x, c):
    beta, thr = c.attr("beta", 1.0), c.attr("threshold", 20.0)
    xb = beta * x
    if np.iscomplexobj(x):  # log(1 + e^(beta x)) / beta; the threshold compares real parts
        return np.where(xb.real > thr, x, np.log(1.0 + np.exp(xb)) / beta)
    return np.where(xb > thr, x, (np.maximum(xb, 0) + np.log1p(np.exp(-np.abs(xb)))) / beta)


def _softplus_grad(c, x, out, g):
    xb = c.attr("beta", 1.0) * x
    if np.iscomplexobj(x):
        return np.where(xb.real > c.attr("threshold", 20.0), g, g * np.conj(_sigmoid(xb)))
    return np.where(xb > c.attr("threshold", 20.0), g, g * _sigmoid(xb))


def _silu_grad(c, x, out, g):
    s, xc = cj(_sigmoid(x)), cj(x)
    return g * s * (1.0 + xc * (1.0 - s))


def _softmax(x, c):
    axis = c.attr("axis", -1)
    if x.ndim == 0:
        return np.ones_like(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, c):
    axis = c.attr("axis", -1)
    if x.ndim == 0:
        return np.zeros_like(x)
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def _axis(c, a):
    return c.attr("axis", -1) if a.ndim else None


_RELU6_GEN = lambda rng, s: _away(rng, s, (0.0, 6.0), -3.0, 9.0)  # noqa: E731
_HSWISH_GEN = lambda rng, s: _away(rng, s, (-3.0, 3.0), -6.0, 6.0)  # noqa: E731
_SOFTMAX_ATTRS = ({"axis": -1}, {"axis": 0}, {"axis": 1})

# fmt: off
# --------------------------------------------------------------------------
# Double grads (Paddle names their slots after backward.yaml: grad_x, grad_out)
# Complex: the grad op is dX = dOut * conj(f'(X)), so its gradient is DDX * f'(X)
# for dOut and conj(DDX) * dOut * conj(f''(X)) for X (or Out).
# --------------------------------------------------------------------------
def _double(name: str, reads: tuple[str, ...], outs: tuple[str, ...], rule) -> GradSpec:
    """`<name>_grad_grad`: `rule(c, ddx)` returns {slot: value} for the wanted outputs,
    where ddx is the gradient flowing into the grad op's X@GRAD."""
    def kernel(c: Call):
        ddx = c.x("grad_x@GRAD")
        like = c.x("Out") if c.has("Out") else c.x("X")
        res = rule(c, ddx)
        return {k: _arr(v, like) for k, v in res.items() if c.wants(k)}
    return GradSpec(f"{name}_grad_grad", reads + ("grad_x@GRAD=X@GRAD@GRAD",),
                    outs + ("grad_out@GRAD=Out@GRAD@GRAD",), kernel=kernel)


_RELU_GG = _double("relu", ("Out",), (), lambda c, dd: {"grad_out@GRAD": dd * (c.x("Out") > 0)})
_LEAKY_GG = _double("leaky_relu", ("X",), (), lambda c, dd: {
    "grad_out@GRAD": np.where(c.x("X") >= 0, dd, c.attr("alpha", 0.02) * dd)})
_TANH_GG = _double("tanh", ("Out", "grad_out=Out@GRAD"), ("Out@GRAD",), lambda c, dd: {
    "grad_out@GRAD": dd * (1.0 - c.x("Out") ** 2), "Out@GRAD": -2.0 * cj(c.x("Out")) * c.x("grad_out") * cj(dd)})
_SIGMOID_GG = _double("sigmoid", ("Out", "grad_out=Out@GRAD"), ("Out@GRAD",), lambda c, dd: {
    "grad_out@GRAD": dd * c.x("Out") * (1.0 - c.x("Out")),
    "Out@GRAD": cj(dd) * c.x("grad_out") * (1.0 - 2.0 * cj(c.x("Out")))})
_SQUARE_GG = _double("square", ("X", "grad_out=Out@GRAD"), ("X@GRAD",), lambda c, dd: {
    "grad_out@GRAD": 2.0 * c.x("X") * dd, "X@GRAD": 2.0 * c.x("grad_out") * cj(dd)})

_unary("relu", lambda x, c: np.maximum(x, 0), lambda c, x, o, g: g * (o > 0), ("Out",), grad_grad=_RELU_GG)
_unary("sigmoid", lambda x, c: _sigmoid(x), lambda c, x, o, g: g * cj(o) * (1.0 - cj(o)), ("Out",),
       grad_grad=_SIGMOID_GG)
_unary("tanh", lambda x, c: np.tanh(x), lambda c, x, o, g: g * cj(1.0 - o * o), ("Out",), grad_grad=_TANH_GG)
_unary("exp", lambda x, c: np.exp(x), lambda c, x, o, g: g * cj(o), ("Out",), int_to_float=True)
_unary("sqrt", lambda x, c: np.sqrt(x), lambda c, x, o, g: g * 0.5 / cj(o), ("Out",), gen=_pos)
_unary("rsqrt", lambda x, c: 1.0 / np.sqrt(x), lambda c, x, o, g: -0.5 * g * o ** 3, ("Out",), gen=_pos)
_unary("reciprocal", lambda x, c: 1.0 / x, lambda c, x, o, g: -g * cj(o) * cj(o), ("Out",),
       gen=lambda r, s: _away(r, s, (0,), gap=0.4))
_unary("relu6", lambda x, c: np.clip(x, 0, 6), lambda c, x, o, g: g * ((o > 0) & (o < 6)), ("Out",), gen=_RELU6_GEN,
       doc="Out = min(max(X, 0), 6); Paddle 3.3.1 ignores a `threshold` attr")
_unary("log", lambda x, c: np.log(x), lambda c, x, o, g: g / cj(x), ("X",), gen=_pos, int_to_float=True)
_unary("square", lambda x, c: x * x, lambda c, x, o, g: 2.0 * g * cj(x), ("X",), ints=True, grad_grad=_SQUARE_GG)
_unary("abs", lambda x, c: np.abs(x), lambda c, x, o, g: g * np.sign(x), ("X",), ints=True)  # sign(z) = z/|z|
_unary("gelu", _gelu, _gelu_grad, ("X",), ("approximate",), attrs_list=({"approximate": False}, {"approximate": True}))
_unary("leaky_relu", _leaky, lambda c, x, o, g: np.where(x >= 0, g, c.attr("alpha", 0.02) * g), ("X",), ("alpha",),
       attrs_list=({}, {"alpha": 0.1}), grad_grad=_LEAKY_GG)
_unary("swish", lambda x, c: x * _sigmoid(x), _silu_grad, ("X",),
       doc="Out = X * sigmoid(X); Paddle 3.3.1 ignores a `beta` attr")
_unary("hard_swish", _hard_swish, _hard_swish_grad, ("X",), gen=_HSWISH_GEN,
       doc="Out = X * clip(X + 3, 0, 6) / 6; Paddle 3.3.1 ignores threshold/scale/offset attrs")
_unary("softplus", _softplus, _softplus_grad, ("X",), ("beta", "threshold"),
       attrs_list=({}, {"beta": 2.0, "threshold": 3.0}), gen=lambda r, s: _away(r, s, (1.5,), -4.0, 4.0))
_unary("silu", lambda x, c: x * _sigmoid(x), _silu_grad, ("X", "Out"))
_unary("elu", _elu, lambda c, x, o, g: np.where(x > 0, g, g * c.attr("alpha", 1.0) * np.exp(np.minimum(x, 0))),
       ("X", "Out"), ("alpha",), attrs_list=({}, {"alpha": 0.5}))
_unary("softmax", _softmax, lambda c, x, o, g: o * (g - np.sum(g * o, axis=_axis(c, o), keepdims=True)), ("Out",),
       ("axis",), attrs_list=_SOFTMAX_ATTRS)
_unary("log_softmax", _log_softmax,
       lambda c, x, o, g: g - np.exp(o) * np.sum(g, axis=_axis(c, o), keepdims=True), ("Out",), ("axis",),
       attrs_list=_SOFTMAX_ATTRS)
# fmt: on


# --------------------------------------------------------------------------
# pow (factor attr or FactorTensor), clip (min/max attrs or Min/Max tensors)
# --------------------------------------------------------------------------
def _factor(c: Call) -> float:
    if c.has("FactorTensor"):  # the factor is a float: a complex tensor gives its real part
        return float(np.real(np.asarray(c.x("FactorTensor")).reshape(-1)[0]))
    return c.attr("factor", 1.0)


def _pow(c: Call):
    x, p = c.x("X"), _factor(c)
    if x.dtype.kind in "iub":  # Paddle casts the factor to the integer type first
        x, p = x.astype(np.float64), float(int(p))
    with np.errstate(all="ignore"):
        return {"Out": _arr(np.power(x, p), c.x("X"))}


def _pow_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, g, p = c.x("X"), c.x("Out@GRAD"), _factor(c)
    with np.errstate(all="ignore"):
        return {"X@GRAD": _arr(g * p * cj(np.power(x, p - 1.0)), x)}


def _pow_samples(rng):
    return [Sample({"X": [_away(rng, (3, 4))]}, {"factor": 2.0}, note="factor=2"),
            Sample({"X": [_away(rng, (3, 4))]}, {"factor": 3.0}, note="factor=3"),
            Sample({"X": [_pos(rng, (3, 4))]}, {"factor": 0.5}, note="factor=0.5"),
            Sample({"X": [_pos(rng, (2, 3))], "FactorTensor": [np.array([1.5])]}, {"factor": 2.0},
                   note="FactorTensor"),
            Sample({"X": [_CANY(rng, (3, 4))]}, {"factor": 3.0}, note="complex, factor=3"),
            Sample({"X": [complex_box((0.3, 2.5), (-1.5, 1.5))(rng, (3, 4))]}, {"factor": 0.5},
                   note="complex, factor=0.5")]


register(OpDef(
    type="pow", inputs=("X", "FactorTensor"), outputs=("Out",), kernel=_pow,
    grad=GradSpec("pow_grad", ("X", "Out@GRAD", "FactorTensor"), ("X@GRAD",), kernel=_pow_grad),
    samples=_pow_samples, attrs_handled=("factor",), doc="Out = X ** factor (FactorTensor wins)"))


def _bounds(c: Call, x: np.ndarray):
    lo = float(np.asarray(c.x("Min")).reshape(-1)[0]) if c.has("Min") else c.attr("min", None)
    hi = float(np.asarray(c.x("Max")).reshape(-1)[0]) if c.has("Max") else c.attr("max", None)
    if lo is None or hi is None:
        raise ExecutionError(f"op {c.op_type}: needs `min` and `max` attrs or Min/Max inputs")
    if lo > hi:
        raise ExecutionError(f"op {c.op_type}: min ({lo}) is greater than max ({hi})")
    if x.dtype.kind in "iu":  # Paddle casts the bounds to the input type (truncation)
        lo, hi = int(lo), int(hi)
    return np.asarray(lo).astype(x.dtype), np.asarray(hi).astype(x.dtype)


def _clip(c: Call):
    x = c.x("X")
    lo, hi = _bounds(c, x)
    return {"Out": _arr(np.minimum(np.maximum(x, lo), hi), x)}


def _clip_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, g = c.x("X"), c.x("Out@GRAD")
    lo, hi = _bounds(c, x)
    return {"X@GRAD": _arr(g * ((x >= lo) & (x <= hi)), x)}


def _clip_samples(rng):
    def x(shape):
        return _away(rng, shape, (-0.5, 1.0))
    return [Sample({"X": [x((3, 4))]}, {"min": -0.5, "max": 1.0}),
            Sample({"X": [x((2, 3))], "Min": [np.array([-0.5])], "Max": [np.array([1.0])]},
                   {"min": -9.0, "max": 9.0}, wrt=("X",), note="Min/Max tensors")]


register(OpDef(
    type="clip", inputs=("X", "Min", "Max"), outputs=("Out",), kernel=_clip,
    grad=GradSpec("clip_grad", ("X", "Out@GRAD", "Min", "Max"), ("X@GRAD",), kernel=_clip_grad),
    samples=_clip_samples, attrs_handled=("min", "max"),
    doc="Out = min(max(X, min), max); the grad passes where min <= X <= max"))


# --------------------------------------------------------------------------
# prelu
# --------------------------------------------------------------------------
def _prelu_alpha(c: Call, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Alpha reshaped to broadcast against X, per `mode` / `data_format`."""
    mode, fmt = c.attr("mode", "all"), c.attr("data_format", "NCHW")
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        if x.ndim < 2:
            raise ExecutionError(f"op {c.op_type}: mode 'channel' needs X of rank >= 2, got {x.shape}")
        if fmt not in ("NCHW", "NHWC", "NCL", "NLC", "NCDHW", "NDHWC"):
            raise c.unsupported("data_format", fmt)
        last = fmt in ("NHWC", "NLC", "NDHWC")
        shape = [1] * x.ndim
        shape[-1 if last else 1] = alpha.size
        return alpha.reshape(shape)
    if mode == "element":
        return alpha.reshape((1,) + x.shape[1:])
    raise c.unsupported("mode", mode, "expected 'all', 'channel' or 'element'")


def _prelu(c: Call):
    x = c.x("X")
    _no_int(c, x)
    a = _prelu_alpha(c, x, c.x("Alpha"))
    return {"Out": _arr(np.where(x > 0, x, a * x), x)}


def _prelu_grad(c: Call):
    x, alpha, g = c.x("X"), c.x("Alpha"), c.x("Out@GRAD")
    a = _prelu_alpha(c, x, alpha)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _arr(np.where(x > 0, g, a * g), x)
    if c.wants("Alpha@GRAD"):
        da = unbroadcast(np.where(x > 0, 0.0, x * g), a.shape) if a.ndim else np.sum(np.where(x > 0, 0.0, x * g))
        res["Alpha@GRAD"] = _arr(np.reshape(da, alpha.shape), alpha)
    return res


def _prelu_samples(rng):
    x4 = _away(rng, (2, 3, 2, 2))
    return [Sample({"X": [x4], "Alpha": [np.array([0.25])]}, {"mode": "all"}, note="all"),
            Sample({"X": [x4], "Alpha": [rng.uniform(0.1, 0.5, (3,))]}, {"mode": "channel"}, note="channel"),
            Sample({"X": [_away(rng, (2, 2, 2, 3))], "Alpha": [rng.uniform(0.1, 0.5, (3,))]},
                   {"mode": "channel", "data_format": "NHWC"}, note="channel NHWC"),
            Sample({"X": [x4], "Alpha": [rng.uniform(0.1, 0.5, (1, 3, 2, 2))]}, {"mode": "element"}, note="element"),
            Sample({"X": [_away(rng, (3, 4))], "Alpha": [rng.uniform(0.1, 0.5, (4,))]}, {"mode": "channel"},
                   note="channel 2-D")]


register(OpDef(
    type="prelu", inputs=("X", "Alpha"), outputs=("Out",), kernel=_prelu,
    grad=GradSpec("prelu_grad", ("X", "Alpha", "Out@GRAD"), ("X@GRAD", "Alpha@GRAD"), kernel=_prelu_grad,
                  sets_lod_level=False),
    samples=_prelu_samples, attrs_handled=("mode", "data_format"),
    doc="Out = X if X > 0 else Alpha * X; Alpha shared (all), per channel, or per element"))


# --------------------------------------------------------------------------
# comparison and logical ops: bool output, no gradient
# --------------------------------------------------------------------------
_COMPARE = {
    "equal": np.equal,  # exact, also for floats (no tolerance in Paddle 3.3.1)
    "not_equal": np.not_equal,
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
}


def _compare_kernel(fn):
    def kernel(c: Call):
        xb, yb = broadcast_pair(c.x("X"), c.x("Y"), c.attr("axis", -1))
        with np.errstate(invalid="ignore"):
            return {"Out": np.asarray(fn(xb, yb), dtype=np.bool_)}
    return kernel


for _name, _fn in _COMPARE.items():
    register(OpDef(type=_name, inputs=("X", "Y"), outputs=("Out",), kernel=_compare_kernel(_fn), grad=None,
                   attrs_handled=("axis",), doc=f"Out = {_name}(X, Y) (bool), Y broadcast to X at `axis`"))

_LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}


def _logical_kernel(fn):
    def kernel(c: Call):
        xb, yb = broadcast_pair(c.x("X"), c.x("Y"), c.attr("axis", -1))
        return {"Out": np.asarray(fn(xb.astype(np.bool_), yb.astype(np.bool_)))}
    return kernel


for _name, _fn in _LOGICAL.items():
    register(OpDef(type=_name, inputs=("X", "Y"), outputs=("Out",), kernel=_logical_kernel(_fn), grad=None,
                   doc=f"Out = {_name}(X != 0, Y != 0)"))

register(OpDef(type="logical_not", inputs=("X",), outputs=("Out",), grad=None,
               kernel=lambda c: {"Out": np.asarray(np.logical_not(c.x("X").astype(np.bool_)))},
               doc="Out = not X (bool)"))


# --------------------------------------------------------------------------
# More activations: slots and grad rules from Paddle's records (unary_op);
# attr defaults are Paddle's, as float32 (the attrs are FLOAT).
# --------------------------------------------------------------------------
def _f32(v: float) -> float:
    return float(np.float32(v))


_SELU_SCALE, _SELU_ALPHA = _f32(1.0507009873554804934193349852946), _f32(1.6732632423543772848170429916717)


def _hard_sigmoid(x, c):
    return np.clip(x * c.attr("slope", _f32(0.2)) + c.attr("offset", 0.5), 0.0, 1.0)


def _mish_sp(x, c):
    """Paddle's softplus inside mish: x above `threshold`, else log(1 + e^x)."""
    return np.where(x > c.attr("threshold", 20.0), x, np.log(1.0 + np.exp(x)))


def _mish_grad(c, x, o, g):
    sp = _mish_sp(x, c)
    t = np.tanh(sp)
    return g * (t + x * (1.0 - t * t) * (1.0 - np.exp(-sp)))


def _selu(x, c):
    scale, alpha = c.attr("scale", _SELU_SCALE), c.attr("alpha", _SELU_ALPHA)
    return scale * np.where(x <= 0, alpha * np.exp(x) - alpha, x)


def _selu_grad(c, x, o, g):
    scale, alpha = c.attr("scale", _SELU_SCALE), c.attr("alpha", _SELU_ALPHA)
    la = float(np.float32(alpha) * np.float32(scale))  # Paddle multiplies the float attrs in float
    return np.where(o <= 0, g * (o + la), g * scale)


def _celu(x, c):
    a = c.attr("alpha", 1.0)
    return np.where(x < 0, a * (np.exp(x / a) - 1.0), x)


def _shrink_mask(x, t):
    return (x > t) | (x < -t)


def _softshrink(x, c):
    lam = c.attr("lambda", 0.5)
    return (x > lam) * (x - lam) + (x < -lam) * (x + lam)


def _logsigmoid(x, c):
    if np.iscomplexobj(x):  # Paddle's complex kernel: -log(1 + e^-x) as written
        return -np.log(1.0 + np.exp(-x))
    t = np.maximum(-x, 0.0)
    return -t - np.log(np.exp(-t) + np.exp(-x - t))


def _logsigmoid_grad(c, x, o, g):
    if np.iscomplexobj(x):
        e = np.exp(-x)
        return g * np.conj(e / (1.0 + e))
    t = np.maximum(-x, 0.0)
    e = np.exp(-x - t)
    return g * e / (np.exp(-t) + e)


def _softsign_grad(c, x, o, g):
    if not np.iscomplexobj(x):
        return g / (1.0 + np.abs(x)) ** 2
    # f(z) = z s(r), s = 1 / (1 + r), r = |z|, is not holomorphic: the gradient of
    # Re(conj(g) f) is g conj(df/dz) + conj(g) df/dz*, df/dz = s + r s'/2,
    # df/dz* = s' z^2 / (2r), s' = -s^2 (Paddle 3.3.1's complex kernel is off; see docs/deviations.md)
    r = np.abs(x)
    s = 1.0 / (1.0 + r)
    zz = np.where(r > 0, x * x / np.where(r > 0, r, 1.0), 0.0)
    return g * (s - 0.5 * r * s * s) - np.conj(g) * (0.5 * s * s) * zz


def _logit(x, c):
    eps = c.attr("eps", _f32(1e-6))
    t = np.maximum(np.minimum(x, 1.0 - eps), eps)
    out = np.log(t / (1.0 - t))
    return np.where((x < 0) | (x > 1), np.nan, out) if eps == 0 else out


def _logit_grad(c, x, o, g):
    eps = c.attr("eps", _f32(1e-6))
    return np.where((x < eps) | (x > 1.0 - eps), 0.0, g / ((1.0 - x) * x))


def _brelu_mask(c, x):
    return (x > c.attr("t_min", 0.0)) & (x < c.attr("t_max", 24.0))


def _stanh_ab(c):
    return c.attr("scale_a", _f32(0.67)), c.attr("scale_b", _f32(1.7159))


def _stanh(x, c):
    a, b = _stanh_ab(c)
    return b * np.tanh(a * x)


def _stanh_grad(c, x, o, g):
    a, b = _stanh_ab(c)
    t = cj(np.tanh(a * x))
    return g * a * b * (1.0 - t * t)


# fmt: off
unary_op("hard_sigmoid", _hard_sigmoid,
         lambda c, x, o, g: g * ((o > 0) & (o < 1)) * c.attr("slope", _f32(0.2)),
         gen=kinks(-2.5, 2.5, -0.5, 1.5, lo=-4.0, hi=4.0), attrs_list=({}, {"slope": 0.5, "offset": 0.25}),
         attrs_handled=("slope", "offset"), doc="Out = clip(slope * X + offset, 0, 1)")
unary_op("mish", lambda x, c: x * np.tanh(_mish_sp(x, c)), _mish_grad, gen=kinks(15.0, lo=-5.0, hi=18.0, gap=0.5),
         attrs_list=({}, {"threshold": 15.0}), attrs_handled=("threshold",),
         doc="Out = X * tanh(softplus(X)); softplus(X) = X above `threshold` (its grad keeps "
             "Paddle's 1 - e^-X there, so thresholds below ~15 are not exact derivatives)")
unary_op("selu", _selu, _selu_grad, attrs_list=({}, {"scale": 1.5, "alpha": 0.5}), attrs_handled=("scale", "alpha"),
         doc="Out = scale * (X if X > 0 else alpha * (e^X - 1))")
unary_op("celu", _celu, lambda c, x, o, g: np.where(x > 0, g, g * np.exp(x / c.attr("alpha", 1.0))),
         attrs_list=({}, {"alpha": 0.5}, {"alpha": -2.0}), attrs_handled=("alpha",),
         doc="Out = X if X >= 0 else alpha * (e^(X / alpha) - 1)")
unary_op("softsign", lambda x, c: x / (1.0 + np.abs(x)), _softsign_grad,
         doc="Out = X / (1 + |X|)", cgen=_off_zero)
unary_op("softshrink", _softshrink, lambda c, x, o, g: g * _shrink_mask(x, c.attr("lambda", 0.5)),
         gen=kinks(-0.5, 0.5, -1.0, 1.0), attrs_list=({}, {"lambda": 1.0}), attrs_handled=("lambda",),
         doc="Out = X - lambda if X > lambda, X + lambda if X < -lambda, else 0")
unary_op("hard_shrink", lambda x, c: x * _shrink_mask(x, c.attr("threshold", 0.5)),
         lambda c, x, o, g: g * _shrink_mask(x, c.attr("threshold", 0.5)),
         gen=kinks(-0.5, 0.5, -1.0, 1.0), attrs_list=({}, {"threshold": 1.0}), attrs_handled=("threshold",),
         doc="Out = X where |X| > threshold, else 0")
unary_op("logsigmoid", _logsigmoid, _logsigmoid_grad, gen=uniform(-30.0, 30.0), doc="Out = log(sigmoid(X))",
         cgen=_CANY)
unary_op("thresholded_relu", lambda x, c: np.where(x > c.attr("threshold", 1.0), x, c.attr("value", 0.0)),
         lambda c, x, o, g: g * (x > c.attr("threshold", 1.0)),
         gen=kinks(1.0, -0.5), attrs_list=({}, {"threshold": -0.5, "value": 2.0}), attrs_handled=("threshold", "value"),
         doc="Out = X if X > threshold else value")
unary_op("tanh_shrink", lambda x, c: x - np.tanh(x), lambda c, x, o, g: g * np.tanh(x) ** 2, doc="Out = X - tanh(X)")
unary_op("brelu", lambda x, c: np.minimum(np.maximum(x, c.attr("t_min", 0.0)), c.attr("t_max", 24.0)),
         lambda c, x, o, g: g * _brelu_mask(c, x),
         gen=kinks(0.0, -1.0, 1.5), attrs_list=({}, {"t_min": -1.0, "t_max": 1.5}), attrs_handled=("t_min", "t_max"),
         doc="Out = min(max(X, t_min), t_max)")
unary_op("stanh", _stanh, _stanh_grad, attrs_list=({}, {"scale_a": 2.0, "scale_b": 0.5}),
         attrs_handled=("scale_a", "scale_b"), doc="Out = scale_b * tanh(scale_a * X)",
         cgen=complex_box((-1.5, 1.5), (-0.5, 0.5)))  # tanh(scale_a X): poles at Im = pi/(2 scale_a)
unary_op("logit", _logit, _logit_grad, gen=kinks(0.25, 0.75, lo=0.02, hi=0.98, gap=0.05),
         attrs_list=({}, {"eps": 0.25}, {"eps": 0.0}), attrs_handled=("eps",),
         doc="Out = log(x / (1 - x)), x = clip(X, eps, 1 - eps); NaN outside [0, 1] when eps = 0")
# fmt: on


# --------------------------------------------------------------------------
# swiglu: silu(x) * y, or with no y the two halves of x's last axis
# --------------------------------------------------------------------------
def _swiglu_operands(c: Call):
    x, y = c.x("x"), c.x("y")
    if y is None:
        if x.ndim == 0 or x.shape[-1] % 2:
            raise ExecutionError(f"op swiglu: with no y, x's last dim must be even, got shape {x.shape}")
        x, y = np.split(x, 2, axis=-1)
    elif x.shape != y.shape:
        raise ExecutionError(f"op swiglu: x{x.shape} and y{y.shape} must have the same shape")
    return x, y


def _swiglu(c: Call):
    _no_int(c, c.x("x"))
    x, y = _swiglu_operands(c)
    return {"out": _arr(x * _sigmoid(x) * y, x)}


def _swiglu_grad(c: Call):
    x, y = _swiglu_operands(c)
    g = c.x("out@GRAD")
    s = _sigmoid(x)
    dx, dy = g * y * s * (1.0 + x * (1.0 - s)), g * x * s
    res = {}
    if not c.has("y"):  # both halves come from x
        if c.wants("x@GRAD"):
            res["x@GRAD"] = _arr(np.concatenate([dx, dy], axis=-1), x)
        return res
    if c.wants("x@GRAD"):
        res["x@GRAD"] = _arr(dx, x)
    if c.wants("y@GRAD"):
        res["y@GRAD"] = _arr(dy, y)
    return res


def _swiglu_samples(rng):
    r = rng.standard_normal
    return [Sample({"x": [r((3, 4))], "y": [r((3, 4))]}, note="x, y"),
            Sample({"x": [r((2, 3, 4))], "y": [r((2, 3, 4))]}, note="3-D"),
            Sample({"x": [r((3, 6))]}, note="halves of x"),
            Sample({"x": [r((4,))]}, note="1-D halves")]


register(paddle_opdef("swiglu", _swiglu, {"swiglu_grad": _swiglu_grad}, samples=_swiglu_samples,
                      doc="out = silu(x) * y; with no y, x's last axis is split in two halves"))
