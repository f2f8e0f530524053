"""Recompute (`checkpoints`) on PIR programs: what Paddle's PIR pass drops.

Paddle 3.3.1's `append_backward` ignores `checkpoints` under PIR (its PIR
recompute is a separate distributed pass). pybackward keeps the legacy
meaning: only the checkpoint values (and what cannot be computed again) stay
alive between the forward and the backward section; each segment's other
values are computed again just before the first grad op that reads them.

The transform runs on the plain pass's output, so the gradients are
bit-equal to the plain pass's (the recomputed ops are the same kernels on the
same inputs):

1. Segments: the forward ops before the first checkpoint, then those between
   consecutive checkpoints (the values after the last checkpoint are read by
   the first grad ops anyway).
2. A forward op is recomputed unless it has regions, writes in place (PIR's
   inplace ops), draws random numbers (a `seed` attribute, or an op of the
   random domain), or defines a checkpoint, a parameter or a feed.
3. Segments last to first: the recomputable ops whose results some grad op
   reads (directly or through other recomputed ops) are copied, in forward
   order, just before the first grad op that reads one of them; every grad
   op then reads the copies.

`checkpoints="auto"` picks every k-th value of the loss's op path (k the
square root of its length), the classic sqrt(n) memory schedule.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ...base.errors import ArgumentError
from ...pir.model import Block, Operation, Value
from ...pir.vjp_rules import rule

FEED_OPS = ("pd_op.data", "builtin.parameter", "pd_op.feed")


def _random_families() -> frozenset[str]:
    import pkgutil
    from ...ops import random as random_domain
    return frozenset(m.name for m in pkgutil.iter_modules(random_domain.__path__))


def draws_random(op: Operation) -> bool:
    """Whether `op` draws random numbers: a `seed` attribute, or its legacy
    counterpart is an op of the random domain (bernoulli, randperm, ...)."""
    if "seed" in op.attrs:
        return True
    from ...pir import opmap
    from ...ops import registry
    m = opmap.pir_to_legacy(op.name)
    if m is None:
        return False
    d = registry.find(m.legacy_type)
    return d is not None and d.family in _random_families()


def recomputable(op: Operation) -> bool:
    if op.regions or op.name in FEED_OPS or op.dialect not in ("pd_op", "builtin"):
        return False
    r = rule(op.name)
    if r is not None and r.kind == "inplace":
        return False
    if op.name.endswith("_") and op.dialect == "pd_op":
        return False
    return not draws_random(op)


def auto_checkpoints(forward: Sequence[Operation], loss: Value) -> list[Value]:
    """sqrt(n) checkpoints along the loss's op path: every k-th single-result float value."""
    cands = auto_candidates(forward, loss)
    if len(cands) < 4:
        return []
    k = max(2, int(math.isqrt(len(cands))))
    return cands[k - 1:-1:k]


def apply(block: Block, forward: Sequence[Operation], checkpoints: Sequence[Value]) -> list[Value]:
    """Move the recomputable values of each segment behind its checkpoints (see the
    module docstring). Returns the checkpoints used, in program order."""
    pos = {id(op): i for i, op in enumerate(forward)}
    cps = []
    for v in checkpoints:
        d = v.defining_op
        if d is None or id(d) not in pos:
            raise ArgumentError(f"checkpoint %{v.id}: not a result of a top-level forward op")
        cps.append(v)
    cps = sorted({id(v): v for v in cps}.values(), key=lambda v: pos[id(v.defining_op)])
    if not cps:
        return []
    held = {id(v) for v in cps}
    bounds = [pos[id(v.defining_op)] for v in cps]
    segments: list[list[Operation]] = []
    start = 0
    for b in bounds:
        seg = [op for op in forward[start:b] if recomputable(op)]
        if seg:
            segments.append(seg)
        start = b + 1
    backward = [op for op in block.ops if id(op) not in pos]
    for seg in reversed(segments):
        _recompute_segment(block, seg, held, backward)
    return cps


def _readers(op: Operation):
    """(op, operand index) for every operand of `op` and of the ops nested in it."""
    for inner in op.walk():
        for i, v in enumerate(inner.operands):
            if v is not None:
                yield inner, i, v


