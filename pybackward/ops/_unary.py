"""The recurring pattern of unary elementwise ops declared from Paddle's records.

`unary_op` turns a forward formula and a gradient formula into a registered
op: slot names (`X`/`Out` or `x`/`out`), the grad op type and which forward
slots it reads all come from Paddle's records (`paddle_opdef`), so a table
entry only states the maths and Paddle's dtype rule for integer inputs.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..base.errors import ExecutionError
from .paddle_data import paddle_op
from .paddle_table import paddle_opdef
from .registry import Call, OpDef, Sample, register

#: fwd(x, call) -> out
Forward = Callable[[np.ndarray, Call], Any]
#: dx(call, x, out, dout) -> dX; x / out are None when the grad op does not read them
Backward = Callable[[Call, Any, Any, np.ndarray], Any]


def as_dtype(v: Any, like: np.ndarray) -> np.ndarray:
    """`v` as an ndarray of `like`'s dtype (0-D results stay arrays)."""
    return np.asarray(v).astype(like.dtype, copy=False)


#: The unary op types whose Paddle 3.3.1 CPU kernel takes complex64 / complex128
#: (testdata/kernels/cpu_kernels.json); the others refuse a complex input.
COMPLEX_UNARY = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1", "hard_swish",
    "log", "log10", "log1p", "log2", "logsigmoid", "reciprocal", "round", "sigmoid", "sign", "silu", "sin",
    "sinh", "softplus", "softsign", "sqrt", "square", "stanh", "tan", "tanh"})


def cj(a: Any) -> Any:
    """conj(a) for a complex array, `a` itself otherwise (no copy on the real path).
    Paddle's complex gradients are dOut * conj(dOut/dX)."""
    return np.conj(a) if np.iscomplexobj(a) else a


def no_complex_kernel(c: Call, x: np.ndarray) -> None:
    """Refuse a complex input where Paddle registers no complex kernel."""
    if x.dtype.kind == "c" and c.op_type not in COMPLEX_UNARY:
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel for it")


def no_int_kernel(c: Call, x: np.ndarray) -> None:
    """Paddle registers this op for floating types only."""
    if x.dtype.kind not in "fc":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel for it")


# --------------------------------------------------------------------------
# sample helpers: values kept away from kinks so finite differences hold
# --------------------------------------------------------------------------
def away(rng: np.random.Generator, shape, kinks: Sequence[float] = (0.0,), lo: float = -3.0,
         hi: float = 3.0, gap: float = 0.15) -> np.ndarray:
    x = rng.uniform(lo, hi, shape)
    for k in kinks:
        near = np.abs(x - k) < gap
        x = np.where(near, k + np.where(x >= k, gap, -gap) * 2, x)
    return np.asarray(x)


def uniform(lo: float, hi: float):
    """A sample generator drawing from [lo, hi)."""
    return lambda rng, shape: np.asarray(rng.uniform(lo, hi, shape))


def kinks(*points: float, lo: float = -3.0, hi: float = 3.0, gap: float = 0.15):
    """A sample generator on [lo, hi) that keeps clear of `points`."""
    return lambda rng, shape: away(rng, shape, points, lo, hi, gap)


def _note(attrs: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in attrs.items())


def unary_samples(slot: str, gen, attrs_list: Sequence[dict] = ({},), cgen=None):
    """One (3, 4) sample per attr set, then a 3-D and a 0-D one; with `cgen`
    (a generator of complex inputs) a complex (3, 4) and a complex 0-D one after."""
    def samples(rng):
        out = [Sample({slot: [gen(rng, (3, 4))]}, dict(a), note=_note(a)) for a in attrs_list]
        out.append(Sample({slot: [gen(rng, (2, 3, 2))]}, dict(attrs_list[-1]), note="3-D"))
        out.append(Sample({slot: [np.asarray(gen(rng, ()))]}, dict(attrs_list[0]), note="0-D"))
        if cgen is not None:
            out.append(Sample({slot: [cgen(rng, (3, 4))]}, dict(attrs_list[-1]),
                              note=",".join(filter(None, ("complex", _note(attrs_list[-1]))))))
            out.append(Sample({slot: [np.asarray(cgen(rng, ()))]}, dict(attrs_list[0]), note="complex 0-D"))
        return out
    return samples


def complex_box(re: tuple[float, float], im: tuple[float, float]):
    """A generator of complex inputs with Re in [re) and Im in [im), each part
    drawn as a whole array (real parts first)."""
    def gen(rng: np.random.Generator, shape) -> np.ndarray:
        a = rng.uniform(re[0], re[1], shape)
        return np.asarray(a + 1j * rng.uniform(im[0], im[1], shape))
    return gen


# --------------------------------------------------------------------------
# the table entry
# --------------------------------------------------------------------------
def unary_op(op_type: str, fwd: Forward, dx: Backward | None = None, *, ints: str = "error",
             gen=None, attrs_list: Sequence[dict] = ({},), attrs_handled: tuple[str, ...] = (),
             doc: str = "", samples=None, cgen=None) -> OpDef:
    """Register `op_type` (one input, one output) with Paddle's slots and grad rule.

    `ints` is Paddle's rule for integer inputs: "error" (no integer kernel),
    "keep" (integer kernel, dtype kept: `fwd` sees the integer array) or
    "float32" (the input is cast to float32 first: log2, expm1, ...).
    `dx` is the kernel of the grad op `<op_type>_grad` (None when the grad
    op is one that already has a kernel, as sign's `scale`). `cgen` draws
    complex sample inputs (ops with Paddle complex kernels; see unary_samples).
    """
    entry = paddle_op(op_type)
    xs, os = entry["inputs"][0][0], entry["outputs"][0][0]

    def kernel(c: Call):
        x = c.x(xs)
        if x.dtype.kind in "iub":
            if ints == "float32" and x.dtype.kind != "b":
                x = x.astype(np.float32)
            elif ints != "keep" or x.dtype.kind == "b":
                no_int_kernel(c, x)
        no_complex_kernel(c, x)
        with np.errstate(all="ignore"):
            return {os: as_dtype(fwd(x, c), x)}

    def grad_kernel(c: Call):
        if not c.wants(xs + "@GRAD"):
            return {}
        x, out, g = c.x(xs), c.x(os), c.x(os + "@GRAD")
        with np.errstate(all="ignore"):
            return {xs + "@GRAD": as_dtype(dx(c, x, out, g), g)}

    grad_kernels = {}
    if dx is not None:
        rule = entry.get("rule") or []
        if len(rule) != 1:
            raise ValueError(f"{op_type}: expected one grad op in Paddle's records, got {len(rule)}")
        grad_kernels[rule[0]["type"]] = grad_kernel
    return register(paddle_opdef(
        op_type, kernel, grad_kernels, family=fwd.__module__.rpartition(".")[2],
        samples=samples or unary_samples(xs, gen or (lambda rng, s: away(rng, s)), attrs_list, cgen),
        attrs_handled=attrs_handled, doc=doc or f"{os} = {op_type}({xs})"))
