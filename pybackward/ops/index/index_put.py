"""Assorted differentiable CPU ops with slots and grad rules from Paddle's
records: index_put, reverse, reduce_as, identity_loss, linear_v2,
partial_sum, partial_concat, add_position_encoding, fused_softmax_mask."""
from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ._util import unbroadcast
from .paddle_table import paddle_opdef
from .registry import Call, Sample, register
from .tensor import norm_axis


def _x(c: Call, slot: str) -> np.ndarray:
    return np.asarray(c.x(slot))


# --------------------------------------------------------------------------
# index_put: out = x; out[indices] = value (or += with accumulate)
# --------------------------------------------------------------------------
def _put_index(c: Call, x: np.ndarray) -> tuple[np.ndarray, ...]:
    idx = []
    for t in c.xs("indices"):
        t = np.asarray(t)
        if t.dtype == np.bool_:
            idx.extend(np.nonzero(t))
        elif t.dtype.kind in "iu":
            idx.append(t.astype(np.int64))
        else:
            raise ExecutionError(f"index_put: indices must be bool or integer tensors, got {t.dtype}")
    if len(idx) > x.ndim:
        raise ExecutionError(f"index_put: {len(idx)} index tensors for a tensor of rank {x.ndim}")
    for d, t in enumerate(idx):
        if t.size and (t.min() < -x.shape[d] or t.max() >= x.shape[d]):
            raise ExecutionError(f"index_put: index out of range for dim {d} of size {x.shape[d]}")
    try:
        np.broadcast_shapes(*(t.shape for t in idx))
    except ValueError:
        raise ExecutionError("index_put: the index tensors do not broadcast together") from None
    return tuple(idx)


def _index_put(c: Call):
    x, v = _x(c, "x"), _x(c, "value")
    idx = _put_index(c, x)
    out = x.copy()
    target = out[idx].shape
    try:
        vb = np.broadcast_to(v, target).astype(x.dtype, copy=False)
    except ValueError:
        raise ExecutionError(f"index_put: value of shape {list(v.shape)} does not broadcast to "
                             f"{list(target)}") from None
    if c.attr("accumulate", False):
        np.add.at(out, idx, vb)
    else:
        out[idx] = vb
    return {"out": out}


def _index_put_grad(c: Call):
    x, v, g = _x(c, "x"), _x(c, "value"), _x(c, "out@GRAD")
    idx = _put_index(c, x)
    res = {}
    if c.wants("x@GRAD"):
        gx = g.copy()
        if not c.attr("accumulate", False):
            gx[idx] = 0
        res["x@GRAD"] = gx
    if c.wants("value@GRAD"):
        res["value@GRAD"] = unbroadcast(g[idx], v.shape).astype(g.dtype)
    return res


def _index_put_samples(rng):
    i0, i1 = np.array([0, 2, 1]), np.array([1, 3, 0])
    return [
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [i0, i1], "value": [rng.standard_normal(3)]},
               {"accumulate": False}),
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [i0, i1], "value": [rng.standard_normal(1)]},
               {"accumulate": True}, note="broadcast value"),
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [np.array([0, 2, 0])],
                "value": [rng.standard_normal(4)]}, {"accumulate": True}, note="duplicate rows add"),
        Sample({"x": [rng.standard_normal((3, 4))], "indices": [np.array([True, False, True])],
                "value": [rng.standard_normal((2, 4))]}, {"accumulate": False}, note="bool mask"),
        Sample({"x": [rng.standard_normal((2, 3, 2))], "indices": [np.array([1, 0], np.int32)],
                "value": [rng.standard_normal((3, 2))]}, {"accumulate": False}, note="int32, rows")]


register(paddle_opdef("index_put", _index_put, {"index_put_grad": _index_put_grad},
                      samples=_index_put_samples, attrs_handled=("accumulate",),
                      doc="out = x with x[indices] set to (or, accumulate, increased by) value"))


# --------------------------------------------------------------------------
# reverse (legacy flip; its grad op is reverse of Out@GRAD)
# --------------------------------------------------------------------------
def _reverse(c: Call):
    x = _x(c, "X")
    axes = c.attr("axis", [])
    if not axes:
        raise ExecutionError("reverse: 'axis' must not be empty")
    return {"Out": np.flip(x, tuple({norm_axis(a, x.ndim) for a in axes})).copy()}


