"""Decoding and sequence post-processing ops of inference and evaluation
programs: gather_tree (beam search back-tracking), viterbi_decode and
crf_decoding (CRF decoding), ctc_align, edit_distance, plus empty.

Padded (not LoD) inputs only: the interpreter carries no LoD, so the ops
take their lengths from the `*Length` inputs Paddle's padding mode reads, and
say so when those are missing. Formulas follow Paddle 3.3.1's CPU kernels.
"""
from __future__ import annotations

import numpy as np

from ...base import dtypes
from ...base.errors import ExecutionError
from .._inputs import input_value
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _ints(c: Call, slot: str) -> np.ndarray:
    a = input_value(c, slot)
    if a.dtype.kind not in "iu":
        raise ExecutionError(f"{c.op_type}: '{slot}' is {a.dtype}; Paddle takes int32 or int64")
    return a


def _reg(name, kernel, samples=None, attrs=(), doc=""):
    register(paddle_opdef(name, kernel, samples=samples, attrs_handled=tuple(attrs), doc=doc))


# --------------------------------------------------------------------------
# gather_tree
# --------------------------------------------------------------------------
def _gather_tree(c: Call):
    ids, parents = _ints(c, "Ids"), _ints(c, "Parents")
    if ids.shape != parents.shape or ids.ndim != 3:
        raise ExecutionError(f"gather_tree: Ids {list(ids.shape)} and Parents {list(parents.shape)} must be "
                             "the same [max_time, batch, beam] shape")
    t_max, batch, beam = ids.shape
    out = np.empty_like(ids)
    if t_max == 0:
        return {"Out": out}
    b = np.arange(batch)[:, None]
    out[-1] = ids[-1]
    parent = parents[-1].astype(np.int64)
    if np.any((parent < 0) | (parent >= beam)):
        raise ExecutionError(f"gather_tree: Parents must be in [0, {beam})")
    for step in range(t_max - 2, -1, -1):  # back-tracking is sequential in time
        out[step] = ids[step][b, parent]
        parent = parents[step][b, parent].astype(np.int64)
        if np.any((parent < 0) | (parent >= beam)):
            raise ExecutionError(f"gather_tree: Parents must be in [0, {beam})")
    return {"Out": out}


def _gather_tree_samples(rng):
    ids = rng.integers(0, 10, (4, 2, 3)).astype(np.int64)
    parents = rng.integers(0, 3, (4, 2, 3)).astype(np.int64)
    return [Sample({"Ids": [ids], "Parents": [parents]}),
            Sample({"Ids": [ids.astype(np.int32)], "Parents": [parents.astype(np.int32)]}, note="int32")]


_reg("gather_tree", _gather_tree, _gather_tree_samples, (),
     "Out = the full beam-search sequences, followed back from the last step through Parents")


# --------------------------------------------------------------------------
# ctc_align (padding mode)
# --------------------------------------------------------------------------
def _ctc_align(c: Call):
    x = _ints(c, "Input")
    if not c.has("InputLength"):
        raise ExecutionError("ctc_align: only the padding mode (with InputLength) is supported; "
                             "LoD inputs do not exist in the interpreter")
    if x.ndim != 2:
        raise ExecutionError(f"ctc_align: Input must be [batch, time], it is {list(x.shape)}")
    lens = _ints(c, "InputLength").reshape(-1).astype(np.int64)
    batch, t = x.shape
    if lens.size != batch or np.any((lens < 0) | (lens > t)):
        raise ExecutionError(f"ctc_align: InputLength must hold {batch} lengths in [0, {t}]")
    blank, merge = int(c.attr("blank", 0)), bool(c.attr("merge_repeated", True))
    pad = int(c.attr("padding_value", 0))
    prev = np.concatenate([np.full((batch, 1), -1, dtype=x.dtype), x[:, :-1]], axis=1)
    keep = (x != blank) & ~(merge & (x == prev)) & (np.arange(t)[None, :] < lens[:, None])
    order = np.argsort(~keep, axis=1, kind="stable")  # kept tokens first, in order
    n_keep = keep.sum(axis=1)
    out = np.take_along_axis(x, order, axis=1)
    out = np.where(np.arange(t)[None, :] < n_keep[:, None], out, pad).astype(x.dtype)
    return {"Output": out, "OutputLength": n_keep.astype(x.dtype).reshape(batch, 1)}


