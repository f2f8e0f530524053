"""Paddle's own listing of a program: the text `print(program)` gives.

`program_to_paddle_text(program)` is what Paddle 3.3.1's legacy
`print(paddle.static.Program.parse_from_string(data))` prints for the same
file (`Program._to_readable_code()`), character for character, so a listing
can be compared with one a Paddle user posts. What Paddle does on the way,
and this module does too:

* vars are listed sorted by name (the C++ block keeps them in a map), each as
  `[persist ][trainable param |var ]NAME : TYPE.shape(..).dtype(..).stop_gradient(..)`;
  a var the file marks as a parameter comes back as a trainable parameter,
  persistable and with `stop_gradient(False)`;
* an op's slots are sorted by name, its attrs too, without `op_callstack`
  and without the op type's runtime ("extra") attrs such as `use_mkldnn`
  (Paddle keeps those apart and does not print them);
* block headers name the parent, forward and backward block.

Checked against the text Paddle printed for every golden program
(`testdata/paddle_text/`, written by `testdata/gen_paddle_text.py`).
"""
from __future__ import annotations

from typing import Any

from ..base import attrs as _attrs
from ..base import dtypes
from ..base.names import printable
from ..ops.paddle_data import paddle_op
from ..legacy.program import Block, Operator, Program, Variable

__all__ = ["program_to_paddle_text", "block_to_paddle_text", "op_to_paddle_text", "var_to_paddle_text",
           "extra_attrs"]

#: Data types Paddle prints by their `paddle.` alias (`paddle.float32` -> `float32`).
_DTYPE_ALIAS = {
    dtypes.VarType.BOOL: "bool", dtypes.VarType.INT16: "int16", dtypes.VarType.INT32: "int32",
    dtypes.VarType.INT64: "int64", dtypes.VarType.FP16: "float16", dtypes.VarType.FP32: "float32",
    dtypes.VarType.FP64: "float64", dtypes.VarType.UINT8: "uint8", dtypes.VarType.INT8: "int8",
    dtypes.VarType.BF16: "bfloat16", dtypes.VarType.COMPLEX64: "complex64",
    dtypes.VarType.COMPLEX128: "complex128", dtypes.VarType.FP8_E4M3FN: "float8_e4m3fn",
    dtypes.VarType.FP8_E5M2: "float8_e5m2", dtypes.VarType.STRING: "pstring", dtypes.VarType.RAW: "raw",
}
_TENSOR_TYPES = (dtypes.VarType.DENSE_TENSOR, dtypes.VarType.SELECTED_ROWS)


def _enum_text(value: int) -> str:
    """`str(VarType.X).split('.')[1]` in Paddle: the alias for data types, else the enum name."""
    return _DTYPE_ALIAS.get(value) or dtypes.type_name(value)


def extra_attrs(op_type: str) -> frozenset[str]:
    """The runtime ("extra") attrs of an op type, which Paddle keeps apart and
    does not print. A grad op has its forward op's."""
    t = op_type
    while True:
        data = paddle_op(t)
        if data is not None:
            return frozenset(data.get("extras", ()))
        if not t.endswith("_grad"):
            return frozenset()
        t = t[: -len("_grad")]


def var_to_paddle_text(v: Variable) -> str:
    """One var, as Paddle's `Variable._to_readable_code()`."""
    type_str = _enum_text(v.type)
    is_param = v.desc.HasField("is_parameter") and v.desc.is_parameter
    if v.type in _TENSOR_TYPES:
        # A parameter Paddle re-creates from a file is trainable: stop_gradient False.
        stop = False if is_param else bool(v.desc.stop_gradient)
        dtype = v.data_type if v.data_type is not None else dtypes.VarType.BOOL
        text = (f"{v.name} : {type_str}.shape{tuple(v.shape)}.dtype({_enum_text(dtype)})"
                f".stop_gradient({stop})")
    else:
        text = f"{v.name} : {type_str})"
    text = ("trainable param " if is_param else "var ") + text
    if is_param or v.desc.persistable:
        text = "persist " + text
    return text


def _attr_value(op: Operator, attr: Any) -> str:
    t = attr.type
    if t == _attrs.BLOCK:
        return f"block[{attr.block_idx}]"
    if t == _attrs.BLOCKS:
        return f"blocks{list(attr.blocks_idx)}"
    if t == _attrs.VAR:
        return f"Var['{attr.var_name}']"
    if t == _attrs.VARS:
        return "Vars[" + ",".join(f"'{n}'" for n in attr.vars_name) + "]"
    return str(_attrs.decode(attr))


def op_to_paddle_text(op: Operator) -> str:
    """One op, as Paddle's `Operator._to_readable_code()` (op_callstack skipped)."""
    def slots(vars_) -> str:
        by_slot = {v.parameter: list(v.arguments) for v in vars_}   # a repeated slot: the last wins
        return "{" + ", ".join(f"{k}={by_slot[k]!r}" for k in sorted(by_slot, key=str.encode)) + "}"

    outputs, inputs = slots(op.desc.outputs), slots(op.desc.inputs)
    hidden = extra_attrs(op.type)
    by_name = {a.name: a for a in op.desc.attrs if a.name not in hidden}
    names = sorted(by_name, key=str.encode)
    parts = []
    for i, name in enumerate(names):
        if name == "op_callstack":
            continue
        # Paddle adds ", " after every attr but the last one, op_callstack included.
        parts.append(f"{name} = {_attr_value(op, by_name[name])}" + (", " if i != len(names) - 1 else ""))
    call = f"{op.type}(inputs={inputs}, {''.join(parts)})"
    return call if outputs == "{}" else f"{outputs} = {call}"


def block_to_paddle_text(block: Block) -> str:
    """One block, as Paddle's `Block._to_readable_code()`."""
    program = block.program
    backward = next((b.idx for b in program.blocks if b.forward_block_idx == block.idx), -1)
    lines = [f"{{ // block_idx:{block.idx}  parent_idx:{block.parent_idx}  "
             f"forward_idx:{block.forward_block_idx}  backward_idx:{backward}"]
    by_name = {v.name: v for v in block.vars.values()}
    # Each var and op one line, its names' control characters escaped (`base.names.printable`:
    # Paddle prints them raw, to the terminal's mercy); ordinary names print as Paddle prints them.
    lines.extend(f"    {printable(var_to_paddle_text(by_name[n]))}" for n in sorted(by_name, key=str.encode))
    lines.append("")
    lines.extend(f"    {printable(op_to_paddle_text(op))}" for op in block.ops)
    return "\n".join(lines) + "\n}"


def program_to_paddle_text(program: Program, block: int | None = None) -> str:
    """The text Paddle 3.3.1 prints for the program (`print(program)`, legacy IR),
    without print's final newline; with `block`, that block's only."""
    if block is not None:
        return block_to_paddle_text(program.block(block)) + "\n"
    return "".join(block_to_paddle_text(b) + "\n" for b in program.blocks)
