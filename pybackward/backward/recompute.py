"""Recompute: `append_backward(loss, checkpoints=[...])` as Paddle 3.3.1 builds it.

Only the checkpoint vars (and a few others) are meant to stay in memory
between the forward and the backward pass; the rest of each segment's
forward ops run again, in the backward section, just before that segment's
grad ops. Paddle's `_append_backward_ops_with_checkpoints_`, step by step:

1. `insert_seed_ops`: a `seed` op goes before every `dropout` of the op path
   that has no `Seed` input; the dropout reads it and loses its
   `fix_seed`/`seed` attrs, so a recomputed dropout draws the same mask.
2. `VarUse` (Paddle's `ProgramStats`): which path ops read and write each var.
3. `sort_checkpoints`: de-duplicated, sorted by their last producer (program
   inputs first); names no path op uses are dropped.
4. `find_segments`: one segment per pair of consecutive checkpoints (from the
   first reader of one to the last writer of the next), plus a leading
   segment from op 0 when the first does not start there.
5. `held_vars`: vars that cross a segment border, `seed` outputs and program
   inputs stay in memory, with the checkpoints.
6. Segments last to first (segment i = 0 is the last): plain grad ops for the
   ops after the segment, then the segment's forward ops again (only those
   that write something not in memory; their other vars renamed
   `name.subprog_{i}`), then the segment's grad ops with the same renames.
7. Accumulation and no-grad branch removal as usual (no callbacks, no
   second-pass `grad/` renames, no disconnected-subgraph pruning: Paddle's
   recompute path has none of them), then the vars, as for append_backward.

Paddle also leaves two blocks behind (`local_block`, `buffer_block`) holding
its scratch copies: the plain grad ops and every segment op, and the
recomputed ops. They are never run; `scratch_blocks` writes the same.

The entry point is `append_backward_with_checkpoints`, called by
`api.append_backward` for a non-empty checkpoint list (or "auto").

Where the output can differ from Paddle's (every golden case in
testdata/programs/recompute_* is equal byte for byte but for the first):

* A `seed` op's `op_callstack`: Paddle creates it with a Python Operator,
  which records the Python stack of whoever called append_backward (the
  caller's files and lines, Paddle's own); pybackward writes [].
* Checkpoints made by the same op (or several program inputs) tie in
  producer order; Paddle then keeps the order of a Python set (it depends on
  PYTHONHASHSEED), pybackward the order they were given in.
* A second append_backward on the same program: Paddle's recompute path
  does no `grad/` renames, so `_rename_grad_` names the clashing gradients
  `x@GRAD_0`, ...; their VarDescs come from Paddle's C++ shape inference
  (dims, and BOOL for some dtypes) where pybackward writes FP32 without dims,
  as Paddle's Python fallback says. The ops are equal.

Two things are done differently for the same result: Paddle's var pass
starts at the forward op count taken before the seed ops went in, so it
re-infers the last forward ops' shapes (which changes nothing); ours starts
after them. And Paddle's shape inference gives a recomputed op's outputs
the LoD level its forward op gave the originals (a dropout's Out, not its
Mask); ours copies it from the originals (`declared_lod_levels`).
"""
from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from typing import Callable, Iterable, Sequence

from .._proto import framework_pb2 as pb
from ..base.errors import ArgumentError, ArgumentTypeError, where
from ..ops import registry
from ..ops.registry import GradOp, fresh_op
from ..legacy.program import OP_DEVICE_ATTR, OP_ROLE_ATTR, Block, Operator, Program, Variable
from ..analysis.checkpoint_choice import AutoCheckpoints, choose
from .accumulate import accumulate_repeated_outputs
from .emit import emit, fill_op_desc
from .grad_ops import PassState, grad_to_var, make_op_grads
from ..legacy.names import grad_name, strip_grad_suffix
from ..analysis.path import find_op_path, unused_outputs
from .prune import remove_no_grad_branch
from .steps import AGGREGATIONS, all_or_nothing, append_plain, begin_append, finish, params_and_grads, unique_name

log = logging.getLogger("pybackward.recompute")

