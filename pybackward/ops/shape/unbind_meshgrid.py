"""unbind, meshgrid and broadcast_tensors, with their grads."""
from __future__ import annotations

import numpy as np
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..tensor.creation import norm_axis
from .._inputs import array_in
from .._inputs import wanted_outputs


# --------------------------------------------------------------------------
# unbind / meshgrid / broadcast_tensors
# --------------------------------------------------------------------------
def _unbind(c: Call):
    x = array_in(c)
    axis = norm_axis(c.attr("axis", 0), x.ndim)
    return {"Out": [np.take(x, i, axis=axis) for i in range(x.shape[axis])]}


register(paddle_opdef(
    "unbind", _unbind, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 1}, outputs={"Out": 3}),
        Sample({"X": [rng.standard_normal((3, 2))]}, {"axis": -1}, outputs={"Out": 2})],
    attrs_handled=("axis",), doc="Out = the slices of X along axis (its grad is a stack of Out@GRAD)"))


def _meshgrid(c: Call):
    xs = [np.asarray(v).reshape(-1) for v in c.xs("X")]
    return {"Out": [np.array(a) for a in np.meshgrid(*xs, indexing="ij")]}


def _meshgrid_grad(c: Call):
    gs = [np.asarray(g) for g in c.xs("Out@GRAD")]
    xs = c.xs("X")
    n = len(xs)
    res = []
    for i, x in enumerate(xs):
        g = gs[i].sum(axis=tuple(j for j in range(n) if j != i))
        res.append(g.reshape(np.shape(x)))
    return {"X@GRAD": wanted_outputs(c, "X@GRAD", res)}


register(paddle_opdef(
    "meshgrid", _meshgrid, {"meshgrid_grad": _meshgrid_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(4)]}, {},
               outputs={"Out": 3}),
        Sample({"X": [rng.standard_normal(()), rng.standard_normal(2)]}, {}, outputs={"Out": 2}, note="0-D")],
    doc="Out[i] = X[i] spread over the grid of all X's sizes ('ij' indexing)"))


def _broadcast_tensors(c: Call):
    xs = [np.asarray(v) for v in c.xs("X")]
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    return {"Out": [np.array(np.broadcast_to(x, shape)) for x in xs]}


def _broadcast_tensors_grad(c: Call):
    gs = c.xs("Out@GRAD")
    return {"X@GRAD": wanted_outputs(c, "X@GRAD", [unbroadcast(np.asarray(g), np.shape(x))
                                              for g, x in zip(gs, c.xs("X"))])}


register(paddle_opdef(
    "broadcast_tensors", _broadcast_tensors, {"broadcast_tensors_grad": _broadcast_tensors_grad},
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 1, 3)), rng.standard_normal((4, 1)), rng.standard_normal(())]},
               {}, outputs={"Out": 3})],
    doc="Out[i] = X[i] broadcast to the common shape of all X"))
