"""The PIR pass through `pd_op.if` and `pd_op.while`, as Paddle 3.3.1 builds it.

A region's forward values reach its grad region through a stack: the pass
puts a `cf.stack_create` at the top of the program and, before the region's
`cf.yield`, a `cf.tuple_push` of every value the block defines (its arguments,
then each op's results); the grad region starts with the matching
`cf.tuple_pop`, and the rules inside read the popped copies.

- `pd_op.if` gets a `pd_op.if` on the same condition, one result per input
  that wants a gradient; each branch's grad ops go in the matching grad
  branch, which yields the input's whole gradient (its contributions from
  after the `if` included: they are summed inside the branch).
- `pd_op.while` gets `cf.has_elements` (of the body's stack) as condition and
  a `pd_op.while` whose loop variables are the gradients of the loop
  variables and of the outside values the body reads; one grad step pops one
  forward step.
"""
from __future__ import annotations

from typing import Sequence

from ...base.errors import UnknownOpError
from ...pir.model import Block, Operation, Value
from ...pir.types import Attr, OpaqueType, dense
from . import graph

STACK_TYPES = (OpaqueType("2.t_stack"), OpaqueType("2.t_inlet"), OpaqueType("2.t_outlet"))


def stop_flag(v: Value | None) -> bool:
    """A value's stop_gradient as Paddle reads it: the result flag (True when absent);
    for a while body's argument, its loop variable's (False when absent)."""
    if v is None:
        return True
    op = v.defining_op
    if op is not None:
        f = op.result_flag("stop_gradient", v.index)
        return True if f is None else f
    parent = v.owner.parent_op  # type: ignore[union-attr]
    if parent is not None and parent.name == "pd_op.while" and v.index + 1 < len(parent.operands):
        src = parent.operands[v.index + 1]
        if src is None:
            return False
        if src.defining_op is not None:
            f = src.defining_op.result_flag("stop_gradient", src.index)
            return False if f is None else f
        return stop_flag(src)
    return True


def _top_block(block: Block) -> Block:
    while block.region is not None and block.region.op is not None and block.region.op.block is not None:
        block = block.region.op.block
    return block


def _op(block: Block, name: str, operands: Sequence[Value | None], types, attrs=None, stop=None,
        regions: int = 0, at: int | None = None) -> Operation:
    ra = {} if stop is None else {"stop_gradient": Attr.bools(list(stop))}
    op = Operation(name, operands, types, attrs or {}, ra, num_regions=regions)
    for r in op.regions:
        r.add_block()
    if at is None:
        block.append(op)
    else:
        block.insert(at, op)
    return op


def build_pipe(block: Block) -> Operation:
    """Paddle's `build_pipe_for_block`: a stack at the top of the program and a push of
    every value `block` defines, before its yield. Returns the push."""
    top = _top_block(block)
    stack = _op(top, "cf.stack_create", [], list(STACK_TYPES), at=0)
    local = list(block.args) + [r for op in block.ops for r in op.results]
    at = len(block.ops) - 1 if block.ops and block.ops[-1].name == "cf.yield" else len(block.ops)
    return _op(block, "cf.tuple_push", [stack.results[1]] + local, [], at=at)


def _push_of_while(op: Operation) -> Operation:
    for inner in reversed(op.regions[0].blocks[0].ops):
        if inner.name == "cf.tuple_push":
            return inner
    raise UnknownOpError("pd_op.while: its body has no cf.tuple_push to build the grad loop from")


def _has_elements(block: Block, while_op: Operation) -> Value:
    stack = _push_of_while(while_op).operands[0].defining_op.results[0]  # type: ignore[union-attr]
    return _op(block, "cf.has_elements", [stack], [dense("bool", (1,))], stop=[True]).results[0]


# --------------------------------------------------------------------------
# The handlers the walk calls
# --------------------------------------------------------------------------
def tuple_push(run, op: Operation, inputs, outputs, out_grads, stops, bwd_block: Block,
               backward_ops: list[Operation], state, copy_map: dict[Value, Value], tuple_ops: list) -> None:
    stack_op = op.operands[0].defining_op
    outlet = stack_op.results[2]
    if not outlet.uses:
        pushed = [x[0] for x in inputs[1:]]
        pop = _op(bwd_block, "cf.tuple_pop", [outlet], [v.type for v in pushed], stop=[stop_flag(v) for v in pushed])
        tuple_ops.extend([pop, op, stack_op])
        run.record(backward_ops, state, op, [pop])
        for v, copy in zip(pushed, pop.results):
            copy_map[v] = copy
    else:
        run.record(backward_ops, state, op, [outlet.uses[0][0]])


