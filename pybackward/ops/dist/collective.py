"""Collective and model-parallel ops, run as a world of one process.

Paddle's distributed programs carry communication ops (`c_identity`,
`c_concat`, `c_split`, `mp_allreduce_sum`, `all_reduce`, ...) and
vocabulary-sharded ops (`c_embedding`, `c_softmax_with_cross_entropy`). The
interpreter runs one process, so it runs them as the one rank of a world of
size one - which is exactly what those programs compute when Paddle runs them
with one trainer:

* a collective over one rank is the identity: all_reduce (any reduce_type:
  sum, max, min, prod, avg of one value is that value), all_gather,
  broadcast, reduce, reduce_scatter, all_to_all, barrier, c_scatter,
  c_identity, c_concat, c_split, mp_allreduce_sum, global_scatter and
  global_gather (with local_count equal to global_count);
* an op whose `nranks` attr says the world is larger is refused
  (`call.unsupported`): its result depends on values other ranks hold;
* c_embedding looks rows up in its shard of the table (`start_index` is the
  shard's first row; ids outside the shard give zeros), as Paddle's CPU
  kernel does; its grad scatters the output grads back into the shard;
* c_softmax_with_cross_entropy over one rank is softmax_with_cross_entropy
  with hard labels on the last axis (Loss [N, 1]; `ignore_index` rows give
  0 loss and 0 gradient). Paddle 3.3.1 registers a CPU kernel for it that
  only raises "Do not support c_softmax_with_cross_entropy for cpu kernel
  now"; pybackward computes what its GPU kernel computes for one rank
  (docs/deviations.md).

The grad ops come from Paddle's records (c_identity's grad is an all_reduce,
c_concat's a c_split, c_split's an all_gather, ...), so the collectives are
registered first and the other ops' grads find their kernels here.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from ..loss.cross_entropy import paddle_softmax, tolerable_log


def _one_rank(c: Call) -> None:
    n = c.attr("nranks", 1)
    if n not in (1, None):
        raise c.unsupported("nranks", n, "pybackward runs a world of one process; the result needs the "
                                         "values the other ranks hold")


def _identity_for(x_slot: str, out_slot: str):
    """Out = X. The ops declared with lower-case slots (x, out) are also read
    with upper-case ones: Paddle's c_split grad maker emits an all_gather with
    slots X and Out."""
    def kernel(c: Call):
        _one_rank(c)
        x_name = x_slot if c.has(x_slot) else x_slot.upper()
        x = c.x(x_name)
        if x is None:
            raise ExecutionError(f"op {c.op_type}: input '{x_slot}' is empty")
        out_name = out_slot if c.n_out(out_slot) else out_slot.capitalize()
        return {out_name: np.array(x, copy=True)}
    return kernel


def _same_samples(slot: str):
    def samples(rng):
        return [Sample({slot: [rng.standard_normal((3, 4))]}, note="one rank"),
                Sample({slot: [rng.standard_normal((2, 3, 2))]}, {"nranks": 1}, note="3-D, nranks=1")]
    return samples


def _nranks_samples(slot: str):
    def samples(rng):
        return [Sample({slot: [rng.standard_normal((3, 4))]}, {"nranks": 1, "rank": 0}, note="one rank")]
    return samples


# Collectives without a gradient of their own (Paddle: empty grad maker); several
# are the grad ops of the differentiable ones below, so they come first.
for _t, _doc in (("all_reduce", "over one rank: Out = X for every reduce_type"),
                 ("all_gather", "over one rank (nranks 1): Out = X"),
                 ("broadcast", "from the only rank: Out = X"),
                 ("reduce", "to the only rank: Out = X"),
                 ("reduce_scatter", "over one rank (nranks 1): Out = X"),
                 ("all_to_all", "over one rank: Out = X")):
    register(paddle_opdef(_t, _identity_for("x", "out"), samples=_same_samples("x"),
                          attrs_handled=("nranks",), doc=_doc))
register(paddle_opdef("barrier", _identity_for("X", "Out"), samples=_same_samples("X"),
                      doc="one process waits for no one: Out = X"))
register(paddle_opdef("c_scatter", _identity_for("X", "Out"), samples=_nranks_samples("X"),
                      attrs_handled=("nranks",), doc="over one rank (nranks 1): Out = X"))

register(paddle_opdef("c_identity", _identity_for("X", "Out"), samples=_same_samples("X"),
                      doc="Out = X (model parallelism's identity; grad an all_reduce, the identity on one rank)"))
register(paddle_opdef("c_split", _identity_for("X", "Out"), samples=_nranks_samples("X"),
                      attrs_handled=("nranks", "rank"), doc="one rank's slice of the last axis: all of it"))
register(paddle_opdef("c_concat", _identity_for("X", "Out"), samples=_nranks_samples("X"),
                      attrs_handled=("nranks", "rank"), doc="the ranks' X joined on the last axis: X"))
register(paddle_opdef("mp_allreduce_sum", _identity_for("X", "Out"), samples=_same_samples("X"),
                      doc="sum over the model-parallel ranks: X; grad a c_identity"))


def _moe_counts(c: Call, x: np.ndarray) -> None:
    local = np.asarray(c.x("local_count")).reshape(-1)
    glob = np.asarray(c.x("global_count")).reshape(-1)
    if local.shape != glob.shape or np.any(local != glob):
        raise ExecutionError(f"op {c.op_type}: local_count {local.tolist()} and global_count {glob.tolist()} "
                             "differ; in a world of one process every row stays where it is, so they "
                             "must be equal")
    if int(local.sum()) != x.shape[0]:
        raise ExecutionError(f"op {c.op_type}: local_count sums to {int(local.sum())} rows, X has "
                             f"{x.shape[0]}")


def _moe_kernel(c: Call):
    x = np.asarray(c.x("X"))
    _moe_counts(c, x)
    return {"Out": x.copy()}


def _moe_samples(rng):
    counts = np.array([2, 0, 3], dtype=np.int64)
    return [Sample({"X": [rng.standard_normal((5, 4))], "local_count": [counts], "global_count": [counts.copy()]},
                   wrt=("X",), note="3 experts on one rank")]


register(paddle_opdef("global_scatter", _moe_kernel, samples=_moe_samples,
                      doc="MoE dispatch over one rank: every expert is local, Out = X"))
register(paddle_opdef("global_gather", _moe_kernel, samples=_moe_samples,
                      doc="MoE combine over one rank: Out = X"))


# --------------------------------------------------------------------------
# c_embedding: a shard of a vocabulary-parallel embedding table
# --------------------------------------------------------------------------
def _shard_rows(c: Call, w: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if ids.dtype not in (np.int32, np.int64):
        raise ExecutionError(f"op {c.op_type}: Ids must be int32 or int64, not {ids.dtype}")
    if w.ndim != 2:
        raise ExecutionError(f"op {c.op_type}: W must be 2-D (rows, width), not of shape {list(w.shape)}")
    local = ids.astype(np.int64) - int(c.attr("start_index", 0))
    inside = (local >= 0) & (local < w.shape[0])
    return np.where(inside, local, 0), inside


def _c_embedding(c: Call):
    w, ids = np.asarray(c.x("W")), np.asarray(c.x("Ids"))
    rows, inside = _shard_rows(c, w, ids)
    out = w[rows]
    out[~inside] = 0
    return {"Out": out}


def _c_embedding_grad(c: Call):
    w, ids = np.asarray(c.x("W")), np.asarray(c.x("Ids"))
    g = np.asarray(c.x("Out@GRAD")).reshape(-1, w.shape[1])
    rows, inside = _shard_rows(c, w, ids)
    dw = np.zeros_like(w)
    np.add.at(dw, rows.reshape(-1)[inside.reshape(-1)], g[inside.reshape(-1)])
    return {"W@GRAD": dw}


def _c_embedding_samples(rng):
    w = rng.standard_normal((5, 3))
    return [Sample({"W": [w], "Ids": [np.array([[0, 4], [2, 2]], dtype=np.int64)]}, note="whole table"),
            Sample({"W": [w], "Ids": [np.array([3, 9, 5, 7, 3, 12], dtype=np.int32)]},
                   {"start_index": 4, "vocab_size": 20}, note="shard from row 4; ids outside give zeros")]


register(paddle_opdef("c_embedding", _c_embedding, {"c_embedding_grad": _c_embedding_grad},
                      samples=_c_embedding_samples, attrs_handled=("start_index",),
                      doc="Out = W[Ids - start_index] inside the shard, 0 outside"))


# --------------------------------------------------------------------------
# c_softmax_with_cross_entropy over one rank
# --------------------------------------------------------------------------
def _hard(c: Call, label: np.ndarray, n: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    if label.dtype.kind not in "iu":
        raise ExecutionError(f"op {c.op_type}: Label must be integer, not {label.dtype}")
    lbl = label.reshape(n, 1).astype(np.int64)
    ignore = lbl == int(c.attr("ignore_index", -100))
    bad = ~ignore & ((lbl < 0) | (lbl >= classes))
    if bad.any():
        raise ExecutionError(f"op {c.op_type}: label {int(lbl[bad][0])} is outside [0, {classes}) "
                             "and is not ignore_index")
    return np.where(ignore, 0, lbl), ignore


def _c_swce(c: Call):
    _one_rank(c)
    logits = np.asarray(c.x("Logits"))
    lead, classes = logits.shape[:-1], logits.shape[-1]
    flat = logits.reshape(-1, classes)
    prob = paddle_softmax(flat, 1)
    lbl, ignore = _hard(c, np.asarray(c.x("Label")), flat.shape[0], classes)
    loss = -tolerable_log(np.take_along_axis(prob, lbl, axis=1))
    loss[ignore] = 0
    return {"Softmax": prob.reshape(logits.shape), "Loss": loss.astype(prob.dtype).reshape(lead + (1,))}


def _c_swce_grad(c: Call):
    _one_rank(c)
    sm = np.asarray(c.x("Softmax"))
    classes = sm.shape[-1]
    flat = sm.reshape(-1, classes)
    g = np.asarray(c.x("Loss@GRAD")).reshape(-1, 1)
    lbl, ignore = _hard(c, np.asarray(c.x("Label")), flat.shape[0], classes)
    dx = flat * g
    np.put_along_axis(dx, lbl, np.take_along_axis(dx, lbl, axis=1) - g, axis=1)
    dx[ignore.reshape(-1)] = 0
    return {"Logits@GRAD": dx.reshape(sm.shape).astype(sm.dtype, copy=False)}


def _c_swce_samples(rng):
    return [Sample({"Logits": [rng.standard_normal((4, 5))], "Label": [np.array([[1], [4], [0], [2]])]},
                   {"nranks": 1, "rank": 0}, wrt=("Logits",), note="one rank"),
            Sample({"Logits": [rng.standard_normal((2, 3, 4))],
                    "Label": [np.array([[[0], [-100], [3]], [[1], [2], [-100]]])]},
                   {"nranks": 1, "ignore_index": -100}, wrt=("Logits",), note="3-D, ignore_index")]


register(paddle_opdef("c_softmax_with_cross_entropy", _c_swce,
                      {"c_softmax_with_cross_entropy_grad": _c_swce_grad}, samples=_c_swce_samples,
                      intermediate_outputs=("Softmax",),   # Paddle's grad reads no Softmax@GRAD
                      attrs_handled=("nranks", "rank", "ignore_index"),
                      doc="over one rank: softmax_with_cross_entropy, hard labels on the last axis"))
