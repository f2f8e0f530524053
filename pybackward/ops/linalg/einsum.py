"""einsum: Paddle's einsum op (Operands, equation) and its grad.

The equation takes letters, `...` and implicit outputs; a label of size 1
broadcasts, as Paddle's kernel lets it (its Python API rewrites `...` into
letters and unsqueezes operands to them, and passes explicit two-operand
equations). XShape holds the operands (Paddle shares their data there) and
is what einsum_grad reads; InnerCache, Paddle's cache of intermediate
products, is left empty.
"""
from __future__ import annotations

import string

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _as(a, like: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(like.dtype, copy=False)


# --------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------
_LETTERS = string.ascii_letters


def _einsum_plan(c: Call, eq: str, shapes):
    """Operand labels as ints (letters 0..51, broadcast dims 52..), the
    output labels, and each label's size; broadcast (`...`) dims follow
    NumPy's rules and any label of size 1 broadcasts (Paddle's Python API
    turns `...` into such letters); the implicit output is the broadcast
    dims then the letters used once, sorted (Paddle's rule)."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ExecutionError(f"op einsum: equation {eq!r} names {len(terms)} operands, {len(shapes)} are given")

    def letters(term, what):
        body = term.replace("...", "")
        bad = [ch for ch in body if ch not in _LETTERS]
        if bad or term.count("...") > 1 or "." in body:
            raise ExecutionError(f"op einsum: bad {what} {term!r} in equation {eq!r}")
        return body

    n_ell = []
    for term, shape in zip(terms, shapes):
        body = letters(term, "operand term")
        k = len(shape) - len(body)
        if k < 0 or (k > 0 and "..." not in term):
            raise ExecutionError(f"op einsum: term {term!r} does not match an operand of rank {len(shape)}")
        n_ell.append(k)
    n_e = max(n_ell, default=0)
    ell = list(range(52, 52 + n_e))
    sizes: dict[int, int] = {}
    labels = []
    for term, shape, k in zip(terms, shapes, n_ell):
        ls = []
        pre, _, post = term.partition("...") if "..." in term else (term, "", "")
        ls = [_LETTERS.index(ch) for ch in pre] + ell[n_e - k:] + [_LETTERS.index(ch) for ch in post]
        for lab, size in zip(ls, shape):   # a label of size 1 broadcasts (Paddle's API unsqueezes to it)
            old = sizes.get(lab)
            sizes[lab] = size if old in (None, 1) else old
            if size not in (1, sizes[lab]):
                what = "broadcast dims" if lab >= 52 else f"label {_LETTERS[lab]!r}"
                raise ExecutionError(f"op einsum: {what} of sizes {old} and {size} do not match")
        labels.append(ls)
    if arrow:
        body = letters(rhs, "output term")
        pre, _, post = rhs.partition("...") if "..." in rhs else (rhs, "", "")
        out = [_LETTERS.index(ch) for ch in pre] + (ell if "..." in rhs else []) + \
              [_LETTERS.index(ch) for ch in post]
        if len(set(out)) != len(out) or any(lab not in sizes for lab in out):
            raise ExecutionError(f"op einsum: bad output term {rhs!r} in equation {eq!r}")
        del body
    else:
        counts = {}
        for ls in labels:
            for lab in ls:
                if lab < 52:
                    counts[lab] = counts.get(lab, 0) + 1
        out = ell + sorted(lab for lab, k in counts.items() if k == 1)
    return labels, out, sizes


def _einsum_full(xs, labels, sizes):
    """The operands with their broadcast dims stretched to full size."""
    return [np.broadcast_to(x, tuple(sizes[lab] for lab in ls)) for x, ls in zip(xs, labels)]


def _einsum_call(pairs, out):
    """np.einsum in sublist form (labels renumbered into the 52 it takes)."""
    ids: dict[int, int] = {}
    args = []
    for arr, ls in pairs:
        args += [arr, [ids.setdefault(lab, len(ids)) for lab in ls]]
    if len(ids) > 52:
        raise ExecutionError("op einsum: more than 52 distinct labels")
    return np.einsum(*args, [ids[lab] for lab in out], optimize=True)


def _einsum(c: Call):
    xs = [np.asarray(x) for x in c.xs("Operands")]
    if not xs:
        raise ExecutionError("op einsum: Operands is empty")
    labels, out, sizes = _einsum_plan(c, c.attr("equation", ""), [x.shape for x in xs])
    full = _einsum_full(xs, labels, sizes)
    res = _einsum_call(list(zip(full, labels)), out)
    return {"Out": _as(res, xs[0]), "XShape": list(xs),
            "InnerCache": [np.zeros((0,), xs[0].dtype) for _ in range(c.n_out("InnerCache"))]}


def _einsum_grad(c: Call):
    xs = [np.asarray(x) for x in c.xs("x_shape")]
    g = np.asarray(c.x("Out@GRAD"))
    labels, out, sizes = _einsum_plan(c, c.attr("equation", ""), [x.shape for x in xs])
    full = _einsum_full(xs, labels, sizes)
    names = c.outs.get("Operands@GRAD", ())
    grads = []
    for i, (x, ls) in enumerate(zip(xs, labels)):
        if i >= len(names) or names[i] == "@EMPTY@":
            grads.append(None)
            continue
        uniq = list(dict.fromkeys(ls))
        # d<g, out>/dx_i: the other operands conjugated (Paddle's convention for complex values)
        others = [(g, out)] + [(np.conj(f) if np.iscomplexobj(f) else f, lo)
                               for j, (f, lo) in enumerate(zip(full, labels)) if j != i]
        seen = {lab for _, lo in others for lab in lo}
        present = [lab for lab in uniq if lab in seen]
        gu = np.asarray(_einsum_call(others, present))
        for pos, lab in enumerate(uniq):   # labels only this operand has: constant along them
            if lab not in seen:
                gu = np.expand_dims(gu, pos)
        gu = np.broadcast_to(gu, tuple(sizes[lab] for lab in uniq))
        if len(uniq) < len(ls):            # repeated labels: the gradient lives on the diagonal
            d = np.zeros(tuple(sizes[lab] for lab in ls), dtype=gu.dtype)
            idx = tuple(np.arange(sizes[lab]).reshape([-1 if k == uniq.index(lab) else 1
                                                       for k in range(len(uniq))]) for lab in ls)
            d[idx] = gu
            gu = d
        grads.append(_as(unbroadcast(gu, x.shape), x))
    return {"Operands@GRAD": grads}


def _einsum_samples(rng):
    r = rng.standard_normal

    def s(eq, *shapes, note=""):
        n = len(shapes)
        return Sample({"Operands": [r(sh) for sh in shapes]}, {"equation": eq},
                      outputs={"Out": 1, "InnerCache": n, "XShape": n}, note=note or eq)
    # Paddle's legacy einsum op crashes on implicit equations (no "->"; its
    # Python API always passes one): tests/ops/test_linalg.py checks them.
    return [s("ij,jk->ik", (2, 3), (3, 4)),
            s("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
            s("ij->ji", (2, 3)),
            s("i,i->", (4,), (4,)),
            s("i,j->ij", (3,), (2,)),
            s("ii->i", (3, 3)),
            s("ii->", (3, 3), note="trace"),
            s("ijk->j", (2, 3, 2)),
            s("ijk->kj", (2, 3, 2)),
            s("bij,bkj->bik", (2, 2, 3), (2, 4, 3)),
            s("gij,gjk->gik", (2, 2, 3), (1, 3, 4), note="label of size 1 broadcast (Paddle's '...' form)"),
            s("...ij,...jk->...ik", (2, 2, 3), (3, 2), note="broadcast batch"),
            s("...i,...i->...", (2, 1, 3), (4, 3), note="broadcast size 1"),
            *[Sample({"Operands": [r(sh) + 1j * r(sh) for sh in shapes]}, {"equation": eq},
                     outputs={"Out": 1, "InnerCache": 2, "XShape": 2}, note=f"complex {eq}")
              for eq, shapes in (("ij,jk->ik", ((2, 3), (3, 4))), ("bij,bkj->bik", ((2, 2, 3), (2, 4, 3))))]]


register(paddle_opdef("einsum", _einsum, {"einsum_grad": _einsum_grad}, samples=_einsum_samples,
                      attrs_handled=("equation",),
                      doc="Out = einsum(equation, *Operands) (letters and '...'; implicit output sorted); "
                          "XShape holds the operands for the grad, InnerCache is left empty"))
