"""The steps every gradient pass takes, plain or with checkpoints (recompute).

`api.append_backward` / `gradients` compose them; `recompute` reuses them
around its own middle step, and `append_plain` is the plain pipeline whole:

    begin_append -> find_op_path -> append_backward_ops -> finish -> params_and_grads

all inside `all_or_nothing`, which restores the program if any step raises.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Sequence

from ..base import dtypes
from ..base._gc import paused_gc
from .._proto import framework_pb2 as pb
from ..base.errors import ArgumentError, where
from ..ops.registry import fresh_op
from ..legacy.program import (
    OP_DEVICE_ATTR, OP_ROLE_ATTR, OP_ROLE_LOSS, OP_ROLE_VAR_ATTR, Block, dedupe_attrs, Operator, Program,
    Variable, prepend_to_list_attr)
from .deviations import refuse_wrong_programs, report_carried_loop_vars, report_dead_writes
from .emit import create_grad_vars, fill_op_desc
from .grad_ops import PassState, append_backward_ops, attrs_tail
from .guards import check_declared
from ..legacy.names import GRAD_SUFFIX, grad_name, strip_grad_suffix
from ..legacy.wire import length_delimited
from ..analysis.path import find_op_path, stop_gradient_names, unused_outputs

#: `aggregation=` -> the accumulation mode `PassState` takes.
AGGREGATIONS = {"sum": 0, "pairwise": 1 << 30}


def loss_op(loss: Variable) -> Operator:
    """The last op of the loss's block that writes the loss."""
    for op in reversed(loss.block.ops):
        if loss.name in op.output_arg_names:
            return op
    raise ArgumentError(f"{where(loss.block.program.source, loss.block.idx, var=loss.name)}: "
                        "the loss is produced by no op (a program input or parameter?)")


#: The programs (by id) an `all_or_nothing` is open on.
_restoring: set[int] = set()


@contextlib.contextmanager
def all_or_nothing(program: Program, saved: bytes | None = None) -> Iterator[None]:
    """Restore the program exactly if the body raises.

    `saved`: the bytes of `program.desc` now (`SerializePartialToString`),
    if the caller has them. Inside another `all_or_nothing` of the same
    program it takes no copy of its own: the exception it would restore on
    goes on into the outer one, which restores the program as it stood when
    that opened (the caller takes care that nothing changes it in between,
    as `cli append` does: it reads its own copy for the backward guard). The
    cyclic garbage collector is paused meanwhile (see `_gc.py`).
    """
    if id(program) in _restoring:
        yield
        return
    pause = paused_gc()
    pause.__enter__()
    # Kept as bytes: a few times smaller than a parsed copy of the program.
    if saved is None:
        saved = program.desc.SerializePartialToString()
    times = program.appending_grad_times
    counters = dict(program.__dict__.get("_unique_counters", {}))
    _restoring.add(id(program))
    try:
        yield
    except BaseException:
        program.desc.Clear()
        program.desc.MergeFromString(saved)
        program.appending_grad_times = times
        program._unique_counters = counters
        program.rebind()
        raise
    finally:
        _restoring.discard(id(program))
        pause.__exit__(None, None, None)


def as_paddle_parses(program: Program, keep_param_stop_gradient: bool) -> None:
    """Read a program from a file as Paddle's parse does: one attr per name on
    every op, and (unless asked to keep it) `stop_gradient` cleared on
    parameters (see the module doc). A program built in memory is left as
    Paddle leaves its own in-memory programs."""
    if program.parsed:
        known = program.repeated_attr_ops
        for op in (known if known is not None else (op for b in program.blocks for op in b.ops)):
            dedupe_attrs(op.desc)
        program.repeated_attr_ops = []
    if keep_param_stop_gradient:
        return
    for b in program.blocks:
        for v in b.vars.values():
            d = v.desc           # (v.is_parameter and v.stop_gradient, read from the desc at once)
            if d.is_parameter and d.stop_gradient:
                v.stop_gradient = False


def unique_name(program: Program, key: str) -> str:
    """`key_N`, N counted per program and key (Paddle's `unique_name.generate`)."""
    counters = program.__dict__.setdefault("_unique_counters", {})
    n = counters.get(key, 0)
    counters[key] = n + 1
    return f"{key}_{n}"


def rename_existing_grads(program: Program, block: Block, start: int, grad_to_var: dict,
                           target_grad_map: dict[str, str], skip: Iterable[str]) -> None:
    """Paddle's `_rename_grad_`: apply target-grad renames; outputs that clash
    with existing vars get a unique `name_N`."""
    var_map = dict(target_grad_map)
    # The outputs to rename: grads the block already declares (the loop declares none), not
    # skipped. A first pass on a forward program has none and no target grads: nothing to do.
    clashes = {n for n in block.vars if GRAD_SUFFIX in n}
    clashes.difference_update(skip)
    if not clashes and not var_map:
        return
    for op in block.ops[start:]:
        if var_map and not var_map.keys().isdisjoint(op.input_arg_names):
            for name in op.input_arg_names:
                if name in var_map:
                    op.rename_input(name, var_map[name])
        outs = op.output_arg_names
        if clashes.isdisjoint(outs):
            continue
        for name in outs:
            if name not in clashes:
                continue
            new = unique_name(program, name)
            op.rename_output(name, new)
            var_map[name] = new
    for g, ng in var_map.items():
        if g in grad_to_var:
            grad_to_var[ng] = grad_to_var.pop(g)


