"""hierarchical_sigmoid (Paddle's hsigmoid_loss) and its grad, Paddle 3.3.1's
CPU kernel in NumPy terms.

Each sample i walks a path of binary decisions from the root to its label:
node indices `idx[i, j]` (rows of W and Bias) and bits `bit[i, j]`, for
j < len_i. With the default tree (no PathTable) the label c is coded as
`c' = c + num_classes`: len = floor(log2 c'), idx[j] = (c' >> (j + 1)) - 1,
bit[j] = (c' >> j) & 1, and the path width is bit_length(num_classes - 1).
A custom tree gives PathTable / PathCode `[N, width]` per sample; a path
ends at its first negative PathTable entry.

    pre[i, j] = clip(W[idx] . x_i + Bias[idx], -40, 40)   (0 past the path)
    Out[i]    = sum_j softplus(pre[i, j]) - sum_{j < len_i} bit[i, j] * pre[i, j]

The softplus runs over the whole width, so a path shorter than the width adds
log 2 per missing step - Paddle's kernel does that (its own TODO says so),
and so does this one. PreOut is softplus(pre). The grad, Paddle's:
`g[i, j] = (sigmoid(pre) - bit) * dOut[i]` on the path, into Bias, W and X
(the clip's subgradient is not applied, also as in Paddle). W_Out is W:
Paddle's layers pass W itself as W_Out.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _paths(c: Call, n: int):
    """(idx [N, width] int64, bit [N, width] float, on-path mask [N, width])."""
    label = np.asarray(c.x("Label")).reshape(-1).astype(np.int64)
    if label.size != n:
        raise ExecutionError(f"op hierarchical_sigmoid: Label holds {label.size} ids for {n} samples")
    if c.has("PathTable"):
        table = np.asarray(c.x("PathTable")).astype(np.int64)
        code = np.asarray(c.x("PathCode")).astype(np.int64)
        if table.shape[0] != n or code.shape != table.shape:
            raise ExecutionError("op hierarchical_sigmoid: PathTable and PathCode must both be [N, width]")
        neg = table < 0
        length = np.where(neg.any(1), neg.argmax(1), table.shape[1])
        on = np.arange(table.shape[1])[None, :] < length[:, None]
        return np.where(on, table, 0), np.where(on, code != 0, False), on
    num_classes = int(c.attr("num_classes", 2))
    if num_classes < 2:
        raise c.unsupported("num_classes", num_classes, "the default tree needs at least 2 classes")
    if label.min(initial=0) < 0 or label.max(initial=0) >= num_classes:
        raise ExecutionError(f"op hierarchical_sigmoid: labels must be in [0, {num_classes})")
    width = int(num_classes - 1).bit_length()
    code = label + num_classes
    j = np.arange(width)[None, :]
    length = np.floor(np.log2(code)).astype(np.int64)
    on = j < length[:, None]
    return np.where(on, (code[:, None] >> (j + 1)) - 1, 0), np.where(on, (code[:, None] >> j) & 1, 0) != 0, on


def _pre(c: Call):
    x, w = np.asarray(c.x("X")), np.asarray(c.x("W"))
    if x.ndim != 2 or w.ndim != 2 or w.shape[1] != x.shape[1]:
        raise ExecutionError(f"op hierarchical_sigmoid: X [N, D] and W [nodes, D] expected, got "
                             f"{list(x.shape)}, {list(w.shape)}")
    idx, bit, on = _paths(c, x.shape[0])
    if idx.max(initial=0) >= w.shape[0]:
        raise ExecutionError(f"op hierarchical_sigmoid: a path reaches node {idx.max()}, W has {w.shape[0]} rows")
    pre = np.einsum("ijd,id->ij", w[idx], x)
    if c.has("Bias"):
        pre = pre + np.asarray(c.x("Bias")).reshape(-1)[idx]
    pre = np.clip(np.where(on, pre, 0), -40.0, 40.0).astype(x.dtype, copy=False)
    return x, w, idx, bit, on, pre


def _hsigmoid(c: Call):
    x, _, _, bit, on, pre = _pre(c)
    soft = np.log1p(np.exp(pre))
    out = soft.sum(1) - (bit * on * pre).sum(1)
    # W_Out is W itself in the programs Paddle builds (paddle.nn.functional.hsigmoid_loss)
    return {"Out": out.reshape(-1, 1).astype(x.dtype, copy=False), "PreOut": soft, "W_Out": np.asarray(c.x("W"))}


def _hsigmoid_grad(c: Call):
    x, w, idx, bit, on, _ = _pre(c)
    soft = np.asarray(c.x("PreOut"))
    g = (1.0 - 1.0 / np.exp(soft)) - bit
    g = np.where(on, g * np.asarray(c.x("Out@GRAD")).reshape(-1, 1), 0).astype(x.dtype, copy=False)
    res = {"X@GRAD": np.einsum("ij,ijd->id", g, w[idx])}
    dw = np.zeros_like(w)
    np.add.at(dw, idx[on], (g[:, :, None] * x[:, None, :])[on])
    res["W@GRAD"] = dw
    if c.has("Bias"):
        b = np.asarray(c.x("Bias"))
        db = np.zeros(b.size, g.dtype)
        np.add.at(db, idx[on], g[on])
        res["Bias@GRAD"] = db.reshape(b.shape)
    return {k: v for k, v in res.items() if c.wants(k)}


def _samples(rng):
    def s(n, d, classes, bias=True, note=""):
        ins = {"X": [rng.uniform(-1, 1, (n, d))], "W": [rng.uniform(-1, 1, (classes - 1, d))],
               "Label": [rng.integers(0, classes, (n, 1)).astype(np.int64)]}
        if bias:
            ins["Bias"] = [rng.uniform(-1, 1, (classes - 1, 1))]
        return Sample(ins, {"num_classes": classes, "is_sparse": False}, outputs={"Out": 1, "PreOut": 1, "W_Out": 1},
                      wrt=("X", "W", "Bias") if bias else ("X", "W"), note=note)
    table = np.array([[0, 1, 3], [0, 2, -1], [0, 1, 4], [0, 2, -1]], np.int64)
    code = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]], np.int64)
    custom = Sample({"X": [rng.uniform(-1, 1, (4, 3))], "W": [rng.uniform(-1, 1, (5, 3))],
                     "Label": [np.array([[0], [1], [2], [1]], np.int64)], "PathTable": [table],
                     "PathCode": [code], "Bias": [rng.uniform(-1, 1, (5, 1))]},
                    {"num_classes": 5, "is_sparse": False}, outputs={"Out": 1, "PreOut": 1, "W_Out": 1},
                    wrt=("X", "W", "Bias"), note="custom tree")
    return [s(4, 3, 6, note="6 classes"), s(5, 2, 8, note="8 classes (full tree)"),
            s(3, 4, 3, bias=False, note="3 classes, no bias"), custom]


register(paddle_opdef("hierarchical_sigmoid", _hsigmoid, {"hierarchical_sigmoid_grad": _hsigmoid_grad},
                      samples=_samples, attrs_handled=("num_classes", "is_sparse"),
                      doc="hierarchical sigmoid loss over the default or a custom binary tree"))
