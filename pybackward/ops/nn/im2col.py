"""Sliding blocks, with slots and grad rules from Paddle's records: unfold
(im2col) and fold (col2im), each the other's gradient."""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _x(c: Call, slot: str = "X") -> np.ndarray:
    return np.asarray(c.x(slot))


def _check_4d(c: Call, x: np.ndarray) -> None:
    if x.ndim != 4:
        raise ExecutionError(f"{c.op_type}: X must be 4-D, got shape {list(x.shape)}")


def _pairs(c: Call, name: str, n: int) -> list[int]:
    v = [int(a) for a in c.attr(name, ())]
    if len(v) != n:
        raise c.unsupported(name, v, f"{n} values")
    return v


def _im2col_geometry(c: Call, h: int, w: int):
    """(rows [kh, oh], cols [kw, ow], paddings [top, left, bottom, right]) of
    the windows; paddings are [top, left, bottom, right]. (Paddle's fold
    counts blocks with paddings[0] and [1] on both sides but pads with all
    four, so it refuses uneven paddings.)"""
    kh, kw = _pairs(c, "kernel_sizes", 2)
    sh, sw = _pairs(c, "strides", 2)
    dh, dw = _pairs(c, "dilations", 2)
    pads = _pairs(c, "paddings", 4)
    if c.op_type.startswith("fold") and (pads[0] != pads[2] or pads[1] != pads[3]):
        raise c.unsupported("paddings", pads, "fold needs top == bottom and left == right")
    oh = (h + pads[0] + pads[2] - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + pads[1] + pads[3] - (dw * (kw - 1) + 1)) // sw + 1
    if min(kh, kw, sh, sw, dh, dw) <= 0 or oh <= 0 or ow <= 0:
        raise ExecutionError(f"{c.op_type}: the windows do not fit an input of {h} x {w}")
    rows = np.arange(kh)[:, None] * dh + np.arange(oh)[None, :] * sh
    cols = np.arange(kw)[:, None] * dw + np.arange(ow)[None, :] * sw
    return rows, cols, pads


def _im2col(x: np.ndarray, rows, cols, pads) -> np.ndarray:
    n, ch = x.shape[:2]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    patches = xp[:, :, rows[:, None, :, None], cols[None, :, None, :]]  # N, C, kh, kw, oh, ow
    return patches.reshape(n, ch * rows.shape[0] * cols.shape[0], rows.shape[1] * cols.shape[1])


def _col2im(y: np.ndarray, shape: tuple[int, ...], rows, cols, pads) -> np.ndarray:
    n, ch, h, w = shape
    kh, oh = rows.shape
    kw, ow = cols.shape
    xp = np.zeros((n, ch, h + pads[0] + pads[2], w + pads[1] + pads[3]), y.dtype)
    np.add.at(xp, (slice(None), slice(None), rows[:, None, :, None], cols[None, :, None, :]),
              y.reshape(n, ch, kh, kw, oh, ow))
    return xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w]


def _unfold(c: Call):
    x = _x(c)
    _check_4d(c, x)
    return {"Y": _im2col(x, *_im2col_geometry(c, *x.shape[2:]))}


def _unfold_grad(c: Call):
    x = _x(c)
    return {"X@GRAD": _col2im(_x(c, "Y@GRAD"), x.shape, *_im2col_geometry(c, *x.shape[2:]))}


def _fold_shape(c: Call, x: np.ndarray) -> tuple[int, ...]:
    if x.ndim != 3:
        raise ExecutionError(f"fold: X must be 3-D, got shape {list(x.shape)}")
    h, w = _pairs(c, "output_sizes", 2)
    kh, kw = _pairs(c, "kernel_sizes", 2)
    if x.shape[1] % (kh * kw):
        raise ExecutionError(f"fold: X's dim 1 ({x.shape[1]}) is not divisible by {kh} x {kw}")
    return (x.shape[0], x.shape[1] // (kh * kw), h, w)


def _fold(c: Call):
    x = _x(c)
    shape = _fold_shape(c, x)
    rows, cols, pads = _im2col_geometry(c, *shape[2:])
    if rows.shape[1] * cols.shape[1] != x.shape[2]:
        raise ExecutionError(f"fold: X has {x.shape[2]} blocks, the sizes make {rows.shape[1] * cols.shape[1]}")
    return {"Y": _col2im(x, shape, rows, cols, pads)}


def _fold_grad(c: Call):
    x = _x(c)
    shape = _fold_shape(c, x)
    return {"X@GRAD": _im2col(_x(c, "Y@GRAD"), *_im2col_geometry(c, *shape[2:]))}


_UNFOLD = {"kernel_sizes": [2, 3], "strides": [1, 2], "paddings": [1, 0, 0, 1], "dilations": [1, 1]}

register(paddle_opdef(
    "unfold", _unfold, {"unfold_grad": _unfold_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 2, 4, 5))]}, dict(_UNFOLD)),
        Sample({"X": [rng.standard_normal((1, 3, 5, 5))]},
               {"kernel_sizes": [2, 2], "strides": [2, 1], "paddings": [0, 0, 0, 0], "dilations": [2, 1]},
               note="dilated")],
    attrs_handled=("kernel_sizes", "strides", "paddings", "dilations"),
    doc="Y[n, c*kh*kw + i*kw + j, l] = X padded at window l's (i, j) (im2col; paddings: top, left, bottom, right)"))

register(paddle_opdef(
    "fold", _fold, {"fold_grad": _fold_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 12, 10))]}, dict(_UNFOLD, output_sizes=[4, 5],
                                                                paddings=[1, 0, 1, 0])),
        Sample({"X": [rng.standard_normal((1, 12, 8))]},
               {"output_sizes": [5, 5], "kernel_sizes": [2, 2], "strides": [2, 1], "paddings": [0, 0, 0, 0],
                "dilations": [2, 1]}, note="dilated")],
    attrs_handled=("output_sizes", "kernel_sizes", "strides", "paddings", "dilations"),
    doc="Y = the blocks of X summed back into an image of output_sizes (col2im)"))
