"""Saved residuals: the forward values the backward section reads.

What a backward pass needs from the forward pass is what must stay in memory
between them (JAX's `print_saved_residuals`, done statically). For every
backward op this lists the forward vars among its inputs - not gradients,
not parameters - and the bytes they hold (-1 dims filled with the batch size).
"""
from __future__ import annotations

import dataclasses

from .liveness import var_bytes
from ..legacy.program import OP_ROLE_ATTR, Program

GRAD_SUFFIX = "@GRAD"


@dataclasses.dataclass
class Residual:
    name: str
    bytes: int | None          # None when a dim is unknown even with the batch size
    readers: list[str]         # "block:op_index type" of the backward ops reading it


def saved_residuals(program: Program, batch_size: int = 1) -> list[Residual]:
    """Forward vars read by backward ops, in first-read order."""
    found: dict[str, Residual] = {}
    for b in program.blocks:
        written_fwd: set[str] = set()
        for i, op in enumerate(b.ops):
            role = op.attr(OP_ROLE_ATTR, 0)
            backward = isinstance(role, int) and bool(role & 1)
            if not backward:
                written_fwd.update(op.output_arg_names)
                continue
            for n in op.input_arg_names:
                if GRAD_SUFFIX in n:
                    continue
                v = b.find_var_recursive(n)
                if v is None or v.persistable:
                    continue
                r = found.get(n)
                if r is None:
                    r = found[n] = Residual(n, var_bytes(v, batch_size), [])
                r.readers.append(f"{b.idx}:{i} {op.type}")
    return list(found.values())
