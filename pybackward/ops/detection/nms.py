"""Non-maximum suppression and matching: nms, multiclass_nms(3), matrix_nms,
bipartite_match (no gradients: Paddle's empty makers).

Paddle's CPU kernels (checked against Paddle 3.3.1 by testdata/kernels).
IoU is Paddle's JaccardOverlap in the boxes' dtype: 0 for disjoint boxes,
areas `(x2-x1)*(y2-y1)` when `normalized`, else `(w+1)*(h+1)` and the
intersection `+1` per side; an inverted box has area 0.

* nms (paddle.vision.ops.nms's op): boxes in the given order; box i
  suppresses every later box j whose IoU (normalized areas) is above
  iou_threshold; KeepBoxesIdxs (int64) the survivors in order.
* multiclass_nms / multiclass_nms3: per image and class (but
  background_label), the boxes scoring above score_threshold sorted by
  score (descending, ties in index order; scores compared as float32, as
  Paddle's pair<float, int> comparator does), cut at nms_top_k, then greedy
  NMS (keep if IoU <= threshold with every kept box; the threshold times
  nms_eta after each keep while above 0.5). Over all classes at most
  keep_top_k by score (stable). Rows `[label, score, box]` by class, within
  a class in keep order. multiclass_nms3 adds Index (int32, the box's flat
  index `image * M + box` into the batch) and NmsRoisNum (int32 per image).
  With 2-D Scores (boxes per class, `(R, C, 4)`) a class's kept indices are
  sorted ascending and Index is `offset + box * C + class`; the images
  come from RoisNum (else one image).
* matrix_nms: per class the boxes above score_threshold sorted by score
  (top nms_top_k); each box's score decays by the minimum over higher boxes
  j of `(1 - iou) / (1 - max_iou_j)` (or `exp((max_iou_j^2 - iou^2) *
  sigma)`), kept above post_threshold; then the keep_top_k best over all
  classes, best first. Out, Index (int32) and RoisNum (int32).
* bipartite_match: greedy - the largest remaining entry (at least 1e-6)
  of an unmatched column and unmatched row is matched, ties to the first
  column then row; `per_prediction` then matches each free column to its
  best row at or above dist_threshold. ColToRowMatchIndices (int32, -1
  unmatched) and ColToRowMatchDist (0 unmatched).

LoD: Paddle also gives multiclass_nms's Out a LoD (one sequence per image)
and reads the 2-D forms' images from the inputs' LoD; arrays here carry no
LoD, so the per-image counts are only in NmsRoisNum / RoisNum outputs.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def jaccard(box, others, normalized: bool):
    """Paddle's JaccardOverlap of one box (4,) against others (K, 4)."""
    t = box.dtype.type
    one = t(0) if normalized else t(1)

    def area(b):
        w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        a = w * h if normalized else (w + t(1)) * (h + t(1))
        return np.where((b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1]), t(0), a)

    disjoint = ((others[:, 0] > box[2]) | (others[:, 2] < box[0]) | (others[:, 1] > box[3])
                | (others[:, 3] < box[1]))
    iw = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]) + one
    ih = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]) + one
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area(box) + area(others) - inter)
    return np.where(disjoint, t(0), iou).astype(box.dtype)


def _sorted_above(scores, threshold, top_k: int) -> np.ndarray:
    """Indices with score > threshold, by score descending (float32 keys, stable)."""
    idx = np.nonzero(scores > threshold)[0]
    key = scores[idx].astype(np.float32)
    idx = idx[np.argsort(-key, kind="stable")]
    return idx[:top_k] if -1 < top_k < idx.size else idx


