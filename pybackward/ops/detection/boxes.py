"""Detection pre- and post-processing: box encodings, prior and anchor
boxes, clipping, YOLO decoding (no gradients: Paddle's empty makers).

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels);
boxes are `[x1, y1, x2, y2]`, and a box that is not `normalized` counts its
pixels inclusively (width `x2 - x1 + 1`):

* box_coder encode_center_size: TargetBox (N, 4) against PriorBox (M, 4) ->
  (N, M, 4) `[(tx - px) / pw, (ty - py) / ph, log|tw / pw|, log|th / ph|]`
  (centres `x1 + w/2` for priors, `(x1 + x2)/2` for targets), divided by
  PriorBoxVar (M, 4) or the `variance` attr. decode_center_size: TargetBox
  (N, M, 4) deltas, the prior of [i, j] is PriorBox[j] (axis 0) or [i]
  (axis 1); centre `v * d * pw + px`, size `exp(v * d) * pw`, corners
  `c -+ size/2` (minus 1 on x2/y2 when not normalized).
* prior_box: per feature cell (h, w), centre `((w + offset) * step_w,
  (h + offset) * step_h)` (steps image/feature size when 0); per min size
  the aspect-ratio boxes (ratios 1, then each new ratio and its inverse with
  `flip`), and the sqrt(min*max) square after them (or right after the
  ratio-1 box with min_max_aspect_ratios_order); divided by the image size,
  clipped to [0, 1] with `clip`. Variances repeat the attr per box.
* anchor_generator: per cell centre `w * stride + offset * (stride - 1)`;
  per (ratio, size): base `round(sqrt(stride_w*stride_h / ratio))`, height
  `round(base * ratio)`, scaled by size / stride; corners `c -+ (s - 1)/2`.
* box_clip: each coordinate clamped to `[0, round(im_dim / scale) - 1]`
  (ImInfo rows `[h, w, scale]`); Paddle splits the boxes over images by
  their LoD: without a LoD here every box belongs to ImInfo's single row.
* yolo_box: per anchor and cell, confidence `sigmoid(obj)` (with iou_aware
  `conf^(1-f) * sigmoid(iou)^f`); below conf_thresh box and scores stay 0;
  else centre `(col + sigmoid(tx) * s + b) * img_w / grid_w` (b = -(s-1)/2),
  size `exp(tw) * anchor_w * img_w / (downsample * grid_w)`, corners clipped
  to [0, img - 1] with clip_bbox; scores `conf * sigmoid(class logits)`.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _boxes(c: Call, slot: str, ndim: int | None = None) -> np.ndarray:
    a = np.asarray(c.x(slot))
    if a.dtype.kind != "f" or a.shape[-1:] != (4,) or (ndim is not None and a.ndim != ndim):
        raise ExecutionError(f"op {c.op_type}: {slot} must be float boxes of shape "
                             f"({'N, M, ' if ndim == 3 else 'N, '}4), got {a.dtype} {a.shape}")
    return a


# --------------------------------------------------------------------------
# box_coder
# --------------------------------------------------------------------------
def _wh_center(b, one, t):
    w = b[..., 2] - b[..., 0] + one
    h = b[..., 3] - b[..., 1] + one
    return w, h, b[..., 0] + w / t(2), b[..., 1] + h / t(2)


def _box_coder(c: Call):
    prior = _boxes(c, "PriorBox", 2)
    t = prior.dtype.type
    one = t(0) if bool(c.attr("box_normalized", True)) else t(1)
    var = c.x("PriorBoxVar")
    attr_var = [float(v) for v in (c.attr("variance", []) or [])]
    if var is not None and attr_var:
        raise ExecutionError(f"op {c.op_type}: PriorBoxVar and the variance attr cannot be used together")
    if attr_var and len(attr_var) != 4:
        raise c.unsupported("variance", attr_var, "needs 4 values")
    code = c.attr("code_type", "encode_center_size")
    pw, ph, px, py = _wh_center(prior, one, t)
    if code == "encode_center_size":
        target = _boxes(c, "TargetBox", 2)
        tw = target[:, None, 2] - target[:, None, 0] + one
        th = target[:, None, 3] - target[:, None, 1] + one
        tx = (target[:, None, 2] + target[:, None, 0]) / t(2)
        ty = (target[:, None, 3] + target[:, None, 1]) / t(2)
        out = np.stack([(tx - px) / pw, (ty - py) / ph,
                        np.log(np.abs(tw / pw)), np.log(np.abs(th / ph))], axis=-1)
        if var is not None:
            out = out / np.asarray(var, prior.dtype)[None, :, :4]
        elif attr_var:
            out = out / np.asarray(attr_var, np.float32).astype(prior.dtype)
        return {"OutputBox": out.astype(prior.dtype)}
    if code != "decode_center_size":
        raise c.unsupported("code_type", code, "encode_center_size or decode_center_size")
    target = _boxes(c, "TargetBox", 3)
    axis = int(c.attr("axis", 0))
    if axis not in (0, 1):
        raise c.unsupported("axis", axis, "0 or 1")
    n, m = target.shape[:2]
    if prior.shape[0] != (m if axis == 0 else n):
        raise ExecutionError(f"op {c.op_type}: PriorBox has {prior.shape[0]} boxes, TargetBox {target.shape}")
    sel = (lambda a: a[None, :]) if axis == 0 else (lambda a: a[:, None])
    pw, ph, px, py = sel(pw), sel(ph), sel(px), sel(py)
    if var is not None:
        v = np.asarray(var, prior.dtype)
        v = v[None, :, :4] if axis == 0 else v[:, None, :4]
        vx, vy, vw, vh = v[..., 0], v[..., 1], v[..., 2], v[..., 3]
    elif attr_var:
        vx, vy, vw, vh = (t(np.float32(a)) for a in attr_var)
    else:
        vx = vy = vw = vh = t(1)
    cx = vx * target[..., 0] * pw + px
    cy = vy * target[..., 1] * ph + py
    w = np.exp(vw * target[..., 2]) * pw
    h = np.exp(vh * target[..., 3]) * ph
    out = np.stack([cx - w / t(2), cy - h / t(2), cx + w / t(2) - one, cy + h / t(2) - one], axis=-1)
    return {"OutputBox": out.astype(prior.dtype)}


def _box_coder_samples(rng):
    prior = np.array([[0.1, 0.2, 0.5, 0.6], [0.3, 0.1, 0.9, 0.4], [0.0, 0.0, 1.0, 1.0]])
    pvar = np.array([[0.1, 0.1, 0.2, 0.2], [0.1, 0.2, 0.2, 0.3], [0.2, 0.2, 0.1, 0.1]])
    target = np.array([[0.2, 0.3, 0.6, 0.7], [0.05, 0.1, 0.4, 0.9]])
    deltas = rng.uniform(-0.5, 0.5, (2, 3, 4))
    return [
        Sample({"PriorBox": [prior], "PriorBoxVar": [pvar], "TargetBox": [target]},
               {"code_type": "encode_center_size", "box_normalized": True}, note="encode, PriorBoxVar"),
        Sample({"PriorBox": [prior * 20], "TargetBox": [target * 20]},
               {"code_type": "encode_center_size", "box_normalized": False, "variance": [0.1, 0.1, 0.2, 0.2]},
               note="encode, pixels, variance attr"),
        Sample({"PriorBox": [prior], "PriorBoxVar": [pvar], "TargetBox": [deltas]},
               {"code_type": "decode_center_size", "box_normalized": True, "axis": 0}, note="decode axis 0"),
        Sample({"PriorBox": [prior[:2] * 20], "TargetBox": [deltas]},
               {"code_type": "decode_center_size", "box_normalized": False, "axis": 1}, note="decode axis 1, pixels"),
        Sample({"PriorBox": [prior[:2]], "PriorBoxVar": [pvar[:2]], "TargetBox": [deltas]},
               {"code_type": "decode_center_size", "box_normalized": True, "axis": 1}, note="decode axis 1, var"),
    ]


register(paddle_opdef("box_coder", _box_coder, samples=_box_coder_samples,
                      attrs_handled=("code_type", "box_normalized", "axis", "variance"),
                      doc="encode boxes against priors as centre/size deltas, or decode deltas"))


# --------------------------------------------------------------------------
# prior_box and anchor_generator
# --------------------------------------------------------------------------
def _expand_ratios(ratios, flip: bool) -> list[float]:
    out = [1.0]
    for r in ratios:
        r = float(np.float32(r))
        if any(abs(r - o) < 1e-6 for o in out):
            continue
        out.append(r)
        if flip:
            out.append(float(np.float32(1.0) / np.float32(r)))
    return out


def _prior_box(c: Call):
    x, img = np.asarray(c.x("Input")), np.asarray(c.x("Image"))
    if x.ndim != 4 or img.ndim != 4:
        raise ExecutionError(f"op {c.op_type}: Input and Image must be 4-D (NCHW), got {x.shape}, {img.shape}")
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    t = dt.type
    f32 = np.float32
    mins = [f32(v) for v in c.attr("min_sizes")]
    maxs = [f32(v) for v in (c.attr("max_sizes", []) or [])]
    if maxs and len(maxs) != len(mins):
        raise c.unsupported("max_sizes", c.attr("max_sizes"), "one per min size")
    ratios = [f32(r) for r in _expand_ratios(c.attr("aspect_ratios", []) or [], bool(c.attr("flip", True)))]
    ih, iw = img.shape[2], img.shape[3]
    fh, fw = x.shape[2], x.shape[3]
    sw, sh, off = (t(f32(c.attr(k, d))) for k, d in (("step_w", 0.0), ("step_h", 0.0), ("offset", 0.5)))
    if sw == 0 or sh == 0:
        sw, sh = t(iw) / t(fw), t(ih) / t(fh)
    half = []   # (half width, half height) per prior, in Paddle's order
    for s, m in enumerate(mins):
        ar_boxes = [(t(f32(m * np.sqrt(r)) / 2.0), t(f32(m / np.sqrt(r)) / 2.0)) for r in ratios]
        sq = [(t(np.sqrt(f32(m * maxs[s])) / 2.0),) * 2] if maxs else []
        if bool(c.attr("min_max_aspect_ratios_order", False)):
            half += [(t(m / 2.0), t(m / 2.0))] + sq + [b for r, b in zip(ratios, ar_boxes) if abs(r - 1.0) >= 1e-6]
        else:
            half += ar_boxes + sq
    hw = np.array(half, dt)                                           # (P, 2)
    cx = ((np.arange(fw).astype(dt) + off) * sw)[None, :, None]
    cy = ((np.arange(fh).astype(dt) + off) * sh)[:, None, None]
    bw, bh = hw[None, None, :, 0], hw[None, None, :, 1]
    out = np.stack(np.broadcast_arrays((cx - bw) / t(iw), (cy - bh) / t(ih), (cx + bw) / t(iw), (cy + bh) / t(ih)),
                   axis=-1).astype(dt)
    if bool(c.attr("clip", True)):
        out = np.clip(out, t(0), t(1))
    var = np.broadcast_to(np.asarray(c.attr("variances", []) or [], np.float32).astype(dt),
                          out.shape[:3] + (len(c.attr("variances", []) or []),)).copy()
    return {"Boxes": out, "Variances": var}


def _prior_box_samples(rng):
    feat, img = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 3, 24, 30))
    v = [0.1, 0.1, 0.2, 0.2]
    return [
        Sample({"Input": [feat], "Image": [img]}, {"min_sizes": [4.0, 9.0], "max_sizes": [8.0, 15.0],
                                                   "aspect_ratios": [2.0, 3.0], "variances": v, "flip": True,
                                                   "clip": True}, note="flip, clip"),
        Sample({"Input": [feat], "Image": [img]}, {"min_sizes": [5.0], "max_sizes": [12.0], "aspect_ratios": [1.0, 2.0],
                                                   "variances": v, "flip": False, "clip": False, "step_w": 7.0,
                                                   "step_h": 6.0, "offset": 0.3,
                                                   "min_max_aspect_ratios_order": True}, note="steps, order"),
        Sample({"Input": [feat], "Image": [img]}, {"min_sizes": [6.0], "aspect_ratios": [0.5], "variances": v,
                                                   "flip": True, "clip": False}, note="no max sizes"),
    ]


register(paddle_opdef("prior_box", _prior_box, samples=_prior_box_samples,
                      attrs_handled=("min_sizes", "max_sizes", "aspect_ratios", "variances", "flip", "clip",
                                     "step_w", "step_h", "offset", "min_max_aspect_ratios_order"),
                      doc="SSD prior boxes per feature-map cell, normalised by the image size"))


def _round_away(v):
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _anchor_generator(c: Call):
    x = np.asarray(c.x("Input"))
    if x.ndim != 4:
        raise ExecutionError(f"op {c.op_type}: Input must be 4-D (NCHW), got {x.shape}")
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    t = dt.type
    stride = [t(np.float32(s)) for s in c.attr("stride", [16.0, 16.0])]
    if len(stride) != 2:
        raise c.unsupported("stride", c.attr("stride"), "two values (w, h)")
    sw, sh = stride
    off = t(np.float32(c.attr("offset", 0.5)))
    sizes = [float(np.float32(s)) for s in c.attr("anchor_sizes")]
    ratios = [float(np.float32(r)) for r in c.attr("aspect_ratios")]
    wh = []
    for ar in ratios:
        for size in sizes:
            area = sw * sh
            base_w = t(_round_away(float(np.sqrt(t(area / t(ar))))))
            base_h = t(_round_away(float(base_w * t(ar))))
            wh.append((t(t(size) / sw) * base_w, t(t(size) / sh) * base_h))
    wh = np.array(wh, np.float64)
    fh, fw = x.shape[2], x.shape[3]
    xc = (np.arange(fw).astype(dt) * sw + off * (sw - t(1))).astype(np.float64)[None, :, None]
    yc = (np.arange(fh).astype(dt) * sh + off * (sh - t(1))).astype(np.float64)[:, None, None]
    aw, ah = wh[None, None, :, 0], wh[None, None, :, 1]
    out = np.stack(np.broadcast_arrays(xc - 0.5 * (aw - 1), yc - 0.5 * (ah - 1), xc + 0.5 * (aw - 1),
                                       yc + 0.5 * (ah - 1)), axis=-1).astype(dt)
    v = np.asarray(c.attr("variances", [0.1, 0.1, 0.2, 0.2]), np.float32).astype(dt)
    return {"Anchors": out, "Variances": np.broadcast_to(v, out.shape[:3] + v.shape).copy()}


def _anchor_samples(rng):
    feat = rng.standard_normal((1, 2, 3, 4))
    v = [0.1, 0.1, 0.2, 0.2]
    return [Sample({"Input": [feat]}, {"anchor_sizes": [32.0, 64.0], "aspect_ratios": [0.5, 1.0, 2.0],
                                       "variances": v, "stride": [16.0, 16.0], "offset": 0.5}),
            Sample({"Input": [feat]}, {"anchor_sizes": [20.0], "aspect_ratios": [1.5], "variances": [1.0, 1.0, 1.0, 1.0],
                                       "stride": [8.0, 12.0], "offset": 0.0}, note="uneven stride")]


register(paddle_opdef("anchor_generator", _anchor_generator, samples=_anchor_samples,
                      attrs_handled=("anchor_sizes", "aspect_ratios", "variances", "stride", "offset"),
                      doc="Faster R-CNN anchors per feature-map cell"))


# --------------------------------------------------------------------------
# box_clip
# --------------------------------------------------------------------------
def _box_clip(c: Call):
    boxes = _boxes(c, "Input")
    info = np.asarray(c.x("ImInfo"), boxes.dtype).reshape(-1, 3)
    if info.shape[0] != 1:
        raise c.unsupported("Input", "LoD", f"{info.shape[0]} images need the boxes' LoD, which arrays here "
                                             "do not carry; clip one image's boxes per op")
    t = boxes.dtype.type
    h, w = t(_round_away(float(info[0, 0] / info[0, 2]))), t(_round_away(float(info[0, 1] / info[0, 2])))
    lim = np.array([w, h, w, h], boxes.dtype) - t(1)
    return {"Output": np.maximum(np.minimum(boxes, lim), t(0)).astype(boxes.dtype)}


def _box_clip_samples(rng):
    b = np.array([[-3.0, 2.0, 40.0, 25.0], [5.0, -1.0, 12.0, 70.0], [10.0, 10.0, 20.0, 20.0]])
    return [Sample({"Input": [b], "ImInfo": [np.array([[30.0, 45.0, 1.5]])]}, {})]


register(paddle_opdef("box_clip", _box_clip, samples=_box_clip_samples,
                      doc="clip boxes to the image (ImInfo [h, w, scale]); one image per op without LoD"))


# --------------------------------------------------------------------------
# yolo_box
# --------------------------------------------------------------------------
def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def _yolo_box(c: Call):
    x = np.asarray(c.x("X"))
    size = np.asarray(c.x("ImgSize")).astype(np.int64).reshape(-1, 2)
    anchors = [int(a) for a in c.attr("anchors")]
    ncls = int(c.attr("class_num"))
    down = int(c.attr("downsample_ratio", 32))
    iou_aware = bool(c.attr("iou_aware", False))
    t = x.dtype.type
    if x.ndim != 4 or len(anchors) % 2:
        raise ExecutionError(f"op {c.op_type}: X must be NCHW and anchors pairs, got {x.shape}, {anchors}")
    n, ch, h, w = x.shape
    an = len(anchors) // 2
    if ch != an * (5 + ncls + (1 if iou_aware else 0)) or size.shape[0] != n:
        raise ExecutionError(f"op {c.op_type}: X has {ch} channels for {an} anchors and {ncls} classes"
                             f"{' (iou_aware)' if iou_aware else ''}, ImgSize {size.shape[0]} rows for {n} images")
    scale = np.float32(c.attr("scale_x_y", 1.0))
    bias = np.float32(-0.5) * (scale - np.float32(1))
    if iou_aware:
        iou, body = x[:, :an], x[:, an:]
    else:
        iou, body = None, x
    p = body.reshape(n, an, 5 + ncls, h, w)
    conf = _sigmoid(p[:, :, 4])
    if iou_aware:
        f = float(np.float32(c.attr("iou_aware_factor", 0.5)))
        conf = (np.power(conf, t(1.0 - f)) * np.power(_sigmoid(iou), t(f))).astype(x.dtype)
    keep = ~(conf < np.float32(c.attr("conf_thresh", 0.01)))
    img_h = size[:, 0].astype(x.dtype)[:, None, None, None]
    img_w = size[:, 1].astype(x.dtype)[:, None, None, None]
    col = np.arange(w).astype(x.dtype)[None, None, None, :]
    row = np.arange(h).astype(x.dtype)[None, None, :, None]
    aw = np.array(anchors[0::2], x.dtype)[None, :, None, None]
    ah = np.array(anchors[1::2], x.dtype)[None, :, None, None]
    bx = (col + _sigmoid(p[:, :, 0]) * t(scale) + t(bias)) * img_w / t(w)
    by = (row + _sigmoid(p[:, :, 1]) * t(scale) + t(bias)) * img_h / t(h)
    bw = np.exp(p[:, :, 2]) * aw * img_w / t(down * w)
    bh = np.exp(p[:, :, 3]) * ah * img_h / t(down * h)
    box = np.stack([bx - bw / t(2), by - bh / t(2), bx + bw / t(2), by + bh / t(2)], axis=-1)
    if bool(c.attr("clip_bbox", True)):
        lo = np.zeros(4, x.dtype)
        box = np.maximum(box, lo)
        hi = np.stack(np.broadcast_arrays(np.full_like(img_w, np.inf), np.full_like(img_h, np.inf),
                                          img_w - t(1), img_h - t(1)), axis=-1)
        box = np.minimum(box, hi)
    box = np.where(keep[..., None], box, t(0)).astype(x.dtype)
    scores = np.where(keep[:, :, None], conf[:, :, None] * _sigmoid(p[:, :, 5:]), t(0)).astype(x.dtype)
    return {"Boxes": box.reshape(n, an * h * w, 4),
            "Scores": scores.transpose(0, 1, 3, 4, 2).reshape(n, an * h * w, ncls)}


def _yolo_samples(rng):
    an = [10, 13, 16, 30, 33, 23]
    size = np.array([[120, 160], [90, 100]], np.int32)
    return [
        Sample({"X": [rng.standard_normal((2, 3 * 7, 3, 4))], "ImgSize": [size]},
               {"anchors": an, "class_num": 2, "conf_thresh": 0.4, "downsample_ratio": 32, "clip_bbox": True,
                "scale_x_y": 1.0, "iou_aware": False, "iou_aware_factor": 0.5}, note="clip"),
        Sample({"X": [rng.standard_normal((2, 3 * 7, 3, 4))], "ImgSize": [size]},
               {"anchors": an, "class_num": 2, "conf_thresh": 0.3, "downsample_ratio": 16, "clip_bbox": False,
                "scale_x_y": 1.2, "iou_aware": False, "iou_aware_factor": 0.5}, note="scale_x_y, no clip"),
        Sample({"X": [rng.standard_normal((1, 2 * 8, 2, 3))], "ImgSize": [size[:1]]},
               {"anchors": an[:4], "class_num": 2, "conf_thresh": 0.2, "downsample_ratio": 32, "clip_bbox": True,
                "scale_x_y": 1.0, "iou_aware": True, "iou_aware_factor": 0.4}, note="iou_aware"),
    ]


register(paddle_opdef("yolo_box", _yolo_box, samples=_yolo_samples,
                      attrs_handled=("anchors", "class_num", "conf_thresh", "downsample_ratio", "clip_bbox",
                                     "scale_x_y", "iou_aware", "iou_aware_factor"),
                      doc="decode YOLOv3 head outputs into boxes and class scores"))
