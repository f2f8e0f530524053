"""How much memory a program's activations take, and which checkpoints shrink it.

    import pybackward.memory as pm
    rep = pm.memory(prog, batch_size=32)     # or pm(prog, batch_size=32): the module is callable
    print(rep)                               # peak, the op there, the largest vars live there
    choice = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=32)
    pybackward.append_backward(fwd.var("mean_0.tmp_0"), checkpoints=choice.checkpoints)

The model (`memory`) is a static liveness analysis of block 0 in op order. A
var is live from its first write to its last read (a var read before any op
writes it - a feed - from op 0); a var nothing reads is live at the op that
writes it only, unless it is in `keep` (fetched: live to the end). Bytes are
the declared dims times the dtype size, every -1 taken as `batch_size`. What
is counted:

* activations: every non-persistable var but the parameter gradients -
  feeds, forward intermediates, recomputed copies, gradients of activations,
  partial (`@RENAME@`) gradients. The peak is over ops, and the op at the
  peak and the vars live there are reported.
* parameters: persistable vars, counted apart (their total).
* gradients: the gradients of the parameters (`w@GRAD`), counted apart (their
  total: an optimizer needs them all at the end).

Sub-blocks are not looked into (an op with a sub-block counts as its inputs
and outputs); tensor arrays and vars with no declared dtype are listed as
unknown and count 0.

`measure` runs a program with the NumPy interpreter and measures the same
thing on the real arrays: values are dropped the moment the model says they
die (the interpreter itself keeps every value of a run, so its own
`track_memory` peak is the sum of everything), and the bytes of the counted
vars are summed after each op.

`choose_checkpoints` picks checkpoints for `append_backward(checkpoints=...)`
on a forward program. Candidates are the cut vars (articulation points) of
the loss's op path: a var that is, right after its producer, the only
non-persistable value later ops still need (every layer output of a chain;
the residual stream between transformer blocks) - or is so together with at
most two earlier cut vars, which then come with it (the feed-forward block
beside a residual stream). Program inputs do not count: recompute keeps them
anyway. Paddle's recompute re-runs each segment once, so any choice costs at
most one extra forward pass. Each choice is judged by the model on the
program recompute actually builds (append_backward on a copy, memoised).

* No budget: the lowest peak (ties: fewer recomputed ops). Candidates split
  the forward bytes into k+1 equal pieces for k = 1, 2, ... (the sqrt(n)
  segmentation of a chain is among them) until the peak has risen for a
  while, then a local search (drop one, move one to a neighbour, add one
  halfway) improves the best, within `search` judged choices.
* A budget (bytes): the fewest recomputed ops whose peak fits - none at all
  if the plain program fits, else the earliest last checkpoint (everything
  after it keeps its forward values) that fits with some even split before
  it, found by bisection; if even the lowest peak does not fit, that choice,
  marked `fits=False`.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import types
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import dtypes
from .errors import ArgumentError
from .interpreter import Executor, Scope
from .program import Block, Program, Variable

# --------------------------------------------------------------------------
# The static model
# --------------------------------------------------------------------------
INPUT, ACTIVATION, GRADIENT, PARAM_GRAD, PARAMETER = (
    "input", "activation", "gradient", "param_grad", "parameter")
#: Kinds that count as activation memory.
ACTIVATION_KINDS = frozenset({INPUT, ACTIVATION, GRADIENT})


@dataclasses.dataclass
class VarLife:
    """One var of block 0: its size and the ops between which it is live."""

    name: str
    kind: str
    nbytes: int | None        # None: unknown (no dtype, a tensor array)
    start: int                # op index of the first write (0 for a feed)
    end: int                  # op index of the last read (or write)


@dataclasses.dataclass
class MemoryReport:
    """What `memory` found. Byte counts are ints."""

    batch_size: int
    peak_bytes: int                       # activations at the peak
    peak_op: int                          # index in block 0 of the op at the (first) peak
    peak_op_type: str
    top: list[tuple[str, str, int]]       # (var, kind, bytes) live at the peak, largest first
    parameter_bytes: int
    gradient_bytes: int                   # parameter gradients
    timeline: list[int]                   # activation bytes live at each op of block 0
    unknown: list[str]                    # vars whose size is unknown (counted as 0)
    num_ops: int
    lives: dict[str, VarLife] = dataclasses.field(repr=False, default_factory=dict)

    @property
    def total_bytes(self) -> int:
        """An upper bound of the whole: parameters + their gradients + peak activations."""
        return self.parameter_bytes + self.gradient_bytes + self.peak_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "peak_bytes": self.peak_bytes,
                "peak_op": self.peak_op, "peak_op_type": self.peak_op_type,
                "top": [{"var": n, "kind": k, "bytes": b} for n, k, b in self.top],
                "parameter_bytes": self.parameter_bytes, "gradient_bytes": self.gradient_bytes,
                "total_bytes": self.total_bytes, "num_ops": self.num_ops, "unknown": self.unknown,
                "timeline": self.timeline}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def __str__(self) -> str:
        lines = [f"peak activation memory: {human(self.peak_bytes)} ({self.peak_bytes} bytes, "
                 f"batch {self.batch_size}) at op {self.peak_op} ({self.peak_op_type}) of {self.num_ops}",
                 f"parameters: {human(self.parameter_bytes)}; parameter gradients: "
                 f"{human(self.gradient_bytes)}; all together at most {human(self.total_bytes)}"]
        if self.top:
            lines.append("largest vars live at the peak:")
            width = max(len(n) for n, _, _ in self.top)
            for n, k, b in self.top:
                lines.append(f"  {n:<{width}}  {human(b):>10}  {k}")
        if self.unknown:
            lines.append(f"size unknown (counted as 0): {', '.join(self.unknown[:8])}"
                         + (" ..." if len(self.unknown) > 8 else ""))
        return "\n".join(lines)


def human(n: int | float) -> str:
    """1536 -> '1.5 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def var_bytes(var: Variable, batch_size: int) -> int | None:
    """Bytes of a var's value with every -1 dim taken as `batch_size`; None if unknown."""
    if var.type != dtypes.VarType.DENSE_TENSOR and var.type != dtypes.VarType.SELECTED_ROWS:
        return None
    dt = var.data_type
    if dt is None:
        return None
    try:
        size = dtypes.to_numpy(dt).itemsize
    except KeyError:
        size = 2 if dt == dtypes.VarType.BF16 else 1 if dt in (dtypes.VarType.FP8_E4M3FN,
                                                               dtypes.VarType.FP8_E5M2) else None
        if size is None:
            return None
    n = 1
    for d in var.shape:
        n *= batch_size if d < 0 else d
    return n * size