def _ctc_align_samples(rng):
    x = np.array([[0, 1, 2, 2, 0, 4, 0, 4, 5, 0, 6], [0, 0, 4, 0, 3, 3, 0, 0, 3, 3, 1]], np.int32)
    lens = np.array([[11], [8]], np.int64)  # (Paddle reads InputLength in Input's dtype)
    return [Sample({"Input": [x], "InputLength": [lens.astype(np.int32)]}, {"blank": 0, "merge_repeated": True, "padding_value": 0},
                   outputs={"Output": 1, "OutputLength": 1}),
            Sample({"Input": [x.astype(np.int64)], "InputLength": [lens]},
                   {"blank": 3, "merge_repeated": False, "padding_value": -1},
                   outputs={"Output": 1, "OutputLength": 1}, note="int64, no merging, other blank")]


_reg("ctc_align", _ctc_align, _ctc_align_samples, ("blank", "merge_repeated", "padding_value"),
     "Output = the tokens of each sequence without blanks (and repeats, if merge_repeated), padded")


# --------------------------------------------------------------------------
# edit_distance (padding mode)
# --------------------------------------------------------------------------
def _levenshtein(h: np.ndarray, r: np.ndarray) -> int:
    """Edit distance by rows of the DP table (each row vectorised but for the
    insertion scan, done with a running minimum)."""
    m, n = len(h), len(r)
    row = np.arange(n + 1)
    for i in range(1, m + 1):
        sub = row[:-1] + (h[i - 1] != r)
        dele = row[1:] + 1
        best = np.minimum(sub, dele)
        new = np.empty_like(row)
        new[0] = i
        # new[j] = min(best[j-1], new[j-1] + 1): a running minimum of best[k] + (j - 1 - k)
        j = np.arange(1, n + 1)
        new[1:] = np.minimum(np.minimum.accumulate(best - j) + j, i + j)
        row = new
    return int(row[n])


def _edit_distance(c: Call):
    hyps, refs = _ints(c, "Hyps"), _ints(c, "Refs")
    if not (c.has("HypsLength") and c.has("RefsLength")):
        raise ExecutionError("edit_distance: only the padding mode (HypsLength and RefsLength) is supported; "
                             "LoD inputs do not exist in the interpreter")
    hl = _ints(c, "HypsLength").reshape(-1)
    rl = _ints(c, "RefsLength").reshape(-1)
    batch = hl.size
    if rl.size != batch or hyps.shape[0] != batch or refs.shape[0] != batch:
        raise ExecutionError("edit_distance: Hyps, Refs and their lengths disagree on the batch size")
    hyps, refs = hyps.reshape(batch, -1), refs.reshape(batch, -1)
    normalized = bool(c.attr("normalized", False))
    out = np.empty((batch, 1), np.float32)
    for k in range(batch):  # one DP per pair of sequences
        m, n = int(hl[k]), int(rl[k])
        if not (0 <= m <= hyps.shape[1] and 0 <= n <= refs.shape[1]):
            raise ExecutionError(f"edit_distance: lengths {m}, {n} of pair {k} exceed the padded sizes")
        d = n if m == 0 else m if n == 0 else _levenshtein(hyps[k, :m], refs[k, :n])
        if normalized:
            if n == 0:
                raise ExecutionError(f"edit_distance: reference {k} is empty, which normalized does not allow")
            out[k, 0] = np.float32(d) / np.float32(n)
        else:
            out[k, 0] = np.float32(d)
    return {"Out": out, "SequenceNum": np.array([batch], np.int64)}