# --------------------------------------------------------------------------
# nms
# --------------------------------------------------------------------------
def _nms(c: Call):
    boxes = np.asarray(c.x("Boxes"))
    if boxes.ndim != 2 or boxes.shape[1] != 4 or boxes.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Boxes must be float (N, 4), got {boxes.dtype} {boxes.shape}")
    thr = np.float32(c.attr("iou_threshold", 0.3))
    n = boxes.shape[0]
    dead = np.zeros(n, bool)
    for i in range(n):
        if dead[i]:
            continue
        o = boxes[i + 1:]
        iw = np.maximum(np.minimum(boxes[i, 2], o[:, 2]) - np.maximum(boxes[i, 0], o[:, 0]), 0)
        ih = np.maximum(np.minimum(boxes[i, 3], o[:, 3]) - np.maximum(boxes[i, 1], o[:, 1]), 0)
        inter = iw * ih
        union = ((boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
                 + (o[:, 2] - o[:, 0]) * (o[:, 3] - o[:, 1]) - inter)
        with np.errstate(divide="ignore", invalid="ignore"):
            dead[i + 1:] |= (inter / union) > thr
    return {"KeepBoxesIdxs": np.nonzero(~dead)[0].astype(np.int64)}


def _nms_samples(rng):
    b = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0.5, 0, 10, 9], [21, 19, 31, 29],
                  [50, 50, 52, 52]], float)
    return [Sample({"Boxes": [b]}, {"iou_threshold": 0.5}), Sample({"Boxes": [b]}, {"iou_threshold": 0.8})]


register(paddle_opdef("nms", _nms, samples=_nms_samples, attrs_handled=("iou_threshold",),
                      doc="greedy NMS in the boxes' order; the indices kept"))


# --------------------------------------------------------------------------
# multiclass_nms, multiclass_nms3
# --------------------------------------------------------------------------
def _nms_fast(boxes, scores, c: Call):
    t = boxes.dtype.type
    order = _sorted_above(scores, t(np.float32(c.attr("score_threshold"))), int(c.attr("nms_top_k")))
    thr = t(np.float32(c.attr("nms_threshold", 0.3)))
    eta = t(np.float32(c.attr("nms_eta", 1.0)))
    normalized = bool(c.attr("normalized", True))
    kept: list[int] = []
    for i in order:
        if kept and not np.all(jaccard(boxes[i], boxes[kept], normalized) <= thr):
            continue
        kept.append(int(i))
        if eta < 1 and thr > 0.5:
            thr = t(thr * eta)
    return kept


def _multiclass_one(c: Call, boxes, scores, per_class_boxes: bool):
    """{label: kept box indices} for one image (scores (C, M) or, per class, (M, C))."""
    n_cls = scores.shape[1] if per_class_boxes else scores.shape[0]
    bg = int(c.attr("background_label", 0))
    sel: dict[int, list[int]] = {}
    for k in range(n_cls):
        if k == bg:
            continue
        if per_class_boxes:
            sel[k] = sorted(_nms_fast(boxes[:, k], scores[:, k], c))
        else:
            sel[k] = _nms_fast(boxes, scores[k], c)
    keep_top_k = int(c.attr("keep_top_k"))
    total = sum(len(v) for v in sel.values())
    if -1 < keep_top_k < total:
        pairs = [(k, i) for k in sorted(sel) for i in sel[k]]
        sc = np.array([scores[i, k] if per_class_boxes else scores[k, i] for k, i in pairs]).astype(np.float32)
        best = np.argsort(-sc, kind="stable")[:keep_top_k]
        new: dict[int, list[int]] = {}
        for p in best:
            new.setdefault(pairs[p][0], []).append(pairs[p][1])
        sel = {k: (sorted(v) if per_class_boxes else v) for k, v in sorted(new.items())}
    return {k: v for k, v in sorted(sel.items()) if v}


