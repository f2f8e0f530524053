"""Readable listings of programs, in Paddle's style: `out = op(X=a) {attrs}`."""
from __future__ import annotations

from typing import Iterable

from . import dtypes
from .program import OP_ROLE_ATTR, Block, Operator, Program, Variable

#: Attrs that say nothing about the computation; hidden unless asked for.
NOISE_ATTRS = frozenset({"op_callstack", "op_namescope", "op_device", "with_quant_attr",
                         "use_mkldnn", "use_onednn", "use_cudnn", "mkldnn_data_type",
                         "onednn_data_type", "use_quantizer", "Scale_x", "Scale_y", "Scale_out",
                         "scale_x", "scale_y", "scale_out", "force_fp32_output"})


def var_to_text(v: Variable) -> str:
    if v.data_type is not None:
        desc = f"{dtypes.type_name(v.data_type).lower()}{list(v.shape)}"
        if v.type != dtypes.VarType.DENSE_TENSOR:
            desc = f"{dtypes.type_name(v.type).lower()}<{desc}>"
    else:
        desc = dtypes.type_name(v.type).lower()
    flags = [f for f in ("persistable", "is_parameter", "stop_gradient") if getattr(v.desc, f)]
    return f"var {v.name} : {desc}" + (f"  ({', '.join(flags)})" if flags else "")


def _args(slots: dict[str, list[str]]) -> str:
    return ", ".join(f"{k}={v[0] if len(v) == 1 else '[' + ', '.join(v) + ']'}" for k, v in slots.items())


def op_to_text(op: Operator, show_attrs: bool = True, all_attrs: bool = False) -> str:
    outs = _args(op.outputs)
    text = f"{outs} = {op.type}({_args(op.inputs)})" if outs else f"{op.type}({_args(op.inputs)})"
    if show_attrs:
        shown = {k: v for k, v in op.all_attrs.items() if all_attrs or k not in NOISE_ATTRS}
        if not all_attrs and not shown.get("op_role_var"):
            shown.pop("op_role_var", None)
        if shown:
            text += " {" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + "}"
    return text


def block_to_lines(block: Block, show_attrs: bool = True, all_attrs: bool = False,
                   show_vars: bool = True, indent: str = "") -> Iterable[str]:
    head = f"{indent}block {block.idx} (parent {block.parent_idx}"
    if block.forward_block_idx != -1:
        head += f", forward block {block.forward_block_idx}"
    yield head + f"): {len(block.vars)} vars, {len(block.ops)} ops"
    if show_vars:
        for v in block.vars.values():
            yield f"{indent}  {var_to_text(v)}"
    for i, op in enumerate(block.ops):
        role = op.attr(OP_ROLE_ATTR, 0)
        mark = "B" if isinstance(role, int) and role & 1 else " "
        yield f"{indent}  [{i:>3}]{mark} {op_to_text(op, show_attrs, all_attrs)}"


def program_to_text(program: Program, show_attrs: bool = True, all_attrs: bool = False,
                    show_vars: bool = True, block: int | None = None) -> str:
    blocks = program.blocks if block is None else [program.block(block)]
    lines: list[str] = []
    for b in blocks:
        lines.extend(block_to_lines(b, show_attrs, all_attrs, show_vars))
    return "\n".join(lines)