SUBPROG_SUFFIX = ".subprog_{}"
_SEED_VAR_DTYPE = pb.VarType.INT32


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------
def wants_recompute(checkpoints) -> bool:
    """True for a non-empty list, "auto" or a `memory.AutoCheckpoints`.

    As in Paddle, None, an empty list and a tuple mean no recompute (golden
    behaviour). Paddle silently ignores any other type too (a number, a
    set); pybackward refuses it, as it does a string other than "auto".
    """
    if checkpoints is None or isinstance(checkpoints, tuple):
        return False
    if isinstance(checkpoints, list):
        return bool(checkpoints)
    if isinstance(checkpoints, str):
        if checkpoints != "auto":
            raise ArgumentError(f"checkpoints must be a list of vars or names, or \"auto\", "
                                f"not {checkpoints!r}")
        return True
    if isinstance(checkpoints, AutoCheckpoints):
        return True
    raise ArgumentTypeError(f"checkpoints must be a list of vars or names, \"auto\" or None, not "
                            f"{type(checkpoints).__name__}: {checkpoints!r}")


def append_backward_with_checkpoints(program: Program, loss: Variable, loss_op: Operator,
                                     params: list[str], user_no_grad: set[str], checkpoints,
                                     keep_param_stop_gradient: bool = False,
                                     aggregation: str = "sum", *, scratch: bool = True,
                                     on_done: Callable[["Recompute"], None] | None = None,
                                     build: Callable[[Program, str, Sequence[str], Iterable[str]], int] | None = None):
    """append_backward with recompute; returns `(params_grads, checkpoint_names)`.

    `checkpoint_names` is what Paddle returns: the checkpoints that path ops
    use, de-duplicated, in producer order. With "auto" (or an
    `AutoCheckpoints`) they are chosen by `checkpoint_choice.choose` first;
    when it picks none, the plain backward section is appended and the names
    are []. `scratch=False` leaves out Paddle's two leftover blocks, and
    `on_done` gets the `Recompute` record (both for `memory`'s estimates).
    `build` is how the chooser builds each candidate (`api.append_for_choice`;
    needed for "auto" only).
    """
    if loss.block.idx != 0:
        raise ArgumentError(f"{where(program.source, loss.block.idx, var=loss.name)}: recompute "
                            "(checkpoints) needs the loss in block 0")
    if not isinstance(checkpoints, list):
        if build is None:
            raise ArgumentError("automatic checkpoints need build= (api.append_for_choice)")
        spec = checkpoints if isinstance(checkpoints, AutoCheckpoints) else AutoCheckpoints()
        choice = choose(program, loss, build, budget=spec.budget, batch_size=spec.batch_size,
                        no_grad_set=user_no_grad)
        log.info("recompute: automatic checkpoints:\n%s", choice)
        if not choice.checkpoints:
            pairs = append_plain(program, loss, loss_op, params, set(user_no_grad), None, aggregation,
                                 keep_param_stop_gradient)
            return pairs, []
        checkpoints = list(choice.checkpoints)
    wanted = checkpoint_names(program, checkpoints)
    with all_or_nothing(program):
        root, no_grad, start = begin_append(program, loss, loss_op, user_no_grad, keep_param_stop_gradient)
        state = PassState(program, no_grad, {}, {}, None, AGGREGATIONS[aggregation])
        block_no_grad = {strip_grad_suffix(n) for n in no_grad[0]}
        path = find_op_path(root, [loss], [], block_no_grad, state.sub_paths)
        block_no_grad |= unused_outputs(root, path, [loss], block_no_grad)
        no_grad[0].update(grad_name(n) for n in block_no_grad)
        refuse_sub_blocks(root, path)
        done = append_recompute_ops(root, path, loss, state, wanted, scratch)
        lods = declared_lod_levels(root, done)
        # Paddle's var pass starts at its forward op count taken before the
        # seed ops went in, so it also re-infers the last forward ops'
        # shapes - which changes nothing: start after the seed ops instead.
        grad_info = finish(program, root, start + done.seeds, state, {}, ())
        restore_lod_levels(root, lods)
        if on_done is not None:
            on_done(done)
        return params_and_grads(program, loss, params, grad_info), done.names