def _multiclass(c: Call, with_index: bool):
    boxes, scores = np.asarray(c.x("BBoxes")), np.asarray(c.x("Scores"))
    dt = boxes.dtype
    if dt.kind != "f":
        raise ExecutionError(f"op {c.op_type}: BBoxes must be floating point, got {dt}")
    if scores.ndim == 3:
        if boxes.ndim != 3 or boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2]:
            raise ExecutionError(f"op {c.op_type}: BBoxes {boxes.shape} do not fit Scores {scores.shape} (N, C, M)")
        if boxes.shape[2] != 4:
            raise c.unsupported("BBoxes", boxes.shape, "polygon boxes (8+ coordinates) are not supported")
        images = [(boxes[i], scores[i], i * scores.shape[2]) for i in range(scores.shape[0])]
        per_class = False
    elif scores.ndim == 2:
        if boxes.ndim != 3 or boxes.shape[:2] != scores.shape or boxes.shape[2] != 4:
            raise ExecutionError(f"op {c.op_type}: BBoxes {boxes.shape} do not fit Scores {scores.shape} (R, C)")
        if c.has("RoisNum"):
            counts = np.asarray(c.x("RoisNum")).reshape(-1).astype(np.int64)
            if counts.sum() != scores.shape[0] or (counts < 0).any():
                raise ExecutionError(f"op {c.op_type}: RoisNum {counts.tolist()} does not split "
                                     f"{scores.shape[0]} boxes")
        else:
            counts = np.array([scores.shape[0]])
        starts = np.concatenate([[0], np.cumsum(counts)])
        images = [(boxes[s:e], scores[s:e], s * scores.shape[1]) for s, e in zip(starts[:-1], starts[1:])]
        per_class = True
    else:
        raise ExecutionError(f"op {c.op_type}: Scores must be 2-D or 3-D, got {scores.shape}")
    rows, index, per_image = [], [], []
    for b, s, offset in images:
        count = 0
        if b.shape[0]:
            for k, idx in _multiclass_one(c, b, s, per_class).items():
                for i in idx:
                    box = b[i, k] if per_class else b[i]
                    score = s[i, k] if per_class else s[k, i]
                    rows.append(np.concatenate([[k, score], box]).astype(dt))
                    index.append(offset + (i * s.shape[1] + k if per_class else i))
                    count += 1
        per_image.append(count)
    if rows:
        out = np.stack(rows)
    elif with_index:
        out = np.zeros((0, 6), dt)
    else:
        out = np.full((1, 1), -1, dt)
    res = {"Out": out}
    if with_index:
        res["Index"] = np.array(index, np.int32).reshape(-1, 1)
        res["NmsRoisNum"] = np.array(per_image, np.int32)
    return res


def _mc_samples(rng, v3: bool):
    centres = rng.uniform(0, 40, (2, 6, 2))
    wh = rng.uniform(8, 20, (2, 6, 2))
    boxes = np.concatenate([centres - wh / 2, centres + wh / 2], axis=-1)
    boxes[:, 1] = boxes[:, 0] + rng.uniform(-1, 1, 4)        # a near-duplicate box
    scores = rng.permutation(2 * 3 * 6).reshape(2, 3, 6) / 40.0 + 0.01
    base = {"score_threshold": 0.1, "nms_top_k": 5, "keep_top_k": -1, "nms_threshold": 0.3, "normalized": False,
            "nms_eta": 1.0, "background_label": 0}
    S = Sample
    out = [S({"BBoxes": [boxes], "Scores": [scores]}, dict(base), note="background 0, pixels"),
           S({"BBoxes": [boxes / 50], "Scores": [scores]}, dict(base, background_label=-1, keep_top_k=4,
                                                                normalized=True, nms_threshold=0.1),
             note="keep_top_k, normalized"),
           S({"BBoxes": [boxes], "Scores": [scores]}, dict(base, score_threshold=0.9, nms_top_k=-1),
             note="nothing above the threshold"),
           S({"BBoxes": [boxes], "Scores": [scores]}, dict(base, nms_eta=0.7, nms_threshold=0.8, background_label=2),
             note="adaptive threshold")]
    if v3:
        pc_boxes = np.concatenate([boxes[0][:, None] + rng.uniform(-2, 2, (6, 3, 4))], axis=0)
        pc_scores = scores[0].T.copy()
        out.append(S({"BBoxes": [pc_boxes], "Scores": [pc_scores], "RoisNum": [np.array([4, 2], np.int32)]},
                     dict(base, background_label=-1, keep_top_k=5), note="2-D scores with RoisNum"))
    return out


