"""Compare PIR programs for what they mean, not how a file happened to spell them.

Two saves of one program by Paddle can differ in bytes: the result
attributes (`OA`) and the attributes of builtin ops come out of an unordered
map, and a file that was upgraded or edited numbers its values differently.
`canonical(prog)` is one line per op (and per block) with the values
renumbered in walk order (results %1, %2, ..., block arguments %-1, %-2, ...),
attributes and result attributes sorted by name, types and attribute data
written exactly (tag and value, floats in full). `equal(a, b)` compares
those lines; `diff(a, b)` gives a unified diff of them to read.
"""
from __future__ import annotations

import json
from .model import Block, Operation, Program, Value, iter_write_order
from .floats import to_f32
from .text import type_text
from .types import LAYOUTS, Attr, DenseTensorType, OpaqueType, Type

_SHORT = {"0.": "", "1.": "pd.", "2.": "cf.", "4.": "dist."}


def type_key(t: Type) -> str:
    """A type, exactly and readably: tensor<2x-1xf32>, plus what differs from Paddle's defaults."""
    text = type_text(t)
    if isinstance(t, DenseTensorType) and (LAYOUTS[t.layout.upper()] != "NCHW" or t.lod or t.offset):
        text += f"{{{LAYOUTS[t.layout.upper()]},lod={[list(x) for x in t.lod]},offset={t.offset}}}"
    elif isinstance(t, OpaqueType) and t.data is not None:
        text += json.dumps(t.data, sort_keys=True, separators=(",", ":"))
    elif type(t).__name__ in ("SparseCooTensorType", "SparseCsrTensorType", "DenseTensorArrayType"):
        text += json.dumps(t.to_json()["D"], sort_keys=True, separators=(",", ":"))
    return text


#: Paddle keeps an `a_scalar` as the builtin attribute of its dtype (and writes it so).
_SCALAR_AS = {"float32": "0.a_f32", "float64": "0.a_f64", "int32": "0.a_i32", "int64": "0.a_i64",
              "bool": "0.a_bool", "complex64": "0.a_c64", "complex128": "0.a_c128"}


def attr_key(a: Attr) -> str:
    """An attribute, exactly, as Paddle holds it: its tag (short) and its data.

    What Paddle cannot tell apart is made equal: an `a_scalar` is the builtin
    attribute of its dtype, an `a_f32` (or complex64 part) is compared as a
    float32, 3 and 3.0 are the same double, -0.0 is 0.0 (Paddle interns them
    as one attribute), a layout is compared by the name Paddle prints.
    """
    tag, v = a.tag, a.value
    if tag == "1.a_scalar":
        dtype = v[0]
        tag = _SCALAR_AS[dtype]
        v = v[1] if len(v) == 2 else (v[1], v[1] if dtype == "complex128" else v[2])
    name = _SHORT.get(tag[:2], tag[:2]) + tag[4:]
    if tag == "0.a_array":
        return "[" + ",".join(attr_key(x) for x in v) + "]"
    if tag == "0.a_type":
        return f"type:{type_key(v)}"
    if a.vd is not None:
        return f"{name}:{'nan' if v != v else ('inf' if v > 0 else '-inf')}"
    if tag in ("0.a_f32", "0.a_f64"):
        return f"{name}:{_float(v, tag == '0.a_f32')}"
    if tag in ("0.a_c64", "0.a_c128"):
        return f"{name}:[{_float(v[0], tag == '0.a_c64')},{_float(v[1], tag == '0.a_c64')}]"
    if tag == "1.a_layout":
        return f"{name}:{LAYOUTS[v.upper()]}"
    return f"{name}:{json.dumps(list(v) if isinstance(v, tuple) else v, ensure_ascii=False)}"


def _float(x: float, f32: bool) -> str:
    x = float(x)
    if f32:
        try:
            x = to_f32(x)
        except OverflowError:
            return "inf" if x > 0 else "-inf"
    return repr(x + 0.0)        # -0.0 + 0.0 == 0.0


def _attrs(attrs: dict[str, Attr]) -> str:
    return ", ".join(f"{n}={attr_key(attrs[n])}" for n in sorted(attrs))


def canonical(program: Program) -> list[str]:
    """The program as lines that two saves of the same program share (see the module doc)."""
    ids: dict[int, int] = {}
    next_id, next_arg = 1, -1
    lines = [f"trainable: {json.dumps(program.trainable)}"]
    depth = 0

    def name(v: Value | None) -> str:
        if v is None:
            return "null"
        n = ids.get(id(v))
        return f"%{n}" if n is not None else "%<undefined>"

    for kind, x in iter_write_order(program):
        if kind == "block":
            block: Block = x
            for v in block.args + block.kwargs:
                ids[id(v)] = next_arg
                next_arg -= 1
            args = ", ".join(f"{name(v)}{'(' + v.key + ')' if v.key else ''}: {type_key(v.type)}"
                             for v in block.args + block.kwargs)
            lines.append(f"{'  ' * depth}block ({args})")
            depth += 1
        elif kind == "end":
            depth -= 1
        else:
            op: Operation = x
            for v in op.results:
                ids[id(v)] = next_id
                next_id += 1
            results = ", ".join(f"{name(v)}: {type_key(v.type)}" for v in op.results)
            line = f"{'  ' * depth}{op.name}({', '.join(name(v) for v in op.operands)}) -> ({results})"
            if op.attrs:
                line += f" {{{_attrs(op.attrs)}}}"
            if op.result_attrs:
                line += f" [{_attrs(op.result_attrs)}]"
            lines.append(line)
    return lines


def equal(a: Program, b: Program) -> bool:
    """Whether the two programs are the same program (canonically)."""
    return canonical(a) == canonical(b)


def diff(a: Program, b: Program, names: tuple[str, str] = ("a", "b"), context: int = 2) -> list[str]:
    """A unified diff of the canonical lines (empty when the programs are equal)."""
    import difflib          # here: the diff alone needs it (start-up of the commands that only compare)
    return list(difflib.unified_diff(canonical(a), canonical(b), names[0], names[1], n=context, lineterm=""))
