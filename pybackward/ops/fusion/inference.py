"""Inference-only CPU ops (no grads) of Paddle 3.3.1, in NumPy terms:

* hash: each row of a 2-D int32/int64 X (its bytes, little-endian) hashed
  with XXH64 under seeds 0..num_hash-1, modulo `mod_by`: Out
  `[rows, num_hash, 1]` in X's dtype (XXH64 written here, vectorised over
  rows and seeds). Paddle hashes only the first dims[0] rows of the last dim,
  so a rank > 2 X leaves most of its output unset: refused here.
* fusion_seqpool_cvm_concat: per input X_i (1-level LoD, width w), each
  sequence pooled (SUM / AVERAGE / SQRT), then the CVM transform of the first
  two columns, `c0 = log(s0 + 1)`, `c1 = log(s1 + 1) - c0` (Paddle applies it
  whatever use_cvm says), and the pooled rows of all inputs concatenated:
  Out `[batch, n * w]`, LoD `[0, 1, ..., batch]`. CVM is not read. An empty
  sequence is refused (Paddle's
  jit seqpool would read the next sequence's first row).
* fused_embedding_fc_lstm: XX = Embeddings[Ids] (the fc and its bias are
  folded into Embeddings; Bias holds only the peephole weights past 4D), then
  an LSTM over each sequence of Ids' LoD with WeightH `[D, 4D]`, gates
  `[candidate, input, forget, output]`; H0 (with C0) or a zero state.
* attention_lstm: for each step of a sequence, attention weights
  `softmax(relu(relu(X_seq a_x + b_a + c_prev . a_c) * s + b_s))` (the scalar
  stage only with AttentionScalar) pool the sequence's rows into the LSTM
  input; LSTMWeight `[(D + M), 4D]` (first D rows for h_prev), gates
  `[forget, input, output, candidate]`, C0 required, H0 optional (no h_prev
  term without it).
* coalesce_tensor: one FusedOutput buffer holding every Input at offsets
  rounded up to the alignment (`align_size` bytes, else Paddle's CPU chunk of
  4096 bytes; none without use_align); copy_data copies the inputs,
  set_constant fills `constant`; Output[i] is its slice (the padding, and
  everything when neither is set, is Paddle's uninitialised memory: zeros here).

The LSTM activations are Paddle's vector ones (funcs/cpu_vec.h): sigmoid
clips its input to [-40, 13], tanh is `2 sigmoid(2x) - 1` with that clip, and
identity does nothing - not even copy. Gate and candidate activations run in
place, so that is the identity there; but cell_activation writes into another
slot of the gate buffer, so with "identity" Paddle's hidden state is
`(what that slot held) * o`, not `c * o`: `f * c_prev` (attention_lstm, and
fused_embedding_fc_lstm after a first step), or the raw forget-gate input on a
first step without H0. pybackward gives Paddle's values.
"""
from __future__ import annotations

import numpy as np

from ...base import dtypes
from ...base.errors import ExecutionError
from .._inputs import input_value
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, Sample, register


def _reg(name, kernel, samples, attrs, doc):
    register(paddle_opdef(name, kernel, samples=samples, attrs_handled=tuple(attrs), doc=doc))