def _recompute_segment(block: Block, seg: list[Operation], held: set[int], backward: list[Operation]) -> None:
    made = {id(r): r for op in seg for r in op.results if id(r) not in held}
    if not made:
        return
    # which segment ops the backward needs (directly, or through other recomputed ops)
    seg_ids = {id(op) for op in seg}
    needed: set[int] = set()
    first: Operation | None = None
    for bop in backward:
        for _, _, v in _readers(bop):
            if id(v) in made:
                needed.add(id(v.defining_op))
                if first is None:
                    first = bop
    if not needed or first is None:
        return
    for op in reversed(seg):
        if id(op) in needed:
            for v in op.operands:
                if v is not None and id(v) in made and id(v.defining_op) in seg_ids:
                    needed.add(id(v.defining_op))
    copies: dict[int, Value] = {}
    at = block.ops.index(first)
    for op in seg:
        if id(op) not in needed:
            continue
        operands = [copies.get(id(v), v) if v is not None else None for v in op.operands]
        clone = Operation(op.name, operands, [r.type for r in op.results], dict(op.attrs), dict(op.result_attrs))
        block.insert(at, clone)
        at += 1
        for r, c in zip(op.results, clone.results):
            copies[id(r)] = c
    for bop in backward:
        for inner, i, v in list(_readers(bop)):
            c = copies.get(id(v))
            if c is not None:
                inner.set_operand(i, c)


def resolve(program: Any, checkpoints: Any, forward: Sequence[Operation], loss: Value) -> list[Value]:
    """The checkpoint values: "auto", or a list of values / refs."""
    if checkpoints == "auto":
        return auto_checkpoints(forward, loss)
    if isinstance(checkpoints, (str, Value)):
        checkpoints = [checkpoints]
    if not isinstance(checkpoints, (list, tuple)):
        raise ArgumentError(f"checkpoints must be \"auto\" or a list of values, not {type(checkpoints).__name__}")
    return [c if isinstance(c, Value) else program.value(c) for c in checkpoints]


def choose_under_budget(program: Any, forward: Sequence[Operation], loss: Value, budget: int, batch_size: int,
                        build: "Any") -> list[Value]:
    """Checkpoints for `checkpoints="auto"` under a memory budget: evenly spaced sets of
    1, 2, 4, ... and sqrt(n) values of the loss's path are tried on copies of the
    program (`build(refs)` appends the backward with those checkpoints to a fresh copy
    and returns it); the set whose peak activation memory (`analysis.pir_liveness`,
    every -1 taken as `batch_size`) fits the budget with the fewest ops wins. Raises
    ArgumentError naming the lowest peak reached when none fits."""
    from ...analysis import pir_liveness
    from ...pir.summary import backward_start
    path = auto_candidates(forward, loss)
    sizes = sorted({0, max(1, int(math.isqrt(len(path))))} | {2 ** k for k in range(len(path).bit_length())
                                                             if 2 ** k <= len(path)})
    best: tuple[int, list[str]] | None = None
    lowest = None
    for m in sizes:
        chosen = _evenly(path, m)
        refs = [f"%{v.id}" for v in chosen]
        copy = build(refs)
        report = pir_liveness.memory(copy, batch_size, backward_start=backward_start(copy))
        lowest = report.peak_bytes if lowest is None else min(lowest, report.peak_bytes)
        if report.peak_bytes <= budget and (best is None or copy.num_ops() < best[0]):
            best = (copy.num_ops(), refs)
    if best is None:
        raise ArgumentError(f"memory budget of {budget} bytes: no checkpoint set fits (the lowest peak reached "
                            f"is {lowest} bytes at batch {batch_size}); raise the budget")
    return [program.value(r) for r in best[1]]


def auto_candidates(forward: Sequence[Operation], loss: Value) -> list[Value]:
    """The single-result float values of the loss's op path a checkpoint may be."""
    on_path: set[int] = {id(loss)}
    path: list[Operation] = []
    for op in reversed(forward):
        if any(id(r) in on_path for r in op.results):
            path.append(op)
            on_path.update(id(v) for v in op.operands if v is not None)
    path.reverse()
    return [op.results[0] for op in path if len(op.results) == 1 and recomputable(op)
            and getattr(op.results[0].type, "dtype", "") in ("float16", "bfloat16", "float32", "float64")]


def _evenly(values: list[Value], m: int) -> list[Value]:
    """`m` of `values`, evenly spaced, the last one left out (its segment is read first anyway)."""
    if m <= 0 or len(values) < 2:
        return []
    step = len(values) / (m + 1)
    return [values[min(len(values) - 2, int(step * (k + 1)))] for k in range(m)]