register(paddle_opdef("reverse", _reverse, samples=lambda rng: [
    Sample({"X": [rng.standard_normal((3, 4))]}, {"axis": [0]}),
    Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": [-1, 1]})],
    attrs_handled=("axis",), doc="Out = X reversed along each axis"))


# --------------------------------------------------------------------------
# reduce_as: x summed down to target's shape
# --------------------------------------------------------------------------
def _reduce_as(c: Call):
    x, t = _x(c, "x"), _x(c, "target")
    try:
        np.broadcast_shapes(x.shape, t.shape)
    except ValueError:
        raise ExecutionError(f"reduce_as: x {list(x.shape)} does not reduce to target {list(t.shape)}") from None
    return {"out": unbroadcast(x, t.shape).astype(x.dtype, copy=False)}


def _reduce_as_grad(c: Call):
    x, g = _x(c, "x"), _x(c, "out@GRAD")
    return {"x@GRAD": np.broadcast_to(g.reshape(g.shape), x.shape).copy()}


register(paddle_opdef("reduce_as", _reduce_as, {"reduce_as_grad": _reduce_as_grad}, samples=lambda rng: [
    Sample({"x": [rng.standard_normal((2, 3, 4))], "target": [rng.standard_normal((3, 1))]}, wrt=("x",)),
    Sample({"x": [rng.standard_normal((2, 3))], "target": [rng.standard_normal((1, 3))]}, wrt=("x",)),
    Sample({"x": [rng.standard_normal((2, 3))], "target": [rng.standard_normal((2, 3))]}, wrt=("x",))],
    doc="out = x summed over the dims target broadcasts along"))


# --------------------------------------------------------------------------
# identity_loss: reduction 0 sum, 1 mean, 2 none
# --------------------------------------------------------------------------
def _reduction(c: Call) -> int:
    r = int(c.attr("reduction", 1))
    if r not in (0, 1, 2):
        raise c.unsupported("reduction", r, "0 (sum), 1 (mean) or 2 (none)")
    return r


def _identity_loss(c: Call):
    x = _x(c, "X")
    r = _reduction(c)
    if r == 0:
        return {"Out": np.asarray(x.sum(), x.dtype)}
    if r == 1:
        return {"Out": np.asarray(x.mean(), x.dtype)}
    return {"Out": x.copy()}


def _identity_loss_grad(c: Call):
    x, g = _x(c, "X"), _x(c, "Out@GRAD")
    r = _reduction(c)
    if r == 2:
        return {"X@GRAD": g.reshape(x.shape).copy()}
    scale = 1 if r == 0 else max(x.size, 1)
    return {"X@GRAD": np.full(x.shape, g.reshape(()) / g.dtype.type(scale), g.dtype)}


register(paddle_opdef("identity_loss", _identity_loss, {"identity_loss_grad": _identity_loss_grad},
                      samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4))]}, {"reduction": r})
                                           for r in (0, 1, 2)],
                      attrs_handled=("reduction",), doc="Out = sum (0), mean (1) or X itself (2)"))


# --------------------------------------------------------------------------
# linear_v2: out = input @ weight (or weight^T) + bias
# --------------------------------------------------------------------------
def _linear_args(c: Call):
    x, w, b = _x(c, "input"), _x(c, "weight"), c.x("bias")
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
    g = _x(c, "out@GRAD")
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
    g = _x(c, "Out@GRAD")
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
    g = _x(c, "Out@GRAD")
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


# --------------------------------------------------------------------------
# add_position_encoding (dense 3-D input): alpha * X + beta * sinusoid table
# --------------------------------------------------------------------------
def _add_position_encoding(c: Call):
    x = _x(c, "X")
    if x.ndim != 3:
        raise ExecutionError(f"add_position_encoding: X must be 3-D [batch, seq, dim], got {list(x.shape)}")
    alpha, beta = float(c.attr("alpha", 1.0)), float(c.attr("beta", 1.0))
    seq, dim = x.shape[1], x.shape[2]
    if dim % 2:
        raise ExecutionError(f"add_position_encoding: the encoding size {dim} must be even")
    half = dim // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.arange(seq, dtype=np.float64)[:, None] / np.power(10000.0, np.arange(half) / (half - 1.0))
    pe = np.concatenate([np.sin(val), np.cos(val)], axis=1)
    return {"Out": (x * x.dtype.type(alpha) + (pe * beta).astype(x.dtype)).astype(x.dtype)}


def _add_position_encoding_grad(c: Call):
    g = _x(c, "Out@GRAD")
    return {"X@GRAD": g * g.dtype.type(float(c.attr("alpha", 1.0)))}


register(paddle_opdef("add_position_encoding", _add_position_encoding,
                      {"add_position_encoding_grad": _add_position_encoding_grad}, samples=lambda rng: [
                          Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"alpha": 1.0, "beta": 1.0}),
                          Sample({"X": [rng.standard_normal((1, 5, 6))]}, {"alpha": 0.5, "beta": 2.0})],
                      attrs_handled=("alpha", "beta"),
                      doc="Out = alpha X + beta [sin, cos](pos / 10000^(k / (dim/2 - 1)))"))


