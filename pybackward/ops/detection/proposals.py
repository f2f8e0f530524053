"""Region-proposal ops of two-stage detectors: generate_proposals(_v2),
distribute_fpn_proposals, collect_fpn_proposals (no gradients).

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels);
`pixel_offset` counts box sizes inclusively (`x2 - x1 + 1`):

* generate_proposals_v2 (and v1, whose ImInfo rows `[h, w, scale]` clip
  as ImShape does but test min_size on sizes divided by the scale), per
  image: the pre_nms_topN best anchors by score
  (Scores (N, A, H, W) and BboxDeltas (N, 4A, H, W) read in (H, W, A)
  order, as Anchors / Variances (H, W, A, 4)); deltas decoded as box_coder
  does, with the log-size deltas (times the variance) capped at
  log(1000/16); boxes clipped to `[0, im - offset]` (ImShape rows `[h, w]`);
  boxes narrower than max(min_size, 1) or (with pixel_offset) centred
  outside the image dropped; greedy NMS by score (IoU with the offset,
  threshold times eta after each keep while above 0.5) cut at
  post_nms_topN. An image left with no box gives one zero box of score 0.
  RpnRoisNum (int32) counts each image's boxes.
* distribute_fpn_proposals: level `floor(log2(sqrt(area) / refer_scale +
  1e-6) + refer_level)` clamped to [min_level, max_level]; MultiFpnRois
  the boxes per level (image order kept), RestoreIndex (int32, (R, 1)) each
  box's row in the levels' concatenation, MultiLevelRoIsNum (int32) per
  level and image.
* collect_fpn_proposals: all levels' boxes by score (descending, stable),
  the best post_nms_topN, regrouped by image (stable); RoisNum per image.

LoD: Paddle also gives RpnRois, MultiFpnRois and FpnRois a LoD (boxes per
image) and reads the boxes' images from their LoD when no RoisNum input is
given; arrays here carry none, so the counts are in the *RoisNum outputs
and, without RoisNum inputs, all boxes belong to one image.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .nms import jaccard
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_CLIP = math.log(1000.0 / 16.0)


def _counts(c: Call, slot: str, total: int, n_img: int | None = None) -> np.ndarray:
    if c.has(slot):
        counts = np.asarray(c.x(slot)).reshape(-1).astype(np.int64)
        if counts.sum() != total or (counts < 0).any() or (n_img is not None and counts.size != n_img):
            raise ExecutionError(f"op {c.op_type}: {slot} {counts.tolist()} does not split {total} boxes")
        return counts
    return np.array([total])


# --------------------------------------------------------------------------
# generate_proposals_v2
# --------------------------------------------------------------------------
def _proposals_one(c: Call, im, anchors, var, deltas, scores, is_scale: bool = False):
    """One image's proposals. `im` is ImShape's row [h, w], or with
    `is_scale` (generate_proposals v1) ImInfo's [h, w, scale], whose box
    sizes are measured in the unscaled image for min_size."""
    t = deltas.dtype.type
    pre, post = int(c.attr("pre_nms_topN", 6000)), int(c.attr("post_nms_topN", 1000))
    off = t(1) if bool(c.attr("pixel_offset", True)) else t(0)
    order = np.argsort(-scores, kind="stable")
    if 0 < pre < scores.size:
        order = order[:pre]
    a, d, v, s = anchors[order], deltas[order], var[order], scores[order]
    aw = a[:, 2] - a[:, 0] + off
    ah = a[:, 3] - a[:, 1] + off
    ax = (a[:, 0] + 0.5 * aw).astype(deltas.dtype)
    ay = (a[:, 1] + 0.5 * ah).astype(deltas.dtype)
    cx = v[:, 0] * d[:, 0] * aw + ax
    cy = v[:, 1] * d[:, 1] * ah + ay
    bw = np.exp(np.minimum(v[:, 2] * d[:, 2], t(_CLIP))) * aw
    bh = np.exp(np.minimum(v[:, 3] * d[:, 3], t(_CLIP))) * ah
    box = np.stack([cx - bw / t(2), cy - bh / t(2), cx + bw / t(2) - off, cy + bh / t(2) - off], axis=1)
    lim = np.array([im[1], im[0], im[1], im[0]], deltas.dtype) - off
    box = np.maximum(np.minimum(box, lim), t(0)).astype(deltas.dtype)
    min_size = t(max(float(np.float32(c.attr("min_size", 0.1))), 1.0))
    ws = box[:, 2] - box[:, 0] + off
    hs = box[:, 3] - box[:, 1] + off
    if off:
        xc, yc = box[:, 0] + ws / t(2), box[:, 1] + hs / t(2)
        if is_scale:
            ws = (box[:, 2] - box[:, 0]) / im[2] + t(1)
            hs = (box[:, 3] - box[:, 1]) / im[2] + t(1)
        keep = (ws >= min_size) & (hs >= min_size) & (xc <= im[1]) & (yc <= im[0])
    else:
        keep = (ws >= min_size) & (hs >= min_size)
    if not keep.any():
        return np.zeros((1, 4), deltas.dtype), np.zeros((1, 1), deltas.dtype)
    box, s = box[keep], s[keep]
    thr = t(np.float32(c.attr("nms_thresh", 0.5)))
    if thr <= 0:
        return box, s[:, None]
    eta = np.float32(c.attr("eta", 1.0))
    # Paddle pops the highest score from a stable ascending sort: ties go to the later box
    cand = np.lexsort((-np.arange(s.size), -s))
    kept: list[int] = []
    for i in cand:
        if kept and not np.all(jaccard(box[i], box[kept], not off) <= thr):
            continue
        kept.append(int(i))
        if eta < 1 and thr > 0.5:
            thr = t(thr * eta)
    if 0 < post < len(kept):
        kept = kept[:post]
    return box[kept], s[kept][:, None]


def _generate_proposals(c: Call):
    v1 = c.op_type == "generate_proposals"
    scores, deltas = np.asarray(c.x("Scores")), np.asarray(c.x("BboxDeltas"))
    im = np.asarray(c.x("ImInfo" if v1 else "ImShape"))
    anchors, var = np.asarray(c.x("Anchors")).reshape(-1, 4), np.asarray(c.x("Variances")).reshape(-1, 4)
    if scores.ndim != 4 or deltas.shape != (scores.shape[0], 4 * scores.shape[1]) + scores.shape[2:]:
        raise ExecutionError(f"op {c.op_type}: Scores (N, A, H, W) and BboxDeltas (N, 4A, H, W) expected, got "
                             f"{scores.shape}, {deltas.shape}")
    n = scores.shape[0]
    if anchors.shape[0] != scores[0].size or var.shape != anchors.shape or im.reshape(n, -1).shape[1] < 2 + v1:
        raise ExecutionError(f"op {c.op_type}: Anchors/Variances {anchors.shape} / {var.shape} do not fit Scores "
                             f"{scores.shape}, or ImShape/ImInfo {im.shape} is not (N, 2) / (N, 3)")
    im = im.reshape(n, -1).astype(deltas.dtype)
    rois, probs, nums = [], [], []
    for i in range(n):
        s = scores[i].transpose(1, 2, 0).reshape(-1)
        d = deltas[i].transpose(1, 2, 0).reshape(-1, 4)
        b, p = _proposals_one(c, im[i], anchors.astype(deltas.dtype), var.astype(deltas.dtype), d, s, v1)
        rois.append(b)
        probs.append(p)
        nums.append(b.shape[0])
    return {"RpnRois": np.concatenate(rois).astype(deltas.dtype), "RpnRoiProbs": np.concatenate(probs),
            "RpnRoisNum": np.array(nums, np.int32)}


def _gp_samples(rng):
    h, w, a = 3, 4, 3
    ys, xs = np.meshgrid(np.arange(h) * 8.0, np.arange(w) * 8.0, indexing="ij")
    sizes = np.array([[8, 8], [16, 10], [10, 16]], float)
    ctr = np.stack([xs, ys], -1)[:, :, None, :] + 4
    anchors = np.concatenate([ctr - sizes / 2, ctr + sizes / 2], -1)               # (H, W, A, 4)
    var = np.broadcast_to(np.array([0.1, 0.1, 0.2, 0.2]), anchors.shape).copy()
    scores = (rng.permutation(2 * a * h * w).reshape(2, a, h, w) + 0.5) / 80.0
    deltas = rng.uniform(-1.0, 1.0, (2, 4 * a, h, w))
    im = np.array([[24.0, 30.0], [20.0, 28.0]])
    base = {"pre_nms_topN": 20, "post_nms_topN": 8, "nms_thresh": 0.5, "min_size": 2.0, "eta": 1.0,
            "pixel_offset": True}
    ins = {"Scores": [scores], "BboxDeltas": [deltas], "ImShape": [im], "Anchors": [anchors], "Variances": [var]}
    return [Sample(ins, dict(base), note="pixel offset"),
            Sample(ins, dict(base, pixel_offset=False, pre_nms_topN=-1, post_nms_topN=-1, nms_thresh=0.3),
                   note="no pixel offset, no top-n"),
            Sample(ins, dict(base, eta=0.8, nms_thresh=0.9, min_size=6.0), note="adaptive threshold"),
            Sample(ins, dict(base, min_size=1000.0), note="nothing left: one zero box")]


def _gp_v1_samples(rng):
    out = []
    for smp in _gp_samples(rng)[:3]:
        ins = dict(smp.inputs)
        im = ins.pop("ImShape")[0]
        ins["ImInfo"] = [np.concatenate([im * 1.5, np.full((im.shape[0], 1), 1.5)], axis=1)]
        out.append(Sample(ins, {k: v for k, v in smp.attrs.items() if k != "pixel_offset"}, note=smp.note))
    return [out[0], out[2]]


register(paddle_opdef("generate_proposals", _generate_proposals, samples=_gp_v1_samples,
                      attrs_handled=("pre_nms_topN", "post_nms_topN", "nms_thresh", "min_size", "eta"),
                      doc="RPN proposals (v1: ImInfo [h, w, scale]); RpnRois' LoD not attached"))
register(paddle_opdef("generate_proposals_v2", _generate_proposals, samples=_gp_samples,
                      attrs_handled=("pre_nms_topN", "post_nms_topN", "nms_thresh", "min_size", "eta",
                                     "pixel_offset"),
                      doc="RPN proposals: decode, clip, filter, NMS per image (RpnRois' LoD not attached)"))


# --------------------------------------------------------------------------
# distribute_fpn_proposals
# --------------------------------------------------------------------------
def _distribute_fpn_proposals(c: Call):
    rois = np.asarray(c.x("FpnRois"))
    if rois.ndim != 2 or rois.shape[1] != 4:
        raise ExecutionError(f"op {c.op_type}: FpnRois must be (R, 4), got {rois.shape}")
    t = rois.dtype.type
    lo, hi = int(c.attr("min_level")), int(c.attr("max_level"))
    ref_l, ref_s = int(c.attr("refer_level")), int(c.attr("refer_scale"))
    if hi < lo or c.n_out("MultiFpnRois") not in (0, hi - lo + 1):
        raise c.unsupported("min_level/max_level", (lo, hi), f"{c.n_out('MultiFpnRois')} MultiFpnRois outputs")
    counts = _counts(c, "RoisNum", rois.shape[0])
    off = bool(c.attr("pixel_offset", True))
    w, h = rois[:, 2] - rois[:, 0], rois[:, 3] - rois[:, 1]
    area = np.where((w < 0) | (h < 0), t(0), (w + t(1)) * (h + t(1)) if off else w * h)
    scale = np.sqrt(area)
    lvl = np.floor(np.log2(scale / t(ref_s) + t(1e-6)) + t(ref_l)).astype(np.int64)
    lvl = np.clip(lvl, lo, hi)
    img = np.repeat(np.arange(counts.size), counts)
    order = np.lexsort((np.arange(rois.shape[0]), lvl))       # by level, image order kept
    restore = np.empty(rois.shape[0], np.int32)
    restore[order] = np.arange(rois.shape[0])
    outs = [rois[lvl == k] for k in range(lo, hi + 1)]
    nums = [np.bincount(img[lvl == k], minlength=counts.size).astype(np.int32) for k in range(lo, hi + 1)]
    res = {"MultiFpnRois": outs, "RestoreIndex": restore[:, None]}
    if c.n_out("MultiLevelRoIsNum"):
        res["MultiLevelRoIsNum"] = nums
    return res


def _dist_samples(rng):
    x1y1 = rng.uniform(0, 100, (7, 2))
    wh = np.array([[10, 12], [40, 50], [200, 180], [90, 110], [5, 4], [300, 260], [60, 70]], float)
    rois = np.concatenate([x1y1, x1y1 + wh], 1)
    base = {"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 224, "pixel_offset": True}
    return [Sample({"FpnRois": [rois], "RoisNum": [np.array([4, 3], np.int32)]}, dict(base),
                   outputs={"MultiFpnRois": 4, "RestoreIndex": 1, "MultiLevelRoIsNum": 4}, note="two images"),
            Sample({"FpnRois": [rois / 4], "RoisNum": [np.array([7], np.int32)]},
                   dict(base, min_level=3, max_level=4, refer_scale=56, pixel_offset=False),
                   outputs={"MultiFpnRois": 2, "RestoreIndex": 1, "MultiLevelRoIsNum": 2}, note="no pixel offset")]


register(paddle_opdef("distribute_fpn_proposals", _distribute_fpn_proposals, samples=_dist_samples,
                      attrs_handled=("min_level", "max_level", "refer_level", "refer_scale", "pixel_offset"),
                      doc="assign RoIs to FPN levels by size (MultiFpnRois' LoD not attached)"))


# --------------------------------------------------------------------------
# collect_fpn_proposals
# --------------------------------------------------------------------------
def _collect_fpn_proposals(c: Call):
    rois, scores = c.xs("MultiLevelRois"), c.xs("MultiLevelScores")
    if len(rois) != len(scores) or not rois:
        raise ExecutionError(f"op {c.op_type}: {len(rois)} MultiLevelRois for {len(scores)} MultiLevelScores")
    nums = c.xs("MultiLevelRoIsNum")
    if nums and len(nums) != len(rois):
        raise ExecutionError(f"op {c.op_type}: {len(nums)} MultiLevelRoIsNum for {len(rois)} levels")
    boxes, sc, img = [], [], []
    n_img = np.asarray(nums[0]).size if nums else 1
    for k, (r, s) in enumerate(zip(rois, scores)):
        r, s = np.asarray(r).reshape(-1, 4), np.asarray(s).reshape(-1)
        cnt = np.asarray(nums[k]).reshape(-1).astype(np.int64) if nums else np.array([r.shape[0]])
        if cnt.sum() != r.shape[0] or s.size != r.shape[0] or cnt.size != n_img:
            raise ExecutionError(f"op {c.op_type}: level {k}: {r.shape[0]} boxes, {s.size} scores, counts "
                                 f"{cnt.tolist()}")
        boxes.append(r)
        sc.append(s)
        img.append(np.repeat(np.arange(n_img), cnt))
    boxes, sc, img = np.concatenate(boxes), np.concatenate(sc), np.concatenate(img)
    top = min(int(c.attr("post_nms_topN")), sc.size)
    if top < 0:
        raise c.unsupported("post_nms_topN", top, "must not be negative")
    best = np.argsort(-sc, kind="stable")[:top]
    best = best[np.argsort(img[best], kind="stable")]
    return {"FpnRois": boxes[best], "RoisNum": np.bincount(img[best], minlength=n_img).astype(np.int32)}


def _collect_samples(rng):
    lv = [rng.uniform(0, 50, (5, 4)), rng.uniform(0, 50, (4, 4)), rng.uniform(0, 50, (3, 4))]
    lv = [np.concatenate([b[:, :2], b[:, :2] + b[:, 2:] + 1], 1) for b in lv]
    s = (rng.permutation(12) + 0.5) / 12.0
    scores = [s[:5, None], s[5:9, None], s[9:, None]]
    nums = [np.array([3, 2], np.int32), np.array([1, 3], np.int32), np.array([2, 1], np.int32)]
    return [Sample({"MultiLevelRois": lv, "MultiLevelScores": scores, "MultiLevelRoIsNum": nums},
                   {"post_nms_topN": 7}, outputs={"FpnRois": 1, "RoisNum": 1}, note="two images, top 7")]


register(paddle_opdef("collect_fpn_proposals", _collect_fpn_proposals, samples=_collect_samples,
                      attrs_handled=("post_nms_topN",),
                      doc="merge FPN levels' RoIs, keep the best by score, grouped by image (FpnRois' LoD not attached)"))
