"""nce: noise-contrastive estimation (word2vec's loss), with its grad.

For each row i of Input, the op scores its true labels and `num_neg_samples`
negative classes drawn by a sampler: logit = sigmoid(Input[i] . Weight[c] +
Bias[c]) for every sampled class c, and

    Cost[i] = w_i * ( sum over true c of -log(o / (o + b_c))
                    + sum over negative c of -log(b_c / (o + b_c)) ),

with b_c = P(c) * num_neg_samples the sampler's probability of c (computed in
float32, as Paddle's CPU kernel does) and w_i the SampleWeight (default 1).
SampleLogits and SampleLabels hold the scores and classes, the grad op reads
them back, so the gradient is the one of the negatives actually drawn.

Negatives come from `custom_neg_classes` when given (the same ones for every
row), else from the sampler: 0 uniform over [0, num_total_classes - 1],
1 log-uniform, 2 a custom distribution (CustomDistProbs, CustomDistAlias,
CustomDistAliasProbs: Walker's alias method). Paddle draws from
`std::mt19937_64` seeded with the `seed` attr through libstdc++'s
uniform_int_distribution (Lemire's multiply-and-reject) and
uniform_real_distribution; both are reproduced here, so a nonzero seed draws
Paddle's classes. Seed 0 draws from Paddle's global generator, whose state a
program does not hold: the interpreter's generator seeds the engine instead.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..random.engine import engine
from ..registry import Call, Sample, register

_M64 = (1 << 64) - 1


class _Engine:
    """Draws as libstdc++'s distributions do from a std::mt19937_64."""

    def __init__(self, c: Call, seed: int):
        self.mt = engine(c, seed)

    def next(self) -> int:
        return int(self.mt.raw(1)[0])

    def uniform_int(self, hi: int) -> int:
        """std::uniform_int_distribution<int>(0, hi): Lemire's nearly divisionless method."""
        r = hi + 1
        product = self.next() * r
        low = product & _M64
        if low < r:
            threshold = (-r & _M64) % r
            while low < threshold:
                product = self.next() * r
                low = product & _M64
        return product >> 64

    def canonical(self) -> float:
        """std::uniform_real_distribution<double>(0, 1): one 64-bit draw."""
        return float(self.mt.canonical(1, np.float64)[0])


class _Sampler:
    def __init__(self, c: Call, n_classes: int):
        self.kind = int(c.attr("sampler", 0))
        self.range = n_classes - 1
        if self.kind not in (0, 1, 2):
            raise c.unsupported("sampler", self.kind, "0 uniform, 1 log-uniform, 2 custom distribution")
        if self.kind == 1:
            self.log_range = math.log(self.range + 1)
        if self.kind == 2:
            names = ("CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs")
            arrays = []
            for name in names:
                a = c.x(name)
                if a is None or np.asarray(a).size != n_classes:
                    raise ExecutionError(f"op nce: sampler 2 needs {name} with num_total_classes "
                                         f"({n_classes}) elements")
                arrays.append(np.asarray(a).reshape(-1))
            self.probs = arrays[0].astype(np.float32)
            self.alias = arrays[1].astype(np.int64)
            self.alias_probs = arrays[2].astype(np.float32)

    def probability(self, labels: np.ndarray) -> np.ndarray:
        """P(label) as float32, as Paddle's samplers return it."""
        if self.kind == 0:
            return np.full(labels.shape, np.float32(1.0) / np.float32(self.range + 1), dtype=np.float32)
        if self.kind == 1:
            v = labels.astype(np.float64)
            return (np.log((v + 2.0) / (v + 1.0)) / self.log_range).astype(np.float32)
        return self.probs[labels]

    def draw(self, engine: _Engine) -> int:
        if self.kind == 0:
            return engine.uniform_int(self.range)
        if self.kind == 1:
            value = int(math.exp(engine.canonical() * self.log_range)) - 1
            return value % self.range
        index = engine.uniform_int(self.range)
        p = engine.canonical()
        if p > self.alias_probs[index]:
            alias = int(self.alias[index])
            return index if alias == -1 else alias
        return index


def _shapes(c: Call) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    x, label, w = np.asarray(c.x("Input")), np.asarray(c.x("Label")), np.asarray(c.x("Weight"))
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ExecutionError(f"op {c.op_type}: Input {list(x.shape)} and Weight {list(w.shape)} must be "
                             "2-D with the same width")
    if label.ndim != 2 or label.shape[0] != x.shape[0]:
        raise ExecutionError(f"op {c.op_type}: Label must be [rows of Input, true classes], "
                             f"not {list(label.shape)}")
    n_classes = int(c.attr("num_total_classes"))
    return x, label.astype(np.int64), w, n_classes


def _weights(c: Call, rows: int, dt) -> np.ndarray:
    sw = c.x("SampleWeight")
    return np.ones(rows, dtype=dt) if sw is None else np.asarray(sw).reshape(-1).astype(dt)


def _b(c: Call, sampler: _Sampler, labels: np.ndarray, dt) -> np.ndarray:
    neg = int(c.attr("num_neg_samples", 10))
    return (sampler.probability(labels) * np.float32(neg)).astype(dt)   # a float in Paddle's kernel