_MC_ATTRS = ("score_threshold", "nms_top_k", "keep_top_k", "nms_threshold", "nms_eta", "normalized",
             "background_label")
register(paddle_opdef("multiclass_nms", lambda c: _multiclass(c, False), samples=lambda rng: _mc_samples(rng, False),
                      attrs_handled=_MC_ATTRS,
                      doc="per-class NMS; rows [label, score, box] (Out's per-image LoD is not attached)"))
register(paddle_opdef("multiclass_nms3", lambda c: _multiclass(c, True), samples=lambda rng: _mc_samples(rng, True),
                      attrs_handled=_MC_ATTRS, doc="per-class NMS with Index and NmsRoisNum"))


# --------------------------------------------------------------------------
# matrix_nms
# --------------------------------------------------------------------------
def _matrix_nms_class(boxes, scores, c: Call):
    t = boxes.dtype.type
    normalized = bool(c.attr("normalized", True))
    order = np.nonzero(scores > t(np.float32(c.attr("score_threshold"))))[0]
    order = order[np.argsort(-scores[order], kind="stable")]
    top_k = int(c.attr("nms_top_k"))
    if -1 < top_k < order.size:
        order = order[:top_k]
    n = order.size
    if n == 0:
        return [], []
    b = boxes[order]
    iou = np.zeros((n, n), boxes.dtype)
    for i in range(1, n):
        iou[i, :i] = jaccard(b[i], b[:i], normalized)
    iou_max = np.concatenate([[t(0)], [iou[i, :i].max() for i in range(1, n)]]).astype(boxes.dtype)
    post = t(np.float32(c.attr("post_threshold", 0.0)))
    s = scores[order]
    if bool(c.attr("use_gaussian", False)):
        sigma = t(np.float32(c.attr("gaussian_sigma", 2.0)))
        decay = np.exp((iou_max[None, :] ** 2 - iou ** 2) * sigma)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            decay = (t(1) - iou) / (t(1) - iou_max[None, :])
    lower = np.tril(np.ones((n, n), bool), -1)
    min_decay = np.minimum(np.min(np.where(lower, decay, np.inf), axis=1), t(1)).astype(boxes.dtype)
    ds = (min_decay * s).astype(boxes.dtype)
    ds[0] = s[0]
    keep = ds > post
    return order[keep].tolist(), ds[keep].tolist()


def _matrix_nms(c: Call):
    boxes, scores = np.asarray(c.x("BBoxes")), np.asarray(c.x("Scores"))
    if scores.ndim != 3 or boxes.ndim != 3 or boxes.shape[:2] != (scores.shape[0], scores.shape[2]):
        raise ExecutionError(f"op {c.op_type}: BBoxes (N, M, 4) and Scores (N, C, M) expected, got "
                             f"{boxes.shape}, {scores.shape}")
    if boxes.shape[2] != 4:
        raise c.unsupported("BBoxes", boxes.shape, "4 coordinates per box")
    dt = boxes.dtype
    bg = int(c.attr("background_label", 0))
    keep_top_k = int(c.attr("keep_top_k"))
    rows, index, per_image = [], [], []
    for i in range(scores.shape[0]):
        idx, sc, cls = [], [], []
        for k in range(scores.shape[1]):
            if k == bg:
                continue
            kept, ds = _matrix_nms_class(boxes[i], scores[i, k], c)
            idx += kept
            sc += ds
            cls += [k] * len(kept)
        n = len(idx)
        if -1 < keep_top_k < n:
            n = keep_top_k
        best = np.argsort(-np.array(sc, dt), kind="stable")[:n]
        for p in best:
            rows.append(np.concatenate([[cls[p], sc[p]], boxes[i, idx[p]]]).astype(dt))
            index.append(i * scores.shape[2] + idx[p])
        per_image.append(int(n))
    out = np.stack(rows) if rows else np.zeros((0, 6), dt)
    return {"Out": out, "Index": np.array(index, np.int32).reshape(-1, 1),
            "RoisNum": np.array(per_image, np.int32)}


