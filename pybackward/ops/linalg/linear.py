"""linear_v2: out = input @ weight (or weight^T) + bias, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# linear_v2: out = input @ weight (or weight^T) + bias
# --------------------------------------------------------------------------
def _linear_args(c: Call):
    x, w, b = array_in(c, "input"), array_in(c, "weight"), c.x("bias")
    if c.attr("transpose_weight", False):
        w = w.T
    if w.ndim != 2 or x.shape[-1] != w.shape[0]:
        raise ExecutionError(f"linear_v2: input {list(x.shape)} and weight {list(w.shape)} do not multiply")
    return x, w, b


def _linear_v2(c: Call):
    x, w, b = _linear_args(c)
    out = x @ w
    if b is not None:
        out = out + np.asarray(b)
    return {"out": out.astype(x.dtype, copy=False)}


def _linear_v2_grad(c: Call):
    x, w, b = _linear_args(c)
    g = array_in(c, "out@GRAD")
    res = {}
    if c.wants("input@GRAD"):
        res["input@GRAD"] = g @ w.T
    if c.wants("weight@GRAD"):
        gw = x.reshape(-1, x.shape[-1]).T @ g.reshape(-1, g.shape[-1])
        res["weight@GRAD"] = gw.T.copy() if c.attr("transpose_weight", False) else gw
    if c.wants("bias@GRAD") and b is not None:
        res["bias@GRAD"] = unbroadcast(g, np.shape(b))
    return res


register(paddle_opdef("linear_v2", _linear_v2, {"linear_v2_grad": _linear_v2_grad}, samples=lambda rng: [
    Sample({"input": [rng.standard_normal((2, 3))], "weight": [rng.standard_normal((3, 4))],
            "bias": [rng.standard_normal(4)]}, {"transpose_weight": False}),
    Sample({"input": [rng.standard_normal((2, 2, 3))], "weight": [rng.standard_normal((4, 3))],
            "bias": [rng.standard_normal(4)]}, {"transpose_weight": True}, note="transposed weight, batch")],
    attrs_handled=("transpose_weight",), doc="out = input @ weight + bias"))
