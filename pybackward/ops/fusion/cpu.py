"""CPU fusion ops Paddle's inference passes write into programs:
fusion_squared_mat_sub, fusion_repeated_fc_relu and fused_elementwise_* (forward
only, as in Paddle).

* fusion_squared_mat_sub: Out = scalar * ((X Y)^2 - (X^2)(Y^2)), with the
  intermediates SquaredX = X^2, SquaredY = Y^2, SquaredXY = (X Y)^2;
* fusion_repeated_fc_relu: n fc + relu layers, out_i = relu(out_{i-1} W_i +
  Bias_i); ReluOut holds the first n - 1 outputs, Out the last.
Products accumulate in float64 and round once (ops/_precision.py), as the
other matmul kernels do.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._precision import matmul64
from ..paddle_table import paddle_opdef
from .. import registry
from ..registry import Call, Sample, register


def _mat(c: Call, slot: str) -> np.ndarray:
    a = np.asarray(c.x(slot))
    if a.ndim != 2:
        raise ExecutionError(f"op {c.op_type}: {slot} must be 2-D, not {list(a.shape)}")
    return a


def _squared_mat_sub(c: Call):
    x, y = _mat(c, "X"), _mat(c, "Y")
    if x.shape[1] != y.shape[0]:
        raise ExecutionError(f"op {c.op_type}: X {list(x.shape)} and Y {list(y.shape)} do not multiply")
    sx, sy = x * x, y * y
    xy = matmul64(x, y).astype(x.dtype)
    sxy = xy * xy
    out = (sxy - matmul64(sx, sy).astype(x.dtype)) * x.dtype.type(c.attr("scalar", 1.0))
    return {"SquaredX": sx, "SquaredY": sy, "SquaredXY": sxy, "Out": out.astype(x.dtype)}


register(paddle_opdef("fusion_squared_mat_sub", _squared_mat_sub, attrs_handled=("scalar",),
                      samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4))], "Y": [rng.standard_normal((4, 5))]},
                                                  {"scalar": 0.5})],
                      doc="Out = scalar * ((X Y)^2 - X^2 Y^2)"))


def _repeated_fc_relu(c: Call):
    x = np.asarray(c.x("X"))
    ws, bs = c.xs("W"), c.xs("Bias")
    if not ws or len(ws) != len(bs):
        raise ExecutionError(f"op {c.op_type}: {len(ws)} W and {len(bs)} Bias vars; one Bias per W")
    cur = x.reshape(x.shape[0], -1)
    outs = []
    for w, b in zip(ws, bs):
        w = np.asarray(w)
        if cur.shape[1] != w.shape[0]:
            raise ExecutionError(f"op {c.op_type}: a layer's input {list(cur.shape)} and W {list(w.shape)} do "
                                 "not multiply")
        cur = np.maximum(matmul64(cur, w).astype(x.dtype) + np.asarray(b).reshape(1, -1).astype(x.dtype),
                         x.dtype.type(0))
        outs.append(cur)
    return {"ReluOut": outs[:-1], "Out": outs[-1]}


def _repeated_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 4))],
                    "W": [rng.standard_normal((4, 5)), rng.standard_normal((5, 3)), rng.standard_normal((3, 2))],
                    "Bias": [rng.standard_normal((1, 5)), rng.standard_normal((1, 3)), rng.standard_normal((1, 2))]},
                   outputs={"ReluOut": 2, "Out": 1})]


register(paddle_opdef("fusion_repeated_fc_relu", _repeated_fc_relu, samples=_repeated_samples,
                      doc="n fc + relu layers: ReluOut the first n - 1 outputs, Out the last"))


# --------------------------------------------------------------------------
# fused_elementwise_{add,sub,mul,div}: oneDNN fusions of an elementwise op with
# scales and an activation. Paddle 3.3.1's CPU kernel computes the plain op with
# NumPy-style broadcasting and ignores the fuse_* / scale_* attrs and `axis`
# (seen on a live Paddle: scale_x 2, scale_y 3, scale_out 0.5 and relu give
# X + Y; axis 1 with a mid-axis Y is refused); so does this one.
# --------------------------------------------------------------------------
def _plain(base: str):
    def kernel(c: Call):
        plain = registry.get(base).kernel
        return plain(Call(base, c.ins, {"axis": -1}, c.outs, c.rng, c.env))
    return kernel


def _fused_samples(rng):
    fuse = {"fuse_activation": "relu", "scale_x": 2.0, "scale_y": 3.0, "scale_out": 0.5, "fuse_alpha": 0.0,
            "fuse_beta": 0.0, "fused_output_scale": 1.0, "fused_unsqueeze2_axes": []}
    y = rng.uniform(0.5, 2.0, (2, 3))
    return [Sample({"X": [rng.standard_normal((2, 3))], "Y": [y]}, {"axis": -1, **fuse},
                   note="fuse attrs ignored on CPU"),
            Sample({"X": [rng.standard_normal((2, 3, 4))], "Y": [rng.uniform(0.5, 2.0, (4,))]},
                   {"axis": -1, **fuse}, note="Y broadcast on the last axis")]


for _op in ("add", "sub", "mul", "div"):
    register(paddle_opdef(f"fused_elementwise_{_op}", _plain(f"elementwise_{_op}"), samples=_fused_samples,
                          doc=f"Out = elementwise_{_op}(X, Y), NumPy broadcasting (Paddle's CPU kernel "
                              "ignores axis and the fuse attrs)"))
