"""What Paddle 3.3.1's `print(program)` shows for a PIR program, character for character.

    print(pybackward.pir.to_text(prog))    # == print(program) in Paddle

The format is MLIR's generic form as Paddle prints it: one op a line,
`(%3) = "pd_op.matmul" (%1, %2) {transpose_x:false,...} : (types) -> types`,
values numbered %0, %1, ... in print order (not the file's ids), attributes
and result attributes merged and sorted by name, 4 spaces of indent per
nesting level. `pd_op.if`, `pd_op.while` and `pd_op.pylayer` have their own
layouts, and `cf.stack_create` names its results %stack_N / %inlet_N /
%outlet_N. Floats print as C++ streams print them (6 significant digits).
The goldens are testdata/pir/*.txt, printed by Paddle.

Where Paddle's print depends on state this file does not hold it is not
followed: attributes Paddle interns (a -0.0 that prints as 0 because a 0.0
was made first in the process), and block-argument attributes, which the
file format does not keep (so they print as `{}`, as in a program Paddle
has just read).

Names (string attributes, op names, keyword-argument keys, type tags) are
shown with the control characters a terminal acts on escaped
(`base.names.printable`; tabs and DEL kept, as Paddle prints them): a parameter named
"w\\x1b[2K\\rwrote out.pb" prints as that text, where Paddle would print the
raw bytes. Every other name prints exactly as Paddle prints it.
"""
from __future__ import annotations

from typing import Any

from ..base.names import printable
from .floats import c_format
from .model import Block, Operation, Program, Value
from .types import (DTYPE_NAMES, LAYOUTS, NULL_TYPE, PLACE_KINDS, Attr, DenseTensorArrayType, DenseTensorType,
                    OpaqueType, ScalarType, SelectedRowsType, SparseCooTensorType, SparseCsrTensorType, Type,
                    VectorType)

#: How Paddle prints each scalar type.
SCALAR_PRINT = {"0.t_bool": "b", "0.t_bf16": "bf16", "0.t_f16": "f16", "0.t_f32": "f32", "0.t_f64": "f64",
                "0.t_i8": "i8", "0.t_ui8": "u8", "0.t_i16": "i16", "0.t_i32": "i32", "0.t_i64": "i64",
                "0.t_index": "index", "0.t_c64": "c64", "0.t_c128": "c128", "0.t_f8e4m3fn": "f8e4m3fn",
                "0.t_f8e5m2": "f8e5m2"}
#: Attributes the printer leaves out.
HIDDEN_ATTRS = frozenset({"op_callstack", "sym_shape_str"})
INDENT = "    "


def _dims(dims: tuple[int, ...]) -> str:
    return "".join(f"{d}x" for d in dims)


def type_text(t: Type | None) -> str:
    """A type as Paddle prints it: tensor<2x-1xf32>, vec[...], cf.stack, <<NULL TYPE>>."""
    if t is None or t is NULL_TYPE:
        return "<<NULL TYPE>>"
    if isinstance(t, ScalarType):
        return SCALAR_PRINT[t.tag]
    if isinstance(t, SelectedRowsType):
        return f"pd_op.selectedrows<{_dims(t.dims)}{type_text(t.dtype_type)}>"
    if isinstance(t, DenseTensorType):
        return f"tensor<{_dims(t.dims)}{type_text(t.dtype_type)}>"
    if isinstance(t, VectorType):
        return "vec[" + ",".join(type_text(x) for x in t.items) + "]"
    if isinstance(t, DenseTensorArrayType):
        return f"pd_op.tensor_array<{type_text(t.dtype_type)}>"
    if isinstance(t, SparseCooTensorType):
        return f"pd_op.sparsecootensor<{_dims(t.dims)}{type_text(t.dtype_type)}>"
    if isinstance(t, SparseCsrTensorType):
        return "pd_op."          # Paddle 3.3.1's printer has no case for it: just the dialect
    if isinstance(t, OpaqueType) and t.tag.startswith("2."):
        return "cf." + t.tag[4:]
    return f"pd_dist.{t.tag[4:]}"


def _complex(re: Any, im: Any, f32: bool) -> str:
    return f"real:{c_format(re, f32)} imag:{c_format(im, f32)}"


def attr_text(a: Attr) -> str:
    """An attribute value as Paddle prints it."""
    tag, v = a.tag, a.value
    if tag in ("0.a_str", "0.a_tensorname"):
        return '"' + _shown(v).replace('"', '\\"') + '"'
    if tag == "0.a_bool":
        return "true" if v else "false"
    if tag == "0.a_f32":
        return c_format(v, f32=True)
    if tag == "0.a_f64":
        return c_format(v)
    if tag in ("0.a_i32", "0.a_i64", "0.a_index"):
        return str(v)
    if tag == "0.a_array":
        return "[" + ",".join(attr_text(x) for x in v) + "]"
    if tag == "0.a_type":
        return type_text(v)
    if tag in ("0.a_c64", "0.a_c128"):
        return _complex(v[0], v[1], tag == "0.a_c64")
    if tag == "1.a_intarray":
        return "[" + ",".join(str(x) for x in v) + "]"
    if tag == "1.a_dtype":
        return DTYPE_NAMES[v]
    if tag == "1.a_layout":
        return LAYOUTS[v.upper()]
    if tag == "1.a_place":
        return _place(*v)
    if tag == "1.a_scalar":
        return _scalar(v)
    if tag == "4.a_process_mesh":
        return f"mesh_shape:[{','.join(map(str, v[0]))}],process_ids:[{','.join(map(str, v[1]))}]"
    return "<#AttrNotImplemented>"


