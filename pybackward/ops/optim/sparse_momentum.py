"""sparse_momentum: momentum applied to the rows an index selects.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* sparse_momentum: momentum whose gradient rows (axis 0) or columns (axis 1)
  are scattered (summed) into Param's positions Index; every element of
  Param and Velocity is updated.
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import float_in
from .._inputs import scalar_in


# --------------------------------------------------------------------------
# sparse_momentum
# --------------------------------------------------------------------------
def _sparse_momentum(c: Call):
    p, g, v = float_in(c, "Param"), float_in(c, "Grad"), float_in(c, "Velocity")
    if c.attr("multi_precision", False):
        raise c.unsupported("multi_precision", True, "no master weights in the NumPy interpreter")
    if p.ndim != 2 or g.ndim != 2 or v.shape != p.shape:
        raise ExecutionError(f"op sparse_momentum: Param and Grad must be 2-D and Velocity like Param, got "
                             f"{p.shape}, {g.shape}, {v.shape}")
    index = np.asarray(c.x("Index"))
    if index.dtype not in (np.int32, np.int64) or not (index.ndim == 1 or (index.ndim == 2 and index.shape[1] == 1)):
        raise ExecutionError(f"op sparse_momentum: Index must be int32/int64 of shape [n] or [n, 1], got "
                             f"{index.dtype} {index.shape}")
    index = index.reshape(-1).astype(np.int64)
    if index.size == 0:
        raise ExecutionError("op sparse_momentum: The index of sparse_momentum_op should not be empty")
    axis = int(c.attr("axis", 0))
    if c.x("Axis") is not None:
        axis = int(scalar_in(c, "Axis"))
    if axis not in (0, 1):
        raise ExecutionError(f"op sparse_momentum: axis must be 0 or 1, got {axis}")
    dt = p.dtype.type
    scaled = g * dt(c.attr("rescale_grad", 1.0))
    full = np.zeros_like(p)
    n = p.shape[axis]
    ok = (index >= 0) & (index < n)  # Paddle's search finds no position for the others
    need = g.shape[0] if axis == 0 else g.shape[1]
    if need < index.size or (axis == 0 and g.shape[1] != p.shape[1]) or (axis == 1 and g.shape[0] != p.shape[0]):
        raise ExecutionError(f"op sparse_momentum: Grad {g.shape} does not hold {index.size} "
                             f"{'rows' if axis == 0 else 'columns'} of Param {p.shape}")
    j = np.nonzero(ok)[0]
    if axis == 0:
        np.add.at(full, index[j], scaled[j])
    else:
        np.add.at(full.T, index[j], scaled[:, j].T)
    grad = full
    method = c.attr("regularization_method", "")
    if method == "l2_decay":
        grad = grad + dt(c.attr("regularization_coeff", 0.0)) * p
    elif method not in ("", None):
        raise c.unsupported("regularization_method", method, "'' or 'l2_decay'")
    mu, lr = dt(c.attr("mu")), dt(scalar_in(c, "LearningRate"))
    v_out = v * mu + grad
    step = grad + v_out * mu if c.attr("use_nesterov", False) else v_out
    return {"ParamOut": (p - step * lr).astype(p.dtype), "VelocityOut": v_out.astype(p.dtype)}


def _sparse_momentum_samples(rng):
    p, v = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)) * 0.1
    lr = np.array([0.1])
    outs = {"ParamOut": 1, "VelocityOut": 1}
    return [
        Sample({"Param": [p], "Grad": [rng.standard_normal((3, 3))], "Velocity": [v],
                "Index": [np.array([2, 0, 2])], "LearningRate": [lr]}, {"mu": 0.9}, outputs=outs,
               note="rows, one twice"),
        Sample({"Param": [p], "Grad": [rng.standard_normal((4, 2))], "Velocity": [v],
                "Index": [np.array([[1], [1]], np.int32)], "LearningRate": [lr]},
               {"mu": 0.9, "axis": 1, "use_nesterov": True}, outputs=outs, note="columns, nesterov"),
        Sample({"Param": [p], "Grad": [rng.standard_normal((2, 3))], "Velocity": [v],
                "Index": [np.array([3, 1])], "LearningRate": [lr], "Axis": [np.array([0])]},
               {"mu": 0.8, "axis": 1, "regularization_method": "l2_decay", "regularization_coeff": 0.05,
                "rescale_grad": 2.0}, outputs=outs, note="Axis tensor over the attr, l2 decay, rescale"),
    ]


register(paddle_opdef("sparse_momentum", _sparse_momentum, samples=_sparse_momentum_samples,
                      attrs_handled=("mu", "axis", "use_nesterov", "regularization_method", "regularization_coeff",
                                     "multi_precision", "rescale_grad"),
                      doc="momentum with Grad's rows/columns summed into Param's positions Index"))
