"""Which forward ops need grad ops: the no-grad set and the op path.

Steps 3, 5 and 6 of Paddle's append_backward: the no-grad names (every
`stop_gradient` var of each block, plus the user's set in block 0), the op
path found backwards from the targets (and forwards from the inputs, for
`gradients`), and outputs of path ops that nothing uses, which get no grad.
Ops whose type has no gradient (`grad=None` in the registry) never join the
path and do not pass it on. Every step is one linear walk over the ops.
"""
from __future__ import annotations

from .._proto import framework_pb2 as pb
from ..base.errors import ProgramFileError, UnknownOpError, where
from ..ops import registry
from ..legacy.program import Block, Operator, Program, Variable
from ..legacy.names import GRAD_SUFFIX



def stop_gradient_names(program: Program) -> dict[int, set[str]]:
    """Per block, `name@GRAD` for every var declared with stop_gradient."""
    return {b.idx: {n + GRAD_SUFFIX for n, v in b.vars.items() if v.desc.stop_gradient}   # (grad_name)
            for b in program.blocks}


def _has_grad(op: Operator, op_index: int) -> bool:
    opdef = registry.find(op.type)
    if opdef is None:
        raise UnknownOpError(
            f"{where(op.block.program.source, op.block.idx, op_index, op.type)}: op type "
            f"'{op.type}' is on the gradient path but pybackward has no gradient rule for it; "
            f"to stop the path there, put its inputs in the no-grad set "
            f"(--no-grad {' --no-grad '.join(op.input_arg_names[:3]) or 'NAME'})")
    return opdef.has_grad


def output_names_for(block: Block, targets: list[Variable]) -> set[str]:
    """Names whose gradient is wanted in `block`, given targets possibly in a sub-block."""
    start = targets[0].block if targets else block
    names = {t.name for t in targets}
    if start.idx == block.idx or _is_ancestor(start, block):
        return names
    cur = start
    while cur.idx != block.idx:
        parent = cur.parent
        assert parent is not None, "targets are not inside this block"
        parent_names: set[str] = set()
        for op in reversed(cur.ops):
            if any(n in names for n in op.output_arg_names):
                for n in op.input_arg_names:
                    names.add(n)
                    if not cur.has_var(n) and parent.has_var(n):
                        parent_names.add(n)
        cur, names = parent, parent_names
    return names


def _is_ancestor(ancestor: Block, block: Block) -> bool:
    p = block.parent
    while p is not None:
        if p.idx == ancestor.idx:
            return True
        p = p.parent
    return False


def _edge_inputs(op: Operator, stop_edges: bool) -> tuple[str, ...] | list[str]:
    """The inputs a gradient flows back into: all of them (Paddle), or with
    `stop_edges` only those in the slots the registry declares differentiable."""
    if not stop_edges:
        return op.input_arg_names
    opdef = registry.find(op.type)
    slots = opdef.differentiable_inputs if opdef is not None else None
    if slots is None:
        return op.input_arg_names
    return [a for s in slots for a in op.input(s)]


