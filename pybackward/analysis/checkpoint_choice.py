"""Which checkpoints to give recompute: candidates, and a search judged by the memory model.

The method is the one `pybackward.memory`'s module doc describes. An
analysis, below the pass: each candidate choice is built by a `build`
function the pass hands in (`backward.api.append_for_choice`), so this module
knows the pass only through that argument.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..legacy.names import strip_grad_suffix
from .path import find_op_path, stop_gradient_names
from ..base.errors import ArgumentError
from ..base.names import printable
from .liveness import human, memory, var_bytes
from ..legacy.program import Program, Variable

#: `build(program_copy, loss_name, checkpoints, no_grad_names) -> recomputed op count`.
Build = Callable[[Program, str, Sequence[str], Iterable[str]], int]


# --------------------------------------------------------------------------
# Choosing checkpoints
# --------------------------------------------------------------------------
@dataclasses.dataclass
class AutoCheckpoints:
    """`append_backward(checkpoints=AutoCheckpoints(budget=..., batch_size=...))`:
    let `choose_checkpoints` pick them ("auto" is `AutoCheckpoints()`)."""

    budget: int | None = None
    batch_size: int = 1


@dataclasses.dataclass
class CheckpointChoice:
    """What `choose_checkpoints` picked and what the model expects of it."""

    checkpoints: list[str]
    peak_before: int              # activation peak of the plain backward program
    peak_after: int               # ... with these checkpoints
    recomputed_ops: int           # forward ops run again in the backward section
    forward_ops: int              # ops on the loss's path
    budget: int | None
    fits: bool                    # peak_after <= budget (True without a budget)
    candidates: list[str]         # the cut vars considered
    batch_size: int
    evaluated: int = 0            # choices judged by the model

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        # The names are escaped (`base.names.printable`): `append --checkpoints auto` prints this.
        ck = ", ".join(map(printable, self.checkpoints)) if self.checkpoints else "(none)"
        ratio = self.peak_after / self.peak_before if self.peak_before else 1.0
        s = (f"checkpoints ({len(self.checkpoints)}): {ck}\n"
             f"estimated peak activation memory (batch {self.batch_size}): {human(self.peak_before)} "
             f"-> {human(self.peak_after)} ({ratio:.0%}); recomputes {self.recomputed_ops} of "
             f"{self.forward_ops} forward ops")
        if self.budget is not None:
            s += (f"\nbudget {human(self.budget)}: " + ("fits" if self.fits else
                                                         "does not fit even with the lowest peak found"))
        return s


@dataclasses.dataclass
class _Judged:
    checkpoints: tuple[str, ...]
    peak: int
    recomputed: int


class _Judge:
    """Builds the backward section of a copy of the program for a checkpoint
    choice (with `build`) and measures its peak with the model (memoised)."""

    def __init__(self, program: Program, loss: str, batch_size: int, no_grad: set[str], build: Build):
        self.program = program
        self.loss = loss
        self.batch_size = batch_size
        self.no_grad = no_grad
        self.build = build
        self.seen: dict[tuple[str, ...], _Judged] = {}

    def __call__(self, checkpoints: Sequence[str]) -> _Judged:
        key = tuple(checkpoints)
        hit = self.seen.get(key)
        if hit is not None:
            return hit
        p = self.program.clone()
        recomputed = self.build(p, self.loss, key, set(self.no_grad))
        peak = memory(p, self.batch_size, top=0, keep=[self.loss]).peak_bytes
        j = self.seen[key] = _Judged(key, peak, recomputed)
        return j


def cut_vars(program: Program, loss: str, no_grad: Iterable[str] = ()
             ) -> tuple[list[str], list[int], int, int, dict[str, list[str]]]:
    """The checkpoint candidates of `loss`'s op path (see the module doc).

    A candidate is a var that, right after the op that makes it, is the only
    non-persistable forward value later ops still need (a cut var), or is so
    together with at most two earlier candidates (the residual stream next
    to a transformer's feed-forward block): choosing it then means choosing
    those too.

    Returns (the names in path order; for each, the forward bytes produced
    up to and including its producer, at batch 1; the forward bytes of the
    whole path; the path length; name -> the earlier candidates it needs)."""
    block = program.global_block()
    loss_var = block.var(loss)
    no_grad_names = {strip_grad_suffix(n) for n in stop_gradient_names(program)[0]} | set(no_grad)
    path = find_op_path(block, [loss_var], [], no_grad_names, {})
    last_read: dict[str, int] = {}
    written: dict[str, int] = {}
    for i, op in enumerate(path):
        for n in op.input_arg_names:
            last_read[n] = i
        for n in op.output_arg_names:
            written.setdefault(n, i)

    def counted(n: str) -> bool:
        v = block.find_var_recursive(n)
        return v is not None and not v.persistable

    # Sweep: the vars written at or before op i and read after it.
    opens: dict[int, list[str]] = defaultdict(list)
    closes: dict[int, list[str]] = defaultdict(list)
    for n, w in written.items():
        r = last_read.get(n, -1)
        if r > w and counted(n):
            opens[w].append(n)
            closes[r].append(n)
    live: set[str] = set()
    names: list[str] = []
    cum: list[int] = []
    needs: dict[str, list[str]] = {}
    produced = 0
    for i, op in enumerate(path):
        for n in closes.get(i, ()):
            live.discard(n)
        live.update(opens.get(i, ()))
        for n in op.output_arg_names:
            if written.get(n) == i and counted(n):
                produced += var_bytes(block.var(n), 1) or 0
        new = [n for n in live if written[n] == i and n not in needs and n != loss]
        if len(new) != 1 or len(live) > 3:
            continue
        (v,) = new
        others = sorted(live - {v}, key=lambda n: written[n])
        if all(o in needs and not needs[o] for o in others):
            names.append(v)
            cum.append(produced)
            needs[v] = others
    return names, cum, produced, len(path), needs


def _with_needs(chosen: list[str], needs: Mapping[str, list[str]], order: Sequence[str]) -> list[str]:
    pos = {n: i for i, n in enumerate(order)}
    out = set(chosen)
    for n in chosen:
        out.update(needs.get(n, ()))
    return sorted(out, key=pos.__getitem__)


def _spread(cands: Sequence[str], cum: Sequence[int], targets: Sequence[float], m: int) -> list[str]:
    """For each target (forward bytes), the nearest of cands[:m]; increasing, no repeats."""
    chosen: list[int] = []
    j = 0
    for t in targets:
        while j + 1 < m and abs(cum[j + 1] - t) <= abs(cum[j] - t):
            j += 1
        if not chosen or j > chosen[-1]:
            chosen.append(j)
    return [cands[i] for i in chosen]


def _even(cands: Sequence[str], cum: Sequence[int], total: int, k: int) -> list[str]:
    """k checkpoints that cut the forward bytes into k+1 equal pieces."""
    return _spread(cands, cum, [total * i / (k + 1) for i in range(1, k + 1)], len(cands))


def _even_upto(cands: Sequence[str], cum: Sequence[int], upto: int, k: int) -> list[str]:
    """k checkpoints, the last cands[upto], that cut the bytes before it into k equal pieces."""
    return _spread(cands, cum, [cum[upto] * i / k for i in range(1, k + 1)], upto + 1)


def _improve(best: _Judged, judge: _Judge, cands: Sequence[str], needs: Mapping[str, list[str]],
             limit: int, max_evals: int) -> _Judged:
    """Local search from `best`: drop a checkpoint, move one to the next
    candidate either way, or add the candidate halfway between two; keep
    the best neighbour while it lowers (peak, recomputed ops, count)."""
    pos = {n: i for i, n in enumerate(cands)}
    spent = 0

    def key(j: _Judged):
        return (j.peak, j.recomputed, len(j.checkpoints))

    while spent < max_evals:
        cur = [pos[n] for n in best.checkpoints]
        moves: list[list[int]] = []
        for k in range(len(cur)):
            moves.append(cur[:k] + cur[k + 1:])
            for d in (-1, 1):
                j = cur[k] + d
                if 0 <= j < len(cands) and j not in cur:
                    moves.append(sorted(cur[:k] + [j] + cur[k + 1:]))
        if len(cur) < limit:
            bounds = [-1] + cur + [len(cands)]
            for a, b in zip(bounds, bounds[1:]):
                if b - a > 1:
                    moves.append(sorted(cur + [(a + b) // 2]))
        improved = None
        for m in moves:
            if spent >= max_evals:
                break
            names = _with_needs([cands[i] for i in m], needs, cands)
            if not names or tuple(names) in judge.seen:
                j = judge.seen.get(tuple(names)) if names else None
            else:
                spent += 1
                j = judge(names)
            if j is not None and key(j) < key(improved or best):
                improved = j
        if improved is None:
            break
        best = improved
    return best


def choose(program: Program, loss: Variable | str, build: Build, budget: int | None = None,
           batch_size: int = 1, no_grad_set: Iterable[Variable | str] | None = None,
           max_checkpoints: int | None = None, search: int = 40) -> CheckpointChoice:
    """The search behind `memory.choose_checkpoints` (the arguments are its own;
    see the module doc for the method). `build(copy, loss, checkpoints,
    no_grad)` appends the backward section a choice gives to a copy of the
    program and returns the number of recomputed ops (the pass provides it:
    `backward.api.append_for_choice`).
    """
    if not isinstance(program, Program):
        raise ArgumentError(f"choose_checkpoints() takes a pybackward Program, not {type(program).__name__}")
    loss_name = loss.name if isinstance(loss, Variable) else loss
    program.global_block().var(loss_name)
    if budget is not None and (not isinstance(budget, (int, float)) or budget <= 0):
        raise ArgumentError(f"budget must be a positive number of bytes, not {budget!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ArgumentError(f"batch_size must be a positive int, not {batch_size!r}")
    no_grad = {v.name if isinstance(v, Variable) else v for v in (no_grad_set or ())}
    cands, cum, total, n_fwd, needs = cut_vars(program, loss_name, no_grad)
    judge = _Judge(program, loss_name, batch_size, no_grad, build)
    plain = judge(())
    limit = len(cands) if max_checkpoints is None else min(max_checkpoints, len(cands))

    def result(j: _Judged) -> CheckpointChoice:
        fits = budget is None or j.peak <= budget
        return CheckpointChoice(list(j.checkpoints), plain.peak, j.peak, j.recomputed, n_fwd,
                                budget, fits, cands, batch_size, len(judge.seen))

    def better(a: _Judged, b: _Judged | None) -> bool:
        return b is None or (a.peak, a.recomputed, len(a.checkpoints)) < (b.peak, b.recomputed,
                                                                          len(b.checkpoints))

    if budget is not None and plain.peak <= budget:
        return result(plain)
    if not cands or limit == 0:
        return result(plain)
    # The lowest peak over even splits into k+1 pieces, k = 1, 2, ...: the
    # peak falls, then rises again; stop a few k past the lowest seen.
    best: _Judged | None = None
    best_k, k = 0, 1
    while k <= limit and (best is None or k <= 2 * best_k + 3):
        j = judge(_with_needs(_even(cands, cum, total, k), needs, cands))
        if better(j, best):
            best, best_k = j, k
        k += 1
    if best is not None:
        best = _improve(best, judge, cands, needs, limit, max_evals=search)
    if best is None or best.peak >= plain.peak:
        best = plain
    if budget is None or best.peak > budget:
        return result(best)
    # A budget the lowest peak fits: recompute as little as possible. The
    # last checkpoint bounds what is recomputed (everything after it keeps
    # its forward values); find the earliest one that still fits.
    def fitting(upto: int) -> _Judged | None:
        """The fewest recomputed ops that fit with the last checkpoint at
        cands[upto]: k = 1, 2, 3, 5, 8, ... checkpoints until the peak
        rises, then the neighbours of the lowest."""
        tried: dict[int, _Judged] = {}

        def at(k: int) -> _Judged:
            if k not in tried:
                tried[k] = judge(_with_needs(_even_upto(cands, cum, upto, k), needs, cands))
            return tried[k]
        a, b = 1, 2
        low = at(1)
        while b <= min(limit, upto + 1):
            j = at(b)
            if j.peak > low.peak:
                break
            low = j
            a, b = b, a + b
        lk = min(tried, key=lambda k: (tried[k].peak, k))
        for k in (lk - 1, lk + 1):
            if 1 <= k <= min(limit, upto + 1):
                at(k)
        ok = [j for j in tried.values() if j.peak <= budget]
        return min(ok, key=lambda j: (j.recomputed, j.peak)) if ok else None
    lo, hi = 0, len(cands) - 1
    answer: _Judged | None = fitting(hi) or best
    while lo < hi:
        mid = (lo + hi) // 2
        f = fitting(mid)
        if f is not None:
            hi = mid
            if f.recomputed < answer.recomputed or (f.recomputed == answer.recomputed and f.peak < answer.peak):
                answer = f
        else:
            lo = mid + 1
    f = fitting(lo)
    if f is not None and (f.recomputed, f.peak) < (answer.recomputed, answer.peak):
        answer = f
    return result(answer)
