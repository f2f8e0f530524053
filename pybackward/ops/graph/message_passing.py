"""Segment and graph message-passing ops, with their grads, as Paddle 3.3.1's
CPU kernels compute them:

* segment_pool: rows of X pooled by sorted SegmentIds (SUM, MEAN, MAX, MIN);
  segment count = last id + 1, empty segments give 0; SummedIds holds the
  per-segment row counts (MEAN);
* graph_send_recv (send_u_recv): X[Src_index] reduced into rows Dst_index of
  an output of out_size rows (X's rows when out_size <= 0); Dst_count the
  per-row message counts (MEAN);
* graph_send_ue_recv: messages X[src] (+ or *) Y[edge], broadcast over the
  feature dims, reduced as above;
* graph_send_uv: per edge X[src] (+ or *) Y[dst].

MAX/MIN grads send Out@GRAD to every input that equals the pooled value.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_REDUCES = ("SUM", "MEAN", "MAX", "MIN")


def _ids(c: Call, slot: str, n: int | None = None) -> np.ndarray:
    v = np.asarray(c.x(slot))
    if v.dtype.kind not in "iu":
        raise ExecutionError(f"{c.op_type}: {slot} must be an integer tensor, got {v.dtype}")
    v = v.reshape(-1).astype(np.int64)
    if n is not None and v.size and (v.min() < 0 or v.max() >= n):
        raise ExecutionError(f"{c.op_type}: {slot} out of range [0, {n}): got [{v.min()}, {v.max()}]")
    return v


def _pool(msg: np.ndarray, dst: np.ndarray, rows: int, reduce: str):
    """Rows of msg reduced into `rows` rows by dst: (out, count per row)."""
    count = np.bincount(dst, minlength=rows)[:rows]
    shape = (rows,) + msg.shape[1:]
    if reduce in ("SUM", "MEAN"):
        out = np.zeros(shape, msg.dtype)
        np.add.at(out, dst, msg)
        if reduce == "MEAN":
            div = np.maximum(count, 1).reshape((-1,) + (1,) * (msg.ndim - 1))
            out = (out / div).astype(msg.dtype) if msg.dtype.kind == "f" else out // div
        return out, count
    if msg.dtype.kind == "f":
        init = -np.inf if reduce == "MAX" else np.inf
    else:
        info = np.iinfo(msg.dtype)
        init = info.min if reduce == "MAX" else info.max
    out = np.full(shape, init, msg.dtype)
    (np.maximum if reduce == "MAX" else np.minimum).at(out, dst, msg)
    out[count == 0] = 0
    return out, count


def _pool_grad(msg: np.ndarray, dst: np.ndarray, out: np.ndarray, g: np.ndarray,
               count: np.ndarray, reduce: str) -> np.ndarray:
    """d(loss)/d(msg) for each message row."""
    if reduce == "SUM":
        return g[dst]
    if reduce == "MEAN":
        return g[dst] / np.maximum(count[dst], 1).reshape((-1,) + (1,) * (g.ndim - 1)).astype(g.dtype)
    return np.where(msg == out[dst], g[dst], 0).astype(g.dtype)


def _reduce(c: Call, attr: str) -> str:
    r = c.attr(attr, "SUM")
    if r not in _REDUCES:
        raise c.unsupported(attr, r, f"supported: {', '.join(_REDUCES)}")
    return r


# --------------------------------------------------------------------------
# segment_pool
# --------------------------------------------------------------------------
def _segments(c: Call):
    x = np.asarray(c.x("X"))
    ids = _ids(c, "SegmentIds")
    if ids.size != x.shape[0]:
        raise ExecutionError(f"segment_pool: SegmentIds has {ids.size} ids for {x.shape[0]} rows of X")
    if ids.size and (ids[0] < 0 or np.any(np.diff(ids) < 0)):
        raise ExecutionError("segment_pool: SegmentIds must be non-negative and sorted")
    rows = int(ids[-1]) + 1 if ids.size else 0
    return x, ids, rows, _reduce(c, "pooltype")


def _segment_pool(c: Call):
    x, ids, rows, pooltype = _segments(c)
    out, count = _pool(x, ids, rows, pooltype)
    summed = count.astype(x.dtype).reshape(rows, 1)
    return {"Out": out, "SummedIds": summed}


def _segment_pool_grad(c: Call):
    x, ids, rows, pooltype = _segments(c)
    g = np.asarray(c.x("Out@GRAD"))
    count = np.bincount(ids, minlength=rows)
    return {"X@GRAD": _pool_grad(x, ids, np.asarray(c.x("Out")), g, count, pooltype).astype(g.dtype)}


def _segment_samples(rng):
    def ids(*v):
        return np.array(v, np.int64)
    return [Sample({"X": [rng.standard_normal((5, 3))], "SegmentIds": [ids(0, 0, 1, 1, 1)]}, {"pooltype": p})
            for p in _REDUCES] + [
        Sample({"X": [rng.standard_normal((4, 2, 2))], "SegmentIds": [np.array([0, 2, 2, 3], np.int32)]},
               {"pooltype": "MEAN"}, note="an empty segment, int32 ids"),
        Sample({"X": [rng.standard_normal((4, 3))], "SegmentIds": [ids(1, 1, 3, 3)]}, {"pooltype": "MAX"},
               note="empty segments give 0")]


register(paddle_opdef("segment_pool", _segment_pool, {"segment_pool_grad": _segment_pool_grad},
                      samples=_segment_samples, attrs_handled=("pooltype",),
                      doc="Out[s] = pool of the rows of X whose SegmentIds is s"))


# --------------------------------------------------------------------------
# graph_send_recv / graph_send_ue_recv
# --------------------------------------------------------------------------
def _out_rows(c: Call, n: int) -> int:
    if c.has("Out_size"):
        size = int(np.asarray(c.x("Out_size")).reshape(-1)[0])
    else:
        sizes = c.attr("out_size", [0]) or [0]
        size = int(np.asarray(sizes).reshape(-1)[0])
    return n if size <= 0 else size


def _edges(c: Call, n_src: int):
    src = _ids(c, "Src_index", n_src)
    dst = _ids(c, "Dst_index")
    if src.size != dst.size:
        raise ExecutionError(f"{c.op_type}: Src_index has {src.size} ids, Dst_index {dst.size}")
    rows = _out_rows(c, n_src)
    if dst.size and (dst.min() < 0 or dst.max() >= rows):
        raise ExecutionError(f"{c.op_type}: Dst_index out of range [0, {rows})")
    return src, dst, rows


def _graph_send_recv(c: Call):
    x = np.asarray(c.x("X"))
    src, dst, rows = _edges(c, x.shape[0])
    out, count = _pool(x[src], dst, rows, _reduce(c, "reduce_op"))
    return {"Out": out, "Dst_count": count.astype(np.int32)}


def _graph_send_recv_grad(c: Call):
    x = np.asarray(c.x("X"))
    src, dst, rows = _edges(c, x.shape[0])
    g = np.asarray(c.x("Out@GRAD"))
    count = np.bincount(dst, minlength=rows)
    gm = _pool_grad(x[src], dst, np.asarray(c.x("Out")), g, count, _reduce(c, "reduce_op"))
    gx = np.zeros(x.shape, g.dtype)
    np.add.at(gx, src, gm)
    return {"X@GRAD": gx}


def _graph_samples(rng):
    src = np.array([0, 1, 2, 0, 3, 2], np.int64)
    dst = np.array([1, 2, 1, 0, 0, 2], np.int64)
    return [Sample({"X": [rng.standard_normal((4, 3))], "Src_index": [src], "Dst_index": [dst]},
                   {"reduce_op": r}) for r in _REDUCES] + [
        Sample({"X": [rng.standard_normal((4, 2, 2))], "Src_index": [src.astype(np.int32)],
                "Dst_index": [dst.astype(np.int32)]}, {"reduce_op": "MEAN", "out_size": [5]},
               note="out_size: an empty row"),
        Sample({"X": [rng.standard_normal((4, 3))], "Src_index": [src], "Dst_index": [dst + 1]},
               {"reduce_op": "MAX", "out_size": [0]}, note="row 0 gets nothing")]


register(paddle_opdef("graph_send_recv", _graph_send_recv, {"graph_send_recv_grad": _graph_send_recv_grad},
                      samples=_graph_samples, attrs_handled=("reduce_op", "out_size"),
                      doc="Out[d] = reduce of X[Src_index[e]] over the edges e with Dst_index[e] = d"))


_MESSAGES = ("ADD", "MUL")


def _message_op(c: Call) -> str:
    m = c.attr("message_op", "ADD")
    if m not in _MESSAGES:
        raise c.unsupported("message_op", m, "supported: ADD, MUL")
    return m


def _ue_setup(c: Call):
    x, y = np.asarray(c.x("X")), np.asarray(c.x("Y"))
    src, dst, rows = _edges(c, x.shape[0])
    if y.shape[0] != src.size:
        raise ExecutionError(f"graph_send_ue_recv: Y has {y.shape[0]} rows for {src.size} edges")
    xs, ye = x[src], y
    mshape = np.broadcast_shapes(xs.shape[1:], ye.shape[1:])
    xb = np.broadcast_to(xs, (src.size,) + mshape)
    yb = np.broadcast_to(ye, (src.size,) + mshape)
    return x, y, src, dst, rows, xb, yb, _message_op(c), _reduce(c, "reduce_op")


def _graph_send_ue_recv(c: Call):
    x, y, src, dst, rows, xb, yb, mop, reduce = _ue_setup(c)
    msg = xb + yb if mop == "ADD" else xb * yb
    out, count = _pool(msg, dst, rows, reduce)
    return {"Out": out, "Dst_count": count.astype(np.int32)}


def _graph_send_ue_recv_grad(c: Call):
    x, y, src, dst, rows, xb, yb, mop, reduce = _ue_setup(c)
    g = np.asarray(c.x("Out@GRAD"))
    msg = xb + yb if mop == "ADD" else xb * yb
    count = np.bincount(dst, minlength=rows)
    gm = _pool_grad(msg, dst, np.asarray(c.x("Out")), g, count, reduce)
    res = {}
    if c.wants("X@GRAD"):
        gxs = gm if mop == "ADD" else gm * yb
        gxs = unbroadcast(gxs, (src.size,) + x.shape[1:])
        gx = np.zeros(x.shape, g.dtype)
        np.add.at(gx, src, gxs)
        res["X@GRAD"] = gx
    if c.wants("Y@GRAD"):
        gy = gm if mop == "ADD" else gm * xb
        res["Y@GRAD"] = unbroadcast(gy, y.shape).astype(g.dtype)
    return res


def _ue_samples(rng):
    src = np.array([0, 1, 2, 0, 3, 2], np.int64)
    dst = np.array([1, 2, 1, 0, 0, 2], np.int64)
    out = []
    for m in _MESSAGES:
        for r in _REDUCES:
            out.append(Sample({"X": [rng.standard_normal((4, 3))], "Y": [rng.standard_normal((6, 3))],
                               "Src_index": [src], "Dst_index": [dst]}, {"message_op": m, "reduce_op": r}))
    out.append(Sample({"X": [rng.standard_normal((4, 2, 3))], "Y": [rng.standard_normal((6, 1, 3))],
                       "Src_index": [src], "Dst_index": [dst]}, {"message_op": "MUL", "reduce_op": "SUM",
                                                                 "out_size": [5]}, note="broadcast Y"))
    out.append(Sample({"X": [rng.standard_normal((4, 1))], "Y": [rng.standard_normal((6, 3))],
                       "Src_index": [src.astype(np.int32)], "Dst_index": [dst.astype(np.int32)]},
                      {"message_op": "ADD", "reduce_op": "MEAN"}, note="broadcast X"))
    return out


register(paddle_opdef("graph_send_ue_recv", _graph_send_ue_recv,
                      {"graph_send_ue_recv_grad": _graph_send_ue_recv_grad}, samples=_ue_samples,
                      attrs_handled=("message_op", "reduce_op", "out_size"),
                      doc="Out[d] = reduce of X[Src_index[e]] (+ or *) Y[e] over the edges e into d"))


# --------------------------------------------------------------------------
# graph_send_uv
# --------------------------------------------------------------------------
def _uv_setup(c: Call):
    x, y = np.asarray(c.x("x")), np.asarray(c.x("y"))
    src = _ids(c, "src_index", x.shape[0])
    dst = _ids(c, "dst_index", y.shape[0])
    if src.size != dst.size:
        raise ExecutionError(f"graph_send_uv: src_index has {src.size} ids, dst_index {dst.size}")
    return x, y, src, dst, _message_op(c)


def _graph_send_uv(c: Call):
    x, y, src, dst, mop = _uv_setup(c)
    return {"out": x[src] + y[dst] if mop == "ADD" else x[src] * y[dst]}


def _graph_send_uv_grad(c: Call):
    x, y, src, dst, mop = _uv_setup(c)
    g = np.asarray(c.x("out@GRAD"))
    res = {}
    for name, v, idx, other, oidx in (("x", x, src, y, dst), ("y", y, dst, x, src)):
        if not c.wants(name + "@GRAD"):
            continue
        ge = g if mop == "ADD" else g * other[oidx]
        ge = unbroadcast(ge, (idx.size,) + v.shape[1:])
        gv = np.zeros(v.shape, g.dtype)
        np.add.at(gv, idx, ge)
        res[name + "@GRAD"] = gv
    return res


def _uv_samples(rng):
    src = np.array([0, 1, 2, 0, 3], np.int64)
    dst = np.array([1, 2, 1, 0, 0], np.int64)
    return [Sample({"x": [rng.standard_normal((4, 3))], "y": [rng.standard_normal((3, 3))],
                    "src_index": [src], "dst_index": [dst]}, {"message_op": m}) for m in _MESSAGES] + [
        Sample({"x": [rng.standard_normal((4, 2, 3))], "y": [rng.standard_normal((3, 1, 3))],
                "src_index": [src.astype(np.int32)], "dst_index": [dst.astype(np.int32)]},
               {"message_op": "MUL"}, note="broadcast y")]


register(paddle_opdef("graph_send_uv", _graph_send_uv, {"graph_send_uv_grad": _graph_send_uv_grad},
                      samples=_uv_samples, attrs_handled=("message_op",),
                      doc="out[e] = x[src_index[e]] (+ or *) y[dst_index[e]]"))
