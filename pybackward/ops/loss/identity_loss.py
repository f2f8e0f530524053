"""identity_loss: a loss reduced by sum (0), mean (1) or none (2), with its grad."""
from __future__ import annotations

import numpy as np
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# identity_loss: reduction 0 sum, 1 mean, 2 none
# --------------------------------------------------------------------------
def _reduction(c: Call) -> int:
    r = int(c.attr("reduction", 1))
    if r not in (0, 1, 2):
        raise c.unsupported("reduction", r, "0 (sum), 1 (mean) or 2 (none)")
    return r


def _identity_loss(c: Call):
    x = array_in(c, "X")
    r = _reduction(c)
    if r == 0:
        return {"Out": np.asarray(x.sum(), x.dtype)}
    if r == 1:
        return {"Out": np.asarray(x.mean(), x.dtype)}
    return {"Out": x.copy()}


def _identity_loss_grad(c: Call):
    x, g = array_in(c, "X"), array_in(c, "Out@GRAD")
    r = _reduction(c)
    if r == 2:
        return {"X@GRAD": g.reshape(x.shape).copy()}
    scale = 1 if r == 0 else max(x.size, 1)
    return {"X@GRAD": np.full(x.shape, g.reshape(()) / g.dtype.type(scale), g.dtype)}


register(paddle_opdef("identity_loss", _identity_loss, {"identity_loss_grad": _identity_loss_grad},
                      samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4))]}, {"reduction": r})
                                           for r in (0, 1, 2)],
                      attrs_handled=("reduction",), doc="Out = sum (0), mean (1) or X itself (2)"))