def var_kind(block: Block, name: str) -> str:
    """parameter, param_grad, gradient, activation or input (see the module doc)."""
    from .backward.names import GRAD_SUFFIX, strip_grad_suffix
    v = block.find_var_recursive(name)
    if v is not None and v.persistable:
        return PARAMETER
    if GRAD_SUFFIX in name:
        if "@RENAME@" not in name and "@ADD@" not in name:
            fwd = block.find_var_recursive(strip_grad_suffix(name))
            if fwd is not None and fwd.persistable:
                return PARAM_GRAD
        return GRADIENT
    return ACTIVATION


def lives(program: Program, batch_size: int = 1, keep: Iterable[str] = ()) -> dict[str, VarLife]:
    """Every var block 0's ops use, with its kind, size and live range."""
    block = program.global_block()
    ops = block.ops
    first_write: dict[str, int] = {}
    last_write: dict[str, int] = {}
    first_read: dict[str, int] = {}
    last_read: dict[str, int] = {}
    for i, op in enumerate(ops):
        for n in op.input_arg_names:
            first_read.setdefault(n, i)
            last_read[n] = i
        for n in op.output_arg_names:
            first_write.setdefault(n, i)
            last_write[n] = i
    keep = set(keep)
    out: dict[str, VarLife] = {}
    for n in list(first_read) + [n for n in first_write if n not in first_read]:
        if n == "@EMPTY@" or n in out:
            continue
        v = block.find_var_recursive(n)
        kind = var_kind(block, n)
        fw = first_write.get(n)
        if fw is None or first_read.get(n, fw) < fw:
            start = 0
            if fw is None and kind == ACTIVATION:
                kind = INPUT
        else:
            start = fw
        end = max(last_read.get(n, -1), last_write.get(n, -1))
        if n in keep:
            end = len(ops) - 1
        nbytes = var_bytes(v, batch_size) if v is not None else None
        out[n] = VarLife(n, kind, nbytes, start, end)
    return out