def region_op(run, op: Operation, inputs, outputs, out_grads, stops, bwd_block: Block, backward_ops: list[Operation],
              state, arg_map: dict[Value, Value], copy_map: dict[Value, Value]) -> None:
    if op.name == "pd_op.if":
        _if(run, op, inputs, outputs, out_grads, stops, bwd_block, backward_ops, state, arg_map, copy_map)
    elif op.name == "pd_op.while":
        _while(run, op, inputs, outputs, out_grads, stops, bwd_block, backward_ops, state, arg_map, copy_map)
    else:
        raise UnknownOpError(f"op '{op.name}': its backward is a Python function registered in the process "
                             "that built the program (static_pylayer), which a saved program does not carry")


def _if(run, op, inputs, outputs, out_grads, stops, bwd_block, backward_ops, state, arg_map, copy_map) -> None:
    origin_inputs = graph.real_inputs(op)
    true_block, false_block = op.regions[0].blocks[0], op.regions[1].blocks[0]
    for b in (true_block, false_block):
        build_pipe(b)
    if (true_block.ops and true_block.ops[0].name == "cf.tuple_pop") or \
            (false_block.ops and false_block.ops[0].name == "cf.tuple_pop"):
        raise UnknownOpError("pd_op.if whose branch starts with cf.tuple_pop (the grad of a grad "
                             "through a condition) is not supported")
    types = [inputs[i][0].type for i in range(1, len(inputs)) if not stops[i - 1][0]]
    grad_op = _op(bwd_block, "pd_op.if", [inputs[0][0]], types, stop=[True] * len(types), regions=2)
    res: list[Value | None] = []
    j = 0
    for i in range(1, len(inputs)):
        if stops[i - 1][0]:
            res.append(None)
        else:
            res.append(grad_op.results[j])
            j += 1
    run.record(backward_ops, state, op, [grad_op])
    # Paddle's pass (a) recurses into the branches without the enclosing loop's map from
    # loop-carried gradients to the grad loop's block arguments, and (b) yields the
    # gradients of the popped copies of the inputs, which no rule gave one: inside a
    # while, the branches read the gradient of the loop's first step and yield zeros
    # (docs/deviations.md, "cond inside while"). Right by default; paddle_exact keeps it.
    wrong = run.paddle_exact
    branch_args = {} if wrong else arg_map
    base_inputs = [x[0] for x in inputs[1:]] if wrong else list(origin_inputs[1:])
    if not wrong and (arg_map or any(a is not b for a, b in zip(base_inputs, (x[0] for x in inputs[1:])))):
        run.deviation("cond inside while: the grad branches read the loop's gradient and yield the inputs' "
                      "gradients (Paddle's PIR pass gives the first step's gradient and zeros)")
    used_before: list[Value] = []
    for fwd_b, bwd_r in zip((true_block, false_block), grad_op.regions):
        sub_state = state.copy()
        used_before.extend(v for v in origin_inputs if v in state.grads)
        run.append_backward_ops(op, base_inputs, list(res), fwd_b, bwd_r.blocks[0],
                                list(fwd_b.ops), [], sub_state, dict(branch_args), dict(copy_map))
    t_yield, f_yield = grad_op.regions[0].blocks[0].ops[-1], grad_op.regions[1].blocks[0].ops[-1]
    flags = [_flag_list(grad_op)[k] and stop_flag(t_yield.operands[k]) and stop_flag(f_yield.operands[k])
             for k in range(len(grad_op.results))]
    _set_flags(grad_op, flags)
    for v in used_before:
        state.grads[v] = []
    run.update_input_grads(op, [[g] for g in res], origin_inputs, state)


