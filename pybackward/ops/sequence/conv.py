"""Convolutions over LoD sequences: sequence_conv, row_conv, im2sequence, with
their grads (Paddle 3.3.1's CPU kernels, in NumPy terms; see ops/sequence/sequence_ops.py
for the LoD conventions).

* sequence_conv: row t of each sequence (X's LoD level 0) is the
  concatenation of rows `p = t + contextStart + j`, j < contextLength, of the
  same sequence, times Filter `[contextLength * M, N]`. A row outside the
  sequence is zero, or with paddingTrainable a PaddingData row: `up_pad + p`
  above the start (p < 0), `up_pad + p - len` below the end, up_pad =
  max(0, -contextStart) - the rows Paddle's ContextProjectFunctor copies.
  contextStride must be 1 (Paddle's only value). Out keeps X's LoD.
* row_conv (float32 only in Paddle): `out[t] = sum_{w, t+w < len} W[w] * x[t+w]`
  per sequence of X's LoD level 0, or per batch item of a 3-D `[B, T, D]` X
  without LoD.
* im2sequence (float32 only in Paddle): the kh x kw patches of each image of
  X `[N, C, H, W]` (paddings [up, left, down, right], strides), one row per
  output position, `[N * oh * ow, C * kh * kw]`, with LoD `[0, oh*ow, ...]`.
  The Y input (real image sizes, with out_stride) is not supported for a
  batch of more than one image.
* fusion_seqconv_eltadd_relu (inference): relu(the zero-padded context
  projection @ Filter + Bias); ColMat is the projection. Equal to Paddle's
  hand-written im2col for every contextStart sampled (negative, zero, positive).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, Sample, register


def _level0(c: Call, slot: str, rows: int) -> np.ndarray:
    lod = c.lod(slot)
    if not lod:
        raise ExecutionError(f"op {c.op_type}: input {slot} has no LoD (docs/lod.md)")
    off = np.asarray(lod[0], dtype=np.int64)
    if off[-1] != rows:
        raise ExecutionError(f"op {c.op_type}: the LoD of {slot} ends at {off[-1]}, but it has {rows} rows")
    return off


def _positions(off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: its sequence's start, its index in the sequence, the sequence length."""
    lens = np.diff(off)
    seq = np.repeat(np.arange(len(lens)), lens)
    start = off[:-1][seq]
    rows = np.arange(off[-1])
    return start, rows - start, lens[seq]


# --------------------------------------------------------------------------
# sequence_conv
# --------------------------------------------------------------------------
def _context_index(c: Call, x: np.ndarray, n_pad: int):
    """[T, contextLength] indices into concat(X, PaddingData, one zero row)."""
    cl = int(c.attr("contextLength"))
    start_attr = int(c.attr("contextStart", 0))
    if int(c.attr("contextStride", 1)) != 1:
        raise c.unsupported("contextStride", c.attr("contextStride"), "Paddle supports only 1")
    if cl < 1:
        raise c.unsupported("contextLength", cl, "must be positive")
    off = _level0(c, "X", x.shape[0])
    start, t, length = _positions(off)
    p = t[:, None] + start_attr + np.arange(cl)[None, :]
    inside = (p >= 0) & (p < length[:, None])
    zero_row = x.shape[0] + n_pad
    idx = np.where(inside, start[:, None] + p, zero_row)
    if c.attr("paddingTrainable", False):
        up_pad = max(0, -start_attr)
        pad_row = np.where(p < 0, up_pad + p, up_pad + p - length[:, None])
        idx = np.where(inside, idx, x.shape[0] + pad_row)
    return idx, cl


def _padding(c: Call, x: np.ndarray) -> np.ndarray:
    cl, s = int(c.attr("contextLength")), int(c.attr("contextStart", 0))
    rows = max(0, -s) + max(0, s + cl - 1)
    if not c.attr("paddingTrainable", False):
        return np.zeros((0, x.shape[1]), x.dtype)
    pd = c.x("PaddingData")
    if pd is None:
        raise ExecutionError("op sequence_conv: paddingTrainable needs Input(PaddingData)")
    pd = np.asarray(pd)
    if pd.shape != (rows, x.shape[1]):
        raise ExecutionError(f"op sequence_conv: PaddingData must be [{rows}, {x.shape[1]}], it is {list(pd.shape)}")
    return pd


