"""weight_quantize (Paddle 3.3.1's CPU kernel: float16 / bfloat16 weights; only
float16 here, NumPy has no bfloat16): a weight `x [m, n]` quantised per
column (`group_size` -1) or per group of `group_size` rows (64 or 128), as
the weight-only GEMMs of CUTLASS want it laid out for the GPU `arch`.

* scale: per column `max|x| / bound` (bound 127 for int8, 7 for int4), in
  float32 then cast to x's dtype (float32 for llm.int8); per group the
  maximum over the group's rows. q = round-half-away(x / scale) clipped to
  +-bound (a 0 / 0 gives 127 for int8, as C's float min/max of a NaN do,
  and -7 for int4, which clips int(NaN) = INT_MIN); int4 packs two
  columns per byte, the even one in the low nibble.
* llm.int8: out = q transposed, `[n, m]`. With arch 70 Paddle declares q's
  buffer `[n, m]` before transposing it and reads past it unless m == n
  (half its output is other memory when m < n; it crashes or hangs when
  m > n): refused here for a non-square x.
* weight_only_int8 / int4, arch 75/80/86/89/90: rows permuted in blocks of
  16 (int8) / 32 (int4) for the mixed GEMM, transposed (element-wise for
  int4), its 32-bit words interleaved column-major (2 / 4 columns per tile of
  64 rows), then each value biased to unsigned (+128 / +8) and the values
  in each 32-bit word reordered (bytes 0 2 1 3; nibbles 0 2 4 6 1 3 5 7).
  Out `[n, m]` int8 (`[n / 2, m]` for int4).
* arch 70: only the bias and word reordering, on q as it is (row-major
  `[m, n]`), read as the `[n, m]` (int4: `[n / 2, m]`) output.
The tile code assumes m a multiple of 64 and n a multiple of 4 / 8 per
word (the shapes real weights have); other shapes are refused.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._inputs import input_value
from ..paddle_table import paddle_opdef
from ..registry import Call, register

_ARCHS = (70, 75, 80, 86, 89, 90)


def _round_away(a: np.ndarray) -> np.ndarray:
    return np.sign(a) * np.floor(np.abs(a) + np.float32(0.5))


def _clip(s: np.ndarray, bound: float) -> np.ndarray:
    """C's max(-b, min(b, s)), NaN included (min(b, NaN) is b)."""
    t = np.where(s < bound, s, np.float32(bound))
    return np.where(-bound < t, t, np.float32(-bound))