# --------------------------------------------------------------------------
# fused_softmax_mask: softmax(X + Mask) over the last axis
# --------------------------------------------------------------------------
def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _fused_softmax_mask(c: Call):
    x, m = _x(c, "X"), _x(c, "Mask")
    if x.ndim != 4 or m.ndim != 4 or m.shape[1] != 1 or m.shape[0] != x.shape[0] or m.shape[2:] != x.shape[2:]:
        raise ExecutionError(f"fused_softmax_mask: X [b, h, s, t] and Mask [b, 1, s, t] expected, got "
                             f"{list(x.shape)} and {list(m.shape)}")
    return {"Out": _softmax(x + m).astype(x.dtype, copy=False)}


def _fused_softmax_mask_grad(c: Call):
    y, g = _x(c, "Softmax"), _x(c, "Out@GRAD")
    return {"X@GRAD": (g - (g * y).sum(axis=-1, keepdims=True)) * y}


register(paddle_opdef("fused_softmax_mask", _fused_softmax_mask,
                      {"fused_softmax_mask_grad": _fused_softmax_mask_grad}, samples=lambda rng: [
                          Sample({"X": [rng.standard_normal((2, 3, 4, 5))],
                                  "Mask": [np.where(rng.random((2, 1, 4, 5)) < 0.3, -10000.0, 0.0)]}, wrt=("X",))],
                      doc="Out = softmax(X + Mask) over the last axis (Mask broadcast over heads)"))


# --------------------------------------------------------------------------
# strided views: index_select_strided, as_strided, view_shape (copies here)
# --------------------------------------------------------------------------
def _select_args(c: Call):
    x = _x(c, "x")
    if x.ndim == 0:
        raise ExecutionError("index_select_strided: x must have rank >= 1")
    axis = norm_axis(c.attr("axis", 0), x.ndim)
    n = x.shape[axis]
    index = int(c.attr("index"))
    if not -n <= index < n:
        raise ExecutionError(f"index_select_strided: index {index} out of range for dim {axis} of size {n}")
    return x, axis, index % n


def _index_select_strided(c: Call):
    x, axis, index = _select_args(c)
    return {"out": np.take(x, index, axis=axis).copy()}


def _index_select_strided_grad(c: Call):
    x, axis, index = _select_args(c)
    g = _x(c, "out@GRAD")
    gx = np.zeros(x.shape, g.dtype)
    sl = [slice(None)] * x.ndim
    sl[axis] = index
    gx[tuple(sl)] = g
    return {"x@GRAD": gx}


register(paddle_opdef("index_select_strided", _index_select_strided,
                      {"index_select_strided_grad": _index_select_strided_grad}, samples=lambda rng: [
                          Sample({"x": [rng.standard_normal((3, 4))]}, {"index": 1, "axis": 0}),
                          Sample({"x": [rng.standard_normal((2, 3, 4))]}, {"index": -1, "axis": 2}),
                          Sample({"x": [rng.standard_normal(5)]}, {"index": 2, "axis": -1}, note="to 0-D")],
                      attrs_handled=("index", "axis"), doc="out = x[..., index, ...] along axis (the dim dropped)"))


def _strided_where(c: Call) -> tuple[np.ndarray, tuple[int, ...]]:
    """Flat positions in input that each element of the view reads."""
    x = _x(c, "input")
    dims = [int(d) for d in c.attr("dims", [])]
    stride = [int(s) for s in c.attr("stride", [])]
    offset_bytes = int(c.attr("offset", 0))  # Paddle's offset counts bytes
    if offset_bytes < 0 or offset_bytes % x.dtype.itemsize:
        raise c.unsupported("offset", offset_bytes, f"bytes: a non-negative multiple of {x.dtype.itemsize} "
                                                   "(Paddle reads misaligned memory otherwise)")
    offset = offset_bytes // x.dtype.itemsize
    if len(dims) != len(stride) or any(d < 0 for d in dims):
        raise ExecutionError(f"as_strided: dims {dims} and stride {stride} do not pair up")
    where = np.full(dims, offset, np.int64)
    for k, (d, s) in enumerate(zip(dims, stride)):
        where = where + (np.arange(d, dtype=np.int64) * s).reshape([-1 if i == k else 1 for i in range(len(dims))])
    if where.size and (where.min() < 0 or where.max() >= x.size):
        raise ExecutionError(f"as_strided: the view reads outside the {x.size} elements of input")
    return where, x.shape


def _as_strided(c: Call):
    where, _ = _strided_where(c)
    return {"out": _x(c, "input").reshape(-1)[where]}


