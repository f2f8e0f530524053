"""yolov3_loss: YOLOv3's training loss, with its grad."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


# --------------------------------------------------------------------------
# yolov3_loss
# --------------------------------------------------------------------------
def _sce(x, label):
    """Sigmoid cross entropy, Paddle's stable form."""
    return np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _iou_cwh(x1, y1, w1, h1, x2, y2, w2, h2):
    """IoU of centre/size boxes (Paddle's CalcBoxIoU; broadcasts)."""
    ow = np.minimum(x1 + w1 / 2, x2 + w2 / 2) - np.maximum(x1 - w1 / 2, x2 - w2 / 2)
    oh = np.minimum(y1 + h1 / 2, y2 + h2 / 2) - np.maximum(y1 - h1 / 2, y2 - h2 / 2)
    inter = np.where((ow < 0) | (oh < 0), 0, ow * oh)
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / (w1 * h1 + w2 * h2 - inter)


class _Yolo:
    """What yolov3_loss and its grad share: the matched boxes and masks."""

    def __init__(self, c: Call):
        x = np.asarray(c.x("X"))
        self.x = x
        t = x.dtype.type
        self.anchors = [int(a) for a in c.attr("anchors")]
        self.amask = [int(a) for a in c.attr("anchor_mask")]
        self.ncls = int(c.attr("class_num"))
        n, ch, h, w = x.shape
        m = len(self.amask)
        if ch != m * (5 + self.ncls) or len(self.anchors) % 2 or max(self.amask, default=0) * 2 >= len(self.anchors):
            raise ExecutionError(f"yolov3_loss: X {x.shape} does not fit {m} masked anchors and "
                                 f"{self.ncls} classes")
        box = np.asarray(c.x("GTBox")).astype(x.dtype)
        label = np.asarray(c.x("GTLabel")).astype(np.int64)
        b = box.shape[1]
        score = np.asarray(c.x("GTScore")).astype(x.dtype) if c.has("GTScore") else np.ones((n, b), x.dtype)
        self.input_size = int(c.attr("downsample_ratio", 32)) * h
        scale = np.float32(c.attr("scale_x_y", 1.0))
        bias = np.float32(-0.5 * (float(scale) - 1.0))
        smooth = bool(c.attr("use_label_smooth", True))
        sw = min(1.0 / self.ncls, 1.0 / 40) if smooth else 0.0
        self.pos, self.neg = t(1.0 - sw), t(sw)
        p = x.reshape(n, m, 5 + self.ncls, h, w)
        self.p = p
        aw = np.array([self.anchors[2 * a] for a in self.amask], x.dtype)[None, :, None, None]
        ah = np.array([self.anchors[2 * a + 1] for a in self.amask], x.dtype)[None, :, None, None]
        col = np.arange(w).astype(x.dtype)[None, None, None, :]
        row = np.arange(h).astype(x.dtype)[None, None, :, None]
        px = (col + _sigmoid(p[:, :, 0]) * t(scale) + t(bias)) / t(h)
        py = (row + _sigmoid(p[:, :, 1]) * t(scale) + t(bias)) / t(h)
        pw = np.exp(p[:, :, 2]) * aw / t(self.input_size)
        ph = np.exp(p[:, :, 3]) * ah / t(self.input_size)
        valid = ~((box[:, :, 2] < 1e-6) | (box[:, :, 3] < 1e-6))                   # (N, B)
        obj = np.zeros((n, m, h, w), x.dtype)
        best = np.zeros((n, m, h, w), x.dtype)
        for i in range(n):
            for k in np.nonzero(valid[i])[0]:
                g = box[i, k]
                best[i] = np.maximum(best[i], _iou_cwh(px[i], py[i], pw[i], ph[i], g[0], g[1], g[2], g[3]))
        obj[best > np.float32(c.attr("ignore_thresh", 0.7))] = -1
        match = np.full((n, b), -1, np.int32)
        self.pos_cells = []      # (i, mask index, gj, gi, anchor, gt box, label, score)
        all_w = np.array(self.anchors[0::2], x.dtype) / t(self.input_size)
        all_h = np.array(self.anchors[1::2], x.dtype) / t(self.input_size)
        for i in range(n):
            for k in range(b):
                if not valid[i, k]:
                    continue
                g = box[i, k]
                gi, gj = int(g[0] * t(w)), int(g[1] * t(h))
                ious = _iou_cwh(t(0), t(0), all_w, all_h, t(0), t(0), g[2], g[3]).astype(np.float32)
                best_n, best_iou = 0, np.float32(0)
                for a, v in enumerate(ious):
                    if v > best_iou:
                        best_n, best_iou = a, v
                mi = self.amask.index(best_n) if best_n in self.amask else -1
                match[i, k] = mi
                if mi >= 0:
                    self.pos_cells.append((i, mi, gj, gi, best_n, g, int(label[i, k]), score[i, k]))
                    obj[i, mi, gj, gi] = score[i, k]
        self.obj, self.match = obj, match
        self.shape = (n, m, h, w)

    def targets(self, g, gi, gj, an):
        t = self.x.dtype.type
        h = self.shape[2]
        tx = g[0] * t(h) - t(gi)
        ty = g[1] * t(h) - t(gj)
        tw = np.log(g[2] * t(self.input_size) / t(self.anchors[2 * an]))
        th = np.log(g[3] * t(self.input_size) / t(self.anchors[2 * an + 1]))
        return tx, ty, tw, th, (t(2.0) - g[2] * g[3])