# --------------------------------------------------------------------------
# hash (XXH64)
# --------------------------------------------------------------------------
_P1, _P2, _P3 = np.uint64(11400714785074694791), np.uint64(14029467366897019727), np.uint64(1609587929392839161)
_P4, _P5 = np.uint64(9650029242287828579), np.uint64(2870177450012600261)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def xxh64(data: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """XXH64 of each row of a uint8 matrix `[n, L]` under each seed: `[n, len(seeds)]` uint64."""
    n, length = data.shape
    seed = np.asarray(seeds, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        p = 0
        if length >= 32:
            v = [np.broadcast_to(seed + _P1 + _P2, (n, seed.shape[1])).copy(), seed + _P2 + np.zeros((n, 1), np.uint64),
                 seed + np.zeros((n, 1), np.uint64), seed - _P1 + np.zeros((n, 1), np.uint64)]
            stripes = length // 32
            lanes = np.ascontiguousarray(data[:, : stripes * 32]).view("<u8").reshape(n, stripes, 4)
            for s in range(stripes):  # sequential by definition of the hash
                for k in range(4):
                    v[k] = _round(v[k], lanes[:, s, k][:, None])
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            for k in range(4):
                h = (h ^ _round(np.uint64(0), v[k])) * _P1 + _P4
            p = stripes * 32
        else:
            h = seed + _P5 + np.zeros((n, 1), np.uint64)
        h = h + np.uint64(length)
        while p + 8 <= length:
            k1 = np.ascontiguousarray(data[:, p:p + 8]).view("<u8")
            h = _rotl(h ^ _round(np.uint64(0), k1), 27) * _P1 + _P4
            p += 8
        if p + 4 <= length:
            k4 = np.ascontiguousarray(data[:, p:p + 4]).view("<u4").astype(np.uint64)
            h = _rotl(h ^ (k4 * _P1), 23) * _P2 + _P3
            p += 4
        while p < length:
            h = _rotl(h ^ (data[:, p:p + 1].astype(np.uint64) * _P5), 11) * _P1
            p += 1
        h = (h ^ (h >> np.uint64(33))) * _P2
        h = (h ^ (h >> np.uint64(29))) * _P3
        return h ^ (h >> np.uint64(32))


def _hash(c: Call):
    x = input_value(c, "X")
    if x.dtype not in (np.int32, np.int64):
        raise ExecutionError(f"hash: X is {x.dtype}; Paddle's CPU kernel takes int32 or int64")
    if x.ndim != 2:
        raise ExecutionError(f"hash: X must be 2-D (it is {list(x.shape)}): Paddle hashes only the first dims[0] "
                             "rows of the last dim and leaves the rest of a higher-rank output unset")
    num_hash, mod_by = int(c.attr("num_hash", 1)), int(c.attr("mod_by", 100000))
    if num_hash < 1 or mod_by <= 0:
        raise ExecutionError(f"hash: num_hash ({num_hash}) and mod_by ({mod_by}) must be positive")
    rows = np.ascontiguousarray(x.astype(x.dtype.newbyteorder("<"), copy=False)).view(np.uint8)
    h = xxh64(rows.reshape(x.shape[0], -1), np.arange(num_hash)) % np.uint64(mod_by)
    return {"Out": h.astype(x.dtype).reshape(x.shape[0], num_hash, 1), LOD_KEY: {"Out": c.lod("X")}}


def _hash_samples(rng):
    x64 = rng.integers(-1000, 100000, (5, 6)).astype(np.int64)   # 48 bytes: a stripe, then 8-byte lanes
    x32 = rng.integers(0, 1 << 30, (4, 3)).astype(np.int32)      # 12 bytes: an 8-byte lane, then 4
    x5 = rng.integers(0, 50, (3, 5)).astype(np.int32)            # 20 bytes
    return [Sample({"X": [x64]}, {"num_hash": 3, "mod_by": 10000}),
            Sample({"X": [x32]}, {"num_hash": 2, "mod_by": 7}, note="int32"),
            Sample({"X": [x5]}, {"num_hash": 1, "mod_by": 100000}, note="one hash, 20 bytes"),
            Sample({"X": [rng.integers(0, 9, (2, 9)).astype(np.int64)]}, {"num_hash": 4, "mod_by": 1 << 40},
                   note="72 bytes, large mod")]


_reg("hash", _hash, _hash_samples, ("num_hash", "mod_by"),
     "Out[r, k] = XXH64(bytes of row r, seed k) % mod_by")


# --------------------------------------------------------------------------
# fusion_seqpool_cvm_concat
# --------------------------------------------------------------------------
def _seqpool_cvm_concat(c: Call):
    xs = [np.asarray(v) for v in c.xs("X")]
    if not xs:
        raise ExecutionError("fusion_seqpool_cvm_concat: no X")
    pooltype = c.attr("pooltype", "SUM")
    if pooltype not in ("SUM", "AVERAGE", "SQRT"):
        raise c.unsupported("pooltype", pooltype, "Paddle's fused kernel pools with SUM, AVERAGE or SQRT")
    if int(c.attr("axis", 1)) != 1:
        raise c.unsupported("axis", c.attr("axis"), "Paddle concatenates along axis 1 only")
    outs, batch = [], None
    for i, x in enumerate(xs):
        lod = c.lod("X", i)
        if not lod:
            raise ExecutionError(f"fusion_seqpool_cvm_concat: X[{i}] has no LoD (docs/lod.md)")
        off = np.asarray(lod[0], dtype=np.int64)
        if off[-1] > x.shape[0]:
            raise ExecutionError(f"fusion_seqpool_cvm_concat: the LoD of X[{i}] ends past its {x.shape[0]} rows")
        x2 = x.reshape(x.shape[0], -1)
        if batch is None:
            batch, w = len(off) - 1, x2.shape[1]
        if x2.shape[1] != w or len(off) - 1 != batch:
            raise ExecutionError("fusion_seqpool_cvm_concat: every X needs the same width and batch size")
        if w < 2:
            raise ExecutionError("fusion_seqpool_cvm_concat: the CVM transform needs at least 2 columns")
        lens = np.diff(off)
        if np.any(lens == 0):
            raise ExecutionError(f"fusion_seqpool_cvm_concat: X[{i}] has an empty sequence, which Paddle's "
                                 "kernel pools from the next sequence's rows")
        sums = np.add.reduceat(x2[: off[-1]], off[:-1], axis=0) if batch else np.zeros((0, w), x.dtype)
        if pooltype == "AVERAGE":   # Paddle scales by 1 / h
            sums = sums * (x.dtype.type(1) / lens.astype(x.dtype))[:, None]
        elif pooltype == "SQRT":
            sums = sums * (x.dtype.type(1) / np.sqrt(lens.astype(x.dtype)))[:, None]
        sums = sums.astype(x.dtype)
        c0 = np.log(sums[:, 0] + 1)
        sums[:, 1] = np.log(sums[:, 1] + 1) - c0
        sums[:, 0] = c0
        outs.append(sums)
    out = np.concatenate(outs, axis=1)
    return {"Out": out, LOD_KEY: {"Out": [list(range(batch + 1))]}}


def _seqpool_cvm_samples(rng):
    def s(pool, lods, w=4, note=""):
        xs = [rng.uniform(0.1, 2.0, (lod[-1], w)) for lod in lods]
        return Sample({"X": xs, "CVM": [rng.uniform(0.1, 1.0, (len(lods[0]) - 1, 2))]},
                      {"pooltype": pool, "use_cvm": True, "axis": 1}, lod={"X": [[lod] for lod in lods]},
                      note=note)
    return [s("SUM", [[0, 2, 5], [0, 1, 3]]), s("AVERAGE", [[0, 3, 4, 6], [0, 1, 2, 5], [0, 2, 4, 5]], note="3 X"),
            s("SQRT", [[0, 1, 4]], w=3, note="one X")]


_reg("fusion_seqpool_cvm_concat", _seqpool_cvm_concat, _seqpool_cvm_samples, ("pooltype", "use_cvm", "axis"),
     "Out = concat over X_i of cvm(seqpool(X_i)) (cvm: log(s0 + 1), log(s1 + 1) - log(s0 + 1))")


# --------------------------------------------------------------------------
# Paddle's vector activations (funcs/cpu_vec.h VecActivations)
# --------------------------------------------------------------------------
def _vsigmoid(a):
    return 1 / (1 + np.exp(-np.clip(a, a.dtype.type(-40.0), a.dtype.type(13.0))))


_VACTS = {"sigmoid": _vsigmoid, "tanh": lambda a: 2 * _vsigmoid(2 * a) - 1,
          "relu": lambda a: np.maximum(a, a.dtype.type(0)), "identity": lambda a: a}


def _acts(c: Call):
    out = []
    for name, default in (("gate_activation", "sigmoid"), ("cell_activation", "tanh"),
                          ("candidate_activation", "tanh")):
        v = c.attr(name, default)
        if v not in _VACTS:
            raise c.unsupported(name, v, "Paddle's vector activations are sigmoid, tanh, relu, identity")
        out.append(_VACTS[v])
    if out[1] is _VACTS["identity"]:
        out[1] = None   # Paddle's vec_identity writes nothing: see the module doc
    return out


def _float2d(c: Call, slot: str, shape: tuple | None = None, dtype=None) -> np.ndarray:
    a = input_value(c, slot)
    if a.dtype.kind != "f" or (dtype is not None and a.dtype != dtype):
        raise ExecutionError(f"{c.op_type}: '{slot}' is {a.dtype}; expected {dtype or 'a float tensor'}")
    if shape is not None and a.size != int(np.prod(shape)):
        raise ExecutionError(f"{c.op_type}: '{slot}' must be {list(shape)}, it is {list(a.shape)}")
    return a.reshape(shape) if shape is not None else a


def _one_level(c: Call, slot: str, rows: int) -> np.ndarray:
    lod = c.lod(slot)
    if not lod or len(lod) != 1:
        raise ExecutionError(f"{c.op_type}: {slot} needs a 1-level LoD (docs/lod.md), it has "
                             f"{len(lod) if lod else 0} levels")
    off = np.asarray(lod[0], dtype=np.int64)
    if off[-1] != rows:
        raise ExecutionError(f"{c.op_type}: the LoD of {slot} ends at {off[-1]}, it has {rows} rows")
    return off


# --------------------------------------------------------------------------
# fused_embedding_fc_lstm
# --------------------------------------------------------------------------
def _embedding_fc_lstm(c: Call):
    ids = input_value(c, "Ids")
    if ids.dtype != np.int64:
        raise ExecutionError(f"fused_embedding_fc_lstm: Ids is {ids.dtype}; Paddle reads int64")
    emb = _float2d(c, "Embeddings")
    dt = emb.dtype
    wh = _float2d(c, "WeightH", dtype=dt)
    if emb.ndim != 2 or wh.ndim != 2 or wh.shape[1] != 4 * wh.shape[0] or emb.shape[1] != wh.shape[1]:
        raise ExecutionError(f"fused_embedding_fc_lstm: WeightH must be [D, 4D] and Embeddings [V, 4D]; they "
                             f"are {list(wh.shape)} and {list(emb.shape)}")
    d = wh.shape[0]
    peep = bool(c.attr("use_peepholes", True))
    bias = _float2d(c, "Bias", dtype=dt).reshape(-1)
    if bias.size < (7 if peep else 4) * d:
        raise ExecutionError(f"fused_embedding_fc_lstm: Bias must hold {(7 if peep else 4) * d} values")
    flat = ids.reshape(-1)
    if np.any((flat < 0) | (flat >= emb.shape[0])):
        raise ExecutionError(f"fused_embedding_fc_lstm: Ids must be in [0, {emb.shape[0]})")
    off = _one_level(c, "Ids", ids.shape[0])
    if flat.size != ids.shape[0]:
        raise ExecutionError("fused_embedding_fc_lstm: Ids must be [T, 1]")
    xx = emb[flat]
    n = len(off) - 1
    h0 = _float2d(c, "H0", (n, d), dt) if c.has("H0") else None
    c0 = _float2d(c, "C0", (n, d), dt) if c.has("C0") else None
    if h0 is not None and c0 is None:
        raise ExecutionError("fused_embedding_fc_lstm: H0 is given without C0")
    wci, wcf, wco = (bias[4 * d: 7 * d].reshape(3, d) if peep else (None, None, None))
    gate, cell_act, cand = _acts(c)
    lens = np.diff(off)
    reverse = bool(c.attr("is_reverse", False))
    hidden = np.zeros((ids.shape[0], d), dt)
    cell = np.zeros_like(hidden)
    h_prev = h0.copy() if h0 is not None else np.zeros((n, d), dt)   # never write into the inputs
    c_prev = c0.copy() if h0 is not None else np.zeros((n, d), dt)
    for step in range(int(lens.max(initial=0))):   # the recurrence, all sequences at once
        live = np.nonzero(lens > step)[0]
        rows = off[live] + (lens[live] - 1 - step if reverse else step)
        g = xx[rows]
        first = step == 0 and h0 is None
        if not first:
            g = g + h_prev[live] @ wh
        gc = cand(g[:, :d])
        gi, gf, go = g[:, d:2 * d], g[:, 2 * d:3 * d], g[:, 3 * d:]
        if first:
            ct = gate(gi) * gc
            kept = gf                       # the forget slot, never activated on a first step
        else:
            if peep:
                gi, gf = gi + wci * c_prev[live], gf + wcf * c_prev[live]
            kept = c_prev[live] * gate(gf)
            ct = gc * gate(gi) + kept
        if peep:
            go = go + wco * ct
        ht = (kept if cell_act is None else cell_act(ct)) * gate(go)
        hidden[rows], cell[rows] = ht, ct
        h_prev[live], c_prev[live] = ht, ct
    lod = c.lod("Ids")
    return {"Hidden": hidden, "Cell": cell, "XX": xx, LOD_KEY: {"Hidden": lod, "Cell": lod, "XX": lod}}


def _embedding_fc_lstm_samples(rng):
    outs = {"Hidden": 1, "Cell": 1, "XX": 1, "BatchedInput": 1, "BatchedHidden": 1, "BatchedCell": 1,
            "ReorderedH0": 1, "ReorderedC0": 1}

    def s(lod, d=3, v=7, peep=False, h0=True, note="", **attrs):
        t, n = lod[-1], len(lod) - 1
        ins = {"Ids": [rng.integers(0, v, (t, 1)).astype(np.int64)],
               "Embeddings": [rng.uniform(-1, 1, (v, 4 * d))], "WeightH": [rng.uniform(-0.8, 0.8, (d, 4 * d))],
               "Bias": [rng.uniform(-0.5, 0.5, (1, (7 if peep else 4) * d))]}
        if h0:
            ins["H0"], ins["C0"] = [rng.uniform(-1, 1, (n, d))], [rng.uniform(-1, 1, (n, d))]
        a = {"use_peepholes": peep, "is_reverse": False, "use_seq": True, "gate_activation": "sigmoid",
             "cell_activation": "tanh", "candidate_activation": "tanh", **attrs}
        return Sample(ins, a, lod={"Ids": [lod]}, outputs=outs, note=note)
    return [s([0, 2, 5, 6], note="use_seq, h0"), s([0, 3, 4], h0=False, is_reverse=True, note="reverse, zero state"),
            s([0, 2, 5, 6], use_seq=False, note="batch path"), s([0, 2, 5], peep=True, note="peepholes"),
            s([0, 3, 4], peep=True, h0=False, use_seq=False, is_reverse=True, note="peepholes, zero state, batch"),
            s([0, 4], gate_activation="relu", cell_activation="identity", candidate_activation="sigmoid",
              note="other activations"),
            s([0, 2, 5], h0=False, peep=True, cell_activation="identity", note="identity cell, zero state"),
            s([0, 3, 5], h0=False, use_seq=False, cell_activation="identity", is_reverse=True,
              note="identity cell, zero state, batch path")]


_reg("fused_embedding_fc_lstm", _embedding_fc_lstm, _embedding_fc_lstm_samples,
     ("use_peepholes", "is_reverse", "use_seq", "gate_activation", "cell_activation", "candidate_activation"),
     "Hidden, Cell = LSTM over LoD sequences of Embeddings[Ids] (fc folded into the embeddings)")


# --------------------------------------------------------------------------
# attention_lstm
# --------------------------------------------------------------------------
def _attention_lstm(c: Call):
    x = _float2d(c, "X")
    dt = x.dtype
    if x.ndim != 2:
        raise ExecutionError(f"attention_lstm: X must be [T, M], it is {list(x.shape)}")
    t, m = x.shape
    w = _float2d(c, "LSTMWeight", dtype=dt)
    if w.ndim != 2 or w.shape[1] % 4 or w.shape[0] != w.shape[1] // 4 + m:
        raise ExecutionError(f"attention_lstm: LSTMWeight must be [D + {m}, 4D], it is {list(w.shape)}")
    d = w.shape[1] // 4
    b = _float2d(c, "LSTMBias", (4 * d,), dt)
    aw = _float2d(c, "AttentionWeight", (m + d,), dt)
    ab = _float2d(c, "AttentionBias", (1,), dt)[0] if c.has("AttentionBias") else None
    sc = _float2d(c, "AttentionScalar", (1,), dt)[0] if c.has("AttentionScalar") else None
    sb = _float2d(c, "AttentionScalarBias", (1,), dt)[0] if c.has("AttentionScalarBias") else None
    off = _one_level(c, "X", t)
    n = len(off) - 1
    c0 = _float2d(c, "C0", (n, d), dt)
    h0 = _float2d(c, "H0", (n, d), dt) if c.has("H0") else None
    gate, cell_act, cand = _acts(c)
    zero = dt.type(0)
    atted = x @ aw[:m]
    if ab is not None:
        atted = atted + ab
    hidden, cell = np.zeros((t, d), dt), np.zeros((t, d), dt)
    for s in range(n):   # each sequence, then each step: the recurrence and its attention are sequential
        xs, ax = x[off[s]:off[s + 1]], atted[off[s]:off[s + 1]]
        c_prev, h_prev = c0[s], None if h0 is None else h0[s]
        for k in range(int(off[s + 1] - off[s])):
            fc = np.maximum(ax + c_prev @ aw[m:], zero)
            if sc is not None:
                fc = fc * sc
                fc = np.maximum(fc + sb if sb is not None else fc, zero)
            e = np.exp(fc - fc.max())
            att = e * (dt.type(1) / e.sum())
            g = (att @ xs) @ w[d:]
            if h_prev is not None:
                g = g + h_prev @ w[:d]
            g = g + b
            f, i, o = gate(g[:d]), gate(g[d:2 * d]), gate(g[2 * d:3 * d])
            kept = f * c_prev
            ct = kept + i * cand(g[3 * d:])
            ht = (kept if cell_act is None else cell_act(ct)) * o
            r = off[s] + k
            hidden[r], cell[r] = ht, ct
            c_prev, h_prev = ct, ht
    lod = c.lod("X")
    return {"Hidden": hidden, "Cell": cell, "AttentionedX": atted.reshape(t, 1),
            LOD_KEY: {"Hidden": lod, "Cell": lod, "AttentionedX": None}}


def _attention_lstm_samples(rng):
    outs = {"Hidden": 1, "Cell": 1, "AttentionedX": 1, "AttentionFCOut": 1, "LSTMX": 1, "LSTMOUT": 1}

    def s(lod, m=4, d=3, h0=True, scalar=True, scalar_bias=True, bias=True, note="", **attrs):
        t, n = lod[-1], len(lod) - 1
        ins = {"X": [rng.uniform(-1, 1, (t, m))], "C0": [rng.uniform(-1, 1, (n, d))],
               "AttentionWeight": [rng.uniform(-1, 1, (m + d, 1))],
               "LSTMWeight": [rng.uniform(-0.8, 0.8, (d + m, 4 * d))], "LSTMBias": [rng.uniform(-0.5, 0.5, (1, 4 * d))]}
        if h0:
            ins["H0"] = [rng.uniform(-1, 1, (n, d))]
        if bias:
            ins["AttentionBias"] = [rng.uniform(0.2, 0.5, (1, 1))]
        if scalar:
            ins["AttentionScalar"] = [rng.uniform(0.5, 1.5, (1, 1))]
        if scalar_bias:
            ins["AttentionScalarBias"] = [rng.uniform(-0.2, 0.2, (1, 1))]
        a = {"gate_activation": "sigmoid", "cell_activation": "tanh", "candidate_activation": "tanh", **attrs}
        return Sample(ins, a, lod={"X": [lod]}, outputs=outs, note=note)
    return [s([0, 2, 5]), s([0, 3, 4, 6], h0=False, note="no H0"),
            s([0, 4], scalar=False, scalar_bias=False, bias=False, note="no attention bias or scalar"),
            s([0, 1, 3], scalar_bias=False, gate_activation="relu", cell_activation="identity",
              candidate_activation="sigmoid", note="scalar without bias, other activations"),
            s([0, 2, 5], h0=False, cell_activation="identity", note="identity cell, no H0")]


_reg("attention_lstm", _attention_lstm, _attention_lstm_samples,
     ("gate_activation", "cell_activation", "candidate_activation"),
     "Hidden, Cell = LSTM whose input at each step is the attention-pooled sequence of X")


# --------------------------------------------------------------------------
# coalesce_tensor
# --------------------------------------------------------------------------
def _coalesce_tensor(c: Call):
    ins = c.xs("Input")
    if not ins or any(v is None for v in ins):
        raise ExecutionError("coalesce_tensor: every Input needs a value (uninitialised inputs, sized by "
                             "concated_shapes, are not supported)")
    dt = np.dtype(dtypes.to_numpy(int(c.attr("dtype"))))
    if dt not in (np.int32, np.float32, np.float64):
        raise c.unsupported("dtype", c.attr("dtype"), "Paddle's CPU kernel takes int32, float32, float64")
    ins = [np.asarray(v) for v in ins]
    if any(v.dtype != dt for v in ins):
        raise ExecutionError(f"coalesce_tensor: every Input must be {dt} (the dtype attr)")
    if any(v.size == 0 for v in ins):
        raise ExecutionError("coalesce_tensor: an Input has no elements, which Paddle refuses")
    size = int(c.attr("user_defined_size_of_dtype", -1))
    size = dt.itemsize if size == -1 else size
    if size <= 0:
        raise ExecutionError(f"coalesce_tensor: user_defined_size_of_dtype {size} must be positive")
    align = int(c.attr("align_size", -1))
    align = align if align > 0 else 4096   # Paddle's CpuMinChunkSize
    use_align = bool(c.attr("use_align", True))
    lens = np.array([v.size for v in ins], dtype=np.int64)
    if use_align:
        lens = -(-lens * size // align) * align // size
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    fused = np.zeros(int(lens.sum()), dt)
    if bool(c.attr("copy_data", False)):
        for v, s0 in zip(ins, starts):
            fused[s0:s0 + v.size] = v.reshape(-1)
    elif bool(c.attr("set_constant", False)):
        fused[:] = dt.type(float(c.attr("constant", 0.0)))
    elif bool(c.attr("persist_output", False)):
        raise c.unsupported("persist_output", True, "it copies the outputs' previous values, which the kernel "
                                                    "does not see; give copy_data when Output aliases Input")
    outs = [fused[s0:s0 + v.size].reshape(v.shape).copy() for v, s0 in zip(ins, starts)]
    return {"Output": outs, "FusedOutput": fused}


def _coalesce_samples(rng):
    outs = {"Output": 3, "FusedOutput": 1}
    xs = [rng.standard_normal(shape).astype(np.float32) for shape in ((2, 3), (5,), (3, 1, 2))]
    base = {"dtype": dtypes.VarType.FP32, "copy_data": True, "use_align": True}
    return [Sample({"Input": xs}, base, outputs=outs, note="copy, aligned to 4096 bytes"),
            Sample({"Input": xs}, {**base, "align_size": 16}, outputs=outs, note="align_size 16"),
            Sample({"Input": xs}, {**base, "use_align": False}, outputs=outs, note="packed"),
            Sample({"Input": xs}, {**base, "copy_data": False, "set_constant": True, "constant": 1.5,
                                   "align_size": 8}, outputs=outs, note="set_constant")]


_reg("coalesce_tensor", _coalesce_tensor, _coalesce_samples,
     ("dtype", "copy_data", "set_constant", "persist_output", "constant", "use_align", "align_size",
      "user_defined_size_of_dtype", "concated_shapes", "concated_ranks"),
     "FusedOutput = the Inputs in one buffer at aligned offsets; Output[i] = its slice")
