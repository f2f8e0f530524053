"""One fused walk for the middle of the legacy pass, where it provably gives
what the step-by-step pass gives.

`grad_ops.append_backward_ops` makes each path op's grad ops (`GradOp`
objects), then renames and sums repeated gradients (`accumulate`), prunes
no-grad branches and unreachable subgraphs (`prune`), applies the
corrections of `deviations.py`, and emits the ops as bytes (`emit`);
`steps.finish` then declares their vars (`emit.create_grad_vars`). Each of
those is a linear walk over ~10k ops in Python. Here, for a block that
qualifies, each forward op's grad ops come from its `_Template` as a
`FlatOp` (a shared `emit.FlatInfo` - type, slots, attr bytes, device - and
a flat list of names), accumulation and the no-grad prune run on those
name lists with exactly the steps of `accumulate_repeated_outputs` and
`remove_no_grad_branch`, and the bytes and views are written by
`emit.emit_flat`; `create_grad_vars` declares the vars from the same names
(`emit.FlatRun`).

A block qualifies only where every skipped step is provably a no-op or
equal to what the walk does (see `_qualifies` and the checks in
`fused_walk`, each with why); anything else declines - the step-by-step
pass then runs for the block, and nothing has been changed yet (the walk
computes everything first, and writes the block, the pass state and the
no-grad set only once it knows it will finish).

`ENABLED = False`, or `PYBACKWARD_NO_FUSED=1` in the environment (read on
each call), turns the walk off. `STATS` counts the walks done and the
declines by reason (for the tests: a walk that silently never runs would
compare the step-by-step pass with itself).
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from itertools import chain
from operator import itemgetter
from typing import Any, Callable

from ..ops import registry
from ..ops.registry import fresh_op
from ..legacy.names import GRAD_SUFFIX, grad_name, renamed_version, strip_grad_suffix
from ..legacy.program import Block, Operator, Variable
from .accumulate import grad_op_device
from .emit import FlatInfo, FlatOp, FlatRun, attr_bytes, emit_flat, plain_grad_type

#: Off: the step-by-step pass everywhere.
ENABLED = True
#: "walks": blocks the walk did; "decline:<reason>": blocks it left to the pass.
STATS: Counter = Counter()



def _owns_block(op_type: str) -> bool:
    """Whether a grad op of this type owns a grad block (the registry's
    `block_attrs`: conditional_block_grad, while_grad): the sub-block steps
    (deviations' branch pass-through, loop seeds, grad_block_owner) concern it."""
    opdef = registry.find(op_type)
    return opdef is not None and bool(opdef.block_attrs)


class _Decline(Exception):
    """The block does not qualify (the message says why)."""


def enabled() -> bool:
    return ENABLED and os.environ.get("PYBACKWARD_NO_FUSED") != "1"


class _Fused:
    """What the walk keeps on a `_Template` (`tmpl.fused`): per grad op its
    `FlatInfo` and a function from the template's `vals` to its names, and
    the template's grad-to-var pairs."""

    __slots__ = ("ops", "mapped", "fed")

    def __init__(self, ops: list[tuple[FlatInfo, Callable[[list[str]], list[str]]]], mapped: list,
                 fed: bool = False):
        self.ops = ops
        self.mapped = mapped
        #: every grad op reads one of the forward op's own names (never a
        #: head for find_not_needed)
        self.fed = fed


def _getter(pos: list[int]) -> Callable[[list[str]], list[str]]:
    if not pos:
        return lambda vals: []
    if len(pos) == 1:
        p = pos[0]
        return lambda vals: [vals[p]]
    get = itemgetter(*pos)
    return lambda vals: list(get(vals))


def _prepare(tmpl: Any, op: Operator, vals: list[str]) -> "_Fused | bool":
    """The template's `_Fused`, or False where its grad ops need a step the
    walk does not take."""
    grads, _ = tmpl.instantiate(vals, op.desc.attrs)
    n_fwd = len(vals) - 1 - len(op.input_arg_names) - len(op.output_arg_names)   # forward names come first
    first_grad, empty = n_fwd, len(vals) - 1
    ops = []
    fed = True
    for g, (pins, pouts) in zip(grads, tmpl.positions):
        if _owns_block(g.type):
            return False
        inpos = [p for _, ps in pins for p in ps]
        outpos = [p for _, ps in pouts for p in ps]
        # A grad op reading and writing one position (an in-place update of
        # a gradient): accumulation pins such a version, and
        # `copy_grads_read_in_place` / `report_grads_written_in_place` act.
        # With every name of the forward op distinct, disjoint positions
        # mean disjoint names.
        if not set(inpos).isdisjoint(outpos):
            return False
        flat = inpos + outpos
        info = FlatInfo(g.type, [(s, len(ps)) for s, ps in pins], [(s, len(ps)) for s, ps in pouts],
                        attr_bytes(g), grad_op_device(g),
                        [k for k, p in enumerate(flat) if k < len(inpos) and first_grad <= p < empty],
                        [k for k, p in enumerate(flat) if k >= len(inpos) and first_grad <= p < empty])
        # (var-type syncs, sparse grads, a sub_block attr: create_grad_vars'
        # other steps)
        if not info.plain:
            return False
        fed = fed and any(p < n_fwd for p in inpos)
        ops.append((info, _getter(flat)))
    return _Fused(ops, tmpl.mapped, fed)


_SUMS: dict[tuple[str, int], FlatInfo] = {}
_FILL: list[FlatInfo] = []


def _sum_info(device: str, n: int) -> FlatInfo:
    """accumulate's `sum` of n versions on `device` (attrs: Paddle's defaults)."""
    info = _SUMS.get((device, n))
    if info is None:
        g = fresh_op("sum", {"X": ["x"] * n}, {"Out": ["x"]}, {"op_device": device})
        info = _SUMS[(device, n)] = FlatInfo("sum", [("X", n)], [("Out", 1)], attr_bytes(g), device,
                                             range(n), (n,))
    return info


def _fill_info() -> FlatInfo:
    """remove_no_grad_branch's zero `fill_any_like`."""
    if not _FILL:
        g = fresh_op("fill_any_like", {"X": ["x"]}, {"Out": ["x@GRAD"]},
                     {"value": 0.0, "dtype": -1, "op_device": ""})
        _FILL.append(FlatInfo("fill_any_like", [("X", 1)], [("Out", 1)], attr_bytes(g), "", (), (1,)))
    return _FILL[0]


def _qualifies(block: Block, target_block: Block, state: Any, input_grad_names: set[str] | None,
               loop_owner: Operator | None) -> str | None:
    """Why the block does not qualify (None: it may; the ops decide next).
    Each condition is what one skipped step needs to be a no-op here."""
    if not enabled():
        return "disabled"
    if state.callbacks:
        return "callbacks"          # emit's op-by-op path: each callback sees the block per op
    if block is not target_block or block.idx != 0 or block.parent is not None or block.forward_block_idx != -1:
        # grad ops into the forward block 0 itself: no enclosing blocks' no-grad
        # names, create_grad_vars' block-0 case, no grad block to make
        return "block"
    if loop_owner is not None:
        return "loop"               # accumulate_array_read_grads, split_loop_var_versions, carried_in_place
    if input_grad_names is not None or state.program.appending_grad_times != 1:
        return "second pass"        # the grad-name renames and the input-grad filter of a second pass
    if state.max_inplace_add != 0:
        return "aggregation"        # grad_add chains instead of one sum
    if state.flat_run is not None:
        return "flat run taken"     # one FlatRun per pass (finish declares from it)
    return None


def fused_walk(block: Block, path: list[Operator], targets: list[Variable], target_block: Block, state: Any,
               input_grad_names: set[str] | None, loop_owner: Operator | None,
               templates: tuple[Callable[..., list | None], Callable[..., list | None]]) -> bool:
    """Do `append_backward_ops`' work for `block` in one walk if it
    qualifies; True if done, False (nothing changed) if the step-by-step
    pass must do it. `templates`: `grad_ops.spec_made` and
    `grad_ops.op_templates` (the templates are grad_ops'; this module sits
    below it)."""
    why = _qualifies(block, target_block, state, input_grad_names, loop_owner)
    if why is None:
        try:
            return _walk(block, path, targets, state, templates)
        except _Decline as e:
            why = str(e)
    STATS["decline:" + why] += 1
    return False


def _walk(block: Block, path: list[Operator], targets: list[Variable], state: Any,
          templates: tuple[Callable[..., list | None], Callable[..., list | None]]) -> bool:
    spec_made, op_templates = templates
    no_grad = state.no_grad[0]
    # (an op with a sub-block: grad blocks, loop seeds, branch pass-through)
    for op in path:
        if op.sub_block is not None:
            raise _Decline("sub-block")
    # (every op's grads from the registry's spec maker: tested first, cheaply)
    typed = spec_made(reversed(path))
    if typed is None:
        raise _Decline("no template")
    # (a grad op type `_prepare` refuses, known from the spec alone: said
    # before any per-op work)
    for spec in {id(s): s for _, _, s in typed}.values():
        if _owns_block(spec.type) or not plain_grad_type(spec.type):
            raise _Decline("template")
    # keep_read_values / insert_value_copies: copies are made only for a var
    # some op of the block (on the path or not) reads and writes (block 0 has
    # no loop vars). With none, they do nothing.
    for op in block.ops:
        outs = op.output_arg_names
        if outs and not set(outs).isdisjoint(op.input_arg_names):
            raise _Decline("op writes its input")
    got = op_templates(typed, no_grad)
    if got is None:
        raise _Decline("no template")

    # -- the grad ops, from the templates (the make loop)
    ops: list[FlatOp] = []
    mapped: dict[str, str] = {}
    fed = True
    for tmpl, vals, op in got:
        # Every name distinct (inputs, outputs, their @GRADs, @EMPTY@):
        # refuse_aliased_outputs has nothing to refuse, and a template's
        # positions name distinct vars (a var read twice by one op gets two
        # gradient writes from it: left to the pass). `op_templates` gives
        # no vals for such an op.
        if vals is None:
            raise _Decline("repeated name")
        f = tmpl.fused
        if f is None:
            f = tmpl.fused = _prepare(tmpl, op, vals)
        if f is False:
            raise _Decline("template")
        for info, get in f.ops:
            ops.append(FlatOp(info, get(vals)))
        for i, j in f.mapped:
            mapped[vals[i]] = vals[j]
        fed = fed and f.fed

    ops = _accumulate(ops)
    ng_updates: list[set[str]] = []
    n_ops = len(ops)
    ops = _remove_no_grad_branch(ops, set(no_grad), {grad_name(t.name) for t in targets}, ng_updates)
    if len(ops) != n_ops or ng_updates:
        fed = False          # (ops removed or zero fills put in: every op is looked at below)

    # find_not_needed removes only subgraphs headed by grad ops none of whose
    # inputs is a forward var (a name of a path op) or made by an earlier
    # grad op. With no such head it removes nothing. A template op reading
    # a name of its forward op is no head (`_Fused.fed`), nor a sum (it reads
    # versions earlier ops wrote); where some template op is not fed, or the
    # no-grad prune removed ops or put zero fills in, every op is looked at.
    if not fed:
        forward_vars: set[str] = set()
        for op in path:
            forward_vars.update(op.input_arg_names)
            forward_vars.update(op.output_arg_names)
        backward_vars: set[str] = set()
        for fo in ops:
            names, nin = fo.names, fo.info.nin
            ins = names[:nin]
            if forward_vars.isdisjoint(ins) and backward_vars.isdisjoint(ins):
                raise _Decline("unfed grad op")
            backward_vars.update(names[nin:])
    # steps.rename_existing_grads renames an output gradient the block
    # already declares; finish's declarations from the walk assume none
    # (looked at op by op only if the block declares some `@GRAD` var).
    own = block.vars
    if GRAD_SUFFIX in "\0".join(own):
        for fo in ops:
            if any(GRAD_SUFFIX in n and n in own for n in fo.names[fo.info.nin:]):
                raise _Decline("existing grad var")
    # copy_grads_read_in_place: a grad op reading and writing one gradient.
    # Template ops never do (`_prepare`), accumulation renames to fresh
    # names only, `sum` reads versions and writes the var, fill_any_like
    # reads a forward var: nothing to copy.
    # pass_gradients_through_untaken_branches: no conditional_block_grad (`_prepare`).

    # -- commit: what the pass leaves behind
    for u in ng_updates:
        no_grad.update(u)
    state.grad_to_var.update(mapped)
    if not state.paddle_exact:
        state.forward_copies[block.idx] = state.forward_copies.get(block.idx, 0)
    begin = len(block.ops)
    emit_flat(block, ops, state.emitted_attrs)
    state.flat_run = FlatRun(block, begin, ops)
    STATS["walks"] += 1
    return True


def _accumulate(ops: list[FlatOp]) -> list[FlatOp]:
    """`accumulate_repeated_outputs(ops, 0, 0, [], (), no_grad)` on flat ops
    with no in-place write (declines if it meets one)."""
    if _written_once(ops):
        return ops          # (its steps would change nothing: see `_written_once`)
    return _accumulate_steps(ops)


def _accumulate_steps(ops: list[FlatOp]) -> list[FlatOp]:
    """`_accumulate`, step for step."""
    versions: dict[str, list[str]] = {}
    first_writer: dict[str, int] = {}
    counter: dict[str, int] = defaultdict(int)
    device: dict[str, str] = {}
    refs: dict[str, list[int]] = defaultdict(list)
    pending: dict[int, list[FlatOp]] = {}
    pending_by_var: dict[str, list[FlatOp]] = defaultdict(list)

    def accumulate(var: str, at: int) -> None:
        parts = versions[var]
        made = FlatOp(_sum_info(device.get(var, ""), len(parts)), [*parts, var])
        pending.setdefault(at, []).append(made)
        pending_by_var[var].append(made)
        versions[var] = [var]

    def rename_earlier(var: str, new: str) -> None:
        start = first_writer[var]
        before = []
        for k in refs.pop(var, ()):
            if k < start:
                before.append(k)
                continue
            names = ops[k].names
            names[:] = [new if a == var else a for a in names]
            refs[new].append(k)
        if before:
            refs[var] = before
        for p in pending_by_var.get(var, ()):
            p.names[:] = [new if a == var else a for a in p.names]

    mentioned: dict[str, None] = {}
    for idx, fo in enumerate(ops):
        names, info = fo.names, fo.info
        grad_ins = [names[k] for k in info.gin]
        for name in grad_ins:
            mentioned.setdefault(name)
            if len(versions.get(name, ())) > 1:
                accumulate(name, idx)
        for pos in info.gout:
            name = names[pos]
            if name in grad_ins:
                raise _Decline("in-place grad")
            mentioned.setdefault(name)
            seen = versions.get(name)
            if not seen:
                versions[name] = [name]
                first_writer[name] = idx
                continue
            if len(seen) == 1:
                new0 = renamed_version(name, 0, counter[name])
                counter[name] += 1
                seen[0] = new0
                rename_earlier(name, new0)
                for j in range(info.nin, pos):
                    if names[j] == name:
                        names[j] = new0
            new = renamed_version(name, 0, counter[name])
            counter[name] += 1
            names[pos] = new
            seen.append(new)
            device[name] = info.device
        for name in grad_ins:
            refs[name].append(idx)
        for pos in info.gout:
            refs[names[pos]].append(idx)
    for var in mentioned:
        if len(versions.get(var, ())) > 1:
            accumulate(var, len(ops))
    if not pending:
        return ops
    out: list[FlatOp] = []
    for idx, fo in enumerate(ops):
        got = pending.get(idx)
        if got:
            out.extend(got)
        out.append(fo)
    out.extend(pending.get(len(ops), ()))
    return out


def _written_once(ops: list[FlatOp]) -> bool:
    """Whether no gradient is written by two ops (or twice by one) and no op
    writes a gradient it reads: `_accumulate` then renames, sums and
    declines nothing - each write is its name's first (`versions` [name]),
    no name reaches two versions - and gives `ops` back as they are. (False:
    it takes its steps, and may decline.)"""
    written = [(fo.names[p], fo) for fo in ops for p in fo.info.gout]
    writer = dict(written)
    if len(writer) != len(written):
        return False
    get = writer.get
    for fo in ops:
        names = fo.names
        for p in fo.info.gin:
            if get(names[p]) is fo:
                return False
    return True


def _remove_no_grad_branch(ops: list[FlatOp], no_grad: set[str], target_grads: set[str],
                           updates: list[set[str]]) -> list[FlatOp]:
    """`prune.remove_no_grad_branch` on flat ops; `no_grad` is a copy, and
    what it adds to it goes to `updates` (for the pass's set on commit)."""
    if no_grad.isdisjoint(chain.from_iterable([fo.names for fo in ops])):
        # (no name of any op is no-grad: no op's outputs or gradient inputs
        # are covered, none reads a no-grad gradient - the steps below keep
        # exactly the ops with outputs, and add nothing to `no_grad`)
        return [fo for fo in ops if len(fo.names) > fo.info.nin]
    return _no_grad_steps(ops, no_grad, target_grads, updates)


def _no_grad_steps(ops: list[FlatOp], no_grad: set[str], target_grads: set[str],
                   updates: list[set[str]]) -> list[FlatOp]:
    """`_remove_no_grad_branch`'s steps, op by op."""
    kept = []
    hit = False
    covers = no_grad.issuperset
    for fo in ops:
        names, info = fo.names, fo.info
        outs = names[info.nin:]
        if not outs or covers(outs):
            continue
        grad_ins = [names[k] for k in info.gin]
        if grad_ins and covers(grad_ins):
            u = set(outs) - target_grads
            no_grad.update(u)
            updates.append(u)
            continue
        kept.append((fo, grad_ins))
        hit = hit or not no_grad.isdisjoint(grad_ins)
    if not updates and not hit:
        # (no_grad as it was for every test above: no op reads a no-grad gradient)
        return [fo for fo, _ in kept]
    out: list[FlatOp] = []
    fill = None
    for fo, grad_ins in kept:
        if not no_grad.isdisjoint(grad_ins):
            for arg in grad_ins:
                if arg in no_grad:
                    if fill is None:
                        fill = _fill_info()
                    x = strip_grad_suffix(arg)
                    if GRAD_SUFFIX in x:          # (FlatInfo.gin of the fill says: a forward name)
                        raise _Decline("zero fill of a gradient's gradient")
                    out.append(FlatOp(fill, [x, arg]))
        out.append(fo)
    return out