def checkpoint_names(program: Program, checkpoints: Iterable[Variable | str]) -> list[str]:
    """The names of `checkpoints` (Variables or names of block 0), first mention first."""
    names: dict[str, None] = {}
    for i, c in enumerate(checkpoints):
        if isinstance(c, Variable):
            if c.block.program is not program:
                raise ArgumentError(f"checkpoint '{c.name}' belongs to another program")
            names.setdefault(c.name)
        elif isinstance(c, str):
            program.global_block().var(c)   # raises, with suggestions
            names.setdefault(c)
        else:
            raise ArgumentError(f"checkpoints[{i}] must be a Variable or a name, "
                                f"not {type(c).__name__}: {c!r}")
    return list(names)


def refuse_sub_blocks(block: Block, path: list[Operator]) -> None:
    """Paddle's recompute raises on any path op with a sub-block."""
    for op in path:
        if op.sub_block is not None:
            raise ArgumentError(
                f"{where(block.program.source, block.idx, op.idx, op.type)}: recompute does not "
                f"support ops with sub-blocks (Paddle: \"Recompute don't support ops with "
                f"sub_block\"); op '{op.type}' reads {list(op.input_arg_names)[:4]}; call "
                "append_backward without checkpoints")


# --------------------------------------------------------------------------
# 1. seed ops
# --------------------------------------------------------------------------
def _needs_seed(op: Operator) -> bool:
    return op.type == "dropout" and len(op.input("Seed")) != 1


def insert_seed_ops(block: Block, path: list[Operator]) -> list[Operator]:
    """Put a `seed` op before each seedless dropout of `path` (in the block
    and in the path); return the new path (the block's op views are rebuilt)."""
    targets = {id(op) for op in path if _needs_seed(op)}
    if not targets:
        return path
    program = block.program
    on_path = {id(op) for op in path}
    descs: list[pb.OpDesc] = []
    new_path_pos: list[int] = []
    for op in block.ops:
        if id(op) in targets:
            seed_var = _declare_seed_var(block, unique_name(program, unique_name(program, "seed") + ".tmp"))
            descs.append(_seed_op_desc(op, seed_var))
            new_path_pos.append(len(descs) - 1)
            _feed_seed(op, seed_var)
        if id(op) in on_path:
            new_path_pos.append(len(descs))
        d = pb.OpDesc()
        d.CopyFrom(op.desc)
        descs.append(d)
    del block.desc.ops[:]
    block.desc.ops.extend(descs)
    block.ops = [Operator(block, d) for d in block.desc.ops]
    return [block.ops[i] for i in new_path_pos]


def _declare_seed_var(block: Block, name: str) -> str:
    """`seed_N.tmp_M`: int32, shape [1] (the seed op's shape inference), not persistable."""
    v = block.create_var(name, shape=[1], dtype=_SEED_VAR_DTYPE)
    v.desc.persistable = False
    v.desc.stop_gradient = False
    return name


def _seed_op_desc(dropout: Operator, out: str) -> pb.OpDesc:
    fixed = dropout.attr("fix_seed", False)
    seed = 0 if fixed is False else int(dropout.attr("seed", 0))
    desc = pb.OpDesc()
    # Paddle's Python Operator also records its caller's Python stack in
    # op_callstack; pybackward has no such stack to give and leaves it empty.
    fill_op_desc(desc, fresh_op("seed", {}, {"Out": [out]}, {
        "seed": seed, "op_device": dropout.attr(OP_DEVICE_ATTR, ""), "force_cpu": True,
        OP_ROLE_ATTR: 0, "op_namescope": "/"}), role=None)
    return desc


def _feed_seed(dropout: Operator, seed_var: str) -> None:
    """The dropout reads the seed (slots stay sorted) and drops fix_seed/seed."""
    dropout.set_input("Seed", [seed_var])
    slots = sorted(dropout.desc.inputs, key=lambda v: v.parameter)
    copies = []
    for v in slots:
        c = pb.OpDesc.Var()
        c.CopyFrom(v)
        copies.append(c)
    del dropout.desc.inputs[:]
    dropout.desc.inputs.extend(copies)
    keep = []
    for a in dropout.desc.attrs:
        if a.name not in ("fix_seed", "seed"):
            c = pb.OpDesc.Attr()
            c.CopyFrom(a)
            keep.append(c)
    del dropout.desc.attrs[:]
    dropout.desc.attrs.extend(keep)


