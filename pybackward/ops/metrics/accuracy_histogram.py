"""Metrics."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------
def _accuracy(c: Call):
    idx, label = input_value(c, "Indices"), input_value(c, "Label")
    n = idx.shape[0] if idx.ndim else 0
    if label.size != n:
        raise ExecutionError(f"accuracy: Label has {label.size} values for {n} samples")
    if n == 0:
        correct = 0
    else:
        correct = int(np.sum(np.any(idx.reshape(n, -1) == label.reshape(n, 1), axis=1)))
    acc = np.float32(correct) / np.float32(n) if n else np.float32(0)
    return {"Accuracy": np.array(acc, np.float32), "Correct": np.array(correct, np.int32),
            "Total": np.array(n, np.int32)}


def _accuracy_samples(rng):
    out = rng.random((6, 3))
    idx = np.argsort(-out, axis=1).astype(np.int64)
    label = rng.integers(0, 5, (6, 1)).astype(np.int64)
    return [Sample({"Out": [np.take_along_axis(out, idx, 1)], "Indices": [idx], "Label": [label]})]


register_plain("accuracy", _accuracy, _accuracy_samples, (),
     "Accuracy = (samples whose label is among their top-k Indices) / samples")


def _histogram(c: Call):
    x = input_value(c, "X")
    bins = int(c.attr("bins", 100))
    if bins < 1:
        raise ExecutionError(f"histogram: bins {bins} must be >= 1")
    lo, hi = float(np.float32(c.attr("min", 0.0))), float(np.float32(c.attr("max", 0.0)))
    flat = x.reshape(-1).astype(np.float64)
    if lo == 0 and hi == 0 and flat.size:
        lo, hi = float(flat.min().astype(x.dtype)), float(flat.max().astype(x.dtype))
    if lo > hi:
        raise ExecutionError(f"histogram: max {hi} is less than min {lo}")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    w = np.asarray(c.x("Weight")).reshape(-1) if c.has("Weight") else None
    density = bool(c.attr("density", False))
    keep = (flat >= lo) & (flat <= hi)
    pos = np.minimum(((flat[keep] - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    counts = np.bincount(pos, weights=None if w is None else w[keep].astype(np.float64), minlength=bins)
    if density:  # Paddle 3.3.1: a float32 Out with weights or density, whatever the input dtypes
        total = counts.sum()
        out = counts / total / ((hi - lo) / bins) if total else counts * np.nan
        return {"Out": out.astype(np.float32)}
    if w is not None:
        return {"Out": counts.astype(np.float32)}
    return {"Out": counts.astype(np.int64)}


def _histogram_samples(rng):
    x = rng.standard_normal((4, 5))
    return [Sample({"X": [x]}, {"bins": 5, "min": -1.0, "max": 1.0, "density": False}),
            Sample({"X": [x]}, {"bins": 4, "min": 0.0, "max": 0.0, "density": False}, note="range from X"),
            Sample({"X": [(rng.random(10) * 6).astype(np.int64)]}, {"bins": 3, "min": 0.0, "max": 5.0,
                                                                     "density": False}, note="int64"),
            Sample({"X": [x]}, {"bins": 6, "min": -2.0, "max": 2.0, "density": True}, note="density"),
            Sample({"X": [x], "Weight": [rng.random((4, 5))]}, {"bins": 5, "min": -1.5, "max": 1.5,
                                                                 "density": False}, note="weights"),
            Sample({"X": [x], "Weight": [rng.random((4, 5))]}, {"bins": 5, "min": -1.5, "max": 1.5,
                                                                 "density": True}, note="weights, density")]


register_plain("histogram", _histogram, _histogram_samples, ("bins", "min", "max", "density"),
     "Out = counts of X in `bins` equal bins over [min, max] (min = max = 0: X's range)")