def _sequence_conv(c: Call):
    x = np.asarray(c.x("X"))
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ExecutionError(f"op sequence_conv: X must be a 2-D float tensor, it is {x.dtype} {list(x.shape)}")
    pd = _padding(c, x)
    idx, cl = _context_index(c, x, len(pd))
    ext = np.concatenate([x, pd.astype(x.dtype), np.zeros((1, x.shape[1]), x.dtype)])
    col = ext[idx].reshape(x.shape[0], cl * x.shape[1])
    f = np.asarray(c.x("Filter"))
    if f.shape[0] != cl * x.shape[1]:
        raise ExecutionError(f"op sequence_conv: Filter must have contextLength * {x.shape[1]} = "
                             f"{cl * x.shape[1]} rows, it has {f.shape[0]}")
    return {"Out": col @ f, LOD_KEY: {"Out": c.lod("X")}}


def _sequence_conv_grad(c: Call):
    x = np.asarray(c.x("X"))
    pd = _padding(c, x)
    idx, cl = _context_index(c, x, len(pd))
    f = np.asarray(c.x("Filter"))
    g = np.asarray(c.x("Out@GRAD"))
    res = {}
    if c.wants("Filter@GRAD"):
        ext = np.concatenate([x, pd.astype(x.dtype), np.zeros((1, x.shape[1]), x.dtype)])
        res["Filter@GRAD"] = ext[idx].reshape(x.shape[0], -1).T @ g
    if c.wants("X@GRAD") or c.wants("PaddingData@GRAD"):
        dcol = (g @ f.T).reshape(x.shape[0], cl, x.shape[1])
        dext = np.zeros((x.shape[0] + len(pd) + 1, x.shape[1]), dtype=g.dtype)
        np.add.at(dext, idx, dcol)
        res["X@GRAD"] = dext[: x.shape[0]]
        if c.wants("PaddingData@GRAD"):
            given = c.x("PaddingData")
            res["PaddingData@GRAD"] = dext[x.shape[0]: x.shape[0] + len(pd)] if len(pd) else \
                np.zeros(np.shape(given), g.dtype)
    return res


def _seq_conv_samples(rng):
    def s(lod, cl, start, trainable, m=2, n=3, note=""):
        rows = lod[-1]
        ins = {"X": [rng.uniform(-1, 1, (rows, m))], "Filter": [rng.uniform(-1, 1, (cl * m, n))]}
        if trainable:
            ins["PaddingData"] = [rng.uniform(-1, 1, (max(0, -start) + max(0, start + cl - 1), m))]
        return Sample(ins, {"contextLength": cl, "contextStart": start, "contextStride": 1,
                            "paddingTrainable": trainable}, lod={"X": [lod]}, note=note)
    return [s([0, 3, 4], 3, -1, False, note="zero padding"),
            s([0, 3, 4], 3, -1, True, note="trainable padding"),
            s([0, 2, 6, 7], 4, -2, True, note="trainable, long context"),
            s([0, 3, 5], 2, 2, True, note="trainable, contextStart > 0"),
            s([0, 1, 5], 3, 0, True, note="trainable, only down padding"),
            s([0, 4, 4, 6], 5, -4, True, note="empty sequence, only up padding")]


register(paddle_opdef("sequence_conv", _sequence_conv, {"sequence_conv_grad": _sequence_conv_grad},
                      samples=_seq_conv_samples,
                      attrs_handled=("contextLength", "contextStart", "contextStride", "paddingTrainable"),
                      doc="context projection of each sequence (zero or trainable padding) times Filter"))


# --------------------------------------------------------------------------
# row_conv (lookahead convolution)
# --------------------------------------------------------------------------
def _row_conv_layout(c: Call, x: np.ndarray):
    """(x as [rows, D], each row's index in its sequence, its sequence length)."""
    if c.lod("X"):
        if x.ndim != 2:
            raise ExecutionError(f"op row_conv: X with a LoD must be [T, D], it is {list(x.shape)}")
        _, t, length = _positions(_level0(c, "X", x.shape[0]))
        return x, t, length
    if x.ndim != 3:
        raise ExecutionError(f"op row_conv: X without a LoD must be [batch, time, D], it is {list(x.shape)}")
    b, steps, d = x.shape
    return x.reshape(b * steps, d), np.tile(np.arange(steps), b), np.full(b * steps, steps)


