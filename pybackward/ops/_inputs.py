"""Reading a kernel's inputs and attrs: helpers the op families share."""
from __future__ import annotations

import numpy as np
from ..base import dtypes
from ..base.errors import ExecutionError
from .paddle_table import paddle_opdef
from .registry import EMPTY_VAR_NAME, Call, register


def input_value(c: Call, slot: str) -> np.ndarray:
    """An input slot's (first) array; an error naming the slot if it has none."""
    v = c.x(slot)
    if v is None:
        raise ExecutionError(f"{c.op_type}: input '{slot}' has no value")
    return np.asarray(v)


def dtype_attr(c: Call, default: int) -> np.dtype:
    """The NumPy dtype the op's `dtype` attr names (default: `default`)."""
    d = int(c.attr("dtype", default))
    try:
        return dtypes.to_numpy(d)
    except (KeyError, ValueError):
        raise c.unsupported("dtype", d, f"data type {dtypes.type_name(d)} has no NumPy equivalent") from None


def register_plain(name, kernel, samples=None, attrs=(), doc=""):
    register(paddle_opdef(name, kernel, samples=samples, attrs_handled=tuple(attrs), doc=doc))


def array_in(c: Call, slot: str = "X") -> np.ndarray:
    """An input slot's (first) array, as given."""
    return np.asarray(c.x(slot))


def checked_indices(c: Call, idx: np.ndarray, n: int, what: str, allow_negative: bool = True) -> np.ndarray:
    """Integer indices into a dim of size n, checked; negatives wrap when allowed."""
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise ExecutionError(f"{c.op_type}: {what} must be an integer tensor, got {idx.dtype}")
    idx = idx.astype(np.int64)
    lo = -n if allow_negative else 0
    if idx.size and (idx.min() < lo or idx.max() >= n):
        raise ExecutionError(f"{c.op_type}: {what} out of range [{lo}, {n}): got [{idx.min()}, {idx.max()}]")
    return np.where(idx < 0, idx + n, idx)


def reduction_attr(c: Call, allowed) -> str:
    r = c.attr("reduction", "mean")
    if r not in allowed:
        raise c.unsupported("reduction", r, f"expected one of {', '.join(allowed)}")
    return r


def wanted_outputs(c: Call, slot: str, arrays: list) -> list:
    """One entry per output name of a duplicable grad slot (None for @EMPTY@)."""
    names = c.outs.get(slot, ())
    return [a if i < len(names) and names[i] != EMPTY_VAR_NAME else None for i, a in enumerate(arrays)]


def float_in(c: Call, slot: str) -> np.ndarray:
    v = c.x(slot)
    if v is None:
        raise ExecutionError(f"op {c.op_type}: input {slot} is required")
    v = np.asarray(v)
    if v.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: {slot} must be a float tensor, got {v.dtype}")
    return v


def scalar_in(c: Call, slot: str) -> float:
    v = np.asarray(c.x(slot) if c.x(slot) is not None else [])
    if v.size < 1:
        raise ExecutionError(f"op {c.op_type}: {slot} must hold a value")
    return v.reshape(-1)[0]


def single_value(c: Call, slot: str):
    v = array_in(c, slot)
    if v.size != 1:
        raise ExecutionError(f"{c.op_type}: {slot} must hold one element, got shape {list(v.shape)}")
    return v.reshape(-1)[0]
