"""interp_antialias (anti-aliased bilinear / bicubic resize, with its grad).

interp_antialias is what `paddle.nn.functional.interpolate(...,
antialias=True)` runs (checked against Paddle 3.3.1 by testdata/kernels):
separable resampling whose filter widens with the downscaling ratio, as
PyTorch's and PIL's anti-aliased resize. Per axis with ratio `r` (in/out,
or 1/scale; `(in-1)/(out-1)` with align_corners), support `s = k/2 * max(r,
1)` (k = 2 bilinear, 4 bicubic), output i centred at `c = r*(i + 0.5)`
reads inputs `[max(int(c - s + 0.5), 0), min(int(c + s + 0.5), in))` with
weights `filter((j - c + 0.5) / max(r, 1))` normalised to sum 1 (triangle
filter; cubic with a = -0.5). Out = Wy X Wx^T per plane; the grad is the
transpose.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _filter(method: str, x):
    x = np.abs(x)
    if method == "bilinear":
        return np.where(x < 1, 1 - x, 0)
    a = -0.5
    return np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0))


def _aa_weights(n_in: int, n_out: int, ratio: float, method: str) -> np.ndarray:
    """(n_out, n_in) resampling matrix along one axis."""
    size = 2 if method == "bilinear" else 4
    support = size * 0.5 * ratio if ratio >= 1.0 else size * 0.5
    inv = 1.0 / ratio if ratio >= 1.0 else 1.0
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = ratio * (i + 0.5)
        lo = max(int(c - support + 0.5), 0)
        hi = min(int(c + support + 0.5), n_in)
        j = np.arange(lo, hi)
        w = _filter(method, (j - c + 0.5) * inv)
        total = w.sum()
        if total != 0:
            m[i, lo:hi] = w / total
    return m


def _aa_setup(c: Call, x):
    if x.ndim != 4:
        raise c.unsupported("x rank", x.ndim, "2-D (4-D input) anti-aliased resize only")
    layout = c.attr("data_format", "NCHW")
    if layout not in ("NCHW", "NHWC"):
        raise c.unsupported("data_format", layout, "NCHW or NHWC")
    method = c.attr("interp_method", "bilinear")
    if method not in ("bilinear", "bicubic"):
        raise c.unsupported("interp_method", method, "anti-aliasing exists for bilinear and bicubic")
    if c.has("out_size") or c.has("size_tensor") or c.has("scale_tensor"):
        raise c.unsupported("out_size/size_tensor/scale_tensor", "tensor", "give the size as out_h/out_w or scale")
    h, w = (x.shape[2], x.shape[3]) if layout == "NCHW" else (x.shape[1], x.shape[2])
    scale = [float(s) for s in (c.attr("scale", []) or [])]
    oh, ow = int(c.attr("out_h", -1)), int(c.attr("out_w", -1))
    sh = sw = 0.0
    if scale and min(scale) > 0:
        sh, sw = (scale * 2)[:2] if len(scale) == 1 else scale[:2]
        oh, ow = int(h * sh), int(w * sw)
    if oh < 1 or ow < 1:
        raise c.unsupported("out_h/out_w", (oh, ow), "a positive output size (or scale) is needed")
    align = bool(c.attr("align_corners", False))

    def ratio(n_in, n_out, s):
        if align:
            return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return 1.0 / s if s > 0 else n_in / n_out

    wy = _aa_weights(h, oh, float(np.float32(ratio(h, oh, sh))), method)
    wx = _aa_weights(w, ow, float(np.float32(ratio(w, ow, sw))), method)
    return layout, wy, wx


def _interp_antialias(c: Call):
    x = np.asarray(c.x("x"))
    if x.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: x must be floating point, got {x.dtype}")
    layout, wy, wx = _aa_setup(c, x)
    if layout == "NCHW":
        out = np.einsum("ph,nchw,qw->ncpq", wy, x.astype(np.float64), wx)
    else:
        out = np.einsum("ph,nhwc,qw->npqc", wy, x.astype(np.float64), wx)
    return {"output": out.astype(x.dtype)}


def _interp_antialias_grad(c: Call):
    if not c.wants("x@GRAD"):
        return {}
    x = np.asarray(c.x("x"))
    layout, wy, wx = _aa_setup(c, x)
    dy = np.asarray(c.x("output@GRAD"), np.float64)
    if layout == "NCHW":
        dx = np.einsum("ph,ncpq,qw->nchw", wy, dy, wx)
    else:
        dx = np.einsum("ph,npqc,qw->nhwc", wy, dy, wx)
    return {"x@GRAD": dx.astype(x.dtype)}


def _aa_samples(rng):
    x = rng.standard_normal((1, 2, 9, 11))
    base = {"data_format": "NCHW", "out_d": -1, "scale": [], "align_corners": False, "align_mode": 0}
    return [
        Sample({"x": [x]}, dict(base, out_h=4, out_w=5, interp_method="bilinear"), note="bilinear down"),
        Sample({"x": [x]}, dict(base, out_h=3, out_w=7, interp_method="bicubic"), note="bicubic down"),
        Sample({"x": [x]}, dict(base, out_h=14, out_w=6, interp_method="bilinear"), note="up and down"),
        Sample({"x": [x]}, dict(base, out_h=-1, out_w=-1, scale=[0.5, 0.4], interp_method="bicubic"),
               note="scale"),
        Sample({"x": [x]}, dict(base, out_h=4, out_w=6, interp_method="bilinear", align_corners=True),
               note="align_corners"),
        Sample({"x": [x.transpose(0, 2, 3, 1).copy()]}, dict(base, data_format="NHWC", out_h=5, out_w=4,
                                                             interp_method="bilinear"), note="NHWC"),
    ]


register(paddle_opdef("interp_antialias", _interp_antialias, {"interp_antialias_grad": _interp_antialias_grad},
                      samples=_aa_samples,
                      attrs_handled=("data_format", "out_h", "out_w", "scale", "interp_method", "align_corners"),
                      doc="anti-aliased bilinear/bicubic resize (interpolate(..., antialias=True))"))


# --------------------------------------------------------------------------
# margin_cross_entropy (one rank)
# --------------------------------------------------------------------------
def _margin_setup(c: Call):
    logits = np.asarray(c.x("Logits"))
    label = np.asarray(c.x("Label")).astype(np.int64).reshape(-1)
    if logits.dtype.kind != "f" or logits.ndim != 2 or label.size != logits.shape[0]:
        raise ExecutionError(f"op {c.op_type}: Logits (N, D) float and Label (N) expected, got {logits.shape} "
                             f"{logits.dtype}, {label.shape}")
    if int(c.attr("nranks", 1)) > 1:
        raise c.unsupported("nranks", c.attr("nranks"), "model parallelism needs a communicator; one rank only")
    if label.size and (label.min() < 0 or label.max() >= logits.shape[1]):
        raise ExecutionError(f"op {c.op_type}: a label is outside [0, {logits.shape[1]})")
    m1, m2, m3, s = (float(np.float32(c.attr(k, d))) for k, d in
                     (("margin1", 1.0), ("margin2", 0.5), ("margin3", 0.0), ("scale", 64.0)))
    return logits, label, m1, m2, m3, s


def _margin_cross_entropy(c: Call):
    logits, label, m1, m2, m3, s = _margin_setup(c)
    z = logits.astype(np.float64).copy()
    rows = np.arange(z.shape[0])
    pos = z[rows, label]
    if abs(m1 - 1.0) > 1e-8 or abs(m2) > 1e-8:
        pos = np.cos(m1 * np.arccos(pos) + m2)
    z[rows, label] = pos - m3
    z = z * s
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return {"Softmax": np.exp(logp).astype(logits.dtype), "Loss": (-logp[rows, label])[:, None].astype(logits.dtype)}


def _margin_cross_entropy_grad(c: Call):
    if not c.wants("Logits@GRAD"):
        return {}
    logits, label, m1, m2, m3, s = _margin_setup(c)
    sm = c.x("Softmax")
    sm = np.asarray(sm, np.float64) if sm is not None else _margin_cross_entropy(c)["Softmax"].astype(np.float64)
    dl = np.asarray(c.x("Loss@GRAD"), np.float64).reshape(-1)
    rows = np.arange(logits.shape[0])
    g = sm * dl[:, None]
    g[rows, label] = (sm[rows, label] - 1.0) * dl
    if abs(m1 - 1.0) > 1e-8 or abs(m2) > 1e-8:
        x = logits[rows, label].astype(np.float64)
        g[rows, label] *= m1 * np.sin(m1 * np.arccos(x) + m2) / np.sqrt(1.0 - x * x)
    return {"Logits@GRAD": (g * s).astype(logits.dtype)}


def _margin_samples(rng):
    x = rng.uniform(-0.9, 0.9, (4, 6))
    lab = np.array([0, 3, 5, 2], np.int64)
    base = {"return_softmax": False, "ring_id": 0, "rank": 0, "nranks": 1}
    return [Sample({"Logits": [x], "Label": [lab]}, dict(base, margin1=1.0, margin2=0.5, margin3=0.0, scale=4.0),
                   outputs={"Loss": 1}, note="ArcFace"),
            Sample({"Logits": [x], "Label": [lab.astype(np.int32)]},
                   dict(base, margin1=1.35, margin2=0.0, margin3=0.2, scale=2.0), outputs={"Loss": 1},
                   note="SphereFace + CosFace margins, int32 labels"),
            Sample({"Logits": [x], "Label": [lab]}, dict(base, margin1=1.0, margin2=0.0, margin3=0.0, scale=1.0),
                   outputs={"Loss": 1}, note="no margin: softmax cross entropy")]


register(paddle_opdef("margin_cross_entropy", _margin_cross_entropy,
                      {"margin_cross_entropy_grad": _margin_cross_entropy_grad}, samples=_margin_samples,
                      attrs_handled=("margin1", "margin2", "margin3", "scale", "nranks", "return_softmax"),
                      doc="ArcFace/CosFace/SphereFace margin softmax cross entropy (one rank); Paddle runs it on "
                          "GPU only"))


# --------------------------------------------------------------------------
# warprnnt (RNN-T loss; FastEmit)
# --------------------------------------------------------------------------
def _rnnt(c: Call):
    """Per sequence: -log P(label | input) and its gradient w.r.t. the input,
    which holds log-probabilities (no softmax inside, as Paddle's rnnt_loss).
    With fastemit_lambda the gradient is FastEmit's, not the loss's
    derivative (tests/ops/test_nn_detection_quant.py checks it against Paddle)."""
    acts = np.asarray(c.x("input"))
    label = np.asarray(c.x("label")).astype(np.int64)
    tl = np.asarray(c.x("input_lengths")).astype(np.int64).reshape(-1)
    ul = np.asarray(c.x("label_lengths")).astype(np.int64).reshape(-1)
    blank = int(c.attr("blank", 0))
    fastemit = float(np.float32(c.attr("fastemit_lambda", 0.0)))
    if acts.ndim != 4 or acts.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: input must be float (B, T, U+1, V), got {acts.dtype} {acts.shape}")
    b, tmax, umax, v = acts.shape
    if tl.size != b or ul.size != b or (tl > tmax).any() or (ul + 1 > umax).any() or (tl < 1).any():
        raise ExecutionError(f"op {c.op_type}: lengths {tl.tolist()} / {ul.tolist()} do not fit input {acts.shape}")
    if not 0 <= blank < v:
        raise c.unsupported("blank", blank, f"must index the {v} symbols")
    lp = acts.astype(np.float64)            # Paddle's input is already log-probabilities
    loss = np.zeros(b)
    grad = np.zeros_like(lp)
    for k in range(b):
        T, U = int(tl[k]), int(ul[k])
        y = label[k, :U]
        lpk = lp[k, :T, :U + 1]                                         # (T, U+1, V)
        lb = lpk[:, :, blank]
        ly = lpk[:, np.arange(U), y] if U else np.zeros((T, 0))        # (T, U)
        alpha = np.full((T, U + 1), -np.inf)
        beta = np.full((T, U + 1), -np.inf)
        alpha[0, 0] = 0.0
        for t in range(T):
            for u in range(U + 1):
                if t == 0 and u == 0:
                    continue
                a1 = alpha[t - 1, u] + lb[t - 1, u] if t > 0 else -np.inf
                a2 = alpha[t, u - 1] + ly[t, u - 1] if u > 0 else -np.inf
                alpha[t, u] = np.logaddexp(a1, a2)
        beta[T - 1, U] = lb[T - 1, U]
        for t in range(T - 1, -1, -1):
            for u in range(U, -1, -1):
                if t == T - 1 and u == U:
                    continue
                b1 = beta[t + 1, u] + lb[t, u] if t < T - 1 else -np.inf
                b2 = beta[t, u + 1] + ly[t, u] if u < U else -np.inf
                beta[t, u] = np.logaddexp(b1, b2)
        ll = beta[0, 0]
        loss[k] = -ll
        # d(-ll)/d lp[t, u, s]
        dlp = np.zeros((T, U + 1, v))
        nb = np.full((T, U + 1), -np.inf)
        nb[:T - 1] = beta[1:]
        nb[T - 1, U] = 0.0
        dlp[:, :, blank] = -np.exp(alpha + lb + nb - ll)
        if U:   # FastEmit scales the label emissions' gradient (not the loss) by 1 + lambda
            dlp[:, np.arange(U), y] -= (1.0 + fastemit) * np.exp(alpha[:, :U] + ly + beta[:, 1:] - ll)
        grad[k, :T, :U + 1] = dlp
    return loss, grad


def _warprnnt(c: Call):
    acts = np.asarray(c.x("input"))
    loss, grad = _rnnt(c)
    return {"loss": loss.astype(acts.dtype), "warprnntgrad": grad.astype(acts.dtype)}


def _warprnnt_grad(c: Call):
    if not c.wants("input@GRAD"):
        return {}
    g = np.asarray(c.x("warprnntgrad"))
    dl = np.asarray(c.x("loss@GRAD")).reshape(-1, 1, 1, 1)
    return {"input@GRAD": (g * dl).astype(g.dtype)}


def _rnnt_samples(rng):
    z = rng.standard_normal((2, 4, 3, 5))
    acts = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))      # log-probabilities
    label = np.array([[1, 3], [2, 0]], np.int32)
    base = {"blank": 0, "fastemit_lambda": 0.0}
    return [Sample({"input": [acts], "label": [label], "input_lengths": [np.array([4, 3], np.int32)],
                    "label_lengths": [np.array([2, 1], np.int32)]}, dict(base), wrt=("input",),
                   note="padded sequences"),
            Sample({"input": [acts], "label": [np.array([[1, 2], [3, 1]], np.int32)],
                    "input_lengths": [np.array([4, 4], np.int32)], "label_lengths": [np.array([2, 2], np.int32)]},
                   dict(base, blank=4), wrt=("input",), note="blank 4, full lengths")]


register(paddle_opdef("warprnnt", _warprnnt, {"warprnnt_grad": _warprnnt_grad}, samples=_rnnt_samples,
                      attrs_handled=("blank", "fastemit_lambda"),
                      doc="RNN-T loss per sequence of log-probabilities; warprnntgrad its input gradient"))


# --------------------------------------------------------------------------
# correlation (FlowNet cost volume; Paddle runs it on GPU only)
# --------------------------------------------------------------------------
def _corr_setup(c: Call):
    a, b = np.asarray(c.x("Input1")), np.asarray(c.x("Input2"))
    if a.ndim != 4 or a.shape != b.shape or a.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Input1 and Input2 must be float NCHW of one shape, got "
                             f"{a.shape}, {b.shape}")
    pad, k, md, s1, s2 = (int(c.attr(n)) for n in ("pad_size", "kernel_size", "max_displacement", "stride1",
                                                   "stride2"))
    if k != 1:
        # Paddle's kernel centres the patch at max_displacement without the kernel radius, so a
        # larger patch reads outside the padded input; FlowNet / PWC-Net use 1
        raise c.unsupported("kernel_size", k, "only 1 (single-pixel patches)")
    if int(c.attr("corr_type_multiply", 1)) != 1:
        raise c.unsupported("corr_type_multiply", c.attr("corr_type_multiply"), "only 1 (multiplicative)")
    if s1 < 1 or s2 < 1 or md < 0 or pad < 0:
        raise c.unsupported("stride1/stride2/max_displacement/pad_size", (s1, s2, md, pad), "out of range")
    ph, pw = a.shape[2] + 2 * pad, a.shape[3] + 2 * pad
    oh, ow = -(-(ph - 2 * md) // s1), -(-(pw - 2 * md) // s1)
    if oh < 1 or ow < 1:
        raise ExecutionError(f"op {c.op_type}: max_displacement {md} leaves no output on the padded input {ph}x{pw}")
    r = md // s2
    shifts = [(tj * s2, ti * s2) for tj in range(-r, r + 1) for ti in range(-r, r + 1)]
    return a, b, pad, md, s1, (oh, ow), shifts


def _corr_windows(md, s1, oh, ow, dy, dx):
    rows = slice(md + dy, md + dy + (oh - 1) * s1 + 1, s1)
    cols = slice(md + dx, md + dx + (ow - 1) * s1 + 1, s1)
    return rows, cols


def _correlation(c: Call):
    a, b, pad, md, s1, (oh, ow), shifts = _corr_setup(c)
    pa = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    pb = np.pad(b, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    r0, c0 = _corr_windows(md, s1, oh, ow, 0, 0)
    base = pa[:, :, r0, c0]
    out = np.stack([(base * pb[:, :, r, q]).sum(axis=1) for r, q in
                    (_corr_windows(md, s1, oh, ow, dy, dx) for dy, dx in shifts)], axis=1)
    return {"Output": (out / a.shape[1]).astype(a.dtype)}


def _correlation_grad(c: Call):
    a, b, pad, md, s1, (oh, ow), shifts = _corr_setup(c)
    pa = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    pb = np.pad(b, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dy_out = np.asarray(c.x("Output@GRAD")) / a.shape[1]
    ga, gb = np.zeros_like(pa), np.zeros_like(pb)
    r0, c0 = _corr_windows(md, s1, oh, ow, 0, 0)
    for k, (dy, dx) in enumerate(shifts):
        r, q = _corr_windows(md, s1, oh, ow, dy, dx)
        g = dy_out[:, k:k + 1]
        ga[:, :, r0, c0] += g * pb[:, :, r, q]
        gb[:, :, r, q] += g * pa[:, :, r0, c0]
    h, w = a.shape[2:]
    res = {}
    if c.wants("Input1@GRAD"):
        res["Input1@GRAD"] = ga[:, :, pad:pad + h, pad:pad + w].astype(a.dtype)
    if c.wants("Input2@GRAD"):
        res["Input2@GRAD"] = gb[:, :, pad:pad + h, pad:pad + w].astype(b.dtype)
    return res


def _corr_samples(rng):
    a, b = rng.standard_normal((2, 3, 6, 7)), rng.standard_normal((2, 3, 6, 7))
    S = Sample
    return [S({"Input1": [a], "Input2": [b]}, {"pad_size": 2, "kernel_size": 1, "max_displacement": 2, "stride1": 1,
                                               "stride2": 1, "corr_type_multiply": 1}, note="FlowNet-C style"),
            S({"Input1": [a], "Input2": [b]}, {"pad_size": 3, "kernel_size": 1, "max_displacement": 3, "stride1": 2,
                                               "stride2": 2, "corr_type_multiply": 1}, note="strides 2"),
            S({"Input1": [a], "Input2": [b]}, {"pad_size": 0, "kernel_size": 1, "max_displacement": 1, "stride1": 1,
                                               "stride2": 1, "corr_type_multiply": 1}, note="no padding")]


register(paddle_opdef("correlation", _correlation, {"correlation_grad": _correlation_grad}, samples=_corr_samples,
                      attrs_handled=("pad_size", "kernel_size", "max_displacement", "stride1", "stride2",
                                     "corr_type_multiply"),
                      doc="FlowNet correlation (cost volume) with kernel_size 1; Paddle runs it on GPU only"))
