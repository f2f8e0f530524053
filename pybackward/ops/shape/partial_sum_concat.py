"""partial_sum and partial_concat: columns [start, start + length) of 2-D inputs, with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# partial_sum / partial_concat: columns [start, start + length) of 2-D inputs
# --------------------------------------------------------------------------
def _partial_cols(c: Call, allow_negative: bool):
    xs = [np.asarray(a) for a in c.xs("X")]
    if not xs:
        raise ExecutionError(f"{c.op_type}: X is empty")
    if any(a.ndim != 2 or a.shape != xs[0].shape for a in xs):
        raise ExecutionError(f"{c.op_type}: X must be 2-D tensors of one shape, got "
                             f"{[list(a.shape) for a in xs]}")
    d = xs[0].shape[1]
    start = int(c.attr("start_index", 0))
    length = int(c.attr("length", -1))
    if start < 0 and allow_negative:
        start += d
    if not 0 <= start < d:
        raise ExecutionError(f"{c.op_type}: start_index {c.attr('start_index', 0)} out of range for {d} columns")
    end = d if length < 0 else start + length
    if end > d:
        raise ExecutionError(f"{c.op_type}: start_index + length = {end} exceeds {d} columns")
    return xs, start, end


def _partial_sum(c: Call):
    xs, s, e = _partial_cols(c, allow_negative=False)
    out = xs[0][:, s:e].copy()
    for a in xs[1:]:
        out = out + a[:, s:e]
    return {"Out": out}


def _partial_sum_grad(c: Call):
    xs, s, e = _partial_cols(c, allow_negative=False)
    g = array_in(c, "Out@GRAD")
    grads = []
    for a in xs:
        gx = np.zeros(a.shape, g.dtype)
        gx[:, s:e] = g
        grads.append(gx)
    return {"X@GRAD": grads}


def _partial_concat(c: Call):
    xs, s, e = _partial_cols(c, allow_negative=True)
    return {"Out": np.concatenate([a[:, s:e] for a in xs], axis=1)}


def _partial_concat_grad(c: Call):
    xs, s, e = _partial_cols(c, allow_negative=True)
    g = array_in(c, "Out@GRAD")
    w = e - s
    grads = []
    for i, a in enumerate(xs):
        gx = np.zeros(a.shape, g.dtype)
        gx[:, s:e] = g[:, i * w:(i + 1) * w]
        grads.append(gx)
    return {"X@GRAD": grads}


def _partial_samples(negative: bool):
    def samples(rng):
        out = [Sample({"X": [rng.standard_normal((2, 5)) for _ in range(3)]}, {"start_index": 1, "length": 2},
                      outputs={"Out": 1}),
               Sample({"X": [rng.standard_normal((3, 4)) for _ in range(2)]}, {"start_index": 0, "length": -1},
                      note="length -1: to the end")]
        if negative:
            out.append(Sample({"X": [rng.standard_normal((2, 4)) for _ in range(2)]},
                              {"start_index": -3, "length": 2}, note="negative start_index"))
        return out
    return samples


register(paddle_opdef("partial_sum", _partial_sum, {"partial_sum_grad": _partial_sum_grad},
                      samples=_partial_samples(False), attrs_handled=("start_index", "length"),
                      doc="Out = sum of X[i][:, start_index:start_index + length]"))
register(paddle_opdef("partial_concat", _partial_concat, {"partial_concat_grad": _partial_concat_grad},
                      samples=_partial_samples(True), attrs_handled=("start_index", "length"),
                      doc="Out = concat of X[i][:, start_index:start_index + length] along dim 1"))