def finish(program: Program, block: Block, start: int, state: PassState,
            target_grad_map: dict[str, str], skip: Iterable[str]) -> dict[str, tuple[str, Block]]:
    """The last step: rename clashing grads and declare every grad var;
    returns forward name -> (grad name, block that declares it)."""
    rename_existing_grads(program, block, start, state.grad_to_var, target_grad_map, skip)
    grad_info: dict[str, tuple[str, Block]] = {}
    # (the fused walk's ops: their vars declared from its names, if they still
    # stand as it wrote them - `create_grad_vars` checks)
    flat, state.flat_run = state.flat_run, None
    create_grad_vars(block, start, state.grad_to_var, grad_info, state.grad_block_owner,
                     flat=None if target_grad_map else flat)
    check_declared(program, block, start, state.grad_block_owner)
    return grad_info


def fill_op(op_type: str, out: str, attrs: dict, inputs: dict | None = None) -> pb.OpDesc:
    """The desc of an op made from nothing (`fill_constant`, `fill_any_like`) writing `out`."""
    desc = pb.OpDesc()
    fill_op_desc(desc, fresh_op(op_type, inputs or {}, {"Out": [out]}, attrs), role=None)
    return desc


def begin_append(program: Program, loss: Variable, loss_op: Operator, user_no_grad: set[str],
                 keep_param_stop_gradient: bool) -> tuple[Block, dict[int, set[str]], int]:
    """The first steps of every append_backward (plain or with checkpoints):
    Paddle's parse semantics, the loss op's role, the pass counter, the no-grad
    names and the loss-grad fill. Returns (root block, no-grad names per block,
    the index of the first op the pass appended)."""
    as_paddle_parses(program, keep_param_stop_gradient)
    loss_op.set_attr(OP_ROLE_ATTR, OP_ROLE_LOSS)
    root = program.global_block()
    program.appending_grad_times += 1
    no_grad = stop_gradient_names(program)
    no_grad[0].update(grad_name(n) for n in user_no_grad)
    start = len(root.ops)
    root.append_op_desc(loss_grad_op(loss, loss_op))
    return root, no_grad, start


def loss_grad_op(loss: Variable, loss_op: Operator) -> pb.OpDesc:
    shape = list(loss.shape)
    if not (len(shape) == 0 or 0 in shape):
        shape = [1]
    return fill_op("fill_constant", grad_name(loss.name), {
        "shape": shape, "value": 1.0, "dtype": loss.data_type, "force_cpu": False,
        OP_ROLE_ATTR: 1 | OP_ROLE_LOSS, OP_DEVICE_ATTR: loss_op.attr(OP_DEVICE_ATTR, ""),
    })


def params_and_grads(program: Program, loss: Variable, params: list[str],
                     grad_info: dict[str, tuple[str, Block]],
                     emitted_attrs: dict[int, tuple[Any, bytes]] | None = None
                     ) -> list[tuple[Variable, Variable | None]]:
    """`[(param, grad), ...]` in `params` order, and each grad's last writer
    tagged with Paddle's `op_role_var` = [param, grad, ...]. `emitted_attrs`:
    `PassState.emitted_attrs` (the attr bytes of the ops emitted as bytes)."""
    root = program.global_block()
    root_vars, loss_vars = root.vars, loss.block.vars
    pairs: list[tuple[Variable, Variable | None]] = []
    tags: list[tuple[str, str]] = []       # (param, grad) names, read once
    for p in params:
        info = grad_info.get(p)
        if info is None:
            continue
        gname, gblock = info
        param = root_vars.get(p)
        if param is None:
            param = root.var(p)            # (raises VarNotFoundError)
        if gname in loss_vars:
            pairs.append((param, gblock.vars[gname]))
            tags.append((p, gname))
        else:
            pairs.append((param, None))
    # The last op writing each gradient: found from the end, stopping once
    # all are found (they are written by the ops the pass just appended).
    wanted = {g for _, g in tags}
    last_writer: dict[str, Operator] = {}
    for op in reversed(root.ops):
        if not wanted:
            break
        outs = op.output_arg_names
        if wanted.isdisjoint(outs):
            continue
        for n in outs:
            if n in wanted:
                last_writer[n] = op
                wanted.discard(n)
    places: dict[bytes, tuple] = {}
    for p, g in tags:
        op = last_writer.get(g)
        if op is None:
            raise ArgumentError(f"no op writes the gradient '{g}' (unexpected)")
        tag_op_role_var(op.desc, p, g, places, emitted_attrs)
    return pairs


