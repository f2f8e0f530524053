"""Beam search over LoD tensors (the legacy seq2seq decoder): beam_search (one
step) and beam_search_decode (the sentences, back-tracked through all steps).

One step of Paddle 3.3.1's CPU `BeamSearchFunctor`, in NumPy terms:

* `scores` (and `ids`, if given) hold the candidates of each prefix: row r
  is prefix r, its `W` columns are candidates. `scores`' LoD (2 levels) says
  which prefixes belong to which source sentence: level `level`, made
  absolute (Paddle's ToAbsOffset), splits the rows into sources.
* A prefix whose `pre_ids` is `end_id` is finished: its only candidate is
  `end_id` with score `pre_scores[r]`. Otherwise candidate (r, j) has id
  `ids[r, j]` (`j` without `ids`) and score `scores[r, j]`
  (`is_accumulated`) or `pre_scores[r] + log(scores[r, j])`, in float32.
* Per source, the `beam_size` best candidates by (score, then row offset),
  both descending (Paddle's `Item::operator<`). Ties of (score, offset) at
  the cut are resolved as Paddle's insertion into its sorted top list does
  (replayed on the tied candidates only; lower candidates never affect it).
* A source whose selected candidates all are `end_id` after an `end_id`
  prefix is finished: it selects nothing (PruneEndBeams).
* Outputs: the selected candidates row by row of their prefix (in score
  order within a prefix), `selected_ids` int64 `[n, 1]`, `selected_scores`
  float32 `[n, 1]`, both with LoD `[source offsets, per-prefix offsets]`,
  and `parent_idx` int32 `[n]`: the prefix row of each.

Paddle reads `pre_scores` and `scores` as float32 whatever the kernel's
dtype, so float64 scores are refused by Paddle (its data<float>() check);
they are refused here too.

beam_search_decode (Paddle's BeamSearchDecoder::Backtrace) reads two tensor
arrays, one element per step, each with the 2-level LoD beam_search gave it.
From the last step back: a source seen for the first time (finished, pruned,
or the last step) starts one sentence per candidate (at most beam_size); a
source already seen extends each sentence with the candidate its prefix
points at (skipping repeated end_id tokens), and moves to that candidate's
prefix (Paddle's forward-only search over the sentence level). Each source's
beam_size sentences, best last-step score first (ties keep their order;
Paddle's std::sort leaves them unspecified), are written forward in time:
SentenceIds int64 `[n]`, SentenceScores `[n]` in Scores' dtype, both with LoD
`[sentences per source, words per sentence]`. A source left with fewer than
beam_size sentences is refused (Paddle then sorts empty sentences: undefined).
Each array element carries its own LoD (ops/lod.py `ArrayLoDs`: write_to_array
records X's LoD at index I), which is what `Call.lod("Ids")` gives here.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._inputs import input_value
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, Sample, register


def abs_offsets(lod: list) -> list[np.ndarray]:
    """Paddle's ToAbsOffset: every level's offsets in rows of the tensor."""
    levels = [np.asarray(level, dtype=np.int64) for level in lod]
    for i in range(len(levels) - 2, -1, -1):
        levels[i] = levels[i + 1][levels[i]]
    return levels


def _replay(keys_score: np.ndarray, keys_off: np.ndarray, beam: int) -> list[int]:
    """Paddle's `Insert` into its descending top-`beam` list, item by item
    (used only where (score, offset) ties straddle the cut)."""
    top: list[int] = []

    def less(a: int, b: int) -> bool:
        return bool(keys_score[a] < keys_score[b] or (keys_score[a] == keys_score[b] and keys_off[a] < keys_off[b]))

    for i in range(len(keys_score)):
        if len(top) < beam:
            top.append(i)
        elif less(i, top[beam - 1]):
            continue
        k = len(top) - 2
        while k >= 0 and less(top[k], i):
            top[k + 1] = top[k]
            k -= 1
        top[k + 1] = i
    return top


def _f32(c: Call, slot: str) -> np.ndarray:
    a = input_value(c, slot)
    if a.dtype != np.float32:
        raise ExecutionError(f"beam_search: '{slot}' is {a.dtype}; Paddle's CPU kernel reads it as float32")
    return a


def _ints(c: Call, slot: str) -> np.ndarray:
    a = input_value(c, slot)
    if a.dtype != np.int64:
        raise ExecutionError(f"beam_search: '{slot}' is {a.dtype}; Paddle's CPU kernel reads it as int64")
    return a


def _beam_search(c: Call):
    pre_ids = _ints(c, "pre_ids").reshape(-1)
    pre_scores = _f32(c, "pre_scores").reshape(-1)
    scores = _f32(c, "scores")
    ids = _ints(c, "ids") if c.has("ids") else None
    level, beam, end_id = int(c.attr("level")), int(c.attr("beam_size")), int(c.attr("end_id"))
    acc = bool(c.attr("is_accumulated", True))
    lod = c.lod("scores")
    if not lod or level < 0 or level >= len(lod):
        raise ExecutionError(f"beam_search: scores needs a LoD with a level {level} (it has "
                             f"{len(lod) if lod else 0} levels; docs/lod.md)")
    if beam <= 0:
        raise ExecutionError(f"beam_search: beam_size must be positive, it is {beam}")
    rows = scores.shape[0]
    width = int(np.prod(scores.shape[1:], dtype=np.int64))
    scores = scores.reshape(rows, width)
    if ids is not None and ids.size != scores.size:
        raise ExecutionError(f"beam_search: ids {list(ids.shape)} and scores disagree in size")
    high = abs_offsets(lod)[level]
    n_prefix = int(high[-1])
    if pre_ids.size < n_prefix or pre_scores.size < n_prefix or n_prefix > rows:
        raise ExecutionError(f"beam_search: the LoD of scores covers {n_prefix} prefixes, but pre_ids has "
                             f"{pre_ids.size}, pre_scores {pre_scores.size} and scores {rows} rows")
    # the candidates, in Paddle's order of insertion: row by row, column by column
    row_of = np.arange(n_prefix)
    ended = pre_ids[:n_prefix] == end_id
    n_cand = np.where(ended, 1, width)
    cand_row = np.repeat(row_of, n_cand)
    start = np.cumsum(n_cand) - n_cand
    col = np.arange(cand_row.size) - np.repeat(start, n_cand)
    live = ~ended[cand_row]
    cand_id = np.full(cand_row.size, end_id, dtype=np.int64)
    cand_score = pre_scores[cand_row].astype(np.float32)
    flat = cand_row[live] * width + col[live]
    cand_id[live] = ids.reshape(-1)[flat] if ids is not None else col[live]
    s = scores.reshape(-1)[flat]
    with np.errstate(divide="ignore", invalid="ignore"):
        cand_score[live] = s if acc else pre_scores[cand_row[live]] + np.log(s)
    src_of_row = np.searchsorted(high, row_of, side="right") - 1
    cand_src = src_of_row[cand_row]
    order = np.lexsort((np.arange(cand_row.size), -cand_row, -cand_score, cand_src))
    n_src = len(high) - 1
    first = np.searchsorted(cand_src[order], np.arange(n_src))
    rank = np.arange(order.size) - first[cand_src[order]]
    keep = order[rank < beam]
    for src in range(n_src):  # exact ties at the cut: replay Paddle's insertion
        lo = int(first[src])
        hi = int(first[src + 1]) if src + 1 < n_src else order.size
        if hi - lo > beam:
            a, b = order[lo + beam - 1], order[lo + beam]
            if cand_score[a] == cand_score[b] and cand_row[a] == cand_row[b]:
                mine = order[lo:hi]
                sc, rw = cand_score[mine], cand_row[mine]
                tie = (sc > cand_score[a]) | ((sc == cand_score[a]) & (rw >= cand_row[a]))
                sub = np.sort(mine[tie])  # in insertion order
                chosen = sub[_replay(cand_score[sub], cand_row[sub], beam)]
                keep = np.concatenate([keep[cand_src[keep] != src], chosen])
    # the top list's order (score desc, offset desc, Paddle's tie order) decides the order within a prefix
    keep = keep[np.lexsort((np.arange(keep.size), cand_row[keep]))] if keep.size else keep
    # PruneEndBeams: a source whose every selection is end_id after an end_id prefix selects nothing
    bad = (cand_id[keep] != end_id) | (pre_ids[cand_row[keep]] != end_id)
    unfinished = np.zeros(n_src, dtype=bool)
    np.logical_or.at(unfinished, cand_src[keep], bad)
    keep = keep[unfinished[cand_src[keep]]]
    low = np.concatenate([[0], np.cumsum(np.bincount(cand_row[keep], minlength=n_prefix))]).astype(np.int64)
    out_lod = [[int(v) for v in high], [int(v) for v in low]]
    res = {"selected_ids": cand_id[keep].reshape(-1, 1),
           "selected_scores": cand_score[keep].astype(np.float32).reshape(-1, 1),
           LOD_KEY: {"selected_ids": out_lod, "selected_scores": out_lod}}
    if c.wants("parent_idx"):
        res["parent_idx"] = cand_row[keep].astype(np.int32)
    return res


def _beam_search_samples(rng):
    outs = {"selected_ids": 1, "selected_scores": 1, "parent_idx": 1}
    # step 0: 2 sources, one prefix each; candidates already top-k'd (ids given, accumulated scores)
    lod0 = [[0, 1, 2], [0, 1, 2]]
    s0 = np.array([[-0.5, -0.9, -1.6], [-0.2, -1.2, -2.3]], np.float32)
    ids0 = np.array([[4, 2, 5], [2, 1, 3]], np.int64)
    base = {"level": 0, "beam_size": 2, "end_id": 0, "is_accumulated": True}
    samples = [Sample({"pre_ids": [np.array([[1], [1]], np.int64)], "pre_scores": [np.zeros((2, 1), np.float32)],
                       "ids": [ids0], "scores": [s0]}, base, outputs=outs,
                      lod={"pre_ids": lod0, "pre_scores": lod0, "ids": lod0, "scores": lod0}, note="first step")]
    # a later step: source 0 has 2 prefixes (one ended), source 1 has 2 live ones; raw probabilities
    lod1 = [[0, 2, 4], [0, 1, 2, 3, 4]]
    pre_ids = np.array([[0], [4], [2], [1]], np.int64)
    pre_sc = np.array([[-0.7], [-0.5], [-0.2], [-1.2]], np.float32)
    p = rng.uniform(0.05, 1.0, (4, 5)).astype(np.float32)
    ids1 = rng.integers(0, 9, (4, 5)).astype(np.int64)
    samples.append(Sample({"pre_ids": [pre_ids], "pre_scores": [pre_sc], "ids": [ids1], "scores": [p]},
                          {**base, "beam_size": 3, "is_accumulated": False}, outputs=outs,
                          lod={"pre_ids": lod1, "pre_scores": lod1, "ids": lod1, "scores": lod1},
                          note="log-probabilities added, an ended prefix"))
    # no ids: the candidate id is its column; accumulated scores
    acc = rng.normal(size=(4, 6)).astype(np.float32)
    samples.append(Sample({"pre_ids": [pre_ids], "pre_scores": [pre_sc], "scores": [acc]},
                          {**base, "beam_size": 2}, outputs=outs,
                          lod={"pre_ids": lod1, "pre_scores": lod1, "scores": lod1}, note="ids from columns"))
    # a finished source is pruned: every prefix of source 0 ended, and so does each selection
    pre_end = np.array([[0], [0], [3], [1]], np.int64)
    samples.append(Sample({"pre_ids": [pre_end], "pre_scores": [pre_sc], "ids": [ids1], "scores": [acc[:, :5]]},
                          {**base, "beam_size": 2}, outputs=outs,
                          lod={"pre_ids": lod1, "pre_scores": lod1, "ids": lod1, "scores": lod1},
                          note="a finished source selects nothing"))
    # exact ties of (score, row) at the cut, beam 3
    tie = np.array([[-1.0, -1.0, -1.0, -1.0], [-1.0, -2.0, -1.0, -3.0]], np.float32)
    lod2 = [[0, 2], [0, 1, 2]]
    samples.append(Sample({"pre_ids": [np.array([[5], [6]], np.int64)], "pre_scores": [np.zeros((2, 1), np.float32)],
                           "ids": [np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int64)], "scores": [tie]},
                          {**base, "beam_size": 3}, outputs=outs,
                          lod={"pre_ids": lod2, "pre_scores": lod2, "ids": lod2, "scores": lod2},
                          note="ties at the cut"))
    return samples


register(paddle_opdef("beam_search", _beam_search, samples=_beam_search_samples,
                      attrs_handled=("level", "beam_size", "end_id", "is_accumulated"),
                      doc="One beam-search step over LoD candidates: the beam_size best per source "
                          "(selected_ids, selected_scores with a 2-level LoD, parent_idx)"))


# --------------------------------------------------------------------------
# beam_search_decode: back-tracking the steps' LoDs into whole sentences
# --------------------------------------------------------------------------
#: Why the interpreter cannot run beam_search_decode yet (docs/ops.md).
ARRAY_LOD_HOOK = ("each step of the array needs its own LoD: write the steps with write_to_array from "
                  "tensors that carry one (beam_search's outputs)")


def _is_lod(e) -> bool:
    return isinstance(e, (list, tuple)) and len(e) > 0 and all(
        isinstance(level, (list, tuple, np.ndarray)) and all(np.ndim(v) == 0 for v in level) for level in e)


def element_lods(c: Call, slot: str, n: int) -> list:
    """The LoDs of the n elements of a tensor-array input: Call.lod(slot), one
    LoD per element (None or a LoD each; lod.ArrayLoDs); an error when the
    array's elements carry none."""
    lod = c.lod(slot)
    if not isinstance(lod, (list, tuple)) or len(lod) != n or not all(e is None or _is_lod(e) for e in lod):
        raise ExecutionError(f"{c.op_type}: input {slot}: {ARRAY_LOD_HOOK}")
    return [None if e is None else [np.asarray(level, dtype=np.int64) for level in e] for e in lod]