def find_op_path(block: Block, targets: list[Variable], inputs: list[Variable],
                 no_grad: set[str], sub_paths: dict[int, list[Operator]],
                 is_while: bool = False, stop_edges: bool = False,
                 redefinitions: list[tuple[str, int, int]] | None = None,
                 loops: dict[int, list[str]] | None = None) -> list[Operator]:
    """The ops of `block` on the way from `inputs` (if any) to `targets`.

    `no_grad` holds forward names (no @GRAD); with `inputs` it gains the
    stop_gradient inputs of path ops that are unreachable from the inputs.
    `sub_paths` receives the path of each conditional_block / while sub-block.

    With a `redefinitions` list (pybackward's default; Paddle's path has none),
    a var an op writes without reading it ends its earlier value: a writer
    of that earlier value joins the path only through the ops that read it,
    and `(var, earlier writer, later writer)` is recorded for each writer
    left out (a value overwritten before anything read it). A value that is
    read and then overwritten, where gradients of the two values would mix
    in one `@GRAD` var, is refused (see `_redefined`).

    With a `loops` dict (pybackward's default; Paddle's path has none), the
    path of a `while` body (and of every loop nested in it) is found to a
    fixed point: a loop var whose gradient the path needs at the start of a
    step is needed at the end of the step before, so its writers join the
    path - a nested `while` too, with the path inside it found for that var.
    (Paddle's single pass finds a nested loop's inner path before it knows
    the var is needed, leaves it empty, and the gradient carried through
    the nested loop is lost.) `loops` maps each body whose path this
    changes to the loop vars it added.
    """
    if not (is_while and loops is not None):
        return _op_path(block, output_names_for(block, targets), inputs, no_grad, sub_paths, is_while,
                        stop_edges, redefinitions, loops)[0]
    wanted = output_names_for(block, targets)
    carried = {n for op in block.ops for n in op.output_arg_names if not block.has_var(n)}
    before = dict(sub_paths)
    path, needed = _op_path(block, set(wanted), inputs, no_grad, sub_paths, is_while, stop_edges,
                            redefinitions, loops)
    first = [id(op.desc) for op in path]
    first_subs = {k: [id(op.desc) for op in v] for k, v in sub_paths.items() if before.get(k) is not v}
    extra: set[str] = set()
    while True:
        more = (needed & carried) - wanted - extra
        if not more:
            break
        extra |= more
        path, needed = _op_path(block, wanted | extra, inputs, no_grad, sub_paths, is_while, stop_edges,
                                redefinitions, loops)
    if extra and ([id(op.desc) for op in path] != first or any(
            [id(op.desc) for op in sub_paths.get(k, [])] != ids for k, ids in first_subs.items())):
        loops[block.idx] = sorted(extra)
    return path


def _op_path(block: Block, output_names: set[str], inputs: list[Variable], no_grad: set[str],
             sub_paths: dict[int, list[Operator]], is_while: bool, stop_edges: bool,
             redefinitions: list[tuple[str, int, int]] | None,
             loops: dict[int, list[str]] | None) -> tuple[list[Operator], set[str]]:
    """One walk of `find_op_path`: the path to `output_names`, and every name
    whose gradient the path then needs."""
    ops = block.ops
    relevant = [True] * len(ops)
    input_names = {v.name for v in inputs}
    if inputs:
        for i, op in enumerate(ops):
            if any(n in input_names for n in op.input_arg_names) and _has_grad(op, i):
                input_names.update(n for n in op.output_arg_names if n not in no_grad)
            else:
                relevant[i] = False
    ended: dict[str, int] = {}   # var -> the op whose write ended its earlier value
    ended_names = ended.keys()   # (a live view)
    track = redefinitions is not None and not is_while
    has_grad: dict[str, bool] = {}     # op type -> _has_grad, asked once per type (it raises for none)
    find_var = block.find_var_recursive
    own_vars = block.vars
    dense = pb.VarType.DENSE_TENSOR
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        sub = op.sub_block
        if sub is not None:
            sub_block = _checked_sub_block(block, op, i, sub)
            wanted = output_names & set(op.output_arg_names)
            sub_paths[sub_block.idx] = sub_block_path(sub_block, op, set(), sub_paths, wanted, loops)
        outs = op.output_arg_names
        here = track and sub is None
        if here and ended and not ended_names.isdisjoint(outs):
            _redefined(block, op, i, output_names, ended, redefinitions)
        if output_names.isdisjoint(outs):
            relevant[i] = False
            continue
        t = op.desc.type
        g = has_grad.get(t)
        if g is None:
            g = has_grad[t] = _has_grad(op, i)
        if not g:
            relevant[i] = False
            continue
        all_ins = op.input_arg_names
        edge = _edge_inputs(op, stop_edges) if stop_edges else all_ins
        ins = edge if no_grad.isdisjoint(edge) else [n for n in edge if n not in no_grad]
        if here:
            # The outputs the op writes without reading them, that are dense tensors
            # (`_is_plain_tensor`, inlined: one call per op on the path).
            defs: list[str] = []
            for n in (outs if len(outs) == 1 else set(outs)):
                if n in all_ins:
                    continue
                v = own_vars.get(n)          # (the block's own, else `find_var_recursive`'s walk)
                if v is None:
                    v = find_var(n)
                if v is not None and v.desc.type.type == dense:
                    defs.append(n)
            # (no name is in both: `defs` holds outputs the op does not read)
            if ended and not ended_names.isdisjoint(ins):
                for n in ins:
                    if n in ended:
                        _refuse_mixed(block, n, ended[n], i)
            if defs:
                output_names.difference_update(defs)
                for n in defs:
                    ended[n] = i
        output_names.update(ins)
    if is_while:
        # Loop-carried values: ops writing anything still needed join the path.
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if not relevant[i] and any(n in output_names for n in op.output_arg_names):
                relevant[i] = True
                if _has_grad(op, i):
                    output_names.update(n for n in op.input_arg_names if n not in no_grad)
    path = [op for op, keep in zip(ops, relevant) if keep]
    if inputs:
        for op in path:
            for n in op.input_arg_names:
                if n not in input_names:
                    v = block.find_var_recursive(n)
                    if v is not None and v.stop_gradient:
                        no_grad.add(n)
    return path, output_names