# --------------------------------------------------------------------------
# 2-5. segments and what stays in memory
# --------------------------------------------------------------------------
@dataclasses.dataclass
class VarUse:
    """Per var, the path positions of the ops that read and that write it
    (one entry per argument, as Paddle's ProgramStats counts them)."""

    readers: dict[str, list[int]]
    writers: dict[str, list[int]]

    @classmethod
    def of(cls, path: Sequence[Operator]) -> "VarUse":
        readers: dict[str, list[int]] = defaultdict(list)
        writers: dict[str, list[int]] = defaultdict(list)
        for i, op in enumerate(path):
            for n in op.input_arg_names:
                readers[n].append(i)
                writers.setdefault(n, [])
            for n in op.output_arg_names:
                writers[n].append(i)
                readers.setdefault(n, [])
        return cls(dict(readers), dict(writers))

    def used(self, name: str) -> bool:
        return name in self.readers

    def producer(self, name: str) -> int:
        """The last writer, -1 for a var no path op writes."""
        w = self.writers.get(name)
        return max(w) if w else -1


def sort_checkpoints(names: Sequence[str], use: VarUse) -> list[str]:
    """Drop names no path op uses; sort by last producer (stable)."""
    kept = []
    for n in names:
        if not use.used(n):
            log.info("recompute: %s is dropped from the checkpoints: no op on the path uses it", n)
            continue
        kept.append(n)
    return sorted(kept, key=use.producer)


def _is_amp_cast(block: Block, op: Operator) -> bool:
    if op.type != "cast" or not op.input_arg_names:
        return False
    v = block.find_var_recursive(op.input_arg_names[0])
    return v is not None and v.persistable


def find_segments(names: Sequence[str], use: VarUse, path: Sequence[Operator],
                  block: Block) -> list[tuple[int, int]]:
    """Recompute segments [start, end) over path positions."""
    segments: list[tuple[int, int]] = []
    if len(names) == 1:
        last = use.producer(names[0])
        if last > 0:
            segments.append((0, last + 1))
    else:
        for a, b in zip(names, names[1:]):
            first_read = min(use.readers[a], default=len(path))
            last_write = max(use.writers[b], default=-1)
            if first_read >= last_write:
                log.info("recompute: could not recompute op range [%d] - [%d]", first_read, last_write + 1)
                continue
            # AMP casts of persistable vars just before the segment join it
            # (Paddle never advances the lower bound: it stays -1).
            while first_read - 1 > -1 and _is_amp_cast(block, path[first_read - 1]):
                first_read -= 1
            segments.append((first_read, last_write + 1))
    if segments and segments[0][0] != 0:
        segments.insert(0, (0, segments[0][0]))
    for i, (s, e) in enumerate(segments):
        log.info("recompute segment[%d]: ops [%d, %d) of the path, %s .. %s", i, s, e,
                 path[s].type, path[e - 1].type)
    return segments


def held_vars(segments: Sequence[tuple[int, int]], use: VarUse, path: Sequence[Operator],
              block: Block, names: Sequence[str]) -> set[str]:
    """Vars crossing a segment border, seed outputs and program inputs."""
    held: set[str] = set()
    for s, e in segments:
        for op in path[s:e]:
            held.update(n for n in op.output_arg_names if any(r >= e for r in use.readers.get(n, ())))
            held.update(n for n in op.input_arg_names if any(w < s for w in use.writers.get(n, ())))
    crossing = held - set(names)
    if crossing:
        log.info("recompute: %d vars cross segment borders (%s); better checkpoints might avoid "
                 "keeping them", len(crossing), sorted(crossing))
    for op in path:
        if op.type == "seed":
            held.update(op.output_arg_names)
        if op.type == "read":
            held.update(op.output_arg_names)
    for n, writers in use.writers.items():
        if not writers and use.readers.get(n):
            v = block.find_var_recursive(n)
            if not (v is not None and v.persistable):
                held.add(n)
    return held


# --------------------------------------------------------------------------
# 6-7. the backward section
# --------------------------------------------------------------------------
@dataclasses.dataclass
class _Build:
    block: Block
    state: PassState
    checkpoints: frozenset[str]
    held: set[str]
    in_memory: set[str]
    descs: list[GradOp] = dataclasses.field(default_factory=list)
    renames: dict[str, str] = dataclasses.field(default_factory=dict)
    #: What Paddle leaves in its local_block (with the forward op of each
    #: grad op) and buffer_block.
    local: list[tuple[GradOp, Operator | None]] = dataclasses.field(default_factory=list)
    buffer: list[GradOp] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Recompute:
    """What `append_recompute_ops` did."""

    names: list[str]                        # the checkpoints, sorted (Paddle's return value)
    segments: list[tuple[int, int]]         # [start, end) over the op path (seed ops included)
    held: set[str]                          # kept in memory besides the checkpoints
    renames: dict[str, str]                 # var -> var.subprog_{i}
    recomputed: list[GradOp]                # the forward ops written again
    seeds: int                              # seed ops inserted


