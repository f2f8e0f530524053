"""repeat_interleave and multiplex, with their grads."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import EMPTY_VAR_NAME, Call, Sample, register
from ..tensor.creation import norm_axis
from .._inputs import array_in
from .._inputs import checked_indices


# --------------------------------------------------------------------------
# repeat_interleave / multiplex
# --------------------------------------------------------------------------
def _repeats(c: Call, x: np.ndarray):
    """(axis, repeats per slice). A negative dim is normalised (Paddle 3.3.1's
    CPU kernel hangs on one)."""
    axis = norm_axis(c.attr("dim", 0), max(x.ndim, 1), "dim")
    if c.has("RepeatsTensor"):
        reps = np.asarray(c.x("RepeatsTensor")).reshape(-1).astype(np.int64)
        if reps.size == 1:
            reps = np.full(x.shape[axis] if x.ndim else 1, reps[0])
    else:
        reps = np.full(x.shape[axis] if x.ndim else 1, int(c.attr("Repeats", 1)))
    n = x.shape[axis] if x.ndim else 1
    if reps.size != n or (reps < 0).any():
        raise ExecutionError(f"repeat_interleave: repeats {reps.tolist()} do not fit a dim of size {n}")
    return axis, reps


def _repeat_interleave(c: Call):
    x = array_in(c)
    axis, reps = _repeats(c, x)
    return {"Out": np.repeat(x.reshape(-1) if x.ndim == 0 else x, reps, axis=axis)}


def _repeat_interleave_grad(c: Call):
    x = array_in(c)
    axis, reps = _repeats(c, x)
    g = np.moveaxis(array_in(c, "Out@GRAD"), axis, 0)
    seg = np.repeat(np.arange(reps.size), reps)
    gx = np.zeros((reps.size,) + g.shape[1:], g.dtype)
    np.add.at(gx, seg, g)
    return {"X@GRAD": np.moveaxis(gx, 0, axis).reshape(x.shape)}


register(paddle_opdef(
    "repeat_interleave", _repeat_interleave, {"repeat_interleave_grad": _repeat_interleave_grad},
    samples=lambda rng: [
        Sample({"X": [rng.standard_normal((2, 3))]}, {"Repeats": 2, "dim": 1, "output_size": -1}),
        Sample({"X": [rng.standard_normal((3, 2))], "RepeatsTensor": [np.array([1, 0, 3])]},
               {"Repeats": 1, "dim": 0, "output_size": -1}, note="RepeatsTensor"),
        Sample({"X": [rng.standard_normal((2, 3))]}, {"Repeats": 3, "dim": 1, "output_size": -1})],
    attrs_handled=("Repeats", "dim"), doc="Out = each slice of X along dim repeated (RepeatsTensor or Repeats)"))


def _multiplex_ids(c: Call, n_inputs: int, rows: int) -> np.ndarray:
    ids = np.asarray(c.x("Ids"))
    if ids.dtype != np.int32:  # Paddle's kernel reads Ids as int32 and rejects others
        raise ExecutionError(f"multiplex: Ids must be int32, got {ids.dtype}")
    if ids.ndim != 2 or ids.shape[1] != 1 or ids.shape[0] != rows:
        raise ExecutionError(f"multiplex: Ids must have shape [{rows}, 1], got {list(ids.shape)}")
    return checked_indices(c, ids.reshape(-1), n_inputs, "Ids", allow_negative=False)


def _multiplex(c: Call):
    xs = np.stack([np.asarray(v) for v in c.xs("X")])
    ids = _multiplex_ids(c, xs.shape[0], xs.shape[1])
    return {"Out": xs[ids, np.arange(xs.shape[1])]}


def _multiplex_grad(c: Call):
    g = array_in(c, "Out@GRAD")
    names = c.outs.get("X@GRAD", ())
    n = len(names)
    ids = _multiplex_ids(c, n, g.shape[0])
    res = []
    for i, name in enumerate(names):
        if name == EMPTY_VAR_NAME:
            res.append(None)
            continue
        keep = (ids == i).reshape((-1,) + (1,) * (g.ndim - 1))
        res.append(np.where(keep, g, np.zeros((), g.dtype)))
    return {"X@GRAD": res}


register(paddle_opdef(
    "multiplex", _multiplex, {"multiplex_grad": _multiplex_grad}, samples=lambda rng: [
        Sample({"X": [rng.standard_normal((4, 3)) for _ in range(3)],
                "Ids": [np.array([[2], [0], [2], [1]], np.int32)]}),
        Sample({"X": [rng.standard_normal((2, 2)) for _ in range(2)], "Ids": [np.array([[1], [1]], np.int32)]})],
    doc="Out[i] = X[Ids[i]][i]"))