def _is_plain_tensor(block: Block, name: str) -> bool:
    """A dense tensor var: writing one replaces its value. Writing a tensor
    array adds a slot, and other var types are Paddle's containers - their
    writes end nothing."""
    v = block.find_var_recursive(name)
    return v is not None and v.desc.type.type == pb.VarType.DENSE_TENSOR


def _redefined(block: Block, op: Operator, i: int, needed: set[str], ended: dict[str, int],
               redefinitions: list[tuple[str, int, int]]) -> None:
    """Record an op that writes only values a later op overwrote unread."""
    outs = op.output_arg_names
    dead = [n for n in outs if n in ended and n not in needed]
    if dead and not any(n in needed for n in outs):
        for n in dead:
            redefinitions.append((n, i, ended[n]))


def _refuse_mixed(block: Block, name: str, later: int, reader: int) -> None:
    program = block.program
    raise ProgramFileError(
        f"{where(program.source, block.idx, later, block.ops[later].type, name)}: writes the var again after op "
        f"{reader} ({block.ops[reader].type}) read its earlier value; the gradients of the two values would be "
        f"added in one '{name}@GRAD' (rule: a var on the gradient path is written once, or updated in place; "
        f"rename one of the two, or --paddle-exact for Paddle's program)")


def _checked_sub_block(block: Block, op: Operator, op_index: int, sub: int) -> Block:
    """The block an op's `sub_block` attr names, which must be a child of the op's block."""
    program = block.program
    if not 0 < sub < len(program.blocks) or program.blocks[sub].parent_idx != block.idx:
        parent = program.blocks[sub].parent_idx if 0 <= sub < len(program.blocks) else None
        raise ProgramFileError(
            f"{where(program.source, block.idx, op_index, op.type)}: attr 'sub_block' names block {sub}, "
            + (f"whose parent is block {parent}, not the op's block {block.idx}" if parent is not None
               else f"which does not exist (the program has {len(program.blocks)} blocks)"))
    return program.blocks[sub]


def sub_block_path(sub_block: Block, owner: Operator, no_grad: set[str],
                   sub_paths: dict[int, list[Operator]], targets: set[str],
                   loops: dict[int, list[str]] | None = None) -> list[Operator]:
    """The path inside a sub-block, as the owner's OpDef declares (`sub_block_path`):
    found from the owner's outputs for a branch or a loop; every op otherwise.
    `loops`: as `find_op_path`'s."""
    opdef = registry.find(owner.type)
    kind = opdef.sub_block_path if opdef is not None else None
    if kind is None:
        return list(sub_block.ops)
    wanted = [sub_block.var(n) for n in targets]
    for n in targets:
        for op in sub_block.ops:
            if n in op.output_arg_names:
                wanted.extend(sub_block.var(m) for m in op.input_arg_names)
    return find_op_path(sub_block, wanted, [], no_grad, sub_paths, is_while=kind == "loop", loops=loops)


def unused_outputs(block: Block, path: list[Operator], targets: list[Variable],
                   no_grad: set[str]) -> set[str]:
    """Outputs of path ops that nothing downstream reads: they get no gradient."""
    needed = output_names_for(block, targets)
    unused: set[str] = set()
    for op in reversed(path):
        ins = op.input_arg_names
        outs = op.output_arg_names
        if not needed.issuperset(outs) and op.sub_block is None:   # (else: all are read)
            in_set = set(ins)
            for n in outs:
                if n in needed or n in in_set:
                    continue
                v = block.find_var_recursive(n)
                if not (v is not None and v.stop_gradient):
                    unused.add(n)
        needed.update(ins if no_grad.isdisjoint(ins) else [n for n in ins if n not in no_grad])
    return unused
