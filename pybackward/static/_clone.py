"""`Program.clone(for_test=True)`: Paddle's `core.prune_backward` followed by
`Program._inference_optimize(prune_read_op=False)`, on the protobuf.

prune_backward: only when some op has `op_role == Backward|Loss` (the loss
gradient's fill op; otherwise the program is copied as is), every op whose
role has the Backward, Optimize or LRSched bit is dropped, each block keeps
only the vars its remaining ops read or write (an attr an op carries twice
is kept once), and blocks left without ops
(grad blocks) are dropped, the others renumbered. Paddle lists the kept vars
in the iteration order of a C++ `unordered_set`; they are kept sorted by
name here (the same VarDescs, another order).
inference_optimize: `is_test=True` on every op that has the attr, and
batch_norm loses its ReserveSpace output slot.
"""
from __future__ import annotations

from .._proto import framework_pb2 as pb
from ..base.attrs import BLOCK, BLOCKS, INT

_BACKWARD, _OPTIMIZE, _LRSCHED, _LOSS = 1, 2, 16, 256


def _role(op: pb.OpDesc) -> int:
    for a in op.attrs:
        if a.name == "op_role" and a.type == INT:
            return a.i
    return 0


def _drop_repeated_attrs(op: pb.OpDesc) -> None:
    """An attr written twice (as an extra and as a proto attr, like reshape2's
    `use_quantizer`) comes out of the pruning once: the first one stays."""
    seen: set[str] = set()
    kept = []
    for a in op.attrs:
        if a.name not in seen:
            seen.add(a.name)
            c = pb.OpDesc.Attr()
            c.CopyFrom(a)
            kept.append(c)
    if len(kept) != len(op.attrs):
        del op.attrs[:]
        op.attrs.extend(kept)


def prune_backward(desc: pb.ProgramDesc) -> None:
    """Paddle's `core.prune_backward`, in place."""
    if not any(_role(op) == _BACKWARD | _LOSS for b in desc.blocks for op in b.ops):
        return
    kept_blocks: list[pb.BlockDesc] = []
    new_of_old: dict[int, int] = {}
    for block in desc.blocks:
        ops = [op for op in block.ops
               if not _role(op) & (_BACKWARD | _OPTIMIZE | _LRSCHED)]
        if not ops:
            continue
        used = {a for op in ops for slot in (*op.inputs, *op.outputs) for a in slot.arguments}
        nb = pb.BlockDesc(idx=len(kept_blocks), parent_idx=block.parent_idx)
        nb.vars.extend(v for v in block.vars if v.name in used)
        nb.ops.extend(ops)
        for op in nb.ops:
            _drop_repeated_attrs(op)
        new_of_old[block.idx] = nb.idx
        kept_blocks.append(nb)
    for nb in kept_blocks:
        if nb.parent_idx != -1:
            nb.parent_idx = new_of_old[nb.parent_idx]
        for op in nb.ops:
            for a in op.attrs:
                if a.type == BLOCK:
                    a.block_idx = new_of_old[a.block_idx]
                elif a.type == BLOCKS:
                    a.blocks_idx[:] = [new_of_old[i] for i in a.blocks_idx]
    del desc.blocks[:]
    desc.blocks.extend(kept_blocks)


def inference_optimize(desc: pb.ProgramDesc) -> None:
    """Paddle's `_inference_optimize(prune_read_op=False)`, in place."""
    for block in desc.blocks:
        for op in block.ops:
            for a in op.attrs:
                if a.name == "is_test":
                    a.b = True
            if op.type == "batch_norm":
                for i, slot in enumerate(op.outputs):
                    if slot.parameter == "ReserveSpace":
                        del op.outputs[i]
                        break


def prune_for_test(desc: pb.ProgramDesc) -> None:
    prune_backward(desc)
    inference_optimize(desc)