def _edit_distance_samples(rng):
    hyps = rng.integers(0, 4, (3, 6)).astype(np.int64)
    refs = rng.integers(0, 4, (3, 5)).astype(np.int64)
    hl, rl = np.array([6, 3, 0], np.int64), np.array([5, 5, 2], np.int64)
    outs = {"SequenceNum": 1, "Out": 1}
    return [Sample({"Hyps": [hyps], "Refs": [refs], "HypsLength": [hl], "RefsLength": [rl]},
                   {"normalized": False}, outputs=outs),
            Sample({"Hyps": [hyps], "Refs": [refs], "HypsLength": [hl], "RefsLength": [rl]},
                   {"normalized": True}, outputs=outs, note="normalized")]


_reg("edit_distance", _edit_distance, _edit_distance_samples, ("normalized",),
     "Out = Levenshtein distance of each hypothesis to its reference (over the reference length if normalized)")


# --------------------------------------------------------------------------
# empty
# --------------------------------------------------------------------------
def _empty(c: Call):
    d = int(c.attr("dtype", dtypes.VarType.FP32))
    try:
        dt = dtypes.to_numpy(d)
    except (KeyError, ValueError):
        raise c.unsupported("dtype", d, f"data type {dtypes.type_name(d)} has no NumPy equivalent") from None
    if c.has("ShapeTensor"):
        shape = [int(v) for v in input_value(c, "ShapeTensor").reshape(-1)]
    elif c.has("ShapeTensorList"):
        shape = [int(np.asarray(t).reshape(-1)[0]) for t in c.xs("ShapeTensorList")]
    else:
        shape = [int(v) for v in c.attr("shape", [])]
    if any(v < 0 for v in shape):
        raise ExecutionError(f"empty: shape {shape} has a negative dim")
    # Paddle leaves the memory uninitialised; zeros are one of its possible values
    return {"Out": np.zeros(shape, dtype=dt)}


_reg("empty", _empty, None, ("shape", "dtype"), "Out = an uninitialised tensor of `shape` (zeros here)")


# --------------------------------------------------------------------------
# viterbi_decode (paddle.text.viterbi_decode) and crf_decoding
# --------------------------------------------------------------------------
def _viterbi_decode(c: Call):
    """Paddle's CPU kernel step by step, vectorised over the batch: masks as
    float / int multiplications, argmax taking the first maximum."""
    x, trans = input_value(c, "Input"), input_value(c, "Transition")
    if x.dtype.kind != "f" or x.ndim != 3:
        raise ExecutionError(f"viterbi_decode: Input must be a float [batch, seq, tags] tensor, "
                             f"it is {x.dtype} {list(x.shape)}")
    batch, seq_len, n = x.shape
    if trans.shape != (n, n):
        raise ExecutionError(f"viterbi_decode: Transition must be [{n}, {n}], it is {list(trans.shape)}")
    trans = trans.astype(x.dtype)
    t = x.dtype.type
    left = _ints(c, "Length").reshape(-1).astype(np.int64)
    if left.size != batch:
        raise ExecutionError(f"viterbi_decode: Length has {left.size} values for a batch of {batch}")
    max_len = int(left.max(initial=0))
    if max_len > seq_len:
        raise ExecutionError(f"viterbi_decode: a Length of {max_len} exceeds the {seq_len} steps of Input")
    bos = bool(c.attr("include_bos_eos_tag", True))
    stop, start = trans[n - 2], trans[n - 1]
    if max_len == 0:
        return {"Scores": np.zeros(batch, x.dtype), "Path": np.zeros((batch, 0), np.int64)}
    alpha = x[:, 0, :]
    if bos:
        alpha = alpha + start
        alpha = alpha + stop * (left == 1).astype(x.dtype)[:, None]
    left = left - 1
    history = []
    for i in range(1, max_len):
        s = alpha[:, :, None] + trans[None]
        arg = np.argmax(s, axis=1)
        history.append(arg)
        nxt = np.take_along_axis(s, arg[:, None, :], axis=1)[:, 0, :] + x[:, i, :]
        mask = (left > 0).astype(x.dtype)[:, None]
        alpha = alpha * (t(1) - mask) + nxt * mask
        if bos:
            alpha = alpha + stop * (left == 1).astype(x.dtype)[:, None]
        left = left - 1
    last = np.argmax(alpha, axis=1).astype(np.int64)
    scores = np.take_along_axis(alpha, last[:, None], axis=1)[:, 0]
    actual = min(seq_len, max_len)
    path = np.zeros((max_len, batch), np.int64)
    path[actual - 1] = last * (left >= 0)
    for k, hist in enumerate(reversed(history), start=2):
        left = left + 1
        upd = hist[np.arange(batch), last].astype(np.int64) * (left > 0)
        zero = (left == 0).astype(np.int64)
        upd = upd * (1 - zero) + last * zero
        path[actual - k] = upd
        last = upd + last * (left < 0)
    return {"Scores": scores, "Path": path.T.copy()}


