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

A PIR program (`pybackward.pir.Program`, a `.json` file) gets the same
report over its SSA values (`analysis.pir_liveness`): a value is live from
its defining op to its last use, a use inside the regions of an `if` /
`while` / `pylayer` counting as a use by that op; `pd_op.data` values are
feeds (live from op 0), `builtin.parameter` values parameters, the
gradients the backward section computes for the parameters (as the PIR
interpreter names them, `NAME@GRAD`) parameter gradients, the other values
after the seed of the backward section gradients; values sharing storage
(a `builtin.combine` vector and its items, an in-place op's result and its
operand) count once. Values are named by data / parameter name, else `%N`.
`measure` and `choose_checkpoints` take legacy programs only so far.

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
import sys
import types
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .backward.api import append_for_choice
from .analysis.checkpoint_choice import AutoCheckpoints, CheckpointChoice, choose, cut_vars  # noqa: F401  (public here)
from .interpreter.executor import Executor, Scope
from .analysis import liveness as _legacy_liveness
from .analysis import pir_liveness
from .analysis.liveness import (
    ACTIVATION, ACTIVATION_KINDS, GRADIENT, INPUT, PARAM_GRAD, PARAMETER, MemoryReport, VarLife, human,
    var_bytes, var_kind)  # noqa: F401  (public here)
from .base.errors import ArgumentError
from .interpreter.pir_grads import backward_info
from .legacy.program import Program, Variable
from .pir.model import Program as PirProgram


# --------------------------------------------------------------------------
# The static model, of either IR
# --------------------------------------------------------------------------
def _pir_facts(program: PirProgram) -> tuple[list, int | None]:
    """The parameter gradients of a PIR program and the index of the op seeding its backward
    section (None: no backward section), as the PIR interpreter reads them (`pir_grads`)."""
    info = backward_info(program)
    ops = program.block.ops
    pgrads = [info.grads[op.results[0]] for op in ops
              if op.name == "builtin.parameter" and op.results and op.results[0] in info.grads]
    return pgrads, (ops.index(info.seed) if info.seed is not None else None)


def lives(program: Program | PirProgram, batch_size: int = 1, keep: Iterable[str] = ()) -> dict[str, VarLife]:
    """Every var (PIR: top-level value) block 0's ops use, with its kind, size and live range."""
    if isinstance(program, PirProgram):
        pgrads, start = _pir_facts(program)
        return pir_liveness.lives(program, batch_size, keep, pgrads, start)
    return _legacy_liveness.lives(program, batch_size, keep)


def memory(program: Program | PirProgram, batch_size: int = 1, top: int = 8,
           keep: Iterable[str] = ()) -> MemoryReport:
    """The activation memory of `program` (block 0; PIR: the top block) by static
    liveness; see the module doc. `batch_size` replaces every -1 dim; `keep`
    names vars live to the end (fetched values, e.g. the loss; PIR: `%N` or a
    name); `top` is how many vars to list at the peak."""
    if isinstance(program, PirProgram):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ArgumentError(f"batch_size must be a positive int, not {batch_size!r}")
        pgrads, start = _pir_facts(program)
        return pir_liveness.memory(program, batch_size, top, keep, pgrads, start)
    return _legacy_liveness.memory(program, batch_size=batch_size, top=top, keep=keep)


def has_backward(program: PirProgram) -> bool:
    """Whether a PIR program has a backward section (a `full_like` seed a grad op reads)."""
    return backward_info(program).seed is not None


def value_name(v) -> str:
    """A PIR value's name in the report: its data / parameter name, else `%N`."""
    return pir_liveness.value_name(v)


def _legacy_only(program, what: str) -> None:
    if isinstance(program, PirProgram):
        raise ArgumentError(f"{program.source or 'the program'}: is a PIR program; {what} takes legacy "
                            "programs only so far (memory() and `pybackward stats` report PIR programs)")

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
    _legacy_only(program, "measure()")
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
    _legacy_only(program, "choose_checkpoints() (its search judges the programs the legacy pass builds; on a "
                          "PIR program give append_backward checkpoints=[...] or \"auto\")")
    return choose(program, loss, append_for_choice, budget=budget, batch_size=batch_size,
                  no_grad_set=no_grad_set, max_checkpoints=max_checkpoints, search=search)


# --------------------------------------------------------------------------
# The module is callable: `pybackward.memory(program, batch_size=N)`.
# --------------------------------------------------------------------------
class _CallableModule(types.ModuleType):
    def __call__(self, program: Program | PirProgram, batch_size: int = 1, top: int = 8,
                 keep: Iterable[str] = ()) -> MemoryReport:
        return memory(program, batch_size=batch_size, top=top, keep=keep)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["memory", "MemoryReport", "VarLife", "lives", "var_bytes", "var_kind", "measure",
           "Measurement", "choose_checkpoints", "CheckpointChoice", "AutoCheckpoints", "cut_vars",
           "human"]

