"""Which value of a PIR backward section is the gradient of which forward value.

A PIR program names no gradient: Paddle's `append_backward` returns
(parameter, gradient value) pairs in memory, and the file keeps only the ops.
This module reads them back from the ops, as Paddle's pass made them:

* the seed: `pd_op.full_like(loss, 1)` is the gradient of the loss;
* a grad op (`pd_op.matmul_grad`): its result for legacy slot `X@GRAD` is the
  gradient of the forward op's operand for slot `X`, the forward op being
  found through the grad op's operands (a forward output it reads, or the
  forward value whose gradient it reads, `Out@GRAD`), else the operand the
  grad op shares with it by name (`x`);
* `pd_op.add_n(builtin.combine(g1, g2, ...))`: the sum of partial gradients of one value;
* a backward `pd_op.while`: its loop variable k carries the gradient its input
  k carries, of a forward `while` result (then it ends as the gradient of that
  `while`'s input) or of a value the forward body captured;
* a backward `pd_op.if`: its results are the gradients of the values the
  forward `if` (the one that pushed what it pops) reads from outside, those
  that need one, in the order of first use (Paddle's `get_used_external_value`);
* a backward `pd_op.pylayer`: its results are the gradients of the forward
  `pylayer`'s operands that need one.

The last gradient computed for a value is its gradient. `named_gradients`
gives `NAME@GRAD` for every parameter and data value that has one, the names
`pybackward.interpreter.pir_executor.run` fetches by.
May import: `pybackward.base`, `pybackward.pir`, and `pir_glue` (the op map lookup).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..pir import opmap
from ..pir.model import Block, Operation, Program, Value
from ..pir.types import DenseTensorType
from ..pir.opmap import resolve

GRAD_SUFFIX = "@GRAD"
CONTROL_FLOW = frozenset({"pd_op.if", "pd_op.while", "pd_op.pylayer"})


@dataclass
class BackwardInfo:
    """The backward section of a program, as far as the ops tell.

    `loss`: the value the seed differentiates (None: no backward section);
    `seed`: the `full_like` op; `grads`: forward value -> its gradient value
    (the last one the section computes, top level only)."""

    loss: Value | None
    seed: Operation | None
    grads: dict[Value, Value]


def _is_grad_op(op: Operation) -> bool:
    return op.dialect == "pd_op" and (op.name.endswith("_grad") or op.name.endswith("_grad_"))


def find_seed(program: Program) -> Operation | None:
    """The start of the backward section: the first top-level `pd_op.full_like(loss, 1)`
    of a one-element loss whose result a grad op (or a backward control-flow op) reads."""
    for op in program.block.ops:
        if op.name != "pd_op.full_like" or not op.results or len(op.operands) < 2 or op.operands[0] is None:
            continue
        loss, fill = op.operands[0], op.operands[1]
        const = fill.defining_op if fill is not None else None
        if const is None or const.name != "pd_op.full" or const.attr("value", None) != 1:
            continue
        n = loss.type.numel() if isinstance(loss.type, DenseTensorType) else None
        if n not in (1, None):
            continue
        if any(_is_grad_op(user) or user.name in CONTROL_FLOW for user, _ in op.results[0].uses):
            return op
    return None


def backward_info(program: Program) -> BackwardInfo:
    """Read the gradient of each top-level forward value from the backward section."""
    seed = find_seed(program)
    if seed is None:
        return BackwardInfo(None, None, {})
    ops = program.block.ops
    start = ops.index(seed)
    grad_of: dict[Value, Value] = {}
    for op in ops[start:]:
        for r, f in _grads_of_op(op, grad_of):
            grad_of[r] = f
    final: dict[Value, Value] = {}
    for g, f in grad_of.items():      # dicts keep insertion order: the last one wins
        final[f] = g
    return BackwardInfo(seed.operands[0], seed, final)


def named_gradients(program: Program, info: BackwardInfo | None = None) -> dict[str, Value]:
    """`NAME@GRAD` -> gradient value, for every parameter and data value the
    backward section computes a gradient for."""
    info = info or backward_info(program)
    out: dict[str, Value] = {}
    for op in program.block.ops:
        attr = {"builtin.parameter": "parameter_name", "pd_op.data": "name"}.get(op.name)
        if attr is None or not op.results:
            continue
        g = info.grads.get(op.results[0])
        name = op.attr(attr, None)
        if g is not None and isinstance(name, str):
            out[name + GRAD_SUFFIX] = g
    return out


# --------------------------------------------------------------------------
def _grads_of_op(op: Operation, grad_of: dict[Value, Value]) -> list[tuple[Value, Value]]:
    """(gradient value, forward value) pairs an op of the backward section makes."""
    name = op.name
    if name == "pd_op.full_like":
        return [(op.results[0], op.operands[0])] if op.operands and op.operands[0] is not None else []
    if name in ("pd_op.add_n", "pd_op.add_n_"):
        src = op.operands[0] if op.operands else None
        parts = src.defining_op.operands if src is not None and src.defining_op is not None \
            and src.defining_op.name == "builtin.combine" else []
        fwd = {grad_of.get(p) for p in parts}
        return [(op.results[0], fwd.pop())] if len(fwd) == 1 and None not in fwd else []
    if name == "pd_op.while":
        return _while_grads(op, grad_of)
    if name == "pd_op.if":
        return _if_grads(op, grad_of)
    if name == "pd_op.pylayer":
        return _pylayer_grads(op, grad_of)
    if _is_grad_op(op):
        return _grad_op_grads(op, grad_of)
    return []


def _grad_op_grads(op: Operation, grad_of: dict[Value, Value]) -> list[tuple[Value, Value]]:
    r = resolve(op.name)
    if r is None or r.map.forward is None:
        return []
    gm = r.map
    fwd_op = _forward_op(op, gm, grad_of)
    fmap = resolve(fwd_op.name).map if fwd_op is not None else None   # type: ignore[union-attr]
    forms = opmap.legacy_forms(gm.forward)
    out = []
    for k, res in enumerate(op.results):
        if res.is_null or k >= len(gm.results) or not (gm.results[k].slot or "").endswith(GRAD_SUFFIX):
            continue
        slot = gm.results[k].slot[: -len(GRAD_SUFFIX)]      # type: ignore[index]
        fwd = None
        if fwd_op is not None and fmap is not None:
            om = fmap.operand_of_slot(slot)
            if om is not None:
                i = fmap.operands.index(om)
                fwd = fwd_op.operands[i] if i < len(fwd_op.operands) else None
        if fwd is None and forms:
            om = forms[0].operand_of_slot(slot)
            if om is not None:
                j = next((j for j, o in enumerate(gm.operands) if o.name == om.name), None)
                fwd = op.operands[j] if j is not None and j < len(op.operands) else None
        if fwd is not None:
            out.append((res, fwd))
    return out


def _forward_op(op: Operation, gm: opmap.OpMap, grad_of: dict[Value, Value]) -> Operation | None:
    """The forward op a grad op belongs to: the op of a forward output it reads,
    or of the forward value whose gradient it reads."""
    for j, v in enumerate(op.operands):
        if v is None or j >= len(gm.operands):
            continue
        slot = gm.operands[j].slot or ""
        cand = grad_of.get(v) if slot.endswith(GRAD_SUFFIX) else v
        f = cand.defining_op if cand is not None else None
        if f is not None and f is not op:
            fr = resolve(f.name)
            if fr is not None and fr.map.legacy_type == gm.forward:
                return f
    return None


def _while_grads(op: Operation, grad_of: dict[Value, Value]) -> list[tuple[Value, Value]]:
    out = []
    for k, v in enumerate(op.operands[1:]):
        f = grad_of.get(v) if v is not None else None
        if f is None or k >= len(op.results):
            continue
        w = f.defining_op
        if w is not None and w.name == "pd_op.while" and w is not op and 1 + f.index < len(w.operands):
            f = w.operands[1 + f.index]
        if f is not None:
            out.append((op.results[k], f))
    return out


def _needs_grad(v: Value) -> bool:
    return isinstance(v.type, DenseTensorType) and v.stop_gradient is not True


def _external_values(op: Operation) -> list[Value]:
    """Values the ops inside `op`'s regions read from outside it, in order of first use."""
    inside: set[Value] = set()
    for inner in op.walk():
        if inner is not op:
            inside.update(inner.results)
        for region in inner.regions:
            for b in region.blocks:
                inside.update(b.args)
                inside.update(b.kwargs)
    seen: dict[Value, None] = {}
    for inner in op.walk():
        if inner is op:
            continue
        for v in inner.operands:
            if v is not None and v not in inside and v not in seen:
                seen[v] = None
    return list(seen)


