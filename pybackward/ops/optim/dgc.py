"""Deep gradient compression: dgc_clip_by_norm and dgc_momentum.

Paddle 3.3.1's CPU kernels, in NumPy terms:

* dgc_clip_by_norm: clip_by_norm of X once current_step >= rampup_begin_step
  (both truncated to int), else X unchanged (Paddle then writes nothing; DGC
  programs pass X as Out, so the value is X).
* dgc_momentum: Grad_out = Grad / nranks (nranks > 1 required); before
  rampup_begin_step a momentum step, from it on an SGD step, both on
  Grad_out: DGC programs pass Grad as Grad_out, so Paddle's update reads the
  divided gradient (docs/ops.md). rampup_begin_step < 0 leaves every output
  as its input.
"""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import float_in
from .._inputs import scalar_in


# --------------------------------------------------------------------------
# dgc_clip_by_norm, dgc_momentum
# --------------------------------------------------------------------------
def _rampup_reached(c: Call, step: float) -> bool:
    ramp = int(float(c.attr("rampup_begin_step", -1.0)))
    return ramp >= 0 and int(step) >= ramp


def _dgc_clip_by_norm(c: Call):
    x = float_in(c, "X")
    if not _rampup_reached(c, scalar_in(c, "current_step")):
        return {"Out": x.copy()}
    max_norm = x.dtype.type(c.attr("max_norm"))
    norm = np.sqrt(np.sum(np.square(x), dtype=x.dtype))
    if norm <= max_norm:
        return {"Out": x.copy()}
    eps = x.dtype.type(1e-6) if norm <= x.dtype.type(1e-30) else x.dtype.type(0)
    return {"Out": (x * (max_norm / (norm + eps))).astype(x.dtype)}


def _dgc_clip_samples(rng):
    x = rng.standard_normal((3, 4))
    return [
        Sample({"X": [x], "current_step": [np.array([5.0])]}, {"max_norm": 1.5, "rampup_begin_step": 2.0}),
        Sample({"X": [x * 0.1], "current_step": [np.array([5.0])]}, {"max_norm": 1.5, "rampup_begin_step": 2.0},
               note="norm below max_norm"),
        Sample({"X": [x], "current_step": [np.array([1.0])]}, {"max_norm": 1.5, "rampup_begin_step": 2.0},
               note="before rampup: X"),
        Sample({"X": [x], "current_step": [np.array([7.0])]}, {"max_norm": 1.0}, note="rampup -1: X"),
    ]


def _dgc_momentum(c: Call):
    p, g, v = float_in(c, "Param"), float_in(c, "Grad"), float_in(c, "Velocity")
    if p.shape != g.shape or p.shape != v.shape:
        raise ExecutionError(f"op dgc_momentum: Param {p.shape}, Grad {g.shape} and Velocity {v.shape} differ")
    if c.attr("multi_precision", False):
        raise c.unsupported("multi_precision", True, "no master weights in the NumPy interpreter")
    if int(float(c.attr("rampup_begin_step", -1.0))) < 0:
        return {"ParamOut": p.copy(), "VelocityOut": v.copy(), "Grad_out": g.copy()}
    nranks = int(scalar_in(c, "nranks"))
    if nranks <= 1:
        raise ExecutionError(f"op dgc_momentum: DGC is not useful when num_trainers <= 1, but now nranks={nranks}")
    dt = p.dtype.type
    lr = dt(scalar_in(c, "LearningRate"))
    g = (g * dt(1.0 / nranks)).astype(p.dtype)
    if _rampup_reached(c, scalar_in(c, "current_step")):  # SGD from the rampup step on
        return {"ParamOut": (p - lr * g).astype(p.dtype), "VelocityOut": v.copy(), "Grad_out": g}
    grad = g  # Paddle's dense CPU momentum ignores rescale_grad
    method = c.attr("regularization_method", "")
    if method == "l2_decay":
        grad = grad + dt(c.attr("regularization_coeff", 0.0)) * p
    elif method not in ("", None):
        raise c.unsupported("regularization_method", method, "'' or 'l2_decay'")
    mu = dt(c.attr("mu"))
    v_out = v * mu + grad
    step = grad + v_out * mu if c.attr("use_nesterov", False) else v_out
    return {"ParamOut": (p - step * lr).astype(p.dtype), "VelocityOut": v_out.astype(p.dtype), "Grad_out": g}


def _dgc_momentum_samples(rng):
    def ins(step, nranks):
        return {"Param": [rng.standard_normal((2, 3))], "Grad": [rng.standard_normal((2, 3))],
                "Velocity": [rng.standard_normal((2, 3)) * 0.1], "LearningRate": [np.array([0.1])],
                "current_step": [np.array([step])], "nranks": [np.array([nranks])]}
    outs = {"ParamOut": 1, "VelocityOut": 1, "Grad_out": 1}
    return [
        Sample(ins(1.0, 2.0), {"mu": 0.9, "rampup_begin_step": 3.0}, outputs=outs, note="momentum before rampup"),
        Sample(ins(1.0, 4.0), {"mu": 0.8, "rampup_begin_step": 3.0, "use_nesterov": True,
                               "regularization_method": "l2_decay", "regularization_coeff": 0.01,
                               "rescale_grad": 0.5}, outputs=outs, note="nesterov, l2 decay, rescale"),
        Sample(ins(5.0, 2.0), {"mu": 0.9, "rampup_begin_step": 3.0}, outputs=outs, note="sgd from rampup on"),
        Sample(ins(5.0, 2.0), {"mu": 0.9}, outputs=outs, note="rampup -1: unchanged"),
    ]


register(paddle_opdef("dgc_clip_by_norm", _dgc_clip_by_norm, samples=_dgc_clip_samples,
                      attrs_handled=("max_norm", "rampup_begin_step"),
                      doc="clip_by_norm once current_step reaches rampup_begin_step, else X"))
register(paddle_opdef("dgc_momentum", _dgc_momentum, samples=_dgc_momentum_samples,
                      attrs_handled=("mu", "use_nesterov", "regularization_method", "regularization_coeff",
                                     "multi_precision", "rescale_grad", "rampup_begin_step"),
                      doc="Grad/nranks; momentum before rampup_begin_step, SGD from it on"))