def _float32_only(c: Call, x: np.ndarray) -> None:
    if x.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has only a float32 kernel, X is {x.dtype}")


def _row_conv(c: Call):
    x = np.asarray(c.x("X"))
    _float32_only(c, x)
    w = np.asarray(c.x("Filter"))
    x2, t, length = _row_conv_layout(c, x)
    if w.ndim != 2 or w.shape[1] != x2.shape[1]:
        raise ExecutionError(f"op row_conv: Filter must be [future_context, {x2.shape[1]}], it is {list(w.shape)}")
    out = np.zeros_like(x2)
    for k in range(w.shape[0]):
        ok = np.nonzero(t + k < length)[0]
        out[ok] += w[k] * x2[ok + k]
    return {"Out": out.reshape(x.shape), LOD_KEY: {"Out": c.lod("X")}}


def _row_conv_grad(c: Call):
    x = np.asarray(c.x("X"))
    w = np.asarray(c.x("Filter"))
    x2, t, length = _row_conv_layout(c, x)
    g = np.asarray(c.x("Out@GRAD")).reshape(x2.shape)
    dx, dw = np.zeros_like(g), np.zeros(w.shape, g.dtype)
    for k in range(w.shape[0]):
        ok = np.nonzero(t + k < length)[0]
        dx[ok + k] += w[k] * g[ok]
        dw[k] = (g[ok] * x2[ok + k]).sum(axis=0)
    return {"X@GRAD": dx.reshape(x.shape), "Filter@GRAD": dw}


def _row_conv_samples(rng):
    return [Sample({"X": [rng.uniform(-1, 1, (6, 3))], "Filter": [rng.uniform(-1, 1, (3, 3))]},
                   lod={"X": [[0, 2, 6]]}, note="LoD"),
            Sample({"X": [rng.uniform(-1, 1, (7, 2))], "Filter": [rng.uniform(-1, 1, (2, 2))]},
                   lod={"X": [[0, 1, 1, 7]]}, note="LoD, empty sequence"),
            Sample({"X": [rng.uniform(-1, 1, (2, 4, 3))], "Filter": [rng.uniform(-1, 1, (5, 3))]},
                   lod={}, note="3-D, context longer than the sequence")]


register(paddle_opdef("row_conv", _row_conv, {"row_conv_grad": _row_conv_grad}, samples=_row_conv_samples,
                      doc="lookahead convolution: out[t] = sum_w Filter[w] * X[t+w] within each sequence"))


# --------------------------------------------------------------------------
# im2sequence
# --------------------------------------------------------------------------
def _im2seq_index(c: Call, x: np.ndarray):
    """Flat indices into the zero-padded image batch, [N*oh*ow, C*kh*kw], and its padded shape."""
    if x.ndim != 4:
        raise ExecutionError(f"op im2sequence: X must be [N, C, H, W], it is {list(x.shape)}")
    if c.has("Y") and x.shape[0] > 1:
        raise c.unsupported("Y", "given", "real image sizes (Input Y) for a batch of several images")
    kh, kw = (int(v) for v in c.attr("kernels"))
    sh, sw = (int(v) for v in c.attr("strides", [1, 1]))
    up, left, down, right = (int(v) for v in c.attr("paddings", [0, 0, 0, 0]))
    n, ch, h, w = x.shape
    oh, ow = (h + up + down - kh) // sh + 1, (w + left + right - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ExecutionError(f"op im2sequence: kernels {kh}x{kw} do not fit the padded {h}x{w} image")
    ph, pw = h + up + down, w + left + right
    rows = (np.arange(oh) * sh)[:, None, None, None, None] + np.arange(kh)[None, None, None, :, None]
    cols = (np.arange(ow) * sw)[None, :, None, None, None] + np.arange(kw)[None, None, None, None, :]
    chan = np.arange(ch)[None, None, :, None, None]
    per_image = (chan * ph + rows) * pw + cols                    # [oh, ow, C, kh, kw]
    idx = np.arange(n)[:, None] * (ch * ph * pw) + per_image.reshape(1, -1)
    return idx.reshape(n * oh * ow, ch * kh * kw), (n, ch, ph, pw), (up, left), oh * ow