_STRINGS = pb.AttrType.STRINGS
#: An `op_role_var` Attr on the wire: name (field 1), type STRINGS (field 2);
#: its strings follow (field 8).
_ROLE_VAR_HEAD = length_delimited(0x0A, OP_ROLE_VAR_ATTR.encode()) + bytes((0x10, _STRINGS))
_GENERAL = object()
_STRING_HEADS = [bytes((0x42, n)) for n in range(0x80)]     # Attr.strings = 8, shorter than 128 bytes


def tag_op_role_var(desc: pb.OpDesc, param: str, grad: str, places: dict[bytes, tuple],
                    emitted_attrs: dict[int, tuple[Any, bytes]] | None = None) -> None:
    """`prepend_to_list_attr(desc, "op_role_var", [param, grad], STRINGS)`,
    in fewer calls into protobuf: where the attr stands (or would be
    inserted) and what it holds depend only on the op's attrs, so they are
    read once per distinct attr list (`places`, keyed by the attrs' wire
    bytes); the new Attr is parsed from its bytes. The attrs' bytes of an
    op `emit` wrote as bytes are those it wrote (`emitted_attrs`; popped:
    the tag changes them); others are read from the op."""
    known = emitted_attrs.pop(id(desc), None) if emitted_attrs else None
    if known is not None and known[0] is desc:
        tail = known[1]
    else:
        tail = attrs_tail(desc.SerializePartialToString())
    place = places.get(tail)
    if place is None:
        place = places[tail] = _role_var_place(desc)
    j, old = place
    if old is _GENERAL:
        prepend_to_list_attr(desc, OP_ROLE_VAR_ATTR, [param, grad], _STRINGS)
        return
    pe, ge = param.encode(), grad.encode()
    if not old and len(pe) < 0x80 and len(ge) < 0x80:     # (the common case, without the general join)
        data = _ROLE_VAR_HEAD + _STRING_HEADS[len(pe)] + pe + _STRING_HEADS[len(ge)] + ge
    else:
        data = _ROLE_VAR_HEAD + b"".join([_STRING_HEADS[len(e)] + e if len(e) < 0x80 else length_delimited(0x42, e)
                                          for e in [pe, ge, *[v.encode() for v in (old or ())]]])
    if old is None:
        desc.attrs.insert(j, pb.OpDesc.Attr.FromString(data))
    else:
        desc.attrs[j].ParseFromString(data)


def _role_var_place(desc: pb.OpDesc) -> tuple[int, Any]:
    """(index, current values) of the op's `op_role_var` attr; (where
    `insert_sorted` would put it, None) if it has none; `_GENERAL` for a
    value of another type, which `prepend_to_list_attr` handles."""
    names = []
    for i, a in enumerate(desc.attrs):
        if a.name == OP_ROLE_VAR_ATTR:
            return (i, tuple(a.strings)) if a.type == _STRINGS else (i, _GENERAL)
        names.append(a.name)
    j = len(names)
    while j > 0 and names[j - 1] > OP_ROLE_VAR_ATTR:
        j -= 1
    return j, None


def no_grad_for_non_floats(program: Program, no_grad: dict[int, set[str]]) -> None:
    """stop_edges: vars that are not floating point never get a gradient."""
    for b in program.blocks:
        for name, v in b.vars.items():
            if v.data_type is not None and not dtypes.is_float(v.data_type):
                no_grad[b.idx].add(grad_name(name))


def append_plain(program: Program, loss: Variable, loss_op: Operator, params: Sequence[str],
                 user_no_grad: set[str], callbacks: list | None = None, aggregation: str = "sum",
                 keep_param_stop_gradient: bool = False, stop_edges: bool = False,
                 paddle_exact: bool = False) -> list[tuple[Variable, Variable | None]]:
    """The plain (no checkpoints) append_backward on checked arguments: the
    loss, the op that makes it, the parameters and the user's no-grad names."""
    with all_or_nothing(program):
        root, no_grad, start = begin_append(program, loss, loss_op, user_no_grad, keep_param_stop_gradient)
        state = PassState(program, no_grad, {}, {}, callbacks, AGGREGATIONS[aggregation], paddle_exact=paddle_exact)
        if stop_edges:
            no_grad_for_non_floats(program, no_grad)
        block = loss.block
        block_no_grad = {strip_grad_suffix(n) for n in no_grad[block.idx]}
        if not paddle_exact:
            refuse_wrong_programs(program)
        redefined = None if paddle_exact else []
        loops: dict[int, list[str]] | None = None if paddle_exact else {}
        path = find_op_path(block, [loss], [], block_no_grad, state.sub_paths, stop_edges=stop_edges,
                            redefinitions=redefined, loops=loops)
        report_dead_writes(block, redefined)
        report_carried_loop_vars(program, loops, state.loop_seeds)
        block_no_grad |= unused_outputs(block, path, [loss], block_no_grad)
        no_grad[block.idx].update(grad_name(n) for n in block_no_grad)
        input_grad_names = {grad_name(loss.name)} if program.appending_grad_times > 1 else None
        append_backward_ops(block, path, [loss], root, state, input_grad_names)
        grad_info = finish(program, root, start, state, {}, ())
        return params_and_grads(program, loss, params, grad_info, state.emitted_attrs)
