"""Legacy sequence (LoD) ops: sequence_pool, sequence_softmax, sequence_expand,
sequence_conv and lod_reset, with their grads.

These ops read the LoD of their inputs (`call.lod(slot)`: Paddle's offsets,
outer level first; docs/lod.md) and give their outputs' LoDs under
`LOD_KEY`. A sequence is the rows `[lod[-1][i], lod[-1][i+1])` of the
tensor. Paddle 3.3.1's CPU kernels, in NumPy terms:

* sequence_pool (pooltype AVERAGE / SUM / SQRT / MAX / LAST / FIRST) reduces
  each sequence of the last level to one row; an empty sequence gives
  `pad_value` (and MaxIndex -1). MAX takes the first maximum; MaxIndex (int32,
  the input row of each maximum) is written by Paddle only for MAX (-1 here
  for the others). With two LoD levels
  Out keeps the outer level as its LoD. Grads: AVERAGE dOut / len, SQRT
  dOut / sqrt(len), SUM dOut, MAX / LAST / FIRST dOut at that row.
* sequence_softmax: softmax over each sequence of a `[N]` or `[N, 1]` X.
* sequence_expand: each sequence i of X (each row, if X has no LoD) is
  repeated `len_i` times, len_i the i-th sequence length of Y's LoD level
  `ref_level` (-1: the last); Out's LoD lists the copies when X has a LoD.
* sequence_conv: each row t of a sequence is the concatenation of rows
  `t + contextStart + j` (j < contextLength) of its sequence, times Filter
  `[contextLength * M, N]`. A row outside the sequence is zero, or with
  paddingTrainable the PaddingData row `up_pad + p` (p < 0, above the start)
  or `up_pad + p - len` (p >= len, below the end), up_pad = max(0,
  -contextStart) - what Paddle's ContextProjectFunctor copies.
* lod_reset: Out = X with a new LoD: Y's LoD, or Y's int32 values as one
  level, or `target_lod`; `append` adds it below X's LoD.
* match_matrix_tensor (float32 only in Paddle): for each pair b of sequences
  of X and Y and each t < dim_t, the `[len_x, len_y]` matrix
  `x_b W[:, t, :] y_b^T`, all flattened into Out `[sum, 1]` (LoD: the block
  offsets); Tmp is `X W` flattened. Its grad reads Tmp, not Tmp@GRAD.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, Sample, register


# --------------------------------------------------------------------------
# LoD helpers
# --------------------------------------------------------------------------
def seq_offsets(c: Call, slot: str = "X", rows: int | None = None) -> np.ndarray:
    """The last LoD level of an input, as int64 offsets; an error if it has none."""
    lod = c.lod(slot)
    if not lod:
        raise ExecutionError(f"op {c.op_type}: input {slot} has no LoD (feed it as (array, lod) "
                             f"or with {slot}@LOD0; docs/lod.md)")
    off = np.asarray(lod[-1], dtype=np.int64)
    if rows is not None and off[-1] != rows:
        raise ExecutionError(f"op {c.op_type}: the LoD of {slot} ends at {off[-1]}, but it has {rows} rows")
    return off


def seq_ids(off: np.ndarray) -> np.ndarray:
    """The sequence index of each row."""
    return np.repeat(np.arange(len(off) - 1), np.diff(off))


def _float_input(c: Call, slot: str = "X") -> np.ndarray:
    x = np.asarray(c.x(slot))
    if x.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel (float32 / float64 only)")
    return x


# --------------------------------------------------------------------------
# sequence_pool
# --------------------------------------------------------------------------
_POOLS = ("AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST")


def _pooltype(c: Call) -> str:
    p = str(c.attr("pooltype", "AVERAGE")).upper()
    if p not in _POOLS:
        raise c.unsupported("pooltype", c.attr("pooltype"), f"expected one of {', '.join(_POOLS)}")
    return p


def _sequence_pool(c: Call):
    x = _float_input(c)
    lod = c.lod("X")
    if lod is not None and len(lod) > 2:
        raise ExecutionError(f"op sequence_pool: the LoD level of X must be 1 or 2, it is {len(lod)}")
    off = seq_offsets(c, "X", x.shape[0])
    pool = _pooltype(c)
    n, lens = len(off) - 1, np.diff(off)
    x2 = x.reshape(x.shape[0], -1)
    out = np.full((n, x2.shape[1]), c.attr("pad_value", 0.0), dtype=x.dtype)
    full = lens > 0
    starts = off[:-1][full]
    res = {}
    if full.any():
        if pool in ("SUM", "AVERAGE", "SQRT"):
            s = np.add.reduceat(x2, starts, axis=0)
            h = lens[full][:, None].astype(x.dtype)
            out[full] = s if pool == "SUM" else s / h if pool == "AVERAGE" else s / np.sqrt(h)
        elif pool == "LAST":
            out[full] = x2[off[1:][full] - 1]
        elif pool == "FIRST":
            out[full] = x2[starts]
        else:  # MAX: the first maximum, as Paddle's strict `>` scan
            out[full] = np.maximum.reduceat(x2, starts, axis=0)
    idx = np.full(out.shape, -1, dtype=np.int32)   # unset by Paddle unless MAX: all -1 here
    if pool == "MAX":
        if full.any():
            rows = np.arange(x2.shape[0])[:, None]
            hit = np.where(x2 == out[seq_ids(off)], rows, np.iinfo(np.int64).max)
            idx[full] = np.minimum.reduceat(hit, starts, axis=0)
    res["MaxIndex"] = idx.reshape((n,) + x.shape[1:])
    res["Out"] = out.reshape((n,) + x.shape[1:])
    res[LOD_KEY] = {"Out": [lod[0]] if len(lod) == 2 else None}
    return res


def _sequence_pool_grad(c: Call):
    x = np.asarray(c.x("X"))
    off = seq_offsets(c, "X", x.shape[0])
    pool = _pooltype(c)
    g = np.asarray(c.x("Out@GRAD")).reshape(len(off) - 1, -1)
    lens = np.diff(off)
    dx = np.zeros((x.shape[0], g.shape[1]), dtype=g.dtype)
    full = lens > 0
    if pool in ("SUM", "AVERAGE", "SQRT"):
        h = lens.astype(g.dtype)[:, None]
        scale = np.ones_like(h) if pool == "SUM" else 1 / np.where(h > 0, h, 1) if pool == "AVERAGE" \
            else 1 / np.sqrt(np.where(h > 0, h, 1))
        dx = (g * scale)[seq_ids(off)]
    elif pool == "LAST":
        dx[off[1:][full] - 1] = g[full]
    elif pool == "FIRST":
        dx[off[:-1][full]] = g[full]
    else:
        # int32 in Paddle; a program may declare the var float32 (the interpreter casts to the declared dtype)
        idx = np.asarray(c.x("MaxIndex")).reshape(g.shape).astype(np.int64)
        rows, cols = np.nonzero(idx >= 0)
        dx[idx[rows, cols], cols] = g[rows, cols]
    return {"X@GRAD": dx.reshape(x.shape).astype(x.dtype, copy=False)}


def _pool_samples(rng):
    out = []
    lod = [[0, 2, 5, 6]]
    for p in _POOLS:
        out.append(Sample({"X": [rng.uniform(-1, 1, (6, 3))]}, {"pooltype": p, "is_test": False}, lod={"X": lod},
                          outputs={"Out": 1, "MaxIndex": 1}, note=p))
    # an empty sequence (pad_value), a 3-D X, two LoD levels
    out.append(Sample({"X": [rng.uniform(-1, 1, (5, 2, 2))]}, {"pooltype": "MAX", "pad_value": 0.5},
                      lod={"X": [[0, 2, 2, 5]]}, outputs={"Out": 1, "MaxIndex": 1}, note="MAX empty 3-D"))
    out.append(Sample({"X": [rng.uniform(-1, 1, (5, 2))]}, {"pooltype": "SQRT", "pad_value": -1.0},
                      lod={"X": [[0, 3, 3, 5]]}, outputs={"Out": 1, "MaxIndex": 1}, note="SQRT empty"))
    out.append(Sample({"X": [rng.uniform(-1, 1, (6, 2))]}, {"pooltype": "LAST"},
                      lod={"X": [[0, 1, 3], [0, 2, 3, 6]]}, outputs={"Out": 1, "MaxIndex": 1}, note="LAST 2-level"))
    out.append(Sample({"X": [rng.uniform(-1, 1, (6, 2))]}, {"pooltype": "AVERAGE"},
                      lod={"X": [[0, 2, 3], [0, 1, 3, 6]]}, outputs={"Out": 1, "MaxIndex": 1},
                      note="AVERAGE 2-level"))
    return out


register(paddle_opdef("sequence_pool", _sequence_pool, {"sequence_pool_grad": _sequence_pool_grad},
                      samples=_pool_samples, attrs_handled=("pooltype", "pad_value", "is_test"),
                      doc="pool each sequence of X's last LoD level to one row (AVERAGE, SUM, SQRT, MAX, "
                          "LAST, FIRST); empty sequences give pad_value"))


# --------------------------------------------------------------------------
# sequence_softmax
# --------------------------------------------------------------------------
def _sequence_softmax(c: Call):
    x = _float_input(c)
    off = seq_offsets(c, "X", x.shape[0])
    if x.size != x.shape[0]:
        raise ExecutionError(f"op sequence_softmax: X must be [N] or [N, 1], it has shape {list(x.shape)}")
    v = x.reshape(-1)
    ids = seq_ids(off)
    full = np.diff(off) > 0
    m = np.zeros(len(off) - 1, dtype=x.dtype)
    if v.size:
        m[full] = np.maximum.reduceat(v, off[:-1][full])
    e = np.exp(v - m[ids])
    s = np.zeros_like(m)
    if v.size:
        s[full] = np.add.reduceat(e, off[:-1][full])
    return {"Out": (e / s[ids]).reshape(x.shape), LOD_KEY: {"Out": c.lod("X")}}


def _sequence_softmax_grad(c: Call):
    out = np.asarray(c.x("Out"))
    g = np.asarray(c.x("Out@GRAD"))
    off = seq_offsets(c, "X", out.shape[0])
    full = np.diff(off) > 0
    p = (out * g).reshape(-1)
    s = np.zeros(len(off) - 1, dtype=p.dtype)
    if p.size:
        s[full] = np.add.reduceat(p, off[:-1][full])
    dx = out.reshape(-1) * (g.reshape(-1) - s[seq_ids(off)])
    return {"X@GRAD": dx.reshape(out.shape)}


def _softmax_samples(rng):
    return [Sample({"X": [rng.uniform(-2, 2, (6, 1))]}, lod={"X": [[0, 2, 5, 6]]}),
            Sample({"X": [rng.uniform(-2, 2, (7,))]}, lod={"X": [[0, 3, 3, 7]]}, note="1-D, empty sequence"),
            Sample({"X": [rng.uniform(-2, 2, (5, 1))]}, lod={"X": [[0, 1, 2], [0, 2, 5]]}, note="2-level")]


register(paddle_opdef("sequence_softmax", _sequence_softmax, {"sequence_softmax_grad": _sequence_softmax_grad},
                      samples=_softmax_samples, doc="softmax over each sequence of X's last LoD level"))


# --------------------------------------------------------------------------
# sequence_expand
# --------------------------------------------------------------------------
def _expand_plan(c: Call, x: np.ndarray):
    """(rows of X each output row copies, X's LoD level or None, out LoD or None)."""
    ylod = c.lod("Y")
    if not ylod:
        raise ExecutionError("op sequence_expand: Input(Y) has no LoD")
    level = int(c.attr("ref_level", -1))
    if level == -1:
        level = len(ylod) - 1
    if not 0 <= level < len(ylod):
        raise c.unsupported("ref_level", level, f"Y has {len(ylod)} LoD levels")
    ref = np.asarray(ylod[level], dtype=np.int64)
    xlod = c.lod("X")
    if xlod is not None and len(xlod) > 1:
        raise ExecutionError("op sequence_expand: the LoD level of X must be at most 1")
    if len(ref) <= 1:
        return None, None, None
    xoff = np.asarray(xlod[0], dtype=np.int64) if xlod else np.arange(x.shape[0] + 1)
    if len(xoff) != len(ref):
        raise ExecutionError(f"op sequence_expand: X has {len(xoff) - 1} sequences, Y's LoD level {level} "
                             f"has {len(ref) - 1}")
    reps = np.diff(ref)
    xlen = np.diff(xoff)
    seq = np.repeat(np.arange(len(reps)), reps)                 # the X sequence of each copy
    copy_len = xlen[seq]
    rows = np.repeat(xoff[:-1][seq], copy_len) + (np.arange(copy_len.sum()) -
                                                  np.repeat(np.cumsum(copy_len) - copy_len, copy_len))
    out_lod = [[0] + np.cumsum(copy_len).tolist()] if xlod else None
    return rows, xoff, out_lod


def _sequence_expand(c: Call):
    x = np.asarray(c.x("X"))
    rows, _, out_lod = _expand_plan(c, x)
    if rows is None:
        return {"Out": x.copy(), LOD_KEY: {"Out": c.lod("X")}}
    return {"Out": x[rows], LOD_KEY: {"Out": out_lod}}


def _sequence_expand_grad(c: Call):
    x = np.asarray(c.x("X"))
    g = np.asarray(c.x("Out@GRAD"))
    rows, _, _ = _expand_plan(c, x)
    if rows is None:
        return {"X@GRAD": g.copy()}
    dx = np.zeros(x.shape, dtype=g.dtype)
    np.add.at(dx, rows, g)
    return {"X@GRAD": dx}


def _expand_samples(rng):
    return [
        Sample({"X": [rng.uniform(-1, 1, (3, 2))], "Y": [rng.uniform(-1, 1, (5, 1))]},
               lod={"X": [[0, 1, 3]], "Y": [[0, 2, 5]]}, wrt=("X",), note="X with LoD"),
        Sample({"X": [rng.uniform(-1, 1, (3, 2))], "Y": [rng.uniform(-1, 1, (6, 1))]},
               lod={"Y": [[0, 2, 2, 6]]}, wrt=("X",), note="X without LoD"),
        Sample({"X": [rng.uniform(-1, 1, (4, 2))], "Y": [rng.uniform(-1, 1, (6, 1))]},
               {"ref_level": 0}, lod={"X": [[0, 2, 4]], "Y": [[0, 3, 4], [0, 1, 2, 3, 6]]}, wrt=("X",),
               note="ref_level 0"),
    ]


register(paddle_opdef("sequence_expand", _sequence_expand, {"sequence_expand_grad": _sequence_expand_grad},
                      samples=_expand_samples, attrs_handled=("ref_level",),
                      doc="repeat each sequence (or row) of X as many times as Y's LoD level ref_level says"))


# --------------------------------------------------------------------------
# lod_reset
# --------------------------------------------------------------------------
def _lod_reset(c: Call):
    x = np.asarray(c.x("X"))
    if c.has("Y"):
        ylod = c.lod("Y")
        if ylod:
            return {"Out": x.copy(), LOD_KEY: {"Out": ylod}}
        y = np.asarray(c.x("Y"))
        if y.dtype != np.int32:
            raise ExecutionError(f"op lod_reset: Y without a LoD must hold int32 offsets, it is {y.dtype}")
        level = y.reshape(-1).tolist()
    else:
        level = [int(v) for v in c.attr("target_lod", [])]
    if len(level) < 2 or level[0] != 0 or level[-1] != x.shape[0] or any(b < a for a, b in zip(level, level[1:])):
        raise ExecutionError(f"op lod_reset: target LoD {level} must be ascending offsets from 0 to the "
                             f"row count of X ({x.shape[0]})")
    xlod = c.lod("X") if c.attr("append", False) else None
    return {"Out": x.copy(), LOD_KEY: {"Out": (list(xlod) if xlod else []) + [level]}}


def _lod_reset_grad(c: Call):
    return {"X@GRAD": np.array(c.x("Out@GRAD"), copy=True)}


def _lod_reset_samples(rng):
    return [Sample({"X": [rng.uniform(-1, 1, (5, 2))]}, {"target_lod": [0, 2, 5]}, lod={}, note="target_lod"),
            Sample({"X": [rng.uniform(-1, 1, (5, 2))], "Y": [np.array([0, 1, 5], np.int32)]}, lod={},
                   wrt=("X",), note="Y offsets"),
            Sample({"X": [rng.uniform(-1, 1, (4, 2))], "Y": [rng.uniform(-1, 1, (4, 1))]},
                   lod={"X": [[0, 4]], "Y": [[0, 1, 4]]}, wrt=("X",), note="Y's LoD"),
            Sample({"X": [rng.uniform(-1, 1, (4, 2))]}, {"target_lod": [0, 1, 2, 4], "append": True},
                   lod={"X": [[0, 2, 4]]}, note="append")]


register(paddle_opdef("lod_reset", _lod_reset, {"lod_reset_grad": _lod_reset_grad}, samples=_lod_reset_samples,
                      attrs_handled=("target_lod", "append"),
                      doc="Out = X with the LoD of Y, Y's int32 offsets, or target_lod (append: as a new level)"))


# --------------------------------------------------------------------------
# match_matrix_tensor
# --------------------------------------------------------------------------
def _match_plan(c: Call, x: np.ndarray, y: np.ndarray):
    """Per sequence pair b: (x rows, y rows, out offset); and the out LoD."""
    xl, yl = c.lod("X"), c.lod("Y")
    if not xl or not yl:
        raise ExecutionError("op match_matrix_tensor: X and Y must both have a LoD")
    xo, yo = np.asarray(xl[0], np.int64), np.asarray(yl[0], np.int64)
    if xo[-1] != x.shape[0] or yo[-1] != y.shape[0] or len(xo) != len(yo):
        raise ExecutionError("op match_matrix_tensor: X's and Y's LoDs must end at their row counts and hold "
                             "as many sequences")
    dim_t = int(c.attr("dim_t", 1))
    sizes = dim_t * np.diff(xo) * np.diff(yo)
    return xo, yo, dim_t, np.concatenate([[0], np.cumsum(sizes)])


def _match_matrix_tensor(c: Call):
    x, y, w = (np.asarray(c.x(s)) for s in ("X", "Y", "W"))
    xo, yo, dim_t, top = _match_plan(c, x, y)
    h = x.shape[1]
    if w.shape != (h, dim_t, h) or y.shape[1] != h:
        raise ExecutionError(f"op match_matrix_tensor: W must be [{h}, dim_t={dim_t}, {h}] and Y [*, {h}], "
                             f"got {list(w.shape)}, {list(y.shape)}")
    tmp = (x @ w.reshape(h, dim_t * h)).reshape(x.shape[0], dim_t, h)
    blocks = [np.einsum("ith,jh->tij", tmp[xo[b]:xo[b + 1]], y[yo[b]:yo[b + 1]]).reshape(-1)
              for b in range(len(xo) - 1)]
    out = np.concatenate(blocks).reshape(-1, 1).astype(x.dtype, copy=False)
    return {"Out": out, "Tmp": tmp.reshape(-1, 1), LOD_KEY: {"Out": [top.tolist()]}}


def _match_matrix_tensor_grad(c: Call):
    x, y, w = (np.asarray(c.x(s)) for s in ("X", "Y", "W"))
    xo, yo, dim_t, top = _match_plan(c, x, y)
    h = x.shape[1]
    tmp = np.asarray(c.x("Tmp")).reshape(x.shape[0], dim_t, h)
    g = np.asarray(c.x("Out@GRAD")).reshape(-1)
    dtmp, dy = np.zeros_like(tmp), np.zeros_like(y)
    for b in range(len(xo) - 1):
        lx, ly = xo[b + 1] - xo[b], yo[b + 1] - yo[b]
        gb = g[top[b]:top[b + 1]].reshape(dim_t, lx, ly)
        dtmp[xo[b]:xo[b + 1]] = np.einsum("tij,jh->ith", gb, y[yo[b]:yo[b + 1]])
        dy[yo[b]:yo[b + 1]] = np.einsum("tij,ith->jh", gb, tmp[xo[b]:xo[b + 1]])
    dtmp2 = dtmp.reshape(x.shape[0], dim_t * h)
    return {"X@GRAD": dtmp2 @ w.reshape(h, dim_t * h).T, "Y@GRAD": dy,
            "W@GRAD": (x.T @ dtmp2).reshape(w.shape)}


def _match_samples(rng):
    def s(xl, yl, h, dim_t, note):
        return Sample({"X": [rng.uniform(-1, 1, (xl[-1], h))], "Y": [rng.uniform(-1, 1, (yl[-1], h))],
                       "W": [rng.uniform(-1, 1, (h, dim_t, h))]}, {"dim_t": dim_t},
                      lod={"X": [xl], "Y": [yl]}, note=note)
    return [s([0, 1, 3, 5], [0, 3, 4, 8], 3, 2, "three pairs"),
            s([0, 2], [0, 3], 2, 1, "one pair, dim_t 1"),
            s([0, 2, 2, 3], [0, 1, 3, 5], 2, 3, "an empty X sequence")]


register(paddle_opdef("match_matrix_tensor", _match_matrix_tensor,
                      {"match_matrix_tensor_grad": _match_matrix_tensor_grad}, samples=_match_samples,
                      attrs_handled=("dim_t",),
                      doc="per sequence pair: x_b W[:, t, :] y_b^T for each t, flattened, with LoD; "
                          "Tmp = X W"))


# --------------------------------------------------------------------------
# fusion_seqpool_concat (inference): sequence_pool of each X, concatenated
# --------------------------------------------------------------------------
def _fusion_seqpool_concat(c: Call):
    pool = str(c.attr("pooltype", "SUM")).upper()
    if pool not in ("SUM", "AVERAGE", "SQRT"):
        raise c.unsupported("pooltype", c.attr("pooltype"), "Paddle's kernel pools SUM, AVERAGE or SQRT")
    if int(c.attr("axis", 1)) != 1:
        raise c.unsupported("axis", c.attr("axis"), "Paddle's kernel concatenates along axis 1 only")
    outs = []
    for i, x in enumerate(c.xs("X")):
        x = np.asarray(x)
        lod = c.lod("X", i)
        if not lod:
            raise ExecutionError(f"op fusion_seqpool_concat: X[{i}] has no LoD")
        off = np.asarray(lod[0], np.int64)
        lens = np.diff(off)
        if (lens == 0).any():
            raise ExecutionError("op fusion_seqpool_concat: an empty sequence (Paddle's kernel reads past it)")
        if outs and len(lens) != outs[0].shape[0]:
            raise ExecutionError("op fusion_seqpool_concat: every X must hold as many sequences")
        s = np.add.reduceat(x.reshape(x.shape[0], -1), off[:-1], axis=0)
        h = lens[:, None].astype(x.dtype)
        outs.append(s if pool == "SUM" else s / h if pool == "AVERAGE" else s / np.sqrt(h))
    out = np.concatenate(outs, axis=1)
    return {"Out": out, LOD_KEY: {"Out": [list(range(out.shape[0] + 1))]}}


def _seqpool_concat_samples(rng):
    lods = ([[0, 2, 5]], [[0, 1, 4]], [[0, 3, 4]])
    xs = [rng.uniform(-1, 1, (lod[0][-1], 3)) for lod in lods]
    return [Sample({"X": xs}, {"pooltype": p, "axis": 1}, lod={"X": list(lods)}, note=p)
            for p in ("SUM", "AVERAGE", "SQRT")]


register(paddle_opdef("fusion_seqpool_concat", _fusion_seqpool_concat, samples=_seqpool_concat_samples,
                      attrs_handled=("pooltype", "axis"),
                      doc="inference-only: SUM / AVERAGE / SQRT pool of each X's sequences, concatenated"))