def _while(run, op, inputs, outputs, out_grads, stops, bwd_block, backward_ops, state, arg_map, copy_map) -> None:
    origin_inputs = graph.real_inputs(op)
    body = op.regions[0].blocks[0]
    sub_state = state.copy()
    for x in graph.block_external_values(body):
        if len(sub_state.grads.get(x, ())) > 1:
            run.add_n(op, x, state, backward_ops, bwd_block, arg_map)
        if not sub_state.grads.get(x):
            run.full_like(0.0, x, x, sub_state, backward_ops, bwd_block)
        grad = sub_state.grads[x][0]
        state.sums.setdefault(x, []).extend(state.grads.get(x, []))
        state.grads[x] = []
        out_grads.append([arg_map.get(g, g) if g is not None else None for g in grad])
    build_pipe(body)
    cond = _has_elements(bwd_block, op)
    loop_vars = [out_grads[k][0] for k in range(len(out_grads)) if not stops[k + 1][0]]
    grad_op = _op(bwd_block, "pd_op.while", [cond] + loop_vars, [v.type for v in loop_vars],
                  stop=[stop_flag(v) if v is not None else False for v in loop_vars], regions=1)
    grad_body = grad_op.regions[0].blocks[0]
    for v in loop_vars:
        grad_body.add_arg(v.type)
    res: list[Value | None] = []
    j = 0
    for i in range(len(inputs)):
        if stops[i][0]:
            res.append(None)
        else:
            res.append(grad_op.results[j])
            j += 1
    run.record(backward_ops, state, op, [grad_op])
    sub_arg_map = {v: a for v, a in zip(grad_op.operands[1:], grad_body.args)}
    sub_arg_map.update(arg_map)
    run.append_backward_ops(op, [x[0] for x in inputs], list(res), body, grad_body, list(body.ops), [],
                            sub_state, sub_arg_map, dict(copy_map))
    y = grad_body.ops[-1]
    flags = _flag_list(grad_op)
    for k in range(1, len(y.operands)):
        if not stop_flag(y.operands[k]):
            flags[k - 1] = False
    _set_flags(grad_op, flags)
    run.update_input_grads(op, [[g] for g in res], origin_inputs, state)


def _flag_list(op: Operation) -> list[bool]:
    return [bool(op.result_flag("stop_gradient", i)) for i in range(len(op.results))]


def _set_flags(op: Operation, flags: list[bool]) -> None:
    op.result_attrs["stop_gradient"] = Attr.bools(flags)


def finish_block(run, base_op: Operation, base_inputs, base_input_grads, block: Block,
                 backward_ops: list[Operation], state, arg_map: dict[Value, Value], copy_map: dict[Value, Value],
                 tuple_ops: list) -> None:
    """Close a grad region: drop an unused stack (Paddle's `while_prune_check`), then
    yield the gradients of the region op's inputs (Paddle's `append_yield`)."""
    if tuple_ops and not any(r.uses for r in tuple_ops[0].results):
        pop, push, stack = tuple_ops[0], tuple_ops[1], tuple_ops[2]
        pop.block.remove(pop)
        push.block.remove(push)
        stack.block.remove(stack)
    base_inputs = list(base_inputs)
    grads: list[Value | None] = []
    if base_op.name == "pd_op.while":
        grads.append(_has_elements(block, base_op))
        to_arg = {v: a for v, a in zip(base_op.operands[1:], base_op.regions[0].blocks[0].args)}
        for i in range(min(len(base_op.operands), len(base_inputs))):
            base_inputs[i] = to_arg.get(base_inputs[i], base_inputs[i])
    from .passes import map_value
    for value, g in zip(base_inputs, base_input_grads):
        if g is None:
            continue
        value = map_value(value, state.inside_to_outside)
        if state.grads.get(value):
            if len(state.grads[value]) > 1:
                run.add_n(base_op, value, state, backward_ops, block, arg_map)
        else:
            new_value = map_value(value, copy_map)
            if not _visible_in(new_value, block):
                state.grads[value] = [[None]]
            else:
                run.full_like(0.0, new_value, value, state, backward_ops, block)
        got = state.grads[value][0][0]
        grads.append(map_value(got, arg_map) if got is not None else None)
    _op(block, "cf.yield", grads, [])


def _visible_in(value: Value, block: Block) -> bool:
    """Paddle's `value_in_block`: whether `value` is defined in `block` or a block around it."""
    d = value.defining_op
    where = d.block if d is not None else value.owner
    b: Block | None = block
    while b is not None:
        if b is where:
            return True
        parent = b.parent_op
        b = parent.block if parent is not None else None
    return False


def remove_unused_full_likes(block: Block, state) -> None:
    """Paddle's `remove_useless_full_like_ops` inside a grad region (nested ones too)."""
    from .passes import remove_op
    remove: list[Operation] = []
    for op in graph.inverse_sort(list(block.ops)):
        if op.name == "pd_op.full_like":
            if not op.results[0].uses:
                remove.append(op)
                d = op.operands[1].defining_op if op.operands[1] is not None else None
                if d is not None:
                    remove.append(d)
        elif op.name in graph.CONTROL_FLOW:
            for region in op.regions:
                for b in region.blocks:
                    remove_unused_full_likes(b, state)
    for op in remove:
        if op.block is not None:
            remove_op(op.block, op, state)
