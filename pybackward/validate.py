"""Structural checks of a ProgramDesc, each failure a `ProgramFileError`.

What is checked, and why it is the rule (Paddle's own loader relies on the
same facts, mostly without checking them):

* at least one block; block i has `idx == i`; block 0's parent is -1;
  every other block's parent is in range and the parent chain reaches
  block 0 without a cycle; `forward_block_idx` is -1 or in range;
* var names are unique within a block; tensor vars carry a tensor
  description; dims are >= -1 (-1 = unknown size);
* every BLOCK / BLOCKS attr (`sub_block`, `blocks_idx`) names an existing
  block other than the op's own block and block 0;
* every op argument names a var declared in the op's block or an ancestor,
  or - for a grad block (one with `forward_block_idx`) - in its forward
  block or that block's ancestors. `@EMPTY@` (Paddle's placeholder for a
  dropped gradient) is exempt. Paddle's own files declare `feed` / `fetch`
  vars, so this holds for everything Paddle writes. Pass
  `check_vars=False` to load files from tools that are looser.

All checks are linear in the size of the program.
"""
from __future__ import annotations

from ._proto import framework_pb2 as pb
from . import dtypes
from .errors import ProgramFileError, where

EMPTY_VAR_NAME = "@EMPTY@"


def validate(desc: pb.ProgramDesc, source: str | None = None, check_vars: bool = True) -> None:
    """Raise ProgramFileError on the first structural problem found."""
    n = len(desc.blocks)
    if n == 0:
        raise ProgramFileError(f"{where(source) or '<bytes>'}: not a program: it has no blocks "
                               "(an empty file, or a protobuf message of another kind)")
    _check_blocks(desc, source)
    declared = [set() for _ in range(n)]
    for b in desc.blocks:
        names = declared[b.idx]
        for v in b.vars:
            if v.name in names:
                raise ProgramFileError(f"{where(source, b.idx, var=v.name)}: variable declared twice")
            names.add(v.name)
            _check_var(v, b.idx, source)
    for b in desc.blocks:
        visible = _visible_blocks(desc, b.idx)
        for i, op in enumerate(b.ops):
            _check_op_blocks(op, b.idx, i, n, source)
            if check_vars:
                for vars_ in (op.inputs, op.outputs):
                    for slot in vars_:
                        for arg in slot.arguments:
                            if arg == EMPTY_VAR_NAME or any(arg in declared[j] for j in visible):
                                continue
                            raise ProgramFileError(
                                f"{where(source, b.idx, i, op.type, arg)}: slot '{slot.parameter}' "
                                "names a variable that no visible block declares")


def _check_blocks(desc: pb.ProgramDesc, source: str | None) -> None:
    n = len(desc.blocks)
    for i, b in enumerate(desc.blocks):
        if b.idx != i:
            raise ProgramFileError(f"{where(source, i)}: the block at position {i} says idx={b.idx}")
        if i == 0:
            if b.parent_idx != -1:
                raise ProgramFileError(f"{where(source, 0)}: block 0 must have parent_idx -1, "
                                       f"not {b.parent_idx}")
        elif not 0 <= b.parent_idx < n or b.parent_idx == i:
            raise ProgramFileError(f"{where(source, i)}: parent_idx {b.parent_idx} is not another "
                                   f"block (the program has {n} blocks)")
        if b.forward_block_idx != -1 and not 0 <= b.forward_block_idx < n:
            raise ProgramFileError(f"{where(source, i)}: forward_block_idx {b.forward_block_idx} "
                                   f"out of range (the program has {n} blocks)")
    # Every parent chain must reach block 0; memoised so the walk is linear.
    reaches_root = {0}
    for i in range(1, n):
        chain, j = [], i
        while j not in reaches_root:
            if j in chain:
                cycle = " -> ".join(str(k) for k in chain[chain.index(j):] + [j])
                raise ProgramFileError(f"{where(source, i)}: parent blocks form a cycle ({cycle})")
            chain.append(j)
            j = desc.blocks[j].parent_idx
        reaches_root.update(chain)


def _visible_blocks(desc: pb.ProgramDesc, idx: int) -> list[int]:
    """The blocks whose vars an op in block `idx` may name."""
    out: list[int] = []
    starts = [idx]
    fwd = desc.blocks[idx].forward_block_idx
    if fwd != -1:
        starts.append(fwd)
    for j in starts:
        while j != -1 and j not in out:
            out.append(j)
            j = desc.blocks[j].parent_idx
    return out


def _check_var(v: pb.VarDesc, block: int, source: str | None) -> None:
    field = dtypes.TENSOR_VAR_TYPES.get(v.type.type)
    if field is None:
        return
    if not v.type.HasField(field):
        raise ProgramFileError(f"{where(source, block, var=v.name)}: a {dtypes.type_name(v.type.type)} "
                               "var without its tensor description")
    sub = getattr(v.type, field)
    t = sub if field == "selected_rows" else sub.tensor
    for d in t.dims:
        if d < -1:
            raise ProgramFileError(f"{where(source, block, var=v.name)}: dimension {d} is negative "
                                   f"(dims {list(t.dims)}; only -1, for an unknown size, may be)")


def _check_op_blocks(op: pb.OpDesc, block: int, i: int, n: int, source: str | None) -> None:
    for a in op.attrs:
        if a.type == pb.AttrType.BLOCK:
            idxs = [a.block_idx]
        elif a.type == pb.AttrType.BLOCKS:
            idxs = list(a.blocks_idx)
        else:
            continue
        for k in idxs:
            if not 0 < k < n or k == block:
                raise ProgramFileError(
                    f"{where(source, block, i, op.type)}: attr '{a.name}' names block {k}, "
                    f"which is not a sub-block (the program has {n} blocks)")
