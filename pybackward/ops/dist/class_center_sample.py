"""Odd non-differentiable ops, as Paddle 3.3.1's CPU kernels compute them:

* class_center_sample (a world of one process, as Paddle's CPU kernel always
  is): the sorted distinct labels, then distinct negative classes drawn from
  [0, num_classes) until num_samples centres; RemappedLabel each label's
  index among the sorted distinct ones. With fix_seed and a nonzero seed the
  draws are Paddle's (libstdc++'s uniform_int_distribution over a
  std::mt19937_64(seed)); otherwise Paddle seeds from std::random_device or
  its global generator and the interpreter's generator stands in.
* dgc_clip_by_norm: clip_by_norm of X once current_step >= rampup_begin_step
  (both truncated to int), else X unchanged (Paddle then writes nothing; DGC
  programs pass X as Out, so the value is X).
* dgc_momentum: Grad_out = Grad / nranks (nranks > 1 required); before
  rampup_begin_step a momentum step, from it on an SGD step, both on
  Grad_out: DGC programs pass Grad as Grad_out, so Paddle's update reads the
  divided gradient (docs/ops.md). rampup_begin_step < 0 leaves every output
  as its input.
* set: Out is a strided view of `source`: dims, stride (elements) and offset
  (bytes), read into a dense array.
* sparse_momentum: momentum whose gradient rows (axis 0) or columns (axis 1)
  are scattered (summed) into Param's positions Index; every element of
  Param and Velocity is updated.
* get_tensor_from_selected_rows, merge_selected_rows: pybackward holds a
  SelectedRows as its dense equivalent (docs/ops.md), on which both are the
  identity.
"""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from .paddle_table import paddle_opdef
from .random import MT19937_64, engine
from .registry import Call, Sample, register
from .tdm import IntDraws


def _float_in(c: Call, slot: str) -> np.ndarray:
    v = c.x(slot)
    if v is None:
        raise ExecutionError(f"op {c.op_type}: input {slot} is required")
    v = np.asarray(v)
    if v.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: {slot} must be a float tensor, got {v.dtype}")
    return v


def _scalar(c: Call, slot: str) -> float:
    v = np.asarray(c.x(slot) if c.x(slot) is not None else [])
    if v.size < 1:
        raise ExecutionError(f"op {c.op_type}: {slot} must hold a value")
    return v.reshape(-1)[0]


# --------------------------------------------------------------------------
# class_center_sample
# --------------------------------------------------------------------------
def _class_center_sample(c: Call):
    label = np.asarray(c.x("Label"))
    if label.dtype not in (np.int32, np.int64):
        raise ExecutionError(f"op class_center_sample: Label must be int32 or int64, got {label.dtype}")
    num_classes, num_samples = int(c.attr("num_classes")), int(c.attr("num_samples"))
    if num_classes <= 0 or num_samples <= 0 or num_samples > num_classes:
        raise ExecutionError(f"op class_center_sample: need 0 < num_samples <= num_classes, got num_samples "
                             f"{num_samples}, num_classes {num_classes}")
    if label.ndim != 1:
        raise ExecutionError(f"op class_center_sample: Label must be 1-D, got shape {label.shape}")
    uniq, remapped = np.unique(label, return_inverse=True)
    sampled = [int(v) for v in uniq]
    if len(sampled) < num_samples:
        seed = int(c.attr("seed", 0)) if c.attr("fix_seed", False) else 0
        draws = IntDraws(MT19937_64(seed) if seed else engine(c, 0))
        have = set(sampled)
        while len(sampled) < num_samples:
            neg = draws.draw(num_classes)
            if neg not in have:
                have.add(neg)
                sampled.append(neg)
    return {"RemappedLabel": remapped.reshape(-1).astype(label.dtype),
            "SampledLocalClassCenter": np.array(sampled, label.dtype)}


def _ccs_samples(rng):
    base = {"num_classes": 20, "num_samples": 8, "ring_id": 0, "rank": 0, "nranks": 1, "fix_seed": True}
    return [
        Sample({"Label": [np.array([3, 8, 3, 1, 15])]}, {**base, "seed": 5}, note="seed 5: Paddle's draws"),
        Sample({"Label": [np.array([4, 0, 7, 4], np.int32)]}, {**base, "num_classes": 1000, "num_samples": 30,
                                                               "seed": 11}, note="int32"),
        Sample({"Label": [np.array([2, 0, 1, 2])]}, {**base, "num_classes": 3, "num_samples": 2, "seed": 1},
               note="more positives than num_samples: all kept, no draws"),
    ]


register(paddle_opdef("class_center_sample", _class_center_sample, samples=_ccs_samples,
                      attrs_handled=("num_classes", "num_samples", "fix_seed", "seed", "ring_id", "rank", "nranks"),
                      doc="positive class centres plus sampled negatives; labels remapped to them"))