def append_recompute_ops(block: Block, path: list[Operator], loss: Variable, state: PassState,
                         wanted: Sequence[str], scratch: bool = True) -> Recompute:
    """Seed ops, segments, and the backward section with recompute."""
    n_ops = len(block.ops)
    path = insert_seed_ops(block, path)
    seeds = len(block.ops) - n_ops
    use = VarUse.of(path)
    names = sort_checkpoints(wanted, use)
    segments = find_segments(names, use, path, block)
    held = held_vars(segments, use, path, block, names)
    b = _Build(block, state, frozenset(names), held, held | set(names))
    end = len(path)
    if not segments:
        _plain_grads(b, path[:end])
    for i, (s, e) in enumerate(reversed(segments)):
        _plain_grads(b, path[e:end])
        end = s
        _recompute_segment(b, path[s:e], SUBPROG_SUFFIX.format(i))
    descs = accumulate_repeated_outputs(b.descs, block.idx, state.max_inplace_add)
    descs = remove_no_grad_branch(descs, state.no_grad[block.idx], {grad_name(loss.name)})
    emit(block, descs, state.grad_to_var, None)
    if scratch:
        scratch_blocks(block.program, b.local, b.buffer)
    return Recompute(names, segments, held, b.renames, b.buffer, seeds)


_LOD_FIELDS = ("dense_tensor", "tensor_array")


def declared_lod_levels(block: Block, done: Recompute) -> dict[str, tuple[str, int | None]]:
    """For every var a recomputed op writes, the LoD level its original has.

    The var pass gives every output of an op that shares LoD a LoD level;
    Paddle's forward shape inference shares it only to some outputs (a
    dropout's Out, not its Mask). A recomputed op's outputs get what the
    original op gave the original vars, which the forward file records.
    """
    original = {new: old for old, new in done.renames.items()}
    out: dict[str, tuple[str, int | None]] = {}
    for g in done.recomputed:
        for n in g.output_args():
            v = block.find_var_recursive(original.get(n, n))
            if v is None:
                continue
            for field in _LOD_FIELDS:
                if v.desc.type.HasField(field):
                    sub = getattr(v.desc.type, field)
                    out[n] = (field, sub.legacy_lod_level if sub.HasField("legacy_lod_level") else None)
    return out


def restore_lod_levels(block: Block, lods: dict[str, tuple[str, int | None]]) -> None:
    for n, (field, level) in lods.items():
        v = block.find_var_recursive(n)
        if v is None or not v.desc.type.HasField(field):
            continue
        sub = getattr(v.desc.type, field)
        if level is None:
            sub.ClearField("legacy_lod_level")
        else:
            sub.legacy_lod_level = level


def _grads(b: _Build, op: Operator) -> list[GradOp]:
    grads = make_op_grads(op, b.state.no_grad[b.block.idx])
    b.state.grad_to_var.update(grad_to_var(op, grads))
    return grads


def _plain_grads(b: _Build, ops: Sequence[Operator]) -> None:
    for op in reversed(ops):
        grads = _grads(b, op)
        b.descs.extend(grads)
        # The same objects: accumulation renames show in Paddle's copies too.
        b.local.extend((g, op) for g in grads)


def _copy_of(op: Operator) -> GradOp:
    """A forward op as a GradOp, to be written again with op_role=1."""
    return GradOp(op.type, op.inputs, op.outputs, op.desc.attrs, {})


def _rename(g: GradOp, renames: dict[str, str]) -> None:
    if not renames:
        return
    for args in list(g.inputs.values()) + list(g.outputs.values()):
        for k, a in enumerate(args):
            new = renames.get(a)
            if new is not None:
                args[k] = new


