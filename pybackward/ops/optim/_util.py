"""Helpers shared by the optimizer op modules (optimizer.py, optimizer_more.py):
reading a Paddle optimizer op's tensors and attrs in the parameter's dtype, and
sample makers."""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, register


def arr(c: Call, slot: str, i: int = 0) -> np.ndarray:
    xs = c.xs(slot)
    if len(xs) <= i or xs[i] is None:
        raise ExecutionError(f"{c.op_type}: input '{slot}' has no value")
    return np.asarray(xs[i])


def param(c: Call, slot: str = "Param", i: int = 0) -> tuple[np.ndarray, np.dtype]:
    p = arr(c, slot, i)
    if p.dtype.kind != "f":
        raise ExecutionError(f"{c.op_type}: '{slot}' is {p.dtype}; Paddle's CPU kernel takes float or double")
    return p, p.dtype


def like(c: Call, slot: str, p: np.ndarray, i: int = 0) -> np.ndarray:
    """Input `slot` in p's dtype, checked to have p's number of elements."""
    a = arr(c, slot, i)
    if a.size != p.size:
        raise ExecutionError(f"{c.op_type}: '{slot}' has shape {list(a.shape)}, "
                             f"Param has {list(p.shape)}")
    return a.astype(p.dtype, copy=False).reshape(p.shape)


def first(c: Call, slot: str, dt: np.dtype, i: int = 0):
    """The first element of a (scalar) tensor input, as a dt scalar."""
    a = arr(c, slot, i)
    if a.size < 1:
        raise ExecutionError(f"{c.op_type}: '{slot}' is empty")
    return dt.type(a.reshape(-1)[0])


def float_attr(c: Call, name: str, default: float, dt: np.dtype):
    """A float attr (stored as float32 by Paddle) cast to dt."""
    return dt.type(np.float32(c.attr(name, default)))


def scalar(c: Call, slot: str, attr: str, default: float, dt: np.dtype):
    """A Scalar argument: the tensor input if given, else the float attr."""
    return first(c, slot, dt) if c.has(slot) else float_attr(c, attr, default, dt)


def skip_update(c: Call) -> bool:
    if not c.has("SkipUpdate"):
        return False
    s = np.asarray(c.x("SkipUpdate"))
    if s.size != 1:
        raise ExecutionError(f"{c.op_type}: SkipUpdate must have one element, it has {s.size}")
    return bool(s.reshape(-1)[0])


def register_optimizer(name, kernel, samples, attrs=(), doc=""):
    """Register an optimizer op type with Paddle's slots and no grad."""
    register(paddle_opdef(name, kernel, samples=samples, attrs_handled=tuple(attrs), doc=doc))


def rs(rng, *shape):
    return rng.standard_normal(shape)


def pos(rng, *shape):
    return rng.uniform(0.1, 1.0, shape)


def one(v):
    return np.array([v], dtype=np.float64)

def adam_ins(rng, shape=(3, 4), b1p=0.9 ** 3, b2p=0.999 ** 3):
    return {"Param": [rs(rng, *shape)], "Grad": [rs(rng, *shape)], "LearningRate": [one(0.01)],
            "Moment1": [0.1 * rs(rng, *shape)], "Moment2": [pos(rng, *shape) * 0.1],
            "Beta1Pow": [one(b1p)], "Beta2Pow": [one(b2p)]}