def _matrix_samples(rng):
    centres = rng.uniform(0, 1, (2, 7, 2))
    wh = rng.uniform(0.2, 0.5, (2, 7, 2))
    boxes = np.concatenate([centres - wh / 2, centres + wh / 2], axis=-1)
    scores = rng.permutation(2 * 3 * 7).reshape(2, 3, 7) / 45.0 + 0.01
    base = {"score_threshold": 0.1, "nms_top_k": 6, "keep_top_k": 8, "post_threshold": 0.05, "use_gaussian": False,
            "gaussian_sigma": 2.0, "background_label": 0, "normalized": True}
    return [Sample({"BBoxes": [boxes], "Scores": [scores]}, dict(base), note="linear"),
            Sample({"BBoxes": [boxes], "Scores": [scores]}, dict(base, use_gaussian=True, background_label=-1,
                                                                 keep_top_k=-1, nms_top_k=-1), note="gaussian"),
            Sample({"BBoxes": [boxes * 30], "Scores": [scores]}, dict(base, normalized=False, post_threshold=0.3),
                   note="pixels, post_threshold")]


register(paddle_opdef("matrix_nms", _matrix_nms, samples=_matrix_samples,
                      attrs_handled=("score_threshold", "nms_top_k", "keep_top_k", "post_threshold", "use_gaussian",
                                     "gaussian_sigma", "background_label", "normalized"),
                      doc="Matrix NMS (SOLOv2): scores decayed by IoU with higher boxes; Index and RoisNum"))


# --------------------------------------------------------------------------
# bipartite_match
# --------------------------------------------------------------------------
def _bipartite_match(c: Call):
    d = np.asarray(c.x("DistMat"))
    if d.ndim != 2 or d.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: DistMat must be a float matrix, got {d.dtype} {d.shape}")
    t = d.dtype.type
    rows, cols = d.shape
    match = np.full(cols, -1, np.int32)
    dist = np.zeros(cols, d.dtype)
    free_r, free_c = np.ones(rows, bool), np.ones(cols, bool)
    ok = d >= t(1e-6)
    dt_cr = d.T                                                  # scan order: column, then row
    while free_r.any():
        cand = np.where(ok.T & free_c[:, None] & free_r[None, :], dt_cr, -np.inf)
        k = int(np.argmax(cand))
        j, i = divmod(k, rows)
        if not np.isfinite(cand.flat[k]):
            break
        match[j], dist[j] = i, d[i, j]
        free_r[i] = free_c[j] = False
    mt = c.attr("match_type", "bipartite")
    if mt == "per_prediction":
        thr = t(np.float32(c.attr("dist_threshold", 0.5)))
        cand = np.where(ok & (d >= thr), d, -np.inf)
        best = np.argmax(cand, axis=0)
        got = np.isfinite(cand[best, np.arange(cols)]) & (match == -1)
        match[got] = best[got]
        dist[got] = d[best[got], np.nonzero(got)[0]]
    elif mt != "bipartite":
        raise c.unsupported("match_type", mt, "bipartite or per_prediction")
    return {"ColToRowMatchIndices": match[None, :], "ColToRowMatchDist": dist[None, :]}


def _bipartite_samples(rng):
    d = rng.permutation(4 * 6).reshape(4, 6) / 24.0
    d[1, 2] = 0.0
    return [Sample({"DistMat": [d]}, {"match_type": "bipartite", "dist_threshold": 0.5}),
            Sample({"DistMat": [d]}, {"match_type": "per_prediction", "dist_threshold": 0.3}, note="per_prediction"),
            Sample({"DistMat": [d.T.copy()]}, {"match_type": "bipartite", "dist_threshold": 0.5}, note="more rows")]


register(paddle_opdef("bipartite_match", _bipartite_match, samples=_bipartite_samples,
                      attrs_handled=("match_type", "dist_threshold"),
                      doc="greedy bipartite (and per-prediction) matching of columns to rows (one instance)"))
