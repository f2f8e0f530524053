"""index_elementwise_get / _put / _put_with_tensor: advanced indexing on a strided view, with
their grads as Paddle 3.3.1's CPU grad kernels compute them.

eig: LAPACK geev, as Paddle's CPU kernel (and numpy) call it - eigenvalues in
geev's order, eigenvectors as columns of unit 2-norm whose largest component
is real (geev's normalisation; probed equal to Paddle's values). Real
float32 / float64 X gives complex64 / complex128 outputs. Each eigenvector is
only defined up to a unit complex factor, and eig_grad (Paddle's formula, see
`_eig_grad`) is the gradient of losses that do not depend on that factor; its
samples are therefore checked with `opcheck.PhaseSample` (the cotangent of
Eigenvectors made phase-invariant).

index_elementwise_*, pyramid_hash: see their sections below.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


# --------------------------------------------------------------------------
# index_elementwise_get / _put / _put_with_tensor: advanced indexing on a strided view
# --------------------------------------------------------------------------
# Paddle's dygraph indexing hands these ops its view of x as metadata:
# * input_dims / input_strides: the shape D of the view (and of Out for get) and
#   the view's strides over x's buffer, in ELEMENTS (0 for the indexed dims);
# * index_dims: [size of each indexed dim of x..., -1, broadcast shape of the
#   index tensors..., (-1)]: k = the position of the first -1 index tensors,
#   each read (int64, flat) with the contiguous strides of that shape,
#   right-aligned against D;
# * index_stride(s): per index tensor, the step in BYTES its value moves in x;
# * slice_offset: where the view starts in x's buffer, in BYTES.
# So element m of the view is x's byte  slice_offset + sum_d m_d input_strides_d
# itemsize + sum_i idx_i[m] index_stride_i  (an index below 0 gets its size
# added). Byte attrs are honoured in x's dtype: an offset that is not a whole
# element, or one outside x, is refused (Paddle would read or write outside the
# tensor). Paddle walks the view in an order of its own (dims sorted by stride)
# and lays get's Out out contiguously in that order (`_plan`); put writes
# duplicate positions in that order too (the last one stays).
def _index_meta(c: Call, x: np.ndarray, stride_attr: str):
    dims = [int(v) for v in (c.attr("input_dims") or [])]
    strides = [int(v) for v in (c.attr("input_strides") or [])]
    index_dims = [int(v) for v in (c.attr("index_dims") or [])]
    istrides = [int(v) for v in (c.attr(stride_attr) or [])]
    if len(strides) != len(dims):
        raise ExecutionError(f"op {c.op_type}: input_dims {dims} and input_strides {strides} differ in length")
    if any(s < 0 for s in strides) or any(d < 0 for d in dims):
        raise c.unsupported("input_strides", strides, "negative strides or dims (Paddle's offsets are unsigned)")
    seps = [i for i, v in enumerate(index_dims) if v == -1]
    k = seps[0] if seps else 0
    ishape = index_dims[k + 1:seps[1]] if len(seps) > 1 else index_dims[k + 1:] if seps else []
    sizes = index_dims[:k]
    if len(istrides) < k:
        raise ExecutionError(f"op {c.op_type}: {stride_attr} {istrides} has fewer than the {k} index tensors' steps")
    idx = c.xs("index")
    if len(idx) < k:
        raise ExecutionError(f"op {c.op_type}: index_dims {index_dims} names {k} index tensors, {len(idx)} are given")
    n_idx = int(np.prod(ishape, dtype=np.int64)) if ishape else 1
    tensors = []
    for t in idx[:k]:
        t = np.asarray(t)
        if t.dtype != np.int64:
            raise ExecutionError(f"op {c.op_type}: index tensors must be int64 (Paddle's kernel), one is {t.dtype}")
        if t.size < n_idx:
            raise ExecutionError(f"op {c.op_type}: an index tensor has {t.size} values, index_dims asks for "
                                 f"{n_idx} ({ishape})")
        tensors.append(t.reshape(-1)[:n_idx].reshape(ishape))
    return dims, strides, sizes, istrides[:k], ishape, tensors, int(c.attr("slice_offset", 0) or 0)


def _bstrides(shape: list[int], strides: list[int], es: int, desired: list[int]) -> list[int]:
    """Byte strides of an operand right-aligned against `desired` (0 where it broadcasts)."""
    out = [0] * len(desired)
    off = len(desired) - len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        out[off + i] = 0 if n == 1 and desired[off + i] != 1 else s * es
    return out


def _contiguous(shape) -> list[int]:
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i], acc = acc, acc * shape[i]
    return st


def _order(desired: list[int], ops: list[list[int]]) -> list[int]:
    """Paddle's walk order of the dims (reorder_dimensions): fastest first, by the operands'
    strides, ties broken by size; an insertion sort starting from the reversed dims."""
    nd = len(desired)
    perm = list(range(nd - 1, -1, -1))
    if nd <= 1:
        return perm

    def should_swap(d0, d1):
        for st in ops:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if desired[d0] > desired[d1]:
                return 1
        return 0

    for i in range(nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            cmp = should_swap(perm[d0], perm[d1])
            if cmp > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif cmp < 0:
                break
    return perm


def _walk(desired: list[int], perm: list[int]) -> np.ndarray:
    """The coordinates (n, ndim) of every element in Paddle's walk order (perm[0] fastest)."""
    pshape = [desired[p] for p in perm]
    lin = np.arange(int(np.prod(desired, dtype=np.int64)))
    coords = np.zeros((lin.size, len(desired)), np.int64)
    for j, p in enumerate(perm):
        coords[:, p] = lin % pshape[j]
        lin = lin // pshape[j]
    return coords


