"""Helpers shared by kernels: Paddle's broadcasting and its undoing."""
from __future__ import annotations

import numpy as np


def align_y(x_shape: tuple[int, ...], y: np.ndarray, axis: int) -> np.ndarray:
    """Reshape Y so NumPy broadcasting matches Paddle's elementwise `axis` rule.

    With axis == -1 (or equal ranks) the shapes are right-aligned, as in
    NumPy. Otherwise Y's dims line up with X's starting at `axis`: Y of shape
    (3,) against X (4, 3, 5) with axis=1 acts as (1, 3, 1).
    """
    if axis == -1 or y.ndim == len(x_shape) or y.ndim == 0:
        return y
    if y.ndim > len(x_shape):
        return y
    ydims = list(y.shape)
    # Paddle trims trailing size-1 dims of Y before aligning at `axis`.
    while len(ydims) > 1 and ydims[-1] == 1 and axis + len(ydims) > len(x_shape):
        ydims.pop()
    if axis < 0:
        axis = len(x_shape) - len(ydims)
    tail = len(x_shape) - axis - len(ydims)
    if tail < 0:
        raise ValueError(f"elementwise axis={axis}: Y{tuple(y.shape)} does not fit X{tuple(x_shape)}")
    return y.reshape(tuple(ydims) + (1,) * tail)


def broadcast_pair(x: np.ndarray, y: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """X and Y made NumPy-broadcastable under Paddle's `axis` rule."""
    if x.ndim >= y.ndim:
        return x, align_y(x.shape, y, axis)
    return align_y(y.shape, x, axis), y


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back down to `shape` (autograd's `unbroadcast`)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    # Sum leading extra dims, then dims where the target has size 1.
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    keep = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
    if keep:
        g = g.sum(axis=keep, keepdims=True)
    return g.reshape(shape)


def normalize_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def reduce_axes(dims, ndim: int, reduce_all: bool) -> tuple[int, ...]:
    """Axes a Paddle reduce op works over (`dim` / `reduce_all`; [] means all)."""
    if reduce_all or dims is None or len(dims) == 0 or ndim == 0:
        return tuple(range(ndim))
    return tuple(sorted({normalize_axis(int(d), ndim) for d in dims}))