def _place(kind: int, device: int, device_type: str) -> str:
    name = PLACE_KINDS[kind]
    if name in ("cpu", "gpu_pinned", "xpu_pinned"):
        return f"Place({name})"
    if kind == 9:
        return f"Place({_shown(device_type)}:{device})"
    return f"Place({name}:{device})"


def _scalar(v: tuple) -> str:
    dtype = v[0]
    if dtype == "bool":
        return "true" if v[1] else "false"
    if dtype in ("float32", "float64"):
        return c_format(v[1], dtype == "float32")
    if dtype == "complex64":
        return _complex(v[1], v[2], True)
    if dtype == "complex128":
        return _complex(v[1], v[1], False)   # Paddle 3.3.1 reads the real part into both
    return str(v[1])


def _shown(s: str) -> str:
    """`s` with what a terminal would act on escaped (`base.names.printable`), tabs and DEL
    kept: they erase and move nothing, and Paddle's print of such a name has them raw."""
    if s.isascii() and s.isprintable():
        return s
    return "\t".join("\x7f".join(printable(p) for p in part.split("\x7f")) for part in s.split("\t"))


def _type(t: Type | None) -> str:
    """`type_text`, its tags from the file escaped (`base.names.printable`) for the terminal."""
    return _shown(type_text(t))


class _Printer:
    """One print: value names are given in print order, as Paddle's IrPrinter gives them."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.results = 0
        self.args = 0
        self.stacks = 0
        self.out: list[str] = []

    def value(self, v: Value | None) -> str:
        if v is None:
            return "<<NULL VALUE>>"
        name = self.names.get(id(v))
        if name is not None:
            return name
        if v.is_block_arg:
            if v.key is not None:
                name = f"%kwarg_{_shown(v.key)}"
            else:
                name = f"%arg_{self.args}"
                self.args += 1
            self.names[id(v)] = name
            return name + " {}"
        name = f"%{self.results}"
        self.results += 1
        self.names[id(v)] = name
        return name

    def attrs(self, op: Operation) -> str:
        merged = {**op.attrs, **op.result_attrs}
        return " {" + ",".join(f"{_shown(n)}:{attr_text(merged[n])}" for n in sorted(merged)
                               if n not in HIDDEN_ATTRS) + "}"

    def head(self, op: Operation) -> str:
        """`(%r...) = "name" (%a...) {attrs}`"""
        if op.name == "cf.stack_create" and len(op.results) == 3 and id(op.results[0]) not in self.names:
            for v, kind in zip(op.results, ("stack", "inlet", "outlet")):
                self.names[id(v)] = f"%{kind}_{self.stacks}"
            self.stacks += 1
        results = ", ".join(self.value(v) for v in op.results)
        operands = ", ".join(self.value(v) for v in op.operands)
        return f'({results}) = "{_shown(op.name)}" ({operands}){self.attrs(op)}'

    def signature(self, op: Operation) -> str:
        ins = ", ".join(_type(v.type) if v is not None else "<<NULL TYPE>>" for v in op.operands)
        outs = ", ".join(_type(v.type) for v in op.results)
        return f" : ({ins}) -> {outs}"

    def program(self, program: Program) -> str:
        """The whole program, iteratively: `work` is a stack of strings to write and
        (op, indent) pairs to expand, so nesting costs no Python stack."""
        work: list[Any] = list(reversed(self._block_items(program.block, "")))
        out = self.out
        while work:
            item = work.pop()
            if isinstance(item, str):
                out.append(item)
            else:
                work.extend(reversed(self._op(*item)))
        return "".join(out)

    def _block_items(self, block: Block, indent: str) -> list[Any]:
        """A block in braces, as Paddle's PrintBlock writes it."""
        inner = indent + INDENT
        items: list[Any] = [indent + "{\n"]
        if block.kwargs:
            items.append(inner + "^kw:\n")
            for v in block.kwargs:
                items.append(inner + INDENT + self.value(v) + "\n")
        for op in block.ops:
            items += [(op, inner), "\n"]
        items.append(indent + "}\n")
        return items

    def _op(self, op: Operation, indent: str) -> list[Any]:
        """Write the op's own line(s) now; return what follows it (nested ops) in order."""
        name = op.name
        inner = indent + INDENT
        items: list[Any] = []
        if name in ("pd_op.if", "pd_op.pylayer") and op.regions:
            outs = ", ".join(_type(v.type) for v in op.results)
            self.out.append(f"{indent}{self.head(op)} -> {outs} {{\n")
            for k, region in enumerate(op.regions):
                if k:
                    items.append(indent + "} else {\n")
                for block in region.blocks:
                    for nested in block.ops:
                        items += [(nested, inner), "\n"]
            items.append(indent + "}")
            return items
        if name == "pd_op.while" and op.regions and op.operands:
            results = ", ".join(self.value(v) for v in op.results)
            cond = self.value(op.operands[0])
            inputs = ", ".join(self.value(v) for v in op.operands[1:])
            body = op.regions[0].blocks[0]
            args = ", ".join(self.value(v) for v in body.args)
            self.out.append(f'{indent}({results}) = "{_shown(name)}" (cond={cond}, inputs={inputs}) {{ \n'
                            f'{indent}^{args}\n')
            for nested in body.ops:
                items += [(nested, inner), "\n"]
            items.append(indent + "}")
            return items
        self.out.append(indent + self.head(op) + self.signature(op))
        if op.regions:
            items.append("\n")
            for region in op.regions:
                for block in region.blocks:
                    items += self._block_items(block, indent)
        return items


def to_text(program: Program) -> str:
    """The program as Paddle's `str(program)` gives it (ends with a newline)."""
    return _Printer().program(program)