def _im2sequence(c: Call):
    x = np.asarray(c.x("X"))
    _float32_only(c, x)
    idx, pshape, (up, left), per = _im2seq_index(c, x)
    padded = np.zeros(pshape, x.dtype)
    padded[:, :, up: up + x.shape[2], left: left + x.shape[3]] = x
    lod = [list(range(0, per * x.shape[0] + 1, per))]
    return {"Out": padded.reshape(-1)[idx], LOD_KEY: {"Out": lod}}


def _im2sequence_grad(c: Call):
    x = np.asarray(c.x("X"))
    idx, pshape, (up, left), _ = _im2seq_index(c, x)
    g = np.asarray(c.x("Out@GRAD"))
    dpad = np.zeros(int(np.prod(pshape)), g.dtype)
    np.add.at(dpad, idx.reshape(-1), g.reshape(-1))
    dx = dpad.reshape(pshape)[:, :, up: up + x.shape[2], left: left + x.shape[3]]
    return {"X@GRAD": np.ascontiguousarray(dx)}


def _im2seq_samples(rng):
    return [Sample({"X": [rng.uniform(-1, 1, (2, 2, 4, 5))]}, {"kernels": [2, 3], "strides": [1, 1],
                                                              "paddings": [0, 0, 0, 0], "out_stride": [1, 1]},
                   lod={}, note="no padding"),
            Sample({"X": [rng.uniform(-1, 1, (1, 3, 5, 4))]}, {"kernels": [3, 2], "strides": [2, 1],
                                                              "paddings": [1, 0, 2, 1], "out_stride": [1, 1]},
                   lod={}, note="uneven paddings, stride 2")]


register(paddle_opdef("im2sequence", _im2sequence, {"im2sequence_grad": _im2sequence_grad},
                      samples=_im2seq_samples, attrs_handled=("kernels", "strides", "paddings"),
                      doc="image patches as a sequence per image: [N*oh*ow, C*kh*kw] with LoD"))


# --------------------------------------------------------------------------
# fusion_seqconv_eltadd_relu (inference): relu(sequence_conv(X) + Bias), zero padding
# --------------------------------------------------------------------------
def _fusion_seqconv_eltadd_relu(c: Call):
    x = np.asarray(c.x("X"))
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: X must be a 2-D float tensor, it is {x.dtype} {list(x.shape)}")
    if c.lod("X") and len(c.lod("X")) != 1:
        raise ExecutionError(f"op {c.op_type}: only one LoD level is supported")
    idx, cl = _context_index(c, x, 0)
    ext = np.concatenate([x, np.zeros((1, x.shape[1]), x.dtype)])
    col = ext[idx].reshape(x.shape[0], cl * x.shape[1])
    f, b = np.asarray(c.x("Filter")), np.asarray(c.x("Bias")).reshape(1, -1)
    if f.shape[0] != col.shape[1] or b.shape[1] != f.shape[1]:
        raise ExecutionError(f"op {c.op_type}: Filter must be [{col.shape[1]}, N] and Bias hold N values, got "
                             f"{list(f.shape)}, {b.size}")
    return {"Out": np.maximum(col @ f + b, 0), "ColMat": col, LOD_KEY: {"Out": c.lod("X")}}


def _seqconv_relu_samples(rng):
    def s(lod, cl, start, m=2, n=3, note=""):
        return Sample({"X": [rng.uniform(-1, 1, (lod[-1], m))], "Filter": [rng.uniform(-1, 1, (cl * m, n))],
                       "Bias": [rng.uniform(-0.5, 0.5, (1, n))]},
                      {"contextLength": cl, "contextStart": start, "contextStride": 1}, lod={"X": [lod]},
                      note=note)
    return [s([0, 4, 7], 3, -1, note="context 3 centred"),
            s([0, 5, 6], 3, 0, note="look ahead"),
            s([0, 1, 3, 8], 5, -2, note="short sequences"),
            s([0, 6], 4, -3, note="look back"),
            s([0, 4, 7], 2, 1, note="positive start"), s([0, 1, 3, 8], 3, 2, note="positive start, short")]


register(paddle_opdef("fusion_seqconv_eltadd_relu", _fusion_seqconv_eltadd_relu, samples=_seqconv_relu_samples,
                      attrs_handled=("contextLength", "contextStart", "contextStride"),
                      doc="inference-only: relu(context projection (zero padding) @ Filter + Bias)"))
