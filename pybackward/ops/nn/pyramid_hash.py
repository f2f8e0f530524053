"""pyramid_hash: hashed n-gram embeddings of int32 id sequences (XXH32), with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, Sample, register


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