def _pushing_op(op: Operation) -> Operation | None:
    """The forward control-flow op that pushed what `op`'s blocks pop first."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                if inner.name != "cf.tuple_pop" or not inner.operands or inner.operands[0] is None:
                    continue
                stack = inner.operands[0].defining_op
                if stack is None or stack.name != "cf.stack_create" or len(stack.results) < 2:
                    continue
                for user, _ in stack.results[1].uses:
                    b: Block | None = user.block
                    while b is not None and b.parent_op is not None:
                        if b.parent_op.name == op.name and b.parent_op is not op:
                            return b.parent_op
                        b = b.parent_op.block
    return None


def _if_grads(op: Operation, grad_of: dict[Value, Value]) -> list[tuple[Value, Value]]:
    fwd = _pushing_op(op)
    if fwd is None:     # nothing pushed: the forward if with the same condition before it
        block = op.block
        if block is None or not op.operands:
            return []
        before = block.ops[: block.ops.index(op)]
        fwd = next((f for f in reversed(before) if f.name == "pd_op.if" and f.operands
                    and f.operands[0] is op.operands[0] and not any(g in grad_of for g in f.results)), None)
        if fwd is None:
            return []
    wanted = [v for v in _external_values(fwd) if v is not fwd.operands[0] and _needs_grad(v)]
    results = [r for r in op.results if not r.is_null]
    if len(wanted) != len(results):
        return []
    return list(zip(results, wanted))


def _pylayer_grads(op: Operation, grad_of: dict[Value, Value]) -> list[tuple[Value, Value]]:
    fwd = None
    for v in op.operands:
        f = grad_of.get(v) if v is not None else None
        if f is not None and f.defining_op is not None and f.defining_op.name == "pd_op.pylayer":
            fwd = f.defining_op
            break
    if fwd is None:
        return []
    results = [r for r in op.results if not r.is_null]
    for wanted in ([v for v in fwd.operands if v is not None and _needs_grad(v)],
                   [v for v in _external_values(fwd) if _needs_grad(v)]):
        if len(wanted) == len(results):
            return list(zip(results, wanted))
    return []
