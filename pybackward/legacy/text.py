"""Readable listings of programs, in Paddle's style: `out = op(X=a) {attrs}`.

`program_to_text` lists block 0 with every sub-block nested (indented) under
the op that owns it (its `sub_block` / BLOCK / BLOCKS attr); `section`
keeps only the forward or the backward ops (by the `op_role` bit set: bit 1
is backward, 256 marks the loss). `program_to_dict` is the same content as
plain JSON-able data, `program_to_pbtxt` the raw protobuf text format.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable

from ..base import dtypes
from .._proto import framework_pb2 as pb
from ..base.errors import ArgumentTypeError
from ..base.op_roles import OP_ROLE_ATTR, OP_ROLE_BACKWARD, OP_ROLE_LOSS, OP_ROLE_OPTIMIZE
from ..base.names import printable

if TYPE_CHECKING:  # annotations only: program.py imports this module (`str(program)`)
    from .program import Block, Operator, Program, Variable

#: Attrs that say nothing about the computation; hidden unless asked for.
NOISE_ATTRS = frozenset({"op_callstack", "op_namescope", "op_device", "with_quant_attr",
                         "use_mkldnn", "use_onednn", "use_cudnn", "mkldnn_data_type",
                         "onednn_data_type", "use_quantizer", "Scale_x", "Scale_y", "Scale_out",
                         "scale_x", "scale_y", "scale_out", "force_fp32_output"})

#: The `section` values: every op, or only one side of the backward pass.
SECTIONS = (None, "forward", "backward")

#: Flags of a VarDesc, in the order listings print them.
VAR_FLAGS = ("persistable", "is_parameter", "stop_gradient", "need_check_feed")


def _check_program(program: Any, fn: str) -> None:
    # A Program is what holds a ProgramDesc as `desc` and its block views as
    # `blocks` (this module is below program.py, so it asks for those).
    if not (isinstance(getattr(program, "desc", None), pb.ProgramDesc) and hasattr(program, "blocks")):
        raise ArgumentTypeError(f"{fn}() takes a pybackward Program, not {type(program).__name__}")


# -- op roles ------------------------------------------------------------
def op_role(op: Operator) -> int:
    """The op's `op_role` bit set (0, forward, when absent or not an int)."""
    role = op.attr(OP_ROLE_ATTR, 0)
    return role if isinstance(role, int) else 0


def is_backward(op: Operator) -> bool:
    return bool(op_role(op) & OP_ROLE_BACKWARD)


def is_forward(op: Operator) -> bool:
    """Neither backward nor optimizer: the forward ops, the loss op included."""
    return not op_role(op) & (OP_ROLE_BACKWARD | OP_ROLE_OPTIMIZE)


def role_mark(op: Operator) -> str:
    """One letter for listings: B backward, O optimize, L the loss op, blank forward."""
    role = op_role(op)
    if role & OP_ROLE_BACKWARD:
        return "B"
    if role & OP_ROLE_OPTIMIZE:
        return "O"
    if role & OP_ROLE_LOSS:
        return "L"
    return " "


def in_section(op: Operator, section: str | None) -> bool:
    if section is None:
        return True
    if section == "forward":
        return is_forward(op)
    if section == "backward":
        return is_backward(op)
    raise ValueError(f"section must be one of {SECTIONS}, not {section!r}")


# -- one var, one op -------------------------------------------------------
def var_type_text(v: Variable) -> str:
    """`fp32[13, 1]`, `dense_tensor_array<fp32[-1]>`, or the var type (`feed_minibatch`)."""
    if v.data_type is not None:
        desc = f"{dtypes.type_name(v.data_type).lower()}{list(v.shape)}"
        if v.type != dtypes.VarType.DENSE_TENSOR:
            desc = f"{dtypes.type_name(v.type).lower()}<{desc}>"
        return desc
    return dtypes.type_name(v.type).lower()


def var_to_text(v: Variable) -> str:
    flags = [f for f in ("persistable", "is_parameter", "stop_gradient") if getattr(v.desc, f)]
    return f"var {printable(v.name)} : {var_type_text(v)}" + (f"  ({', '.join(flags)})" if flags else "")


def _args(slots: dict[str, list[str]]) -> str:
    """`X=a, Y=[b, c]`, every name escaped (`base.names.printable`: a name's control characters
    never reach the terminal)."""
    return ", ".join(f"{printable(k)}={printable(v[0]) if len(v) == 1 else '[' + ', '.join(map(printable, v)) + ']'}"
                     for k, v in slots.items())


