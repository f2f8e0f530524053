"""`append_backward`, `gradients` and `calc_gradient` on PIR programs.

The same calls as for legacy programs, given a PIR `Program` and values — or the
names Paddle will not take (`%N` ids and parameter / data / fetch /
shadow_output names), wherever a value goes. The appended ops are Paddle
3.3.1's (`ir_backward` with prim off), op for op. What Paddle drops, this
keeps (docs/deviations.md): `callbacks` are called once per new grad op with
`(block, context)`, `context` mapping each new gradient to the forward value
it is the gradient of and holding the op as `__current_op_desc__`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from ...base._gc import paused_gc
from ...base.errors import ArgumentError, ArgumentTypeError, VarNotFoundError
from ...pir.model import Operation, Program, Value, make_value_ids
from . import recompute
from .passes import GradState, calc_gradient_helper

def _program_of(program: Program | None, *refs: Any) -> Program:
    if program is not None:
        if not isinstance(program, Program):
            raise ArgumentTypeError(f"program must be a PIR Program, not {type(program).__name__}")
        return program
    for r in refs:
        for x in (r if isinstance(r, (list, tuple, set)) else [r]):
            if isinstance(x, Value):
                p = _program_of_value(x)
                if p is not None:
                    return p
    raise ArgumentError("name the PIR program (program=...) when values are given by name")


def _program_of_value(v: Value) -> Program | None:
    owner: Any = v.owner
    block = owner.block if isinstance(owner, Operation) else owner
    while block is not None:
        region = block.region
        if region is None:
            return None
        if region.program is not None:
            return region.program
        block = region.op.block if region.op is not None else None
    return None


def _value(program: Program, ref: Any, what: str) -> Value:
    if isinstance(ref, Value):
        return ref
    if isinstance(ref, bool) or not isinstance(ref, (str, int)):
        raise ArgumentTypeError(f"{what}: a PIR value is given as a Value, '%N' or a name, "
                                f"not {type(ref).__name__}")
    try:
        return program.value(ref)
    except VarNotFoundError as e:
        raise VarNotFoundError(f"{what}: {e}") from None


def _values(program: Program, refs: Any, what: str) -> list[Value]:
    if refs is None:
        return []
    if isinstance(refs, (Value, str, int)) and not isinstance(refs, bool):
        return [_value(program, refs, what)]
    if not isinstance(refs, (list, tuple, set, frozenset)):
        raise ArgumentTypeError(f"{what} must be a value, a name or a list of them, not {type(refs).__name__}")
    return [_value(program, r, what) for r in refs]


def _check_callbacks(callbacks: Any) -> list[Callable]:
    if not callbacks:
        return []
    if not isinstance(callbacks, (list, tuple)) or not all(callable(c) for c in callbacks):
        raise ArgumentTypeError("callbacks must be a list of callables")
    return list(callbacks)


def _call_callbacks(callbacks: list[Callable], made: list[tuple[Operation, Operation | None]],
                    state: GradState, program: Program) -> None:
    """Call each callback once per grad op that is in the program after the pass (the
    pass's scratch ops, such as unused zero gradients it removed, are not shown)."""
    if not made:
        return
    order = {id(o): i for i, o in enumerate(program.walk())}      # program order
    for op, fwd in sorted(made, key=lambda m: order.get(id(m[0]), -1)):
        if op.block is None:
            continue
        context: dict[Any, Any] = {"__current_op_desc__": op}
        for r in op.results:
            v = state.grad_of.get(r) or state.summed_of.get(r)
            if v is not None:
                context[r] = v
        for cb in callbacks:
            cb(op.block, context)


def append_backward(loss: Any, parameter_list: Iterable[Any] | None = None, no_grad_set: Iterable[Any] | None = None,
                    callbacks: Sequence[Callable] | None = None, checkpoints: Any = None, *,
                    program: Program | None = None, paddle_exact: bool = False, memory_budget: Any = None,
                    batch_size: int = 1) -> "list[tuple[Value, Value | None]] | tuple[list[tuple[Value, Value | None]], list[Value]]":
    """Append the backward section of `loss` to its PIR program (Paddle's
    `ir_backward.append_backward`). Returns `[(param, grad or None), ...]`: every
    persistable value of the loss's block by default (non-trainable ones too, with
    None where they get no gradient, as Paddle), else `parameter_list` in order.

    With `checkpoints` (values or refs, or "auto") the segments between them are
    computed again in the backward section (`recompute`), and the call returns
    `(pairs, checkpoints used)`, as for legacy programs. `memory_budget` (bytes, with
    `checkpoints` "auto" or None) chooses them so the peak activation memory at
    `batch_size` fits (`recompute.choose_under_budget`)."""
    program = _program_of(program, loss, parameter_list)
    loss_v = _value(program, loss, "loss")
    if loss_v.defining_op is None:
        raise ArgumentError("loss must be an op's result, not a block argument")
    block = loss_v.defining_op.block
    if parameter_list is not None:
        if not isinstance(parameter_list, (list, tuple, set)):
            raise ArgumentTypeError(f"parameter_list must be a list, tuple or set, not {type(parameter_list).__name__}")
        params = _values(program, list(parameter_list), "parameter_list")
    else:
        params = [r for op in block.ops if "persistable" in op.result_attrs
                  for i, r in enumerate(op.results) if op.result_flag("persistable", i)]
    no_grad = set(_values(program, list(no_grad_set) if no_grad_set is not None else [], "no_grad_set"))
    if memory_budget is not None and checkpoints not in (None, "auto"):
        raise ArgumentError("memory_budget goes with checkpoints=\"auto\" (or none): it chooses them")
    forward = list(block.ops)
    if memory_budget is not None:
        checkpoints = _under_budget(program, forward, loss_v, memory_budget, batch_size, parameter_list,
                                    no_grad_set)
    cbs = _check_callbacks(callbacks)
    made: list[tuple[Operation, Operation | None]] = []
    with paused_gc():
        state, _ = calc_gradient_helper(block, [loss_v], [], [], no_grad,
                                        (lambda op, fwd: made.append((op, fwd))) if cbs else None, paddle_exact)
        pairs = [(p, state.first(p)) for p in params]
        used = [] if memory_budget is not None else None
        if checkpoints is not None and checkpoints != []:
            used = recompute.apply(block, forward, recompute.resolve(program, checkpoints, forward, loss_v))
        make_value_ids(program)
    _call_callbacks(cbs, made, state, program)
    return pairs if used is None else (pairs, used)


def _under_budget(program: Program, forward: list[Operation], loss: Value, budget: Any, batch_size: int,
                  parameter_list: Any, no_grad_set: Any) -> list[Value]:
    """The checkpoints whose peak fits `budget`, tried on copies of the program."""
    from ...pir import codec
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ArgumentTypeError(f"memory_budget must be a positive number of bytes, not {budget!r}")
    make_value_ids(program)
    data = codec.dumps(program)
    loss_ref = f"%{loss.id}"
    keep = [f"%{v.id}" for v in _values(program, list(parameter_list), "parameter_list")] \
        if parameter_list is not None else None
    no_grad = [f"%{v.id}" for v in _values(program, list(no_grad_set), "no_grad_set")] if no_grad_set else None

    def build(refs: list[str]) -> Program:
        copy = codec.loads(data)
        append_backward(loss_ref, keep, no_grad, checkpoints=refs or None, program=copy)
        return copy
    return recompute.choose_under_budget(program, forward, loss, budget, batch_size, build)


def calc_gradient(targets: Any, inputs: Any, target_gradients: Any = None, no_grad_set: Iterable[Any] | None = None,
                  *, program: Program | None = None, paddle_exact: bool = False) -> list[Value | None]:
    """Gradients of `targets` with respect to `inputs` (Paddle's `ir_backward.calc_gradient`):
    one per input, None where the targets do not depend on it."""
    program = _program_of(program, targets, inputs, target_gradients)
    outs = _values(program, targets, "targets")
    ins = _values(program, inputs, "inputs")
    if not outs:
        raise ArgumentError("targets is empty")
    tgrads: list[Value | None] = []
    if target_gradients is not None:
        raw = target_gradients if isinstance(target_gradients, (list, tuple)) else [target_gradients]
        tgrads = [None if g is None else _value(program, g, "target_gradients") for g in raw]
        if len(tgrads) != len(outs):
            raise ArgumentError(f"target_gradients has {len(tgrads)} entries for {len(outs)} targets")
        for i, (t, g) in enumerate(zip(outs, tgrads)):
            if g is not None and not _shapes_match(t, g):
                raise ArgumentError(f"target_gradients[{i}] has shape {getattr(g.type, 'dims', '?')}, "
                                    f"target {i} has {getattr(t.type, 'dims', '?')}")
    no_grad = set(_values(program, list(no_grad_set) if no_grad_set is not None else [], "no_grad_set"))
    block = outs[0].defining_op.block if outs[0].defining_op is not None else program.block
    with paused_gc():
        state, _ = calc_gradient_helper(block, outs, ins, tgrads, no_grad, None, paddle_exact)
        make_value_ids(program)
    return [state.first(x) for x in ins]


def gradients(targets: Any, inputs: Any, target_gradients: Any = None, no_grad_set: Iterable[Any] | None = None,
              *, program: Program | None = None, paddle_exact: bool = False) -> list[Value | None]:
    """Paddle's `paddle.static.gradients` on a PIR program: `calc_gradient`, always a list."""
    return calc_gradient(targets, inputs, target_gradients, no_grad_set, program=program, paddle_exact=paddle_exact)


def _shapes_match(a: Value, b: Value) -> bool:
    da, db = getattr(a.type, "dims", None), getattr(b.type, "dims", None)
    if da is None or db is None:
        return True
    return len(da) == len(db) and all(x == y or x == -1 or y == -1 for x, y in zip(da, db))