def _recompute_segment(b: _Build, ops: Sequence[Operator], suffix: str) -> None:
    block = b.block
    for op in ops:
        for n in op.input_arg_names + op.output_arg_names:
            v = block.var(n)
            if v.persistable or n in b.checkpoints or n in b.held or n in b.renames:
                continue
            b.renames[n] = n + suffix
            _declare_renamed(block, v, n + suffix)
    again = [_copy_of(op) for op in ops if _writes_something_not_held(block, op, b.in_memory)]
    for g in again:
        _rename(g, b.renames)
    b.buffer.extend(again)
    b.local.extend((_copy_of(op), None) for op in ops)
    b.descs.extend(again)
    for op in reversed(ops):
        grads = _grads(b, op)
        for g in grads:
            _rename(g, b.renames)
        b.descs.extend(grads)


def _writes_something_not_held(block: Block, op: Operator, in_memory: set[str]) -> bool:
    for n in op.output_arg_names:
        v = block.find_var_recursive(n)
        if v is not None and v.persistable:
            continue
        if n not in in_memory:
            return True
    return False


def _declare_renamed(block: Block, like: Variable, name: str) -> None:
    """As Paddle's `block.create_var(shape, dtype, type, persistable,
    stop_gradient)` of the original: no LoD level (shape inference sets it
    later, for the ops that share it)."""
    v = block.create_var_like(name, like)
    for field in ("dense_tensor", "tensor_array"):
        if v.desc.type.HasField(field):
            getattr(v.desc.type, field).ClearField("legacy_lod_level")
    v.desc.persistable = like.persistable
    v.desc.stop_gradient = like.stop_gradient


# --------------------------------------------------------------------------
# Paddle's leftover blocks
# --------------------------------------------------------------------------
def scratch_blocks(program: Program, local: Sequence[tuple[GradOp, Operator | None]],
                   buffer: Sequence[GradOp]) -> None:
    """Append Paddle's `local_block` (parent: block 0) and `buffer_block`
    (parent: local_block) with the ops Paddle leaves in them. They hold op
    copies as Paddle makes them before its var pass: op_role=1 and the attrs
    the op carries, without the defaults the var pass adds."""
    lb = program.create_block(parent_idx=0)
    bb = program.create_block(parent_idx=lb.idx)
    lb.extend_op_descs([raw_op_desc(g, fwd) for g, fwd in local])
    bb.extend_op_descs([raw_op_desc(g) for g in buffer])


def raw_op_desc(g: GradOp, fwd: Operator | None = None) -> pb.OpDesc:
    """`g` written with op_role=1 and only the attrs it carries.

    A grad op a maker builds fresh (`fwd` its forward op) carries the attrs
    the maker sets and - as Paddle's SingleGradOpMaker copies them - the
    forward op's extra (runtime) attrs; `sum`'s maker makes `scale` ops that
    set `scale` only.
    """
    if g.fresh and fwd is not None:
        extras = registry.extra_attrs(fwd.type) or frozenset()
        attrs = dict(g.attrs)
        runtime: list[pb.OpDesc.Attr] = []
        if fwd.type == "sum":
            attrs = {k: v for k, v in attrs.items() if k in ("scale", OP_DEVICE_ATTR)}
        else:
            seen: set[str] = set()
            for a in fwd.desc.attrs:
                if a.name in extras and a.name not in seen and a.name not in attrs:
                    seen.add(a.name)
                    runtime.append(a)
        g = GradOp(g.type, g.inputs, g.outputs, runtime, attrs)
    desc = pb.OpDesc()
    fill_op_desc(desc, g)
    keep = {a.name for a in g.base_attrs} | set(g.attrs) | {OP_ROLE_ATTR}
    if any(a.name not in keep for a in desc.attrs):
        kept = []
        for a in desc.attrs:
            if a.name in keep:
                c = pb.OpDesc.Attr()
                c.CopyFrom(a)
                kept.append(c)
        del desc.attrs[:]
        desc.attrs.extend(kept)
    return desc


def is_recompute_var(name: str) -> bool:
    """A var recompute made: `name.subprog_{i}`."""
    head, sep, tail = name.rpartition(".subprog_")
    return bool(sep) and tail.isdigit()


__all__ = ["wants_recompute", "append_backward_with_checkpoints", "checkpoint_names", "insert_seed_ops", "VarUse",
           "sort_checkpoints", "find_segments", "held_vars", "append_recompute_ops",
           "scratch_blocks", "is_recompute_var", "SUBPROG_SUFFIX"]