def _yolov3_loss(c: Call):
    y = _Yolo(c)
    x, p = y.x, y.p
    n = x.shape[0]
    loss = np.zeros(n, np.float64)
    for i, mi, gj, gi, an, g, lab, sc in y.pos_cells:
        tx, ty, tw, th, s2 = y.targets(g, gi, gj, an)
        v = p[i, mi, :, gj, gi]
        s = s2 * sc
        loss[i] += (_sce(v[0], tx) + _sce(v[1], ty) + abs(tw - v[2]) + abs(th - v[3])) * s
        lbl = np.where(np.arange(y.ncls) == lab, y.pos, y.neg)
        loss[i] += (_sce(v[5:], lbl) * sc).sum()
    o = p[:, :, 4]
    obj = y.obj
    lo = np.where(obj > 1e-5, _sce(o, 1.0) * obj, np.where(obj > -0.5, _sce(o, 0.0), 0))
    loss += lo.reshape(n, -1).sum(axis=1)
    return {"Loss": loss.astype(x.dtype), "ObjectnessMask": obj, "GTMatchMask": y.match}


def _yolov3_loss_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    y = _Yolo(c)
    x, p = y.x, y.p
    dl = np.asarray(c.x("Loss@GRAD"), np.float64).reshape(-1)
    dp = np.zeros(p.shape)
    for i, mi, gj, gi, an, g, lab, sc in y.pos_cells:
        tx, ty, tw, th, s2 = y.targets(g, gi, gj, an)
        v = p[i, mi, :, gj, gi].astype(np.float64)
        s = float(s2 * sc) * dl[i]
        dp[i, mi, 0, gj, gi] += (_sigmoid(v[0]) - tx) * s
        dp[i, mi, 1, gj, gi] += (_sigmoid(v[1]) - ty) * s
        dp[i, mi, 2, gj, gi] += (1.0 if v[2] > tw else -1.0) * s
        dp[i, mi, 3, gj, gi] += (1.0 if v[3] > th else -1.0) * s
        lbl = np.where(np.arange(y.ncls) == lab, y.pos, y.neg)
        dp[i, mi, 5:, gj, gi] += (_sigmoid(v[5:]) - lbl) * float(sc) * dl[i]
    o = p[:, :, 4].astype(np.float64)
    obj = y.obj
    d = np.where(obj > 1e-5, (_sigmoid(o) - 1.0) * obj, np.where(obj > -0.5, _sigmoid(o), 0))
    dp[:, :, 4] = d * dl[:, None, None, None]
    return {"X@GRAD": dp.reshape(x.shape).astype(x.dtype)}


def _yolov3_samples(rng):
    an = [10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119]
    x = rng.standard_normal((2, 3 * (5 + 3), 4, 4)) * 0.8
    box = np.array([[[0.30, 0.40, 0.20, 0.25], [0.70, 0.60, 0.10, 0.15], [0.55, 0.20, 0.05, 0.08]],
                    [[0.15, 0.80, 0.30, 0.40], [0.62, 0.35, 0.12, 0.10], [0.0, 0.0, 0.0, 0.0]]])
    label = np.array([[0, 2, 1], [1, 0, 2]], np.int32)
    score = np.array([[0.9, 0.7, 1.0], [0.8, 0.6, 1.0]])
    base = {"anchors": an, "anchor_mask": [0, 1, 2], "class_num": 3, "ignore_thresh": 0.7, "downsample_ratio": 32,
            "use_label_smooth": True, "scale_x_y": 1.0}
    return [
        Sample({"X": [x], "GTBox": [box], "GTLabel": [label]}, dict(base), wrt=("X",), note="label smoothing"),
        Sample({"X": [x], "GTBox": [box], "GTLabel": [label], "GTScore": [score]},
               dict(base, anchor_mask=[3, 4, 5], use_label_smooth=False, scale_x_y=1.2, ignore_thresh=0.5),
               wrt=("X",), note="GTScore, other anchors, scale_x_y"),
        Sample({"X": [x], "GTBox": [box * np.array([1, 1, 3, 3])], "GTLabel": [label]},
               dict(base, anchor_mask=[1, 3, 4], downsample_ratio=16, ignore_thresh=0.3), wrt=("X",),
               note="boxes matched to other masks"),
        Sample({"X": [x], "GTBox": [np.array([[[0.30, 0.40, 0.20, 0.25], [0.33, 0.45, 0.22, 0.24],
                                               [0.70, 0.60, 0.10, 0.15]]] * 2)],
                "GTLabel": [np.array([[0, 2, 1], [1, 1, 0]], np.int32)]}, dict(base), wrt=("X",),
               note="two boxes in one cell and anchor"),
    ]


register(paddle_opdef("yolov3_loss", _yolov3_loss, {"yolov3_loss_grad": _yolov3_loss_grad}, samples=_yolov3_samples,
                      attrs_handled=("anchors", "anchor_mask", "class_num", "ignore_thresh", "downsample_ratio",
                                     "use_label_smooth", "scale_x_y"),
                      doc="YOLOv3 loss per image (location, class, objectness); gradient for X only"))
