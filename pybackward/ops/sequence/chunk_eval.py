"""chunk_eval: precision, recall and F1 of labelled chunks (NER-style tags),
as Paddle 3.3.1's CPU kernel counts them.

A tag id is `type * num_tag_types + tag`; the scheme says which tags open and
close a chunk (IOB: B=0 I=1; IOE: I=0 E=1; IOBES: B=0 I=1 E=2 S=3; plain:
every run of one type), and type `num_chunk_types` is "outside". Chunks of
Inference and Label are compared per sequence - the rows of a padded batch
cut to SeqLength, or the sequences of the inputs' LoD - and chunks of the
`excluded_chunk_types` are not counted. Precision = correct / inferred,
recall = correct / labelled, F1 their harmonic mean (0 when nothing is
correct), in float32; the three counts are int64. The chunk walk follows
Paddle's state machine step by step (a per-tag loop: it is a sequential scan).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

#: scheme -> (number of tag types, begin, inside, end, single); -1: the scheme has no such tag
_SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1), "IOBES": (4, 0, 1, 2, 3), "plain": (1, -1, -1, -1, -1)}


def _ends(prev_tag, prev_type, tag, type_, other, b, i, e, s) -> bool:
    if prev_type == other:
        return False
    if type_ == other or type_ != prev_type:
        return True
    if prev_tag in (b, i) and prev_tag != -1:
        return tag == b or tag == s
    return prev_tag in (e, s) and prev_tag != -1


def _begins(prev_tag, prev_type, tag, type_, other, b, i, e, s) -> bool:
    if prev_type == other:
        return type_ != other
    if type_ == other:
        return False
    if type_ != prev_type:
        return True
    if tag == b and b != -1:
        return True
    if tag in (i, e) and tag != -1:
        return prev_tag == e or prev_tag == s
    return tag == s and s != -1


def _segments(labels, n_types: int, scheme: tuple) -> list[tuple[int, int, int]]:
    n_tags, b, i, e, s = scheme
    other = n_types
    out, start, inside, tag, type_ = [], 0, False, -1, other
    for k, v in enumerate(labels):
        v = int(v)
        if v > n_types * n_tags:
            raise ExecutionError(f"op chunk_eval: label {v} is above num_chunk_types * tag types "
                                 f"({n_types} * {n_tags})")
        prev_tag, prev_type = tag, type_
        tag, type_ = v % n_tags, v // n_tags
        if inside and _ends(prev_tag, prev_type, tag, type_, other, b, i, e, s):
            out.append((start, k - 1, prev_type))
            inside = False
        if _begins(prev_tag, prev_type, tag, type_, other, b, i, e, s):
            start, inside = k, True
    if inside:
        out.append((start, len(labels) - 1, type_))
    return out


def _chunk_eval(c: Call):
    inf, lab = np.asarray(c.x("Inference")).astype(np.int64), np.asarray(c.x("Label")).astype(np.int64)
    name = c.attr("chunk_scheme", "IOB")
    if name not in _SCHEMES:
        raise c.unsupported("chunk_scheme", name, "IOB, IOE, IOBES or plain")
    scheme = _SCHEMES[name]
    n_types = int(c.attr("num_chunk_types"))
    excluded = {int(t) for t in (c.attr("excluded_chunk_types", []) or [])}
    lod = c.lod("Label")
    if lod:
        if len(lod) != 1:
            raise ExecutionError("op chunk_eval: only a one-level LoD is supported, as in Paddle")
        offs = lod[0]
        seqs = [(inf.reshape(-1)[a:z], lab.reshape(-1)[a:z]) for a, z in zip(offs[:-1], offs[1:])]
    else:
        if not c.has("SeqLength"):
            raise ExecutionError("op chunk_eval: without a LoD on Label, SeqLength gives the sequence lengths")
        lengths = np.asarray(c.x("SeqLength")).reshape(-1)
        rows_i, rows_l = inf.reshape(inf.shape[0], -1), lab.reshape(lab.shape[0], -1)
        seqs = [(rows_i[k][:int(n)], rows_l[k][:int(n)]) for k, n in enumerate(lengths)]
    n_inf = n_lab = n_ok = 0
    for out_seq, lab_seq in seqs:
        so, sl = _segments(out_seq, n_types, scheme), _segments(lab_seq, n_types, scheme)
        p = q = 0
        while p < len(so) and q < len(sl):
            if so[p] == sl[q] and so[p][2] not in excluded:
                n_ok += 1
            if so[p][1] < sl[q][1]:
                p += 1
            elif so[p][1] > sl[q][1]:
                q += 1
            else:
                p, q = p + 1, q + 1
        n_lab += sum(seg[2] not in excluded for seg in sl)
        n_inf += sum(seg[2] not in excluded for seg in so)
    f = np.float32
    precision = f(0) if not n_inf else f(n_ok) / f(n_inf)
    recall = f(0) if not n_lab else f(n_ok) / f(n_lab)
    f1 = f(0) if not n_ok else f(2) * precision * recall / (precision + recall)
    one = lambda v, dt: np.array([v], dtype=dt)  # noqa: E731
    return {"Precision": one(precision, np.float32), "Recall": one(recall, np.float32),
            "F1-Score": one(f1, np.float32), "NumInferChunks": one(n_inf, np.int64),
            "NumLabelChunks": one(n_lab, np.int64), "NumCorrectChunks": one(n_ok, np.int64)}


def _samples(rng):
    def padded(scheme, n_types, rows=3, width=8, **attrs):
        n_tags = _SCHEMES[scheme][0]
        top = n_types * n_tags + 1           # the "outside" ids included
        lab = rng.integers(0, top, (rows, width)).astype(np.int64)
        inf = np.where(rng.random((rows, width)) < 0.7, lab, rng.integers(0, top, (rows, width)))
        return Sample({"Inference": [inf.astype(np.int64)], "Label": [lab],
                       "SeqLength": [np.array([width, width - 2, 5][:rows], dtype=np.int64)]},
                      {"num_chunk_types": n_types, "chunk_scheme": scheme, **attrs}, note=scheme)
    return [padded("IOB", 3), padded("IOE", 2), padded("IOBES", 2), padded("plain", 3),
            padded("IOB", 3, excluded_chunk_types=[1])]


register(paddle_opdef("chunk_eval", _chunk_eval, samples=_samples,
                      attrs_handled=("num_chunk_types", "chunk_scheme", "excluded_chunk_types"),
                      doc="precision / recall / F1 of chunks under an IOB / IOE / IOBES / plain scheme"))