def _broadcast(c: Call, *shapes) -> list[int]:
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        vals = {s[i - nd + len(s)] for s in shapes if i - nd + len(s) >= 0} - {1}
        if len(vals) > 1:
            raise ExecutionError(f"op {c.op_type}: shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(vals.pop() if vals else 1)
    return out


def _element_offsets(c: Call, x: np.ndarray, coords: np.ndarray, dims, strides, sizes, istrides, ishape,
                     tensors, offset, desired) -> np.ndarray:
    """The element of x's buffer each walked view position lands on."""
    es = x.dtype.itemsize
    b = offset + coords @ np.asarray([s * es for s in strides], np.int64).reshape(-1) if coords.size else \
        np.full(len(coords), offset, np.int64)
    if tensors:
        ist = _bstrides(ishape, _contiguous(ishape), 1, desired)
        flat_pos = coords @ np.asarray(ist, np.int64) if coords.size else np.zeros(len(coords), np.int64)
        for t, n, s in zip(tensors, sizes, istrides):
            v = t.reshape(-1)[flat_pos] if t.size else np.zeros(len(coords), np.int64)
            b = b + np.where(v < 0, v + n, v) * s
    if np.any(b % es):
        raise ExecutionError(f"op {c.op_type}: a byte offset is not a whole {x.dtype} element "
                             "(slice_offset / index_stride are in bytes)")
    e = b // es
    if e.size and (e.min() < 0 or e.max() >= x.size):
        raise ExecutionError(f"op {c.op_type}: the view reaches element {int(e.max() if e.max() >= x.size else e.min())}"
                             f" of x's {x.size}")
    return e


def _get_plan(c: Call, x: np.ndarray):
    dims, strides, sizes, istrides, ishape, tensors, offset = _index_meta(c, x, "index_stride")
    desired = _broadcast(c, dims, ishape)
    if desired != dims:
        raise ExecutionError(f"op {c.op_type}: the index shape {ishape} widens the view {dims}")
    es = x.dtype.itemsize
    ops = [[0] * len(dims), _bstrides(dims, strides, es, desired),
           _bstrides(ishape, _contiguous(ishape), 8, desired)]
    perm = _order(desired, ops)
    coords = _walk(desired, perm)
    src = _element_offsets(c, x, coords, dims, strides, sizes, istrides, ishape, tensors, offset, desired)
    # Out is contiguous in the walk order: walked element j sits at Out's flat position j.
    return dims, src


def _index_get(c: Call):
    x = np.asarray(c.x("x"))
    if x.size == 0:   # Paddle's kernel: zeros
        return {"Out": np.zeros([int(v) for v in (c.attr("input_dims") or [])], x.dtype)}
    dims, src = _get_plan(c, x)
    return {"Out": x.reshape(-1)[src].reshape(dims)}


def _index_get_grad(c: Call):
    x = np.asarray(c.x("x"))
    dims, src = _get_plan(c, x)
    g = np.asarray(c.x("Out@GRAD")).reshape(-1)
    dx = np.zeros(x.size, g.dtype)
    if bool(c.attr("accumulate", True)):
        np.add.at(dx, src, g)
    else:   # assigned in walk order: the last write stays
        last = len(src) - 1 - np.unique(src[::-1], return_index=True)[1]
        dx[src[last]] = g[last]
    return {"x@GRAD": dx.reshape(x.shape)}


def _put_plan(c: Call, x: np.ndarray, vshape: list[int]):
    """(destination element of x per walked position, the value's flat index per position)."""
    dims, strides, sizes, istrides, ishape, tensors, offset = _index_meta(c, x, "index_strides")
    desired = _broadcast(c, dims, vshape, ishape)
    if desired != dims:
        raise ExecutionError(f"op {c.op_type}: value {vshape} or index shape {ishape} widen the view {dims}")
    es = x.dtype.itemsize
    vst = _bstrides(vshape, _contiguous(vshape), es, desired)
    ops = [_bstrides(dims, strides, es, desired), vst, _bstrides(ishape, _contiguous(ishape), 8, desired)]
    coords = _walk(desired, _order(desired, ops))
    dst = _element_offsets(c, x, coords, dims, strides, sizes, istrides, ishape, tensors, offset, desired)
    return dst, coords, desired


def _last_writes(dst: np.ndarray) -> np.ndarray:
    """The walked positions whose write stays (the last one to each element)."""
    return np.sort(len(dst) - 1 - np.unique(dst[::-1], return_index=True)[1])


def _put(c: Call, x: np.ndarray, value: np.ndarray, out_slot: str):
    out = x.copy().reshape(-1)
    if not c.xs("index") or out.size == 0:
        return {out_slot: out.reshape(x.shape)}
    vshape = list(value.shape)
    dst, coords, desired = _put_plan(c, x, vshape)
    keep = _last_writes(dst)
    if len(keep):
        vpos = coords[keep] @ np.asarray(_bstrides(vshape, _contiguous(vshape), 1, desired), np.int64).reshape(-1) \
            if coords.size else np.zeros(len(keep), np.int64)
        out[dst[keep]] = value.reshape(-1)[vpos]
    return {out_slot: out.reshape(x.shape)}


def _scalar_value(c: Call, x: np.ndarray) -> np.ndarray:
    v = c.x("ValueTensor")
    if v is not None:
        v = np.asarray(v)
        if v.size != 1:
            raise ExecutionError(f"op {c.op_type}: ValueTensor must hold one value, it has shape {list(v.shape)}")
        return v.reshape(()).astype(x.dtype)
    return np.asarray(c.attr("value", 1.0)).astype(x.dtype)


def _index_put(c: Call):
    x = np.asarray(c.x("x"))
    return _put(c, x, _scalar_value(c, x), "out")


def _index_put_tensor(c: Call):
    x = np.asarray(c.x("x"))
    v = np.asarray(c.x("value"))
    if v.dtype != x.dtype:
        raise ExecutionError(f"op {c.op_type}: value is {v.dtype}, x is {x.dtype}")
    return _put(c, x, v, "Out")


def _put_grads(c: Call, value_shape: list[int] | None, gslot: str):
    """x@GRAD: Out@GRAD with the written elements zeroed; value@GRAD (value_shape given): Out@GRAD at
    every walked position (duplicates each get it, as Paddle's kernel), summed to value's shape."""
    x = np.asarray(c.x("x"))
    g = np.asarray(c.x(gslot))
    res = {}
    if not c.xs("index"):
        if c.wants("x@GRAD"):
            res["x@GRAD"] = g.copy()
        if value_shape is not None and c.wants("value@GRAD"):
            res["value@GRAD"] = np.zeros(value_shape, g.dtype)
        return res
    dst, coords, desired = _put_plan(c, x, value_shape if value_shape is not None else [])
    gf = g.reshape(-1)
    if c.wants("x@GRAD"):
        dx = gf.copy()
        dx[dst] = 0
        res["x@GRAD"] = dx.reshape(x.shape)
    if value_shape is not None and c.wants("value@GRAD"):
        tmp = np.zeros(int(np.prod(desired, dtype=np.int64)), g.dtype)
        if len(dst):
            tmp[np.ravel_multi_index(tuple(coords.T), desired)] = gf[dst]
        res["value@GRAD"] = _sum_to(tmp.reshape(desired), value_shape)
    return res


def _sum_to(a: np.ndarray, shape: list[int]) -> np.ndarray:
    """`a` summed over the dims a value of `shape` was broadcast along."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and a.shape[lead + i] != 1)
    return a.sum(axis=axes).reshape(shape) if axes else a.reshape(shape)


def _index_put_grad(c: Call):
    return _put_grads(c, None, "out@GRAD")


def _index_put_tensor_grad(c: Call):
    return _put_grads(c, list(np.asarray(c.x("value")).shape), "Out@GRAD")


def _i64(*v):
    return np.array(v, np.int64)


def _get_samples(rng):
    r = rng.standard_normal
    rows = dict(input_dims=[2, 3], input_strides=[0, 1], index_dims=[8, -1, 2, 1], index_stride=[24], slice_offset=0)
    return [
        Sample({"x": [r((8, 3))], "index": [_i64(2, 0)]}, dict(rows), note="x[i] on rows (24-byte rows)"),
        Sample({"x": [r((8, 3))], "index": [_i64(-1, 1)]}, dict(rows, index_dims=[3, -1, 2, 1]), note="negative"),
        Sample({"x": [r((8, 3))], "index": [_i64(1, 1, 0)]},
               dict(rows, input_dims=[3, 3], index_dims=[8, -1, 3, 1]), note="repeated rows, accumulated grad"),
        Sample({"x": [r((8, 3))], "index": [_i64(2, 0)]}, dict(rows, accumulate=False, slice_offset=8),
               note="slice_offset, assigned grad"),
        Sample({"x": [r((4, 3, 5))], "index": [_i64(1, 0), _i64(4, 2)]},
               dict(input_dims=[2, 3], input_strides=[0, 5], index_dims=[4, 5, -1, 2, 1],
                    index_stride=[120, 8], slice_offset=0), note="x[i, :, j]"),
        Sample({"x": [r((8, 3))], "index": [_i64(0, 2, 1, 0)]},
               dict(input_dims=[2, 2, 3], input_strides=[0, 0, 1], index_dims=[8, -1, 2, 2, 1],
                    index_stride=[24], slice_offset=0), note="2-D index"),
        Sample({"x": [r((8, 3))], "index": [_i64(0)]},
               dict(input_dims=[3, 2], input_strides=[1, 3], index_dims=[], index_stride=[], slice_offset=0),
               note="transposed view, no index: Out in Paddle's walk order"),
    ]


def _put_samples(rng):
    r = rng.standard_normal
    rows = dict(input_dims=[2, 3], input_strides=[0, 1], index_dims=[8, -1, 2, 1], index_strides=[24], slice_offset=0)
    return [
        Sample({"x": [r((8, 3))], "index": [_i64(2, 0)]}, dict(rows, value=7.5), note="x[i] = 7.5"),
        Sample({"x": [r((8, 3))], "index": [_i64(-1, 1)], "ValueTensor": [np.array([-2.0])]},
               dict(rows, index_dims=[3, -1, 2, 1], value=0.0), note="ValueTensor, negative index"),
        Sample({"x": [r((4, 3, 5))], "index": [_i64(1, 0), _i64(4, 2)]},
               dict(input_dims=[2, 3], input_strides=[0, 5], index_dims=[4, 5, -1, 2, 1],
                    index_strides=[120, 8], slice_offset=8, value=3.0), note="x[i, :, j] = 3, slice_offset"),
    ]


def _put_tensor_samples(rng):
    r = rng.standard_normal
    rows = dict(input_dims=[2, 3], input_strides=[0, 1], index_dims=[8, -1, 2, 1], index_strides=[24], slice_offset=0)
    return [
        Sample({"x": [r((8, 3))], "index": [_i64(2, 0)], "value": [r((2, 3))]}, dict(rows), note="x[i] = v"),
        Sample({"x": [r((8, 3))], "index": [_i64(1, 2)], "value": [r((3,))]}, dict(rows),
               note="value broadcast along the index"),
        Sample({"x": [r((8, 3))], "index": [_i64(-1, 0)], "value": [r((1,))]},
               dict(rows, index_dims=[3, -1, 2, 1]), note="one value"),
        Sample({"x": [r((4, 3, 5))], "index": [_i64(1, 0), _i64(4, 2)], "value": [r((2, 1))]},
               dict(input_dims=[2, 3], input_strides=[0, 5], index_dims=[4, 5, -1, 2, 1],
                    index_strides=[120, 8], slice_offset=0), note="x[i, :, j] = v (2, 1)"),
    ]


_META = ("input_dims", "input_strides", "index_dims", "slice_offset")
register(paddle_opdef("index_elementwise_get", _index_get, {"index_elementwise_get_grad": _index_get_grad},
                      samples=_get_samples, attrs_handled=_META + ("index_stride", "accumulate"),
                      doc="Out = x's strided view indexed by int64 index tensors (byte steps); grad: "
                          "Out@GRAD added (accumulate) or assigned back"))
register(paddle_opdef("index_elementwise_put", _index_put, {"index_elementwise_put_grad": _index_put_grad},
                      samples=_put_samples, attrs_handled=_META + ("index_strides", "value"),
                      doc="out = x with the indexed elements of its strided view set to value (or ValueTensor)"))
register(paddle_opdef("index_elementwise_put_with_tensor", _index_put_tensor,
                      {"index_elementwise_put_with_tensor_grad": _index_put_tensor_grad},
                      samples=_put_tensor_samples, attrs_handled=_META + ("index_strides",),
                      doc="Out = x with the indexed elements of its strided view set to value (broadcast)"))