def _as_strided_grad(c: Call):
    where, shape = _strided_where(c)
    g = _x(c, "out@GRAD")
    gx = np.zeros(int(np.prod(shape, dtype=np.int64)), g.dtype)
    np.add.at(gx, where.reshape(-1), g.reshape(-1))
    return {"input@GRAD": gx.reshape(shape)}


register(paddle_opdef("as_strided", _as_strided, {"as_strided_grad": _as_strided_grad}, samples=lambda rng: [
    Sample({"input": [rng.standard_normal((3, 4))]}, {"dims": [4, 3], "stride": [1, 4], "offset": 0},
           note="a transpose"),
    Sample({"input": [rng.standard_normal((3, 4))]}, {"dims": [2, 2], "stride": [4, 2], "offset": 8}),
    Sample({"input": [rng.standard_normal(6)]}, {"dims": [3, 2], "stride": [2, 1], "offset": 0}),
    Sample({"input": [rng.standard_normal(6)]}, {"dims": [3, 3], "stride": [1, 1], "offset": 8},
           note="overlapping windows: the grad sums (Paddle's copies, docs/deviations.md)")],
    attrs_handled=("dims", "stride", "offset"),
    doc="out[i] = input.flat[offset / itemsize + sum(i_k * stride_k)] (a copy of the view; offset in bytes)"))


def _view_dims(c: Call) -> list[int]:
    x = _x(c, "input")
    dims = [int(d) for d in c.attr("dims", [])]
    if dims.count(-1) > 1:
        raise ExecutionError(f"view_shape: at most one -1 in dims {dims}")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise ExecutionError(f"view_shape: input of {x.size} elements does not fit dims {dims}")
        dims[dims.index(-1)] = x.size // known
    if int(np.prod(dims, dtype=np.int64)) != x.size:
        raise ExecutionError(f"view_shape: input {list(x.shape)} does not fit dims {dims}")
    return dims


def _view_shape(c: Call):
    return {"out": _x(c, "input").reshape(_view_dims(c)).copy()}


def _view_shape_grad(c: Call):
    return {"input@GRAD": _x(c, "out@GRAD").reshape(_x(c, "input").shape).copy()}


register(paddle_opdef("view_shape", _view_shape, {"view_shape_grad": _view_shape_grad}, samples=lambda rng: [
    Sample({"input": [rng.standard_normal((3, 4))]}, {"dims": [2, 6]}),
    Sample({"input": [rng.standard_normal((2, 3, 2))]}, {"dims": [-1, 4]})],
    attrs_handled=("dims",), doc="out = input viewed with shape dims (-1 inferred)"))


# --------------------------------------------------------------------------
# cvm (dense X, no LoD): the show/click columns, log-transformed or dropped
# --------------------------------------------------------------------------
def _cvm_args(c: Call):
    x, cvm = _x(c, "X"), _x(c, "CVM")
    if x.ndim != 2 or x.shape[1] < 2:
        raise ExecutionError(f"cvm: X must be 2-D with at least 2 columns, got {list(x.shape)}")
    if cvm.ndim != 2 or cvm.shape[1] != 2 or cvm.shape[0] != x.shape[0]:
        raise ExecutionError(f"cvm: CVM must be [{x.shape[0]}, 2], got {list(cvm.shape)}")
    return x, cvm, bool(c.attr("use_cvm", True))


def _cvm(c: Call):
    x, _, use_cvm = _cvm_args(c)
    if not use_cvm:
        return {"Y": x[:, 2:].copy()}
    y = x.copy()
    y[:, 0] = np.log(x[:, 0] + 1)
    y[:, 1] = np.log(x[:, 1] + 1) - y[:, 0]
    return {"Y": y}


def _cvm_grad(c: Call):
    """Paddle's cvm_grad: Y@GRAD passes through to the other columns, and the
    show/click columns of X@GRAD are CVM itself (not a derivative, by design)."""
    x, cvm, use_cvm = _cvm_args(c)
    g = _x(c, "Y@GRAD")
    gx = np.empty(x.shape, g.dtype)
    gx[:, 2:] = g[:, 2:] if use_cvm else g
    gx[:, :2] = cvm
    return {"X@GRAD": gx}


register(paddle_opdef("cvm", _cvm, {"cvm_grad": _cvm_grad}, samples=lambda rng: [
    # X@GRAD's first two columns are CVM by design, so finite differences can
    # only check them with CVM = 0 and use_cvm = False (use_cvm = True and a
    # nonzero CVM: tests/test_ops_misc.py, against Paddle's values)
    Sample({"X": [rng.random((3, 5))], "CVM": [np.zeros((3, 2))]}, {"use_cvm": False}, wrt=("X",))],
    attrs_handled=("use_cvm",),
    doc="Y = X with columns 0, 1 -> log(show + 1), log(click + 1) - log(show + 1) (use_cvm), else X[:, 2:]"))
