"""The graph facts Paddle's PIR pass walks by: an op's real inputs and outputs, the
values a region captures, the reverse topological order, and the pruning walk.

Paddle's `ir_backward` treats `pd_op.if` / `pd_op.while` / `pd_op.pylayer` as ops
whose inputs are every value their regions use from outside (the op's own
operands first, then the regions' ops in order, each value once), and
`pd_op.array_write_` as an op that also writes its array operand. The order in
which grad ops are appended is the order of `inverse_sort`: Kahn's algorithm
from the ops nobody in the list consumes, first-in first-out, as Paddle does —
a different tie-break would give a different (equally valid) program.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence

from ...pir.model import Block, Operation, Value

#: Ops whose regions make their inputs: every outside value the regions use.
REGION_OPS = ("pd_op.if", "pd_op.while", "pd_op.pylayer")
CONTROL_FLOW = ("pd_op.if", "pd_op.while")
#: Ops that write into an operand (Paddle's "inplace net": nothing is pruned).
WRITES_OPERAND = ("pd_op.array_write_", "pd_op.assign_out_")


def used_external_values(op: Operation) -> list[Value]:
    """The values `op` and its regions read from outside it: its operands first, then
    each nested op's operands in order (block arguments and values defined inside
    excluded), each value once."""
    used: list[Value] = []
    _collect(op, set(), used)
    return used


def block_external_values(block: Block) -> list[Value]:
    """The values `block` (a while body) reads from outside it, each once, in order."""
    defined: set[int] = {id(a) for a in block.args}
    used: list[Value] = []
    for o in block.ops:
        _collect(o, defined, used)
    return used


def _collect(op: Operation, defined: set[int], used: list[Value]) -> None:
    """Paddle's walk: an op's operands, then its regions (their arguments defined
    first), then its results become defined."""
    for v in op.operands:
        if v is not None and id(v) not in defined:
            used.append(v)
            defined.add(id(v))
    for region in op.regions:
        for b in region.blocks:
            defined.update(id(a) for a in b.args)
        for b in region.blocks:
            for inner in b.ops:
                _collect(inner, defined, used)
    defined.update(id(r) for r in op.results)


def real_inputs(op: Operation) -> list[Value | None]:
    """The inputs the pass sees: the captured values for region ops, else the operands
    (a null operand, an optional one left out, as None)."""
    name = op.name
    if name == "pd_op.if" or name == "pd_op.pylayer":
        return used_external_values(op)
    if name == "pd_op.while":
        return list(op.operands) + block_external_values(op.regions[0].blocks[0])
    return list(op.operands)


def real_outputs(op: Operation) -> list[Value]:
    """The outputs the pass sees: the results, plus the arrays `array_write_` writes
    (also those written inside a while body)."""
    outs = list(op.results)
    if op.name == "pd_op.array_write_":
        outs.extend(v for v in op.operands if v is not None)
    elif op.name == "pd_op.while":
        for inner in op.regions[0].blocks[0].ops:
            if inner.name == "pd_op.array_write_":
                outs.extend(v for v in inner.operands if v is not None)
    return outs


def is_inplace_net(ops: Iterable[Operation]) -> bool:
    """Whether some op (or an op inside a control-flow region) writes an operand:
    Paddle then neither prunes nor sorts (it walks the ops in reverse)."""
    for op in ops:
        if op.name in WRITES_OPERAND:
            return True
        if op.name in CONTROL_FLOW:
            for region in op.regions:
                for b in region.blocks:
                    if is_inplace_net(b.ops):
                        return True
    return False


def inverse_sort(ops: Sequence[Operation]) -> list[Operation]:
    """`ops` in reverse topological order, as Paddle's `inverse_sort_op` gives it."""
    seen: set[int] = set()
    uniq: list[Operation] = []
    for op in ops:
        if id(op) not in seen:
            seen.add(id(op))
            uniq.append(op)
    inputs = {id(op): real_inputs(op) for op in uniq}
    pending: dict[int, int] = {}
    for op in uniq:
        for x in inputs[id(op)]:
            d = x.defining_op if x is not None else None
            if d is not None and id(d) in seen:
                pending[id(d)] = pending.get(id(d), 0) + 1
    queue = deque(op for op in uniq if not pending.get(id(op)))
    out: list[Operation] = []
    while queue:
        op = queue.popleft()
        out.append(op)
        for x in inputs[id(op)]:
            d = x.defining_op if x is not None else None
            if d is None or id(d) not in seen:
                continue
            pending[id(d)] -= 1
            if pending[id(d)] == 0:
                queue.append(d)
    if len(out) != len(uniq):
        raise ValueError("inverse_sort: the ops have a cycle")
    _move_increments(out)
    return out


def _move_increments(order: list[Operation]) -> None:
    """Paddle's fix-up for a loop counter: an `increment_` goes after the last op
    (before it in `order`, `cf.tuple_push` aside) that reads the counter it bumps."""
    swaps: list[tuple[int, int]] = []
    position = {id(op): i for i, op in enumerate(order)}
    for op in reversed(order):
        if op.name != "pd_op.increment_":
            continue
        i1 = i2 = position[id(op)]
        sources = {id(v) for v in op.operands if v is not None}
        for earlier in reversed(order[:i1]):
            if earlier.name != "cf.tuple_push" and any(v is not None and id(v) in sources
                                                       for v in real_inputs(earlier)):
                i2 = position[id(earlier)]
        if i1 != i2:
            swaps.append((i1, i2))
    for a, b in swaps:
        order[a], order[b] = order[b], order[a]


def prune(ops: Sequence[Operation], inputs: set[int], outputs: set[int],
          no_grad: set[int]) -> tuple[list[Operation], list[Operation]]:
    """Paddle's `prune_ops`: (effective, uneffective). Effective ops lie on a path from
    `inputs` (when given) to `outputs`; uneffective ones on none. Sets hold `id(value)`;
    `inputs` and `outputs` grow as the walks go, values in `no_grad` stop them."""
    n = len(ops)
    inter = [True] * n
    union = [False] * n
    outs_of = [real_outputs(op) for op in ops]
    ins_of = [[v for v in real_inputs(op) if v is not None] for op in ops]
    if inputs:
        for i in range(n):
            if any(id(v) in inputs for v in outs_of[i]):
                union[i] = True
                continue
            if any(id(v) in inputs for v in ins_of[i]):
                union[i] = True
                for v in outs_of[i]:
                    if id(v) not in no_grad:
                        inputs.add(id(v))
            else:
                inter[i] = False
    for i in range(n - 1, -1, -1):
        if any(id(v) in outputs for v in outs_of[i]):
            union[i] = True
            for v in ins_of[i]:
                if id(v) not in no_grad:
                    outputs.add(id(v))
        else:
            union[i] = False
            inter[i] = False
    index = {id(op): i for i, op in enumerate(ops)}
    for i, op in enumerate(ops):
        if union[i]:
            continue
        for r in op.results:
            if len(r.uses) == 1:
                j = index.get(id(r.uses[0][0]))
                if j is not None and union[j]:
                    union[i] = True
    effective = [ops[i] for i in range(n) if inter[i]]
    uneffective = [ops[i] for i in range(n) if not union[i]]
    return effective, uneffective