def shown_attrs(op: Operator, all_attrs: bool = False,
                ignore: Iterable[str] | None = None) -> dict[str, Any]:
    """The attrs a listing prints: without `ignore` (default NOISE_ATTRS) unless
    `all_attrs`, and without an empty `op_role_var`."""
    hide = frozenset() if all_attrs else (NOISE_ATTRS if ignore is None else frozenset(ignore))
    shown = {k: v for k, v in op.all_attrs.items() if k not in hide}
    if not all_attrs and not shown.get("op_role_var"):
        shown.pop("op_role_var", None)
    return shown


def op_to_text(op: Operator, show_attrs: bool = True, all_attrs: bool = False,
               ignore: Iterable[str] | None = None) -> str:
    outs = _args(op.outputs)
    kind = printable(op.type)
    text = f"{outs} = {kind}({_args(op.inputs)})" if outs else f"{kind}({_args(op.inputs)})"
    if show_attrs:
        shown = shown_attrs(op, all_attrs, ignore)
        if shown:       # repr escapes a str value's control characters; printable the rest
            text += " {" + ", ".join(f"{printable(k)}={printable(repr(v))}" for k, v in shown.items()) + "}"
    return text


def op_line(op: Operator, index: int, show_attrs: bool = True, all_attrs: bool = False,
            ignore: Iterable[str] | None = None) -> str:
    """`[  3]B Out=... = op(...) {...}`: the op's index in its block, its role mark, the op."""
    return f"[{index:>3}]{role_mark(op)} {op_to_text(op, show_attrs, all_attrs, ignore)}"


def block_header(block: Block, shown: tuple[int, int, str] | None = None) -> str:
    """`block 0 (parent -1): 9 vars, 5 ops`; with `shown` = (vars, ops, section) for a listing of one
    side only: `block 0 (parent -1): 4 of 9 vars, 2 of 5 ops (backward)`."""
    head = f"block {block.idx} (parent {block.parent_idx}"
    if block.forward_block_idx != -1:
        head += f", forward block {block.forward_block_idx}"
    if shown is not None:
        n_vars, n_ops, section = shown
        return head + f"): {n_vars} of {len(block.vars)} vars, {n_ops} of {len(block.ops)} ops ({section})"
    return head + f"): {len(block.vars)} vars, {len(block.ops)} ops"


# -- blocks and programs ---------------------------------------------------
def _used_names(ops: Iterable[Operator]) -> set[str]:
    names: set[str] = set()
    for op in ops:
        names.update(op.input_arg_names)
        names.update(op.output_arg_names)
    return names


def block_to_lines(block: Block, show_attrs: bool = True, all_attrs: bool = False,
                   show_vars: bool = True, indent: str = "", section: str | None = None,
                   nested: bool = False, _seen: set[int] | None = None) -> Iterable[str]:
    """The listing of one block. With `nested`, each sub-block follows the op
    that owns it, indented further. With `section`, only that side's ops are
    listed (with their original indices), and only the vars they use."""
    seen = _seen if _seen is not None else set()
    seen.add(block.idx)
    kept = [(i, op) for i, op in enumerate(block.ops) if in_section(op, section)]
    used = _used_names(op for _, op in kept) if section is not None else None
    shown_vars = [v for v in block.vars.values() if used is None or v.name in used]
    yield indent + block_header(block, None if section is None else (len(shown_vars), len(kept), section))
    if show_vars:
        for v in shown_vars:
            yield f"{indent}  {var_to_text(v)}"
    for i, op in kept:
        yield f"{indent}  {op_line(op, i, show_attrs, all_attrs)}"
        if not nested:
            continue
        for sub in op.sub_blocks():
            if sub in seen or not 0 <= sub < block.program.num_blocks:
                yield f"{indent}         (block {sub}, listed above)"
                continue
            yield from block_to_lines(block.program.blocks[sub], show_attrs, all_attrs, show_vars,
                                      indent + "         ", section, nested, seen)


def owned_blocks(program: Program) -> dict[int, tuple[int, int]]:
    """block index -> (block, op index) of the first op that names it as a sub-block."""
    owner: dict[int, tuple[int, int]] = {}
    for b in program.blocks:
        for i, op in enumerate(b.ops):
            for sub in op.sub_blocks():
                owner.setdefault(sub, (b.idx, i))
    return owner


