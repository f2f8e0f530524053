"""Fake quantization (quantization-aware training) and dequantization ops.

Paddle's CPU kernels (phi funcs/fake_quantize_functor.cc, impl/
fake_quantize_kernel_impl.h, fake_dequantize_functor.cc; checked against
Paddle 3.3.1 by testdata/kernels). Paddle registers the fake-quant kernels
for float32 only; the arithmetic here runs in X's dtype, in Paddle's order:

* `bin_cnt = 2^(bit_length-1) - 1`; the scale `s` is max|x| (per tensor, or
  per channel along `quant_axis` 0 or 1), `inv_s = 1/s`, or `1/(s + 1e-6)`
  when `s <= 1e-30`;
* round_type 0 (ties to even): `q = round_even((bin_cnt * inv_s) * x)`
  clipped to `[-bin_cnt - 1, bin_cnt]`; round_type 1 (ties away from zero):
  `q = round_away((bin_cnt * inv_s) * clip(x, -s, s))`;
* the quantize-dequantize ops give `(q * s) / bin_cnt`;
* moving average: `state = rate*state + 1`, `accum = rate*accum + max|x|`,
  `scale = accum / state`; with `is_test` the input scale is used and the
  state outputs are left unwritten (empty here);
* fake_quantize_range_abs_max keeps a window of scales in OutScales, whose
  previous contents Paddle reads from the var it holds between runs; a
  kernel here sees no such state, so the window starts from zeros (the
  scale then is max(InScale, max|x|) - Paddle's too whenever InScale is
  below max|x| or the window was fresh).

The quantize-dequantize ops' grads are straight-through: `X@GRAD = Out@GRAD`
(Paddle's templates; not the derivative of the rounding, so these ops are
exempt from finite differences: tests/ops/test_registry.py NO_FD).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# Shared arithmetic
# --------------------------------------------------------------------------
def _bin_cnt(c: Call, name: str = "bit_length") -> int:
    bits = int(c.attr(name, 8))
    if not 1 < bits <= 16:
        raise c.unsupported(name, bits, "expected 2..16 bits")
    return 2 ** (bits - 1) - 1


def _round_type(c: Call) -> int:
    rt = int(c.attr("round_type", 1))
    if rt not in (0, 1):
        raise c.unsupported("round_type", rt, "0 (ties to even) or 1 (ties away from zero)")
    return rt


def _round_away(v):
    return np.copysign(np.floor(np.abs(v) + v.dtype.type(0.5)), v)


def _inverse(s):
    s = np.asarray(s)
    t = s.dtype.type
    return np.where(s <= t(1e-30), t(1) / (s + t(1e-6)), t(1) / np.where(s == 0, t(1), s)).astype(s.dtype)


def _quant(x, s, bin_cnt: int, rt: int):
    """The integer levels (in x's dtype) of x under scale s (broadcastable)."""
    t = x.dtype.type
    s = np.asarray(s, x.dtype)
    k = (t(bin_cnt) * _inverse(s)).astype(x.dtype)
    if rt == 0:
        return np.clip(np.round(k * x), t(-bin_cnt - 1), t(bin_cnt)).astype(x.dtype)
    return _round_away((k * np.clip(x, -s, s)).astype(x.dtype))


def _dequant(q, s, bin_cnt: int):
    return ((q * np.asarray(s, q.dtype)) / q.dtype.type(bin_cnt)).astype(q.dtype)


def _abs_max(x) -> np.ndarray:
    return np.array([np.max(np.abs(x)) if x.size else 0], x.dtype)


def _channel_axis(c: Call, x) -> int:
    axis = int(c.attr("quant_axis", 0))
    if axis not in (0, 1) or x.ndim <= axis:
        raise c.unsupported("quant_axis", axis, f"0 or 1 within X's rank {x.ndim}")
    return axis


def _channel_abs_max(x, axis: int) -> np.ndarray:
    rest = tuple(d for d in range(x.ndim) if d != axis)
    return np.max(np.abs(x), axis=rest) if rest else np.abs(x)


def _on_axis(s, x, axis: int):
    shape = [1] * x.ndim
    shape[axis] = -1
    return np.asarray(s, x.dtype).reshape(shape)


def _x(c: Call):
    x = np.asarray(c.x("X"))
    if x.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: X must be floating point, got {x.dtype}")
    return x


def _one(c: Call, slot: str, dtype) -> np.ndarray:
    v = c.x(slot)
    if v is None:
        raise ExecutionError(f"op {c.op_type}: input {slot} is required when is_test is false")
    v = np.asarray(v, dtype).reshape(-1)
    if v.size < 1:
        raise ExecutionError(f"op {c.op_type}: input {slot} is empty")
    return v[:1]


def _moving_average(c: Call, x, rate=None):
    """(OutState, OutAccum, OutScale) after folding max|x| into the averages."""
    t = x.dtype.type
    rate = t(c.attr("moving_rate", 0.9) if rate is None else rate)
    state = (rate * _one(c, "InState", x.dtype) + t(1)).astype(x.dtype)
    accum = (rate * _one(c, "InAccum", x.dtype) + _abs_max(x)).astype(x.dtype)
    return state, accum, (accum / state).astype(x.dtype)


def _straight_through(c: Call):
    return {"X@GRAD": np.array(c.x("Out@GRAD"), copy=True)} if c.wants("X@GRAD") else {}


# --------------------------------------------------------------------------
# Abs-max fake quantization (and quantize-dequantize)
# --------------------------------------------------------------------------
def _fq_abs_max(dequant: bool):
    def kernel(c: Call):
        x = _x(c)
        b, rt = _bin_cnt(c), _round_type(c)
        s = _abs_max(x)
        q = _quant(x, s[0], b, rt)
        return {"Out": _dequant(q, s[0], b) if dequant else q, "OutScale": s}
    return kernel


def _fq_channel(dequant: bool):
    def kernel(c: Call):
        x = _x(c)
        b, rt, axis = _bin_cnt(c), _round_type(c), _channel_axis(c, x)
        if not dequant and bool(c.attr("is_test", False)):
            raise c.unsupported("is_test", True, "Paddle then reads OutScale as an input it "
                                                 "never declares; run with is_test=false")
        s = _channel_abs_max(x, axis).astype(x.dtype)
        sb = _on_axis(s, x, axis)
        q = _quant(x, sb, b, rt)
        return {"Out": _dequant(q, sb, b) if dequant else q, "OutScale": s}
    return kernel


def _fq_moving_average(dequant: bool):
    def kernel(c: Call):
        x = _x(c)
        b, rt = _bin_cnt(c), _round_type(c)
        if bool(c.attr("is_test", False)):
            s = _one(c, "InScale", x.dtype)
            q = _quant(x, s[0], b, rt)
            return {"Out": _dequant(q, s[0], b) if dequant else q}
        state, accum, s = _moving_average(c, x)
        q = _quant(x, s[0], b, rt)
        return {"Out": _dequant(q, s[0], b) if dequant else q, "OutScale": s,
                "OutState": state, "OutAccum": accum}
    return kernel


def _moving_average_abs_max_scale(c: Call):
    x = _x(c)
    out = {"Out": x.copy()} if c.wants("Out") else {}
    if bool(c.attr("is_test", False)):
        return out
    state, accum, s = _moving_average(c, x)
    out.update(OutScale=s, OutState=state, OutAccum=accum)
    return out


def _fq_range_abs_max(c: Call):
    x = _x(c)
    b, rt = _bin_cnt(c), _round_type(c)
    last = _one(c, "InScale", x.dtype)
    if bool(c.attr("is_test", False)):
        return {"Out": _quant(x, last[0], b, rt)}
    window = int(c.attr("window_size", 10000))
    if window < 1:
        raise c.unsupported("window_size", window, "must be positive")
    it = c.x("Iter")
    if it is None:
        raise ExecutionError(f"op {c.op_type}: input Iter is required when is_test is false")
    it = int(np.asarray(it).reshape(-1)[0])
    cur = _abs_max(x)[0]
    scales = np.zeros(window, x.dtype)
    idx = it % window
    removed = scales[idx]
    scales[idx] = cur
    mx = last[0]
    if mx < cur:
        mx = cur
    elif abs(float(removed) - float(mx)) < 1e-6:
        n = min(it, window)
        mx = np.max(np.abs(scales[:n])) if n > 0 else x.dtype.type(0)
    return {"Out": _quant(x, mx, b, rt), "OutScale": np.array([mx], x.dtype), "OutScales": scales}


# --------------------------------------------------------------------------
# Dequantization
# --------------------------------------------------------------------------
def _fake_dequantize_max_abs(c: Call):
    x = _x(c)
    s = np.asarray(c.x("Scale"), x.dtype).reshape(-1)[0]
    t = x.dtype.type
    return {"Out": ((x * s) / t(c.attr("max_range"))).astype(x.dtype)}


def _fake_channel_wise_dequantize_max_abs(c: Call):
    x = _x(c)
    t = x.dtype.type
    scales = [np.asarray(s, x.dtype).reshape(-1) for s in c.xs("Scales")]
    bits = [int(b) for b in c.attr("quant_bits", [8])]
    if len(scales) not in (1, 2) or len(bits) < len(scales):
        raise c.unsupported("quant_bits", bits, f"one bit width per scale ({len(scales)} scales, 1 or 2)")
    ranges = [t(2 ** (bb - 1) - 1) for bb in bits]
    if len(scales) == 1:
        axis = _channel_axis(c, x)
        if scales[0].size != x.shape[axis]:
            raise ExecutionError(f"op {c.op_type}: {scales[0].size} scales for {x.shape[axis]} channels")
        return {"Out": ((x * _on_axis(scales[0], x, axis)) / ranges[0]).astype(x.dtype)}
    # two scales: per channel along axis x_num_col_dims (of the weights), times a tensor scale
    ncd = int(c.attr("x_num_col_dims", 1))
    if not 0 < ncd < x.ndim or scales[0].size != x.shape[ncd]:
        raise c.unsupported("x_num_col_dims", ncd, f"Scales[0] ({scales[0].size}) must size X's dim there")
    out = (x * _on_axis(scales[0], x, ncd) * scales[1][0]) / (ranges[0] * ranges[1])
    return {"Out": out.astype(x.dtype)}


def _dequantize_abs_max(c: Call):
    x = np.asarray(c.x("X"))
    s = np.float32(np.asarray(c.x("Scale")).reshape(-1)[0])
    return {"Out": ((s * x.astype(np.float32)) / np.float32(c.attr("max_range"))).astype(np.float32)}


def _dequantize_log(c: Call):
    x = np.asarray(c.x("X")).astype(np.int64)
    d = np.asarray(c.x("Dict"), np.float32).reshape(-1)
    if d.size < 128:
        raise ExecutionError(f"op {c.op_type}: Dict needs 128 entries, has {d.size}")
    return {"Out": np.where(x < 0, -d[np.where(x < 0, x + 128, 0)], d[np.clip(x, 0, 127)]).astype(np.float32)}


def _qmax(c: Call) -> int:
    q = int(c.attr("qmax", 127))
    if q < 1:
        raise c.unsupported("qmax", q, "must be positive")
    return q


def _linear_axis(c: Call, x, n: int):
    axis = int(c.attr("quant_axis", -1))
    if axis < 0:
        return None
    if axis >= x.ndim or n != x.shape[axis]:
        raise c.unsupported("quant_axis", axis, f"Scale has {n} values for X{tuple(x.shape)}")
    return axis


def _quantize_linear(c: Call):
    """Y = levels of X (float); in training the scale is observed first:
    per tensor a moving average with rate 0.9 (OutState/OutAccum/OutScale),
    per channel (quant_axis 0 or 1) the channel's max|x| (OutScale)."""
    x = _x(c)
    q, rt = _qmax(c), _round_type(c)
    observe = bool(c.attr("only_observer", False))
    out = {}
    axis = int(c.attr("quant_axis", -1))
    if not bool(c.attr("is_test", True)):
        if axis < 0:
            state, accum, s = _moving_average(c, x, 0.9)
            out.update(OutState=state, OutAccum=accum, OutScale=s)
        else:
            axis = _channel_axis(c, x)
            s = _channel_abs_max(x, axis).astype(x.dtype)
            out["OutScale"] = s
    else:
        s = np.asarray(c.x("Scale"), x.dtype).reshape(-1)
        if axis >= 0:
            axis = _channel_axis(c, x)
            if s.size != x.shape[axis]:
                raise ExecutionError(f"op {c.op_type}: {s.size} scales for {x.shape[axis]} channels")
    if observe:
        out["Y"] = x.astype(np.float32)
        return out
    sb = s[0] if axis < 0 else _on_axis(s, x, axis)
    out["Y"] = _quant(x, sb, q, rt).astype(np.float32)
    return out


def _dequantize_linear(c: Call):
    """Y = X * Scale / qmax in Scale's float type (X cast to it first)."""
    x = np.asarray(c.x("X"))
    scale = np.asarray(c.x("Scale"))
    if scale.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Scale must be floating point, got {scale.dtype}")
    if bool(c.attr("only_observer", False)):
        return {"Y": x.copy()}
    dt = scale.dtype
    xf = x.astype(dt)
    axis = _linear_axis(c, x, scale.size)
    sb = scale.reshape(-1)[0] if axis is None else _on_axis(scale, xf, axis)
    return {"Y": ((xf * sb) / dt.type(_qmax(c))).astype(dt)}


# --------------------------------------------------------------------------
# Samples and registration
# --------------------------------------------------------------------------
_COMMON = dict(bit_length=8, round_type=1)


def _data(rng, shape):
    """Values away from rounding ties at 8 bits (the levels are max|x|/127 apart)."""
    return np.round(rng.uniform(-1, 1, shape) * 127) / 127 * 1.7 + 0.3 / 127 * 1.7


def _fqdq_samples(rng):
    x = _data(rng, (3, 4))
    return [Sample({"X": [x]}, dict(_COMMON), note="round_type 1"),
            Sample({"X": [_data(rng, (2, 3, 2))]}, dict(bit_length=8, round_type=0), note="ties to even"),
            Sample({"X": [_data(rng, (5,)) * 3]}, dict(bit_length=4, round_type=1), note="4 bits")]


def _channel_samples(rng):
    return [Sample({"X": [_data(rng, (3, 2, 2))]}, dict(_COMMON, quant_axis=0, is_test=False), note="axis 0"),
            Sample({"X": [_data(rng, (2, 3, 2))]}, dict(bit_length=8, round_type=0, quant_axis=1, is_test=False),
                   note="axis 1, ties to even"),
            Sample({"X": [_data(rng, (4, 3))]}, dict(bit_length=6, round_type=1, quant_axis=1, is_test=False),
                   note="axis 1, 6 bits")]


def _ma_samples(rng):
    x = _data(rng, (3, 4))
    st = {"InScale": [np.array([0.8])], "InAccum": [np.array([1.3])], "InState": [np.array([2.0])]}
    return [Sample({"X": [x], **st}, dict(_COMMON, moving_rate=0.9, is_test=False), note="training"),
            Sample({"X": [x], **st}, dict(bit_length=8, round_type=0, moving_rate=0.5, is_test=False),
                   note="training, ties to even"),
            Sample({"X": [x], "InScale": [np.array([0.8])]}, dict(_COMMON, moving_rate=0.9, is_test=True),
                   outputs={"Out": 1, "OutScale": 1}, note="is_test")]


def _scale_samples(rng):
    x = rng.standard_normal((3, 4))
    st = {"InAccum": [np.array([1.3])], "InState": [np.array([2.0])]}
    return [Sample({"X": [x], **st}, {"moving_rate": 0.9, "is_test": False}, note="training"),
            Sample({"X": [x]}, {"moving_rate": 0.9, "is_test": True}, outputs={"Out": 1, "OutScale": 1},
                   note="is_test")]


def _range_samples(rng):
    x = _data(rng, (3, 4))
    return [Sample({"X": [x], "InScale": [np.array([0.5])], "Iter": [np.array([3], np.int64)]},
                   dict(_COMMON, window_size=5, is_test=False), note="training, InScale below max|x|"),
            Sample({"X": [x], "InScale": [np.array([1.2])]}, dict(_COMMON, window_size=5, is_test=True),
                   outputs={"Out": 1, "OutScale": 1}, note="is_test")]


def _deq_samples(rng):
    x = np.round(rng.uniform(-127, 127, (3, 4)))
    return [Sample({"X": [x], "Scale": [np.array([0.37])]}, {"max_range": 127.0}),
            Sample({"X": [x[:2]], "Scale": [np.array([2.5])]}, {"max_range": 255.0})]


def _cw_deq_samples(rng):
    x = np.round(rng.uniform(-127, 127, (3, 2, 2)))
    return [Sample({"X": [x], "Scales": [np.array([0.3, 0.7, 1.1])]}, {"quant_bits": [8], "quant_axis": 0},
                   note="axis 0"),
            Sample({"X": [x], "Scales": [np.array([0.4, 0.9])]}, {"quant_bits": [8], "quant_axis": 1},
                   note="axis 1"),
            Sample({"X": [x], "Scales": [np.array([0.4, 0.9]), np.array([3.0])]},
                   {"quant_bits": [8, 8], "quant_axis": 0, "x_num_col_dims": 1}, note="two scales")]


def _qlinear_samples(rng):
    x = _data(rng, (3, 4))
    attrs = dict(_COMMON, quant_axis=-1, qmin=-128, qmax=127, is_test=True, only_observer=False)
    return [Sample({"X": [x], "Scale": [np.array([1.7])], "ZeroPoint": [np.zeros(1)]}, attrs, outputs={"Y": 1},
                   note="per tensor"),
            Sample({"X": [x], "Scale": [np.array([1.7, 0.9, 1.2, 2.0])], "ZeroPoint": [np.zeros(4)]},
                   dict(attrs, quant_axis=1, round_type=0), outputs={"Y": 1}, note="per channel, ties to even"),
            Sample({"X": [x], "Scale": [np.array([1.0])], "ZeroPoint": [np.zeros(1)],
                    "InAccum": [np.array([1.3])], "InState": [np.array([2.0])]}, dict(attrs, is_test=False),
                   note="training, per tensor"),
            Sample({"X": [x], "Scale": [np.ones(3)], "ZeroPoint": [np.zeros(3)]},
                   dict(attrs, is_test=False, quant_axis=0), outputs={"Y": 1, "OutScale": 1},
                   note="training, per channel")]


def _dqlinear_samples(rng):
    q = np.round(rng.uniform(-127, 127, (3, 4)))
    attrs = dict(_COMMON, quant_axis=-1, qmin=-128, qmax=100, is_test=True, only_observer=False)
    return [Sample({"X": [q], "Scale": [np.array([1.7])], "ZeroPoint": [np.zeros(1)]}, attrs, outputs={"Y": 1},
                   note="per tensor"),
            Sample({"X": [q], "Scale": [np.array([1.7, 0.9, 1.2, 2.0])], "ZeroPoint": [np.zeros(4)]},
                   dict(attrs, quant_axis=1), outputs={"Y": 1}, note="per channel")]


def _dq_abs_max_samples(rng):
    return [Sample({"X": [rng.integers(-127, 128, (3, 4)).astype(np.int8)], "Scale": [np.array([0.37], np.float32)]},
                   {"max_range": 127.0}, note="int8"),
            Sample({"X": [rng.integers(-3000, 3000, (5,)).astype(np.int16)], "Scale": [np.array([2.5], np.float32)]},
                   {"max_range": 32767.0}, note="int16")]


def _dq_log_samples(rng):
    return [Sample({"X": [rng.integers(-128, 128, (3, 5)).astype(np.int8)],
                    "Dict": [(rng.uniform(-3, 3, 128)).astype(np.float32)]}, {})]


_QA = ("bit_length", "round_type")
register(paddle_opdef("fake_quantize_dequantize_abs_max", _fq_abs_max(True),
                      {"fake_quantize_dequantize_abs_max_grad": _straight_through}, samples=_fqdq_samples,
                      attrs_handled=_QA, doc="Out = round(x * bin_cnt / max|x|) * max|x| / bin_cnt; "
                                             "straight-through grad"))
register(paddle_opdef("fake_channel_wise_quantize_dequantize_abs_max", _fq_channel(True),
                      {"fake_channel_wise_quantize_dequantize_abs_max_grad": _straight_through},
                      samples=lambda rng: [Sample(s.inputs, {k: v for k, v in s.attrs.items() if k != "is_test"},
                                                  note=s.note) for s in _channel_samples(rng)],
                      attrs_handled=_QA + ("quant_axis",), doc="quantize-dequantize by per-channel abs max"))
register(paddle_opdef("fake_quantize_dequantize_moving_average_abs_max", _fq_moving_average(True),
                      {"fake_quantize_dequantize_moving_average_abs_max_grad": _straight_through},
                      samples=_ma_samples, attrs_handled=_QA + ("moving_rate", "is_test"),
                      doc="quantize-dequantize by the moving average of max|x|"))
register(paddle_opdef("moving_average_abs_max_scale", _moving_average_abs_max_scale,
                      {"straight_through_estimator_grad": _straight_through}, samples=_scale_samples,
                      attrs_handled=("moving_rate", "is_test"), doc="Out = X; OutScale the moving average of max|x|"))
register(paddle_opdef("fake_quantize_abs_max", _fq_abs_max(False), samples=_fqdq_samples,
                      attrs_handled=_QA, doc="Out = round(x * bin_cnt / max|x|); OutScale = max|x|"))
register(paddle_opdef("fake_channel_wise_quantize_abs_max", _fq_channel(False), samples=_channel_samples,
                      attrs_handled=_QA + ("quant_axis", "is_test"), doc="quantize by per-channel abs max"))
register(paddle_opdef("fake_quantize_moving_average_abs_max", _fq_moving_average(False), samples=_ma_samples,
                      attrs_handled=_QA + ("moving_rate", "is_test"), doc="quantize by the moving average of max|x|"))
register(paddle_opdef("fake_quantize_range_abs_max", _fq_range_abs_max, samples=_range_samples,
                      attrs_handled=_QA + ("window_size", "is_test"),
                      doc="quantize by the max of a window of scales (the window starts from zeros)"))
register(paddle_opdef("fake_dequantize_max_abs", _fake_dequantize_max_abs, samples=_deq_samples,
                      attrs_handled=("max_range",), doc="Out = X * Scale / max_range"))
register(paddle_opdef("fake_channel_wise_dequantize_max_abs", _fake_channel_wise_dequantize_max_abs,
                      samples=_cw_deq_samples, attrs_handled=("quant_bits", "quant_axis", "x_num_col_dims"),
                      doc="Out = X * Scales[c] / (2^(bits-1)-1) (times a second tensor scale)"))
register(paddle_opdef("quantize_linear", _quantize_linear, samples=_qlinear_samples,
                      attrs_handled=("qmax", "round_type", "quant_axis", "is_test", "only_observer"),
                      doc="Y = round(X * qmax / Scale); in training the scale is observed first"))
register(paddle_opdef("dequantize_linear", _dequantize_linear, samples=_dqlinear_samples,
                      attrs_handled=("qmax", "quant_axis", "only_observer"), doc="Y = X * Scale / qmax"))
register(paddle_opdef("dequantize_abs_max", _dequantize_abs_max, samples=_dq_abs_max_samples,
                      attrs_handled=("max_range",), doc="Out = Scale * float(X) / max_range (float32)"))
register(paddle_opdef("dequantize_log", _dequantize_log, samples=_dq_log_samples,
                      doc="Out = Dict[x] for x >= 0, -Dict[x + 128] below (float32)"))


# --------------------------------------------------------------------------
# lookup_table_dequant: an embedding whose rows hold [min, max, uint8 codes]
# --------------------------------------------------------------------------
def _lookup_table_dequant(c: Call):
    """Each row of W (float32) is `[min, max]` followed by the row's 8-bit
    codes packed four to a float; Out rows are `(max - min) / 256 * code +
    min` (float32), zeros for padding_idx. Out is Ids' shape with its last
    dim (1) replaced by the row width `(W.shape[1] - 2) * 4`."""
    w = np.asarray(c.x("W"))
    ids = np.asarray(c.x("Ids")).astype(np.int64)
    if w.dtype != np.float32 or w.ndim != 2 or w.shape[1] < 3:
        raise ExecutionError(f"op {c.op_type}: W must be a float32 (rows, 2 + packed) table, got {w.dtype} {w.shape}")
    pad = int(c.attr("padding_idx", -1))
    flat = ids.reshape(-1)
    live = flat != pad if pad != -1 else np.ones(flat.size, bool)
    if ((flat[live] < 0) | (flat[live] >= w.shape[0])).any():
        raise ExecutionError(f"op {c.op_type}: an id is outside [0, {w.shape[0]})")
    rows = w[np.where(live, flat, 0)]
    lo, hi = rows[:, 0], rows[:, 1]
    codes = np.ascontiguousarray(rows[:, 2:]).view(np.uint8).astype(np.float32)      # (n, 4 * (Q - 2))
    scale = ((hi - lo) / np.float32(256))[:, None]
    out = np.where(live[:, None], scale * codes + lo[:, None], np.float32(0)).astype(np.float32)
    lead = ids.shape[:-1] if ids.ndim > 1 else ids.shape
    return {"Out": out.reshape(lead + (codes.shape[1],))}


def _ltd_samples(rng):
    codes = rng.integers(0, 256, (5, 12), dtype=np.uint8)
    codes[:, 3::4] = rng.integers(0, 0x7F, (5, 3), dtype=np.uint8)    # no NaN / inf bit patterns
    mins = rng.uniform(-1, 0, (5, 1)).astype(np.float32)
    table = np.concatenate([mins, mins + rng.uniform(0.5, 2, (5, 1)).astype(np.float32), codes.view(np.float32)], 1)
    ids = np.array([[3], [0], [4], [3]], np.int64)
    return [Sample({"W": [table], "Ids": [ids]}, {"padding_idx": -1}),
            Sample({"W": [table], "Ids": [ids]}, {"padding_idx": 3}, note="padding_idx")]


register(paddle_opdef("lookup_table_dequant", _lookup_table_dequant, samples=_ltd_samples,
                      attrs_handled=("padding_idx",), doc="embedding lookup of 8-bit min/max-quantised rows"))