def _quant(x: np.ndarray, bits: int, group: int, scale_dtype) -> tuple[np.ndarray, np.ndarray]:
    m, n = x.shape
    bound = np.float32(127.0 if bits == 8 else 7.0)
    ax = np.abs(x).astype(np.float32)
    if group == -1:
        mx = np.maximum(ax.max(axis=0), x[0].astype(np.float32))   # Paddle starts from x[0, i] itself
        scale = (mx / bound).astype(scale_dtype)
        per_elem = np.broadcast_to(scale.astype(np.float32), (m, n))
    else:
        blocks = -(-m // group)
        pad = np.zeros((blocks * group, n), np.float32)
        pad[:m] = ax
        scale = (pad.reshape(blocks, group, n).max(axis=1) / bound).astype(scale_dtype)
        per_elem = np.repeat(scale.astype(np.float32), group, axis=0)[:m]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = _round_away(x.astype(np.float32) / per_elem)
    if bits == 4:   # Paddle clips int(r): a NaN (0 / 0) converts to INT_MIN on x86, so -7
        r = np.where(np.isnan(r), np.float32(-7), r)
    q = _clip(r, bound).astype(np.int8)
    if bits == 4:   # two columns a byte, the even one low
        q = ((q[:, 0::2] & 0x0F) | ((q[:, 1::2] & 0x0F) << 4)).astype(np.int8)
    return q, scale


def _bias_interleave(q: np.ndarray, bits: int) -> np.ndarray:
    """add_bias_and_interleave_inplace over a flat int8 buffer."""
    b = q.reshape(-1).astype(np.int16)
    if bits == 8:
        out = (b + 128).astype(np.uint8).reshape(-1, 4)[:, [0, 2, 1, 3]]
        return out.reshape(-1).view(np.int8)
    lo = ((b << 4).astype(np.int8) >> 4) + 8            # sign-extended low nibble + 8
    hi = (b.astype(np.int8) >> 4) + 8
    nib = np.stack([lo, hi], axis=1).reshape(-1, 8).astype(np.uint32)   # 8 nibbles per 32-bit word
    nib = nib[:, [0, 2, 4, 6, 1, 3, 5, 7]]
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    return packed.reshape(-1).view(np.int8)


def _mixed_gemm_layout(q: np.ndarray, bits: int, m: int, n: int) -> np.ndarray:
    """permute_B_rows_for_mixed_gemm, subbyte_transpose, interleave_column_major."""
    rows = 16 if bits == 8 else 32
    per_reg = 32 // bits
    t = np.arange(rows)
    read = 8 * ((t % per_reg) // 2) + t % 2 + 2 * (t // per_reg)
    q = q.reshape(m // rows, rows, -1)[:, read, :].reshape(m, -1)
    if bits == 8:
        tr = np.ascontiguousarray(q.T)                                         # [n, m]
    else:
        vals = np.stack([q & 0x0F, (q >> 4) & 0x0F], axis=2).reshape(m, n)    # nibbles, column order
        vt = vals.T.astype(np.uint8)                                           # [n, m]
        tr = (vt[:, 0::2] | (vt[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    words = np.ascontiguousarray(tr).view(np.uint32).reshape(n, -1)           # [n, m / per_reg]
    n_vec = words.shape[1]
    vrpt = 64 // per_reg
    inter = 128 * 8 // bits // 64
    c = np.arange(n)[:, None]
    v = np.arange(n_vec)[None, :]
    dst = (c // inter) * n_vec * inter + inter * (v - v % vrpt) + vrpt * (c % inter) + v % vrpt
    out = np.empty(n * n_vec, np.uint32)
    out[dst.reshape(-1)] = words.reshape(-1)
    return out.view(np.int8)


def _weight_quantize(c: Call):
    x = input_value(c, "x")
    if x.dtype != np.float16:
        raise ExecutionError(f"weight_quantize: x is {x.dtype}; Paddle's CPU kernel takes float16 (or bfloat16, "
                             "which NumPy lacks)")
    if x.ndim != 2:
        raise ExecutionError(f"weight_quantize: x must be 2-D, it is {list(x.shape)}")
    algo, arch, group = c.attr("algo", "weight_only_int8"), int(c.attr("arch", 80)), int(c.attr("group_size", -1))
    if algo not in ("weight_only_int8", "weight_only_int4", "llm.int8"):
        raise c.unsupported("algo", algo, "Paddle's CPU kernel has weight_only_int8, weight_only_int4, llm.int8")
    if arch not in _ARCHS:
        raise c.unsupported("arch", arch, f"Paddle supports {', '.join(map(str, _ARCHS))}")
    if group not in (-1, 64, 128):
        raise c.unsupported("group_size", group, "Paddle takes -1, 64 or 128")
    m, n = x.shape
    bits = 4 if algo == "weight_only_int4" else 8
    if m % 64 or n % (32 // bits * (2 if bits == 8 else 4)):
        raise ExecutionError(f"weight_quantize: x {[m, n]}: Paddle's tile code needs rows a multiple of 64 and "
                             f"columns of {32 // bits * (2 if bits == 8 else 4)} (others read past the buffer)")
    q, scale = _quant(x, bits, group, np.float32 if algo == "llm.int8" else x.dtype)
    if algo == "llm.int8":
        if arch == 70 and m != n:
            raise ExecutionError(f"weight_quantize: llm.int8 with arch 70 on a non-square x {[m, n]}: Paddle 3.3.1 "
                                 "transposes q's buffer under swapped dims and reads past it (half of its output is "
                                 "other memory when m < n; a crash or hang when m > n)")
        out = np.ascontiguousarray(q.T)
    elif arch == 70:
        out = _bias_interleave(q, bits).reshape(n * bits // 8, m)
    else:
        out = _bias_interleave(_mixed_gemm_layout(q, bits, m, n), bits).reshape(n * bits // 8, m)
    return {"out": out, "scale": scale}


register(paddle_opdef("weight_quantize", _weight_quantize, attrs_handled=("algo", "arch", "group_size"),
                      doc="out, scale = x quantised to int8 / int4 per column or group, laid out for the GPU's "
                          "weight-only GEMM (float16 x only)"))