def program_to_text(program: Program, show_attrs: bool = True, all_attrs: bool = False,
                    show_vars: bool = True, block: int | None = None, section: str | None = None,
                    nested: bool = True) -> str:
    """The listing of the program (or of one block and its sub-blocks).

    Nested: block 0 and every block no op owns are listed at the top level,
    each sub-block under its owner. Flat (`nested=False`): block by block.
    """
    _check_program(program, "program_to_text")
    lines: list[str] = []
    if block is not None:
        lines.extend(block_to_lines(program.block(block), show_attrs, all_attrs, show_vars,
                                    section=section, nested=nested))
        return "\n".join(lines)
    if not nested:
        for b in program.blocks:
            lines.extend(block_to_lines(b, show_attrs, all_attrs, show_vars, section=section))
        return "\n".join(lines)
    owner = owned_blocks(program)
    seen: set[int] = set()
    for b in program.blocks:
        if b.idx not in owner and b.idx not in seen:
            lines.extend(block_to_lines(b, show_attrs, all_attrs, show_vars, section=section,
                                        nested=True, _seen=seen))
    # Blocks reached only through a cycle of sub_block attrs (or whose owner
    # was filtered out by `section` inside such a cycle) would be lost.
    hidden = _hidden_by_section(program, owner, section)
    for b in program.blocks:
        if b.idx not in seen and b.idx not in hidden:
            lines.extend(block_to_lines(b, show_attrs, all_attrs, show_vars, section=section,
                                        nested=True, _seen=seen))
    return "\n".join(lines)


def _hidden_by_section(program: Program, owner: dict[int, tuple[int, int]],
                       section: str | None) -> set[int]:
    """Blocks owned (directly or through their owners) by an op `section` leaves out."""
    hidden: set[int] = set()
    for idx in owner:
        chain: list[int] = []
        j = idx
        while j in owner and j not in chain:
            chain.append(j)
            bi, oi = owner[j]
            if not in_section(program.blocks[bi].ops[oi], section):
                hidden.update(chain)
                break
            j = bi
    return hidden


# -- JSON and protobuf text -------------------------------------------------
def jsonable(value: Any) -> Any:
    """An attr value as strict JSON: lists of JSON values, complex as [re, im],
    non-finite floats as strings ("nan", "inf")."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)  # BlockRef and Long are ints
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(float(value))
    if isinstance(value, complex):
        return [jsonable(value.real), jsonable(value.imag)]
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def var_to_dict(v: Variable) -> dict[str, Any]:
    d: dict[str, Any] = {"name": v.name, "type": dtypes.type_name(v.type).lower()}
    if v.data_type is not None:
        d["dtype"] = dtypes.type_name(v.data_type).lower()
        d["shape"] = list(v.shape)
    for f in VAR_FLAGS:
        d[f] = bool(getattr(v.desc, f))
    return d


def op_to_dict(op: Operator, index: int, show_attrs: bool = True, all_attrs: bool = True,
               ignore: Iterable[str] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"index": index, "type": op.type, "role": op_role(op),
                         "inputs": op.inputs, "outputs": op.outputs}
    if show_attrs:
        d["attrs"] = {k: jsonable(v) for k, v in shown_attrs(op, all_attrs, ignore).items()}
    subs = op.sub_blocks()
    if subs:
        d["sub_blocks"] = subs
    return d


def program_to_dict(program: Program, show_attrs: bool = True, all_attrs: bool = True,
                    show_vars: bool = True, block: int | None = None,
                    section: str | None = None) -> dict[str, Any]:
    """Blocks, vars and ops as plain data (every attr unless `all_attrs=False`)."""
    _check_program(program, "program_to_dict")
    blocks = program.blocks if block is None else [program.block(block)]
    out = []
    for b in blocks:
        kept = [(i, op) for i, op in enumerate(b.ops) if in_section(op, section)]
        d: dict[str, Any] = {"idx": b.idx, "parent_idx": b.parent_idx,
                             "forward_block_idx": b.forward_block_idx}
        if show_vars:
            used = _used_names(op for _, op in kept) if section is not None else None
            d["vars"] = [var_to_dict(v) for v in b.vars.values() if used is None or v.name in used]
        d["ops"] = [op_to_dict(op, i, show_attrs, all_attrs) for i, op in kept]
        out.append(d)
    return {"source": program.source, "blocks": out}


def program_to_pbtxt(program: Program, block: int | None = None, section: str | None = None) -> str:
    """Protobuf text format (of one BlockDesc with `block`), the ops outside `section` dropped."""
    _check_program(program, "program_to_pbtxt")
    from google.protobuf import text_format
    prog = program
    if section is not None:
        prog = program.clone()
        kept = []
        for b in prog.blocks:
            copies = []
            for op in b.ops:
                if in_section(op, section):
                    copies.append(type(op.desc)())
                    copies[-1].CopyFrom(op.desc)
            kept.append(copies)
        for b, copies in zip(prog.desc.blocks, kept):
            del b.ops[:]
            b.ops.extend(copies)
        prog.sync()
    msg = prog.desc if block is None else prog.block(block).desc
    return text_format.MessageToString(msg)
