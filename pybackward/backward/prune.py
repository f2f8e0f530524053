"""Removing grad ops that compute nothing needed.

* `remove_no_grad_branch` (Paddle's `_remove_no_grad_branch_`): drop a grad
  op whose outputs are all no-grad, or whose gradient inputs all are (its
  outputs then become no-grad too, so removal cascades); then put a zero
  `fill_any_like` before each remaining op for every no-grad gradient it
  still reads.
* `find_not_needed` (Paddle's `_find_not_need_ops`): grad ops fed only by
  vars nothing produces head subgraphs that can never run; such subgraphs
  go, unless that would remove every grad op.
"""
from __future__ import annotations

from collections import deque

from ..ops.registry import GradOp, fresh_op
from ..legacy.program import Operator
from ..legacy.names import GRAD_SUFFIX, strip_grad_suffix


def remove_no_grad_branch(ops: list[GradOp], no_grad: set[str], target_grads: set[str]) -> list[GradOp]:
    kept: list[GradOp] = []
    # (slots read as lists made in comprehensions: GradOp.input_args is a
    # generator, several times slower on ~10k ops)
    # (set tests over whole lists in C: `issuperset` is `all(n in no_grad ...)`)
    covers = no_grad.issuperset
    for op in ops:
        outs = [o for args in op.outputs.values() for o in args]
        if not outs or covers(outs):
            continue
        grad_ins = [n for args in op.inputs.values() for n in args if GRAD_SUFFIX in n]
        if grad_ins and covers(grad_ins):
            no_grad.update(set(outs) - target_grads)
            continue
        kept.append((op, grad_ins))
    out: list[GradOp] = []
    for op, grad_ins in kept:
        if not no_grad.isdisjoint(grad_ins):
            for arg in grad_ins:
                if arg in no_grad:
                    out.append(fresh_op("fill_any_like", {"X": [strip_grad_suffix(arg)]}, {"Out": [arg]},
                                        {"value": 0.0, "dtype": -1, "op_device": ""}))
        out.append(op)
    return out


class _Node:
    __slots__ = ("op", "ins", "outs", "readers")

    def __init__(self, op=None):
        self.op = op
        self.ins: list[_Node] = []
        self.outs: list[_Node] = []
        self.readers: list[_Node] = []


def find_not_needed(ops: list[GradOp], forward_ops: list[Operator],
                    input_grad_names: set[str] | None) -> set[int]:
    """ids (id()) of the grad ops in subgraphs that no forward value feeds."""
    forward_vars = set(input_grad_names or ())
    for op in forward_ops:
        forward_vars.update(op.input_arg_names)
        forward_vars.update(op.output_arg_names)
    # Candidate heads: grad ops none of whose inputs is a forward var or made
    # by an earlier grad op. Usually there are none, and no graph is needed.
    backward_vars: set[str] = set()
    head_ids: set[int] = set()
    for op in ops:
        ins = [n for args in op.inputs.values() for n in args]
        if forward_vars.isdisjoint(ins) and backward_vars.isdisjoint(ins):
            head_ids.add(id(op))
        for args in op.outputs.values():
            backward_vars.update(args)
    if not head_ids:
        return set()
    versions: dict[str, list[_Node]] = {}
    heads: list[_Node] = []
    for op in ops:
        node = _Node(op)
        for name in op.input_args():
            if name not in versions:
                versions[name] = [_Node()]
            var = versions[name][-1]
            var.readers.append(node)
            node.ins.append(var)
        for name in op.output_args():
            var = _Node()
            versions.setdefault(name, []).append(var)
            node.outs.append(var)
        if id(op) in head_ids:
            heads.append(node)
    doomed: list[GradOp] = []
    for head in heads:
        reached = [head]
        ready = set(map(id, head.ins))
        queue = deque([head])
        removable = True
        while queue:
            node = queue.popleft()
            if node.ins and all(id(v) in ready for v in node.ins):
                for var in node.outs:
                    queue.extend(var.readers)
                    reached.extend(var.readers)
                ready.update(map(id, node.outs))
            else:
                removable = False
                break
        if removable:
            doomed.extend(n.op for n in reached)
    doomed_ids = {id(op) for op in doomed}
    if doomed_ids == {id(op) for op in ops}:
        return set()
    return doomed_ids
