"""The last differentiable op types Paddle 3.3.1 runs on CPU: eig, the
stride-metadata indexing ops index_elementwise_get / _put /
_put_with_tensor, and pyramid_hash, with their grads as Paddle's CPU grad
kernels compute them.

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

from ..errors import ExecutionError
from .linalg_decomp import matrices
from .opcheck import PhaseSample
from .paddle_table import paddle_opdef
from .registry import LOD_KEY, Call, Sample, register


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


# --------------------------------------------------------------------------
# eig
# --------------------------------------------------------------------------
_COMPLEX_OF = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
               np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}


def _eig_input(c: Call) -> np.ndarray:
    x = np.asarray(c.x("X"))
    if x.dtype not in _COMPLEX_OF:
        raise ExecutionError(f"op eig: Paddle's CPU kernel takes float32, float64, complex64 or complex128, "
                             f"X is {x.dtype}")
    matrices(c, x, square=True)
    return x


def _eig(c: Call):
    x = _eig_input(c)
    if not np.all(np.isfinite(x)):
        raise ExecutionError("op eig: X holds NaN or Inf (LAPACK geev cannot decompose it)")
    ct = _COMPLEX_OF[x.dtype]
    n = x.shape[-1]
    flat = x.reshape((-1, n, n))
    w = np.empty(flat.shape[:2], ct)
    v = np.empty(flat.shape, ct)
    try:
        # geev in x's precision, one matrix at a time as Paddle's kernel calls it (numpy's batched
        # call picks other signs for some eigenvectors)
        for i, m in enumerate(flat):
            w[i], v[i] = np.linalg.eig(m)
    except np.linalg.LinAlgError:
        raise ExecutionError("op eig: the eigenvalue iteration (LAPACK geev) did not converge") from None
    return {"Eigenvalues": w.reshape(x.shape[:-1]), "Eigenvectors": v.reshape(x.shape)}


def _eig_grad(c: Call):
    """Paddle's eig_grad (ComputeBackwardForComplexInput), L the eigenvalues and V the eigenvectors:
    X@GRAD = V^-H (diag(gL) + (V^H gV - V^H V diag(Re diag(V^H gV))) / E) V^H, with
    E[i, j] = conj(L_j) - conj(L_i) off the diagonal. X@GRAD is complex, as Paddle's kernel
    allocates it, also for a real X."""
    lam = np.asarray(c.x("Eigenvalues")).astype(np.complex128)
    v = np.asarray(c.x("Eigenvectors")).astype(np.complex128)
    ct = np.asarray(c.x("Eigenvectors")).dtype
    gl = c.x("Eigenvalues@GRAD")
    gv = c.x("Eigenvectors@GRAD")
    gl = np.zeros(lam.shape, np.complex128) if gl is None else np.asarray(gl).astype(np.complex128)
    gv = np.zeros(v.shape, np.complex128) if gv is None else np.asarray(gv).astype(np.complex128)
    n = v.shape[-1]
    vh = np.conj(_t(v))
    lc = np.conj(lam)
    e = lc[..., None, :] - lc[..., :, None]
    vhgv = vh @ gv
    d = np.real(np.diagonal(vhgv, axis1=-2, axis2=-1))
    res = vhgv - vh @ (v * d[..., None, :])
    off = ~np.eye(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.where(off, res / np.where(off, e, 1.0), 0.0)
    res = res + gl[..., :, None] * np.eye(n)
    try:
        dx = np.linalg.solve(vh, res @ vh)
    except np.linalg.LinAlgError:
        raise ExecutionError("op eig_grad: the eigenvectors of X are linearly dependent "
                             "(X is not diagonalizable); its gradient is not defined") from None
    return {"X@GRAD": dx.astype(ct)}


def _eig_samples(rng):
    """Complex X only: for a real X Paddle's kernel also gives a complex X@GRAD, which its executor
    (and pybackward's interpreter) casts to X's real dtype - the real part. Real X is checked by
    tests/test_ops_last_diff.py (finite differences, and Paddle's values through a program)."""
    def c(*shape):
        return 0.6 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) + np.eye(shape[-1])

    return [PhaseSample({"X": [c(3, 3)]}, phase_invariant=("Eigenvectors",), note="complex X"),
            PhaseSample({"X": [c(2, 4, 4)]}, phase_invariant=("Eigenvectors",), note="batch"),
            PhaseSample({"X": [np.array([[2.5 - 0.5j]])]}, phase_invariant=("Eigenvectors",), note="1x1")]


register(paddle_opdef("eig", _eig, {"eig_grad": _eig_grad}, samples=_eig_samples,
                      doc="Eigenvalues, Eigenvectors = LAPACK geev of X (complex, eigenvectors of unit norm with "
                          "their largest component real); batched"))


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



# --------------------------------------------------------------------------
# pyramid_hash: hashed n-gram embeddings of int32 id sequences (XXH32)
# --------------------------------------------------------------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = np.uint64(0xFFFFFFFF)


def _mul(a, b):
    return (a * np.uint64(b)) & _M32


def _rotl(a, r):
    return ((a << np.uint64(r)) | (a >> np.uint64(32 - r))) & _M32


def xxh32(data: np.ndarray, seed: int) -> np.ndarray:
    """XXH32 (xxHash, 32 bits) of each row of `data` (uint8, (n, L)) with `seed`, as uint32."""
    n, length = data.shape
    words = data[:, : length // 4 * 4].copy().view("<u4").astype(np.uint64)
    seed &= 0xFFFFFFFF
    i = 0
    if length >= 16:
        v = [np.full(n, x & 0xFFFFFFFF, np.uint64) for x in (seed + _P1 + _P2, seed + _P2, seed, seed - _P1)]
        while i + 4 <= length // 16 * 4:
            v = [_mul(_rotl((v[k] + _mul(words[:, i + k], _P2)) & _M32, 13), _P1) for k in range(4)]
            i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = np.full(n, (seed + _P5) & 0xFFFFFFFF, np.uint64)
    h = (h + np.uint64(length)) & _M32
    while i < words.shape[1]:
        h = _mul(_rotl((h + _mul(words[:, i], _P3)) & _M32, 17), _P4)
        i += 1
    for b in range(length // 4 * 4, length):
        h = _mul(_rotl((h + _mul(data[:, b].astype(np.uint64), _P5)) & _M32, 11), _P1)
    h ^= h >> np.uint64(15)
    h = _mul(h, _P2)
    h ^= h >> np.uint64(13)
    h = _mul(h, _P3)
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


def _rand_r(state: int) -> tuple[int, int]:
    """glibc's rand_r: (value in [0, RAND_MAX], next state)."""
    nxt = state
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (nxt // 65536) % 2048
    for _ in range(2):
        nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
        result = ((result << 10) ^ ((nxt // 65536) % 1024)) & 0xFFFFFFFF
    return result, nxt


def _pyramid_terms(c: Call):
    """Per sequence, its n-grams (start row, length) in Paddle's order, and X as float32."""
    x = np.asarray(c.x("X"))
    if x.dtype != np.int32:
        raise ExecutionError(f"op {c.op_type}: X must be int32 (Paddle's kernel), it is {x.dtype}")
    if x.ndim != 2 or x.shape[1] != 1:
        raise ExecutionError(f"op {c.op_type}: X must have shape [N, 1], it has {list(x.shape)} (Paddle's kernel "
                             "reads one id per row)")
    lod = c.lod("X")
    if not lod or lod[-1][-1] != x.shape[0]:
        raise ExecutionError(f"op {c.op_type}: X needs a LoD whose last level ends at its {x.shape[0]} rows")
    if c.attr("use_filter", True) and (int(c.attr("white_list_len", 0)) or int(c.attr("black_list_len", 0))):
        raise c.unsupported("use_filter", True, "the bloom-filter white / black lists are not implemented; "
                                                "white_list_len and black_list_len 0 (no filter) are")
    layers = int(c.attr("pyramid_layer", 2))
    offs = [int(o) for o in lod[0]]
    terms = []
    for a, b in zip(offs[:-1], offs[1:]):
        w = b - a
        terms.append([(a + l, k + 1) for k in range(1, min(layers, w)) for l in range(w - k)] if w >= 2 else [])
    return x.reshape(-1).astype(np.float32), offs, terms


def _pyramid_hash(c: Call):
    w = np.asarray(c.x("W"))
    if w.dtype not in (np.float32, np.float64, np.int8):
        raise ExecutionError(f"op pyramid_hash: W must be float32 or int8 (Paddle's kernels), it is {w.dtype}")
    num_emb, rand_len, space_len = (int(c.attr(a, 0)) for a in ("num_emb", "rand_len", "space_len"))
    if rand_len <= 0 or space_len <= 0 or num_emb % rand_len:
        raise ExecutionError(f"op pyramid_hash: num_emb {num_emb} must be a multiple of rand_len {rand_len}, "
                             f"space_len {space_len} positive")
    if w.shape != (space_len + rand_len, 1):
        raise ExecutionError(f"op pyramid_hash: W must have shape [space_len + rand_len, 1] = "
                             f"[{space_len + rand_len}, 1], it has {list(w.shape)}")
    xf, offs, terms = _pyramid_terms(c)
    training = int(c.attr("is_training", 0)) != 0
    drop = np.float32(c.attr("drop_out_percent", 0.0))
    state = int(c.attr("seed", 0)) & 0xFFFFFFFF
    keep_all, out_lod, drop_lod, rows = [], [0], [0], []
    for seq in terms:
        keep = []
        for _ in seq:
            if training:
                v, state = _rand_r(state)
                keep.append(0 if float(v) / 2147483647.0 < float(drop) else 1)
            else:
                keep.append(1)
        keep_all += keep
        kept = [t for t, k in zip(seq, keep) if k]
        drop_lod.append(drop_lod[-1] + len(kept))
        out_lod.append(out_lod[-1] + max(len(kept), 1))
        rows.append(kept)
    out = np.zeros((out_lod[-1], num_emb), w.dtype)
    wf = w.reshape(-1)
    r = 0
    for kept in rows:
        if not kept:
            r += 1            # a zero row for a sequence without terms
            continue
        by_len: dict[int, list[tuple[int, int]]] = {}
        for j, (start, n) in enumerate(kept):
            by_len.setdefault(n, []).append((r + j, start))
        for n, items in by_len.items():
            at = np.array([i for i, _ in items])
            grams = np.stack([xf[s:s + n] for _, s in items]).astype("<f4").view(np.uint8)
            for j in range(0, num_emb, rand_len):
                pos = (xxh32(grams, j) % np.uint32(space_len)).astype(np.int64)
                out[at, j:j + rand_len] = wf[pos[:, None] + np.arange(rand_len)]
        r += len(kept)
    if not training and w.dtype != np.int8:
        out = (out * drop).astype(w.dtype)
    drop_pos = np.zeros((xf.size * int(c.attr("pyramid_layer", 2)), 1), np.int32)
    drop_pos[:len(keep_all), 0] = keep_all   # Paddle leaves the rows after these unset
    return {"Out": out, "DropPos": drop_pos, "X_Temp_Out": xf.reshape(-1, 1),
            LOD_KEY: {"Out": [out_lod], "DropPos": [drop_lod], "X_Temp_Out": None}}


def _pyramid_hash_grad(c: Call):
    """Paddle's pyramid_hash_grad computes no gradient: it writes nothing to X@GRAD and takes an
    SGD step W -= lr * Out@GRAD rows in place. With lr 0 (the default) that is nothing."""
    lr = float(c.attr("lr", 0.0))
    if lr != 0.0:
        raise c.unsupported("lr", lr, "Paddle's pyramid_hash_grad updates W in place by -lr * Out@GRAD; "
                                      "pybackward's kernels do not write their inputs")
    return {}


def _pyramid_samples(rng):
    def attrs(**kw):
        a = dict(num_emb=4, space_len=30, pyramid_layer=3, rand_len=2, drop_out_percent=1.0, is_training=0,
                 use_filter=False, white_list_len=0, black_list_len=0, seed=3, lr=0.0, distribute_update_vars="")
        a.update(kw)
        return a

    ids = np.array([[5], [17], [3], [9], [42], [8], [1]], np.int32)
    w = rng.standard_normal((32, 1))
    return [Sample({"X": [ids], "W": [w], "WhiteList": [np.zeros((1, 1))], "BlackList": [np.zeros((1, 1))]},
                   attrs(), lod={"X": [[0, 3, 4, 7]]}, wrt=(), note="inference, drop_out_percent 1"),
            Sample({"X": [ids], "W": [w], "WhiteList": [np.zeros((1, 1))], "BlackList": [np.zeros((1, 1))]},
                   attrs(num_emb=6, pyramid_layer=4, drop_out_percent=0.5), lod={"X": [[0, 5, 7]]}, wrt=(),
                   note="inference scaled by drop_out_percent"),
            Sample({"X": [ids], "W": [w], "WhiteList": [np.zeros((1, 1))], "BlackList": [np.zeros((1, 1))]},
                   attrs(is_training=1, drop_out_percent=0.4, seed=11), lod={"X": [[0, 7]]}, wrt=(),
                   note="training: rand_r dropout")]


register(paddle_opdef("pyramid_hash", _pyramid_hash, {"pyramid_hash_grad": _pyramid_hash_grad},
                      samples=_pyramid_samples,
                      attrs_handled=("num_emb", "space_len", "pyramid_layer", "rand_len", "drop_out_percent",
                                     "is_training", "use_filter", "white_list_len", "black_list_len", "seed", "lr"),
                      doc="Out = per sequence of int32 ids, W's rows at the XXH32 hashes of its 2..pyramid_layer "
                          "-grams (times drop_out_percent at inference); grad: Paddle's SGD step on W (lr 0 only)"))