def memory(program: Program, batch_size: int = 1, top: int = 8, keep: Iterable[str] = ()) -> MemoryReport:
    """The activation memory of `program` (block 0) by static liveness; see the module doc.

    `batch_size` replaces every -1 dim; `keep` names vars live to the end
    (fetched values, e.g. the loss); `top` is how many vars to list at the peak.
    """
    if not isinstance(program, Program):
        raise ArgumentError(f"memory() takes a pybackward Program, not {type(program).__name__}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ArgumentError(f"batch_size must be a positive int, not {batch_size!r}")
    block = program.global_block()
    n_ops = len(block.ops)
    life = lives(program, batch_size, keep)
    delta = [0] * (n_ops + 1)
    for v in life.values():
        if v.kind in ACTIVATION_KINDS and v.nbytes:
            delta[v.start] += v.nbytes
            delta[v.end + 1] -= v.nbytes
    timeline, cur = [], 0
    for i in range(n_ops):
        cur += delta[i]
        timeline.append(cur)
    peak = max(timeline, default=0)
    at = timeline.index(peak) if timeline else 0
    live_there = sorted(((v.name, v.kind, v.nbytes) for v in life.values()
                         if v.kind in ACTIVATION_KINDS and v.nbytes and v.start <= at <= v.end),
                        key=lambda t: (-t[2], t[0]))
    params = sum(var_bytes(v, batch_size) or 0 for b in program.blocks[:1] for v in b.vars.values()
                 if v.persistable and v.type == dtypes.VarType.DENSE_TENSOR)
    grads = sum(v.nbytes or 0 for v in life.values() if v.kind == PARAM_GRAD)
    unknown = sorted(n for n, v in life.items() if v.nbytes is None and v.kind != PARAMETER)
    return MemoryReport(batch_size, peak, at, block.ops[at].type if block.ops else "",
                        live_there[:top], params, grads, timeline, unknown, n_ops, life)


# --------------------------------------------------------------------------
# Measuring with the interpreter
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Measurement:
    """What `measure` saw on the real arrays."""

    peak_bytes: int               # counted kinds (as memory().peak_bytes), values dropped when dead
    peak_op: int
    timeline: list[int]           # bytes after each op of block 0
    peak_all_bytes: int           # every non-persistable value, values dropped when dead
    values: dict[str, np.ndarray]  # the fetched values


def measure(program: Program, feed: Mapping[str, Any] | None = None,
            params: Mapping[str, Any] | None = None, fetch: Sequence[str] = (),
            batch_size: int = 1, seed: int = 0) -> Measurement:
    """Run block 0 with the interpreter, dropping each value once the model
    says it is dead, and measure the bytes the counted vars hold after each op.

    `fetch` names are kept to the end (and returned); `batch_size` only
    matters for the liveness (not for the bytes, which are measured).
    """
    life = lives(program, batch_size, fetch)
    n_ops = len(program.global_block().ops)
    dead_after: dict[int, list[str]] = defaultdict(list)
    for v in life.values():
        if v.kind != PARAMETER:
            dead_after[v.end].append(v.name)
    counted = {n for n, v in life.items() if v.kind in ACTIVATION_KINDS}
    exe = _FreeingExecutor(seed, dead_after, counted, n_ops)
    exe.track_memory = True
    scope = Scope()
    for k, v in (params or {}).items():
        scope.set(k, np.asarray(v))
    vals = exe.run(program, feed=dict(feed or {}), fetch_list=list(fetch), scope=scope)
    exe.finish()
    tl = exe.timeline
    peak = max(tl, default=0)
    return Measurement(peak, tl.index(peak) if tl else 0, tl, exe.peak_bytes, dict(zip(fetch, vals)))


def _held_bytes(d: dict, names) -> int:
    total = 0
    for n in names:
        v = d.get(n)
        if isinstance(v, np.ndarray):
            total += v.nbytes
    return total


class _FreeingExecutor(Executor):
    """The interpreter, but before each op of block 0 the counted bytes are
    sampled (= after the previous op) and the values that died at the
    previous op are dropped. Sub-blocks run as usual."""

    def __init__(self, seed: int, dead_after: Mapping[int, list[str]], counted: set[str], n_ops: int):
        super().__init__(seed=seed)
        self._dead_after = dead_after
        self._counted = counted
        self._n_ops = n_ops
        self._wrapped: dict[int, list] = {}
        self._local: dict | None = None
        self.timeline: list[int] = []

    def _plan(self, block):
        plan = super()._plan(block)
        if block.idx != 0:
            return plan
        w = self._wrapped.get(id(plan))
        if w is None:
            w = self._wrapped[id(plan)] = [dataclasses.replace(s, kernel=self._wrap(s.index, s.kernel))
                                           for s in plan]
        return w

    def _wrap(self, index: int, kernel):
        def run(call):
            local = call.env.scope.vars
            self._local = local
            if index > 0:
                self._sample(local)
                for n in self._dead_after.get(index - 1, ()):
                    local.pop(n, None)
            return kernel(call)
        return run

    def _sample(self, local: dict) -> None:
        self.timeline.append(_held_bytes(local, self._counted))

    def finish(self) -> None:
        """The sample after the last op."""
        if self._local is not None and len(self.timeline) < self._n_ops:
            self._sample(self._local)


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
        ck = ", ".join(self.checkpoints) if self.checkpoints else "(none)"
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
    choice and measures its peak with the model (memoised)."""

    def __init__(self, program: Program, loss: str, batch_size: int, no_grad: set[str]):
        self.program = program
        self.loss = loss
        self.batch_size = batch_size
        self.no_grad = no_grad
        self.seen: dict[tuple[str, ...], _Judged] = {}

    def __call__(self, checkpoints: Sequence[str]) -> _Judged:
        key = tuple(checkpoints)
        hit = self.seen.get(key)
        if hit is not None:
            return hit
        from .backward import api, recompute
        p = self.program.clone()
        recomputed = [0]
        if key:
            def count(done):
                recomputed[0] = len(done.recomputed)
            loss = p.global_block().var(self.loss)
            params = [v.name for v in p.global_block().all_parameters()]
            recompute.append_backward_with_checkpoints(p, loss, api._loss_op(loss), params,
                                                       set(self.no_grad), list(key), scratch=False,
                                                       on_done=count)
        else:
            api.append_backward(self.loss, program=p, no_grad_set=set(self.no_grad) or None)
        peak = memory(p, self.batch_size, top=0, keep=[self.loss]).peak_bytes
        j = self.seen[key] = _Judged(key, peak, recomputed[0])
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
    from .backward.names import strip_grad_suffix
    from .backward.path import find_op_path, stop_gradient_names
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


def choose_checkpoints(program: Program, loss: Variable | str, budget: int | None = None,
                       batch_size: int = 1, no_grad_set: Iterable[Variable | str] | None = None,
                       max_checkpoints: int | None = None, search: int = 40) -> CheckpointChoice:
    """Pick checkpoints for `append_backward(loss, checkpoints=...)` on the
    forward `program` (left unchanged).

    With no `budget` (bytes): the choice with the lowest activation peak, each
    forward op recomputed at most once. With a budget: the fewest recomputed
    ops whose peak fits. See the module doc for the method; `str()` of the
    result says what was chosen and the estimated peak before and after.
    `max_checkpoints` caps their number; `search` caps the choices judged
    while improving the best even split locally.
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
    judge = _Judge(program, loss_name, batch_size, no_grad)
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


# --------------------------------------------------------------------------
# The module is callable: `pybackward.memory(program, batch_size=N)`.
# --------------------------------------------------------------------------
class _CallableModule(types.ModuleType):
    def __call__(self, program: Program, batch_size: int = 1, top: int = 8,
                 keep: Iterable[str] = ()) -> MemoryReport:
        return memory(program, batch_size=batch_size, top=top, keep=keep)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["memory", "MemoryReport", "VarLife", "lives", "var_bytes", "var_kind", "measure",
           "Measurement", "choose_checkpoints", "CheckpointChoice", "AutoCheckpoints", "cut_vars",
           "human"]