# --------------------------------------------------------------------------
# dgc_clip_by_norm, dgc_momentum
# --------------------------------------------------------------------------
def _rampup_reached(c: Call, step: float) -> bool:
    ramp = int(float(c.attr("rampup_begin_step", -1.0)))
    return ramp >= 0 and int(step) >= ramp


def _dgc_clip_by_norm(c: Call):
    x = _float_in(c, "X")
    if not _rampup_reached(c, _scalar(c, "current_step")):
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
    p, g, v = _float_in(c, "Param"), _float_in(c, "Grad"), _float_in(c, "Velocity")
    if p.shape != g.shape or p.shape != v.shape:
        raise ExecutionError(f"op dgc_momentum: Param {p.shape}, Grad {g.shape} and Velocity {v.shape} differ")
    if c.attr("multi_precision", False):
        raise c.unsupported("multi_precision", True, "no master weights in the NumPy interpreter")
    if int(float(c.attr("rampup_begin_step", -1.0))) < 0:
        return {"ParamOut": p.copy(), "VelocityOut": v.copy(), "Grad_out": g.copy()}
    nranks = int(_scalar(c, "nranks"))
    if nranks <= 1:
        raise ExecutionError(f"op dgc_momentum: DGC is not useful when num_trainers <= 1, but now nranks={nranks}")
    dt = p.dtype.type
    lr = dt(_scalar(c, "LearningRate"))
    g = (g * dt(1.0 / nranks)).astype(p.dtype)
    if _rampup_reached(c, _scalar(c, "current_step")):  # SGD from the rampup step on
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


# --------------------------------------------------------------------------
# set
# --------------------------------------------------------------------------
def _set(c: Call):
    x, src = np.asarray(c.x("x")), np.asarray(c.x("source"))
    if x.dtype != src.dtype:
        raise ExecutionError(f"op set: x ({x.dtype}) and source ({src.dtype}) must have one dtype")
    dims = [int(d) for d in c.attr("dims")]
    stride = [int(s) for s in c.attr("stride")]
    offset = int(c.attr("offset", 0))
    if len(dims) != len(stride) or any(d < 0 for d in dims):
        raise ExecutionError(f"op set: dims {dims} and stride {stride} must have one length, dims >= 0")
    if offset < 0 or offset % src.itemsize:
        raise ExecutionError(f"op set: offset {offset} must be a non-negative multiple of {src.itemsize} bytes")
    flat = np.ascontiguousarray(src).reshape(-1)
    start = offset // src.itemsize
    idx = np.full(dims, start, np.int64) if dims else np.array(start, np.int64)
    for axis, (d, s) in enumerate(zip(dims, stride)):
        shape = [1] * len(dims)
        shape[axis] = d
        idx = idx + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise ExecutionError(f"op set: the view dims {dims}, stride {stride}, offset {offset} reaches past "
                             f"source's {flat.size} elements")
    return {"out": flat[idx].astype(src.dtype)}


def _set_samples(rng):
    src = rng.standard_normal(12)
    x = np.zeros((2, 3))
    return [
        Sample({"x": [x], "source": [src]}, {"dims": [2, 3], "stride": [3, 1], "offset": 0}),
        Sample({"x": [x], "source": [src]}, {"dims": [2, 3], "stride": [1, 2], "offset": 0}, note="transposed"),
        Sample({"x": [x.astype(np.int64)], "source": [np.arange(12, dtype=np.int64)]},
               {"dims": [2, 2], "stride": [2, 1], "offset": 16}, note="int64, an offset"),
        Sample({"x": [x], "source": [src]}, {"dims": [2, 2], "stride": [1, 2], "offset": 0}),
    ]


register(paddle_opdef("set", _set, samples=_set_samples, attrs_handled=("dims", "stride", "offset"),
                      doc="out = the strided view (dims, stride, byte offset) of source"))


# --------------------------------------------------------------------------
# sparse_momentum
# --------------------------------------------------------------------------
def _sparse_momentum(c: Call):
    p, g, v = _float_in(c, "Param"), _float_in(c, "Grad"), _float_in(c, "Velocity")
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
        axis = int(_scalar(c, "Axis"))
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
    mu, lr = dt(c.attr("mu")), dt(_scalar(c, "LearningRate"))
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


# --------------------------------------------------------------------------
# SelectedRows as their dense equivalent
# --------------------------------------------------------------------------
def _dense_identity(c: Call):
    x = c.x("X")
    if x is None:
        raise ExecutionError(f"op {c.op_type}: input X is required")
    return {"Out": np.array(x, copy=True)}


register(paddle_opdef("get_tensor_from_selected_rows", _dense_identity,
                      doc="the value of a SelectedRows: here its dense equivalent, copied (docs/ops.md)"))
register(paddle_opdef("merge_selected_rows", _dense_identity,
                      doc="a SelectedRows with its rows merged: the dense equivalent is unchanged (docs/ops.md)"))