def _nce(c: Call):
    x, label, w, n_classes = _shapes(c)
    if c.attr("is_sparse", False):
        raise c.unsupported("is_sparse", True, "a SelectedRows weight gradient")
    sampler = _Sampler(c, n_classes)
    neg = int(c.attr("num_neg_samples", 10))
    custom = [int(v) for v in (c.attr("custom_neg_classes", []) or [])]
    rows, true = label.shape
    if custom:
        negs = np.tile(np.asarray(custom, dtype=np.int64), (rows, 1))
    else:
        engine = _Engine(c, int(c.attr("seed", 0)))
        negs = np.array([[sampler.draw(engine) for _ in range(neg)] for _ in range(rows)],
                        dtype=np.int64).reshape(rows, neg)
    labels = np.concatenate([label, negs], axis=1)
    if (labels < 0).any() or (labels >= w.shape[0]).any():
        raise ExecutionError(f"op nce: sampled class {int(labels[(labels < 0) | (labels >= w.shape[0])][0])} "
                             f"is outside the {w.shape[0]} rows of Weight")
    bias = c.x("Bias")
    z = np.einsum("nd,nkd->nk", x, w[labels])
    if bias is not None:
        z = z + np.asarray(bias).reshape(-1)[labels]
    o = (1.0 / (1.0 + np.exp(-z))).astype(x.dtype)
    b = _b(c, sampler, labels, x.dtype)
    cost = np.where(np.arange(labels.shape[1]) < true, -np.log(o / (o + b)), -np.log(b / (o + b)))
    cost = (cost.sum(axis=1) * _weights(c, rows, x.dtype)).reshape(rows, 1).astype(x.dtype)
    return {"Cost": cost, "SampleLogits": o, "SampleLabels": labels}


def _nce_grad(c: Call):
    x, label, w, n_classes = _shapes(c)
    sampler = _Sampler(c, n_classes)
    o = np.asarray(c.x("SampleLogits"))
    labels = np.asarray(c.x("SampleLabels")).astype(np.int64)
    rows, true = label.shape
    b = _b(c, sampler, labels, x.dtype)
    g = np.asarray(c.x("Cost@GRAD")).reshape(rows, 1) * _weights(c, rows, x.dtype)[:, None]
    is_true = np.arange(labels.shape[1]) < true
    dz = np.where(is_true, (b / (o + b)) * (o - 1), o * (1 - o) / (o + b)) * g
    out = {}
    if c.wants("Bias@GRAD"):
        bias = np.asarray(c.x("Bias"))
        db = np.zeros(bias.size, dtype=x.dtype)
        np.add.at(db, labels.reshape(-1), dz.reshape(-1))
        out["Bias@GRAD"] = db.reshape(bias.shape)
    if c.wants("Weight@GRAD"):
        dw = np.zeros_like(w)
        np.add.at(dw, labels.reshape(-1), (dz[:, :, None] * x[:, None, :]).reshape(-1, x.shape[1]))
        out["Weight@GRAD"] = dw
    if c.wants("Input@GRAD"):
        out["Input@GRAD"] = np.einsum("nk,nkd->nd", dz, w[labels]).astype(x.dtype)
    return out


def _nce_samples(rng):
    classes, dim = 7, 3
    x = rng.standard_normal((4, dim)) * 0.5
    w = rng.standard_normal((classes, dim)) * 0.5
    bias = rng.standard_normal(classes) * 0.1
    label = np.array([[1], [3], [6], [0]], dtype=np.int64)
    base = {"num_total_classes": classes, "num_neg_samples": 3, "seed": 5}
    probs = rng.dirichlet(np.ones(classes)).astype(np.float32)
    alias = rng.integers(0, classes, classes).astype(np.int32)
    alias_p = rng.uniform(0.2, 1.0, classes).astype(np.float32)
    return [
        Sample({"Input": [x], "Label": [label], "Weight": [w], "Bias": [bias]},
               {**base, "custom_neg_classes": [2, 4, 5]}, wrt=("Input", "Weight", "Bias"),
               note="custom negatives"),
        Sample({"Input": [x], "Label": [label], "Weight": [w], "Bias": [bias]}, base,
               wrt=("Input", "Weight", "Bias"), note="uniform sampler, seed 5"),
        Sample({"Input": [x], "Label": [np.array([[1, 2], [3, 0], [6, 5], [0, 4]], dtype=np.int64)],
                "Weight": [w], "SampleWeight": [rng.uniform(0.5, 2.0, (4, 1))]},
               {**base, "sampler": 1, "seed": 11}, wrt=("Input", "Weight"),
               note="log-uniform, 2 true classes, sample weights, no bias"),
        Sample({"Input": [x], "Label": [label], "Weight": [w], "Bias": [bias], "CustomDistProbs": [probs],
                "CustomDistAlias": [alias], "CustomDistAliasProbs": [alias_p]},
               {**base, "sampler": 2, "seed": 3}, wrt=("Input", "Weight", "Bias"), note="custom distribution"),
    ]


register(paddle_opdef("nce", _nce, {"nce_grad": _nce_grad}, samples=_nce_samples,
                      attrs_handled=("num_total_classes", "num_neg_samples", "custom_neg_classes", "sampler",
                                     "seed", "is_sparse"),
                      doc="noise-contrastive estimation: sigmoid scores of true and sampled classes"))