def _viterbi_samples(rng):
    x = rng.standard_normal((3, 5, 4))
    trans = rng.standard_normal((4, 4))
    outs = {"Scores": 1, "Path": 1}
    return [Sample({"Input": [x], "Transition": [trans], "Length": [np.array([5, 3, 4], np.int64)]},
                   {"include_bos_eos_tag": True}, outputs=outs),
            Sample({"Input": [x], "Transition": [trans], "Length": [np.array([2, 4, 1], np.int64)]},
                   {"include_bos_eos_tag": False}, outputs=outs, note="no bos/eos, shorter than Input")]


_reg("viterbi_decode", _viterbi_decode, _viterbi_samples, ("include_bos_eos_tag",),
     "Scores, Path = the best tag path of each sequence under emissions Input and Transition")


def _crf_path(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Paddle's CRFDecoding: w[0] start, w[1] end, w[2:] transitions; first maximum wins."""
    seq_len, n = x.shape
    alpha = w[0] + x[0]
    track = np.zeros((seq_len, n), np.int64)
    for k in range(1, seq_len):  # the recursion is sequential in time
        s = alpha[:, None] + w[2:]
        track[k] = np.argmax(s, axis=0)
        alpha = s[track[k], np.arange(n)] + x[k]
    path = np.empty(seq_len, np.int64)
    path[-1] = int(np.argmax(alpha + w[1]))
    for k in range(seq_len - 1, 0, -1):
        path[k - 1] = track[k, path[k]]
    return path


def _crf_decoding(c: Call):
    e, w = input_value(c, "Emission"), input_value(c, "Transition")
    if not c.has("Length"):
        raise ExecutionError("crf_decoding: only the padding mode (with Length) is supported; "
                             "LoD inputs do not exist in the interpreter")
    if e.dtype.kind != "f" or e.ndim != 3:
        raise ExecutionError(f"crf_decoding: Emission must be a float [batch, max_len, tags] tensor, "
                             f"it is {e.dtype} {list(e.shape)}")
    batch, max_len, n = e.shape
    if w.shape != (n + 2, n):
        raise ExecutionError(f"crf_decoding: Transition must be [{n + 2}, {n}], it is {list(w.shape)}")
    lens = _ints(c, "Length").reshape(-1)
    if lens.size != batch or np.any((lens < 0) | (lens > max_len)):
        raise ExecutionError(f"crf_decoding: Length must hold {batch} lengths in [0, {max_len}]")
    w = w.astype(e.dtype)
    path = np.zeros((batch, max_len), np.int64)
    for b in range(batch):
        if lens[b]:
            path[b, :lens[b]] = _crf_path(e[b, :lens[b]], w)
    if c.has("Label"):
        label = _ints(c, "Label").reshape(batch, max_len)
        inside = np.arange(max_len)[None, :] < lens[:, None]
        path = ((label == path) & inside).astype(np.int64)  # Paddle: 0 past each length
    return {"ViterbiPath": path}


def _crf_samples(rng):
    e = rng.standard_normal((3, 5, 4))
    w = rng.standard_normal((6, 4))
    lens = np.array([5, 2, 0], np.int64)
    return [Sample({"Emission": [e], "Transition": [w], "Length": [lens]}),
            Sample({"Emission": [e], "Transition": [w], "Length": [lens],
                    "Label": [rng.integers(0, 4, (3, 5)).astype(np.int64)]}, note="with Label")]


_reg("crf_decoding", _crf_decoding, _crf_samples, (),
     "ViterbiPath = the best tag path under a linear-chain CRF (or 1 where it equals Label)")
