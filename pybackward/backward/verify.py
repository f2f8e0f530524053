"""Checking a backward section after the pass: a second pair of eyes.

`verify_backward` checks that every gradient var has its forward var's shape
and dtype (renamed ones too: `x@GRAD_0`, `x@GRAD@RENAME@block0@1`), and that every backward op is a registered op type using only the
slots the registry declares for it. The pass builds things this way; the
check catches a registry entry or a hand-edited file that breaks the rule.
"""
from __future__ import annotations

import re

from ..base.errors import CheckFailedError, where
from ..ops import registry
from ..legacy.program import OP_ROLE_ATTR, Program
from ..legacy.names import EMPTY_VAR_NAME, GRAD_SUFFIX, strip_grad_suffix


class VerificationError(CheckFailedError):
    """The backward section breaks a rule the pass guarantees (a failed check: exit 1)."""


#: A grad var renamed because its name was taken: `x@GRAD_0` (the `_N` of
#: `_rename_existing_grads`, which a second pass over a file makes).
_RENAMED = re.compile(r"^(.*" + re.escape(GRAD_SUFFIX) + r".*)_\d+$")


def forward_name(grad: str) -> str:
    """The forward var a gradient var belongs to (`x@GRAD_0` -> `x`)."""
    m = _RENAMED.match(grad)
    return strip_grad_suffix(m.group(1) if m else grad)


def verify_backward(program: Program) -> list[str]:
    """Problems found (empty when the backward section is consistent)."""
    problems: list[str] = []
    src = program.source
    for b in program.blocks:
        for name, v in b.vars.items():
            if GRAD_SUFFIX not in name or v.data_type is None:
                continue
            fname = strip_grad_suffix(name)
            if fname == name or not _has(program, b, fname):
                fname = forward_name(name)
            fwd = b.find_var_recursive(fname)
            if fwd is None and b.forward_block_idx != -1:
                fwd = program.blocks[b.forward_block_idx].find_var_recursive(fname)
            if fwd is None or fwd.data_type is None:
                continue
            if fwd.shape != v.shape or fwd.data_type != v.data_type:
                problems.append(f"{where(src, b.idx, var=name)}: gradient is {v.dtype}{list(v.shape)} but "
                                f"'{fwd.name}' is {fwd.dtype}{list(fwd.shape)}")
        for i, op in enumerate(b.ops):
            role = op.attr(OP_ROLE_ATTR, 0)
            if not (isinstance(role, int) and role & 1):
                continue
            opdef = registry.find(op.type)
            if opdef is None:
                problems.append(f"{where(src, b.idx, i, op.type)}: backward op of an unknown type")
                continue
            if not opdef.inputs and not opdef.outputs:
                continue  # a type that declares no slots
            for kind, declared, slots in (("input", opdef.inputs, op.inputs), ("output", opdef.outputs, op.outputs)):
                for slot, args in slots.items():
                    if slot not in declared and any(a != EMPTY_VAR_NAME for a in args):
                        problems.append(f"{where(src, b.idx, i, op.type)}: {kind} slot '{slot}' is not one "
                                        f"of the registered {kind}s {list(declared)}")
    return problems


def _has(program: Program, b, name: str) -> bool:
    if b.find_var_recursive(name) is not None:
        return True
    return b.forward_block_idx != -1 and program.blocks[b.forward_block_idx].find_var_recursive(name) is not None


def check_backward(program: Program) -> None:
    """Raise VerificationError listing the problems, if any."""
    problems = verify_backward(program)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise VerificationError(problems[0] + more)