def _beam_search_decode(c: Call):
    ids_arr, sc_arr = c.x("Ids"), c.x("Scores")
    if not isinstance(ids_arr, list) or not isinstance(sc_arr, list):
        raise ExecutionError("beam_search_decode: Ids and Scores must be tensor arrays")
    steps = len(ids_arr)
    if steps == 0 or len(sc_arr) != steps:
        raise ExecutionError(f"beam_search_decode: Ids holds {steps} steps and Scores {len(sc_arr)}; they must "
                             "be equal and not 0")
    lods = element_lods(c, "Ids", steps)
    if any(lod is None or len(lod) != 2 for lod in lods):
        raise ExecutionError("beam_search_decode: every step of Ids needs a 2-level LoD (source, sentence)")
    ids = [np.asarray(a).reshape(-1) for a in ids_arr]
    scores = [np.asarray(a).reshape(-1) for a in sc_arr]
    if any(a.dtype != np.int64 for a in ids):
        raise ExecutionError("beam_search_decode: Ids must be int64 (Paddle reads data<int64_t>)")
    dt = scores[0].dtype
    if dt.kind != "f" or any(a.dtype != dt for a in scores):
        raise ExecutionError(f"beam_search_decode: Scores must be one float dtype, they are "
                             f"{sorted({str(a.dtype) for a in scores})}")
    beam, end_id = int(c.attr("beam_size")), int(c.attr("end_id"))
    n_src = len(lods[0][0]) - 1
    if n_src <= 0:
        raise ExecutionError("beam_search_decode: the first step's LoD holds no source sentence")
    words: list[list[list]] = [[[] for _ in range(beam)] for _ in range(n_src)]
    marks: list[list[list]] = [[[] for _ in range(beam)] for _ in range(n_src)]
    prefix: list[np.ndarray | None] = [None] * n_src
    for t in range(steps - 1, -1, -1):   # Paddle's Backtrace, from the last step
        l0, l1 = lods[t]
        if len(l0) < n_src + 1 or ids[t].size < l1[-1] or scores[t].size < l1[-1]:
            raise ExecutionError(f"beam_search_decode: step {t}'s LoD {[list(v) for v in lods[t]]} does not fit "
                                 f"its {ids[t].size} ids, {scores[t].size} scores and {n_src} sources")
        for s in range(n_src):
            ps, pe = int(l0[s]), int(l0[s + 1])
            if prefix[s] is None:    # finished and pruned at this step, or the last step
                counts = l1[ps + 1:pe + 1] - l1[ps:pe]
                cand = np.arange(l1[ps], l1[pe])
                if cand.size > beam:
                    raise ExecutionError(f"beam_search_decode: source {s} has {cand.size} candidates at step {t}, "
                                         f"more than beam_size {beam}")
                for k, ci in enumerate(cand):
                    words[s][k].append(int(ids[t][ci]))
                    marks[s][k].append(scores[t][ci])
                if cand.size:
                    prefix[s] = np.repeat(np.arange(ps, pe), counts)
                continue
            cand = prefix[s]
            if cand.max() >= l1[pe]:
                raise ExecutionError(f"beam_search_decode: step {t + 1} points past source {s}'s candidates of "
                                     f"step {t}")
            for k, ci in enumerate(cand):
                if ids[t][ci] != end_id or not words[s][k]:   # skip the repeated end tokens
                    words[s][k].append(int(ids[t][ci]))
                    marks[s][k].append(scores[t][ci])
            # Paddle's forward-only search: the prefix holding each candidate, never moving back
            p_true = np.searchsorted(l1[1:], cand, side="right")
            prefix[s] = np.maximum.accumulate(np.maximum(p_true, ps))
    out_ids, out_sc, sent_lod, src_lod = [], [], [0], [0]
    for s in range(n_src):
        if any(not w for w in words[s]):
            raise ExecutionError(f"beam_search_decode: source {s} ends with fewer than beam_size {beam} "
                                 "hypotheses; Paddle's decoder then sorts empty sentences (undefined)")
        # by the last step's score, best first (Paddle's std::sort; ties keep their order here)
        order = sorted(range(beam), key=lambda k: -float(marks[s][k][0]))
        for k in order:
            out_ids.extend(words[s][k][::-1])
            out_sc.extend(marks[s][k][::-1])
            sent_lod.append(sent_lod[-1] + len(words[s][k]))
        src_lod.append(src_lod[-1] + beam)
    lod = [src_lod, sent_lod]
    return {"SentenceIds": np.array(out_ids, dtype=np.int64), "SentenceScores": np.array(out_sc, dtype=dt),
            LOD_KEY: {"SentenceIds": lod, "SentenceScores": lod}}


register(paddle_opdef("beam_search_decode", _beam_search_decode, attrs_handled=("beam_size", "end_id"),
                      doc="SentenceIds, SentenceScores = the beam_size sentences per source, followed back "
                          "through the steps' LoDs (needs per-element LoDs of tensor arrays)"))
