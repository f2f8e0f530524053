"""Op attributes: decoding an `OpDesc.Attr` to Python and encoding back.

Decoding follows the attr's declared AttrType, so an attribute keeps its exact
wire type when copied (a LONG stays a LONG, a FLOAT64 stays a FLOAT64).
Encoding a fresh Python value picks the type Paddle would.
"""
from __future__ import annotations

from typing import Any

from .._proto import framework_pb2 as pb

AttrType = pb.AttrType
# Plain ints: comparing against `pb.AttrType.X` costs an enum lookup per use.
(INT, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, BOOLEANS, BLOCK, LONG, BLOCKS, LONGS,
 FLOAT64S, VAR, VARS, FLOAT64, SCALAR, SCALARS) = range(18)


class BlockRef(int):
    """A BLOCK attr value: the index of a block (an int that remembers it is one)."""


class BlocksRef(list):
    """A BLOCKS attr value: a list of block indices."""


class Float64(float):
    """A float meant to be stored as FLOAT64 rather than FLOAT."""


class Long(int):
    """An int meant to be stored as LONG rather than INT."""


def _scalar(s: pb.Scalar) -> Any:
    if s.type == pb.Scalar.BOOLEAN:
        return s.b
    if s.type == pb.Scalar.LONG:
        return s.i
    if s.type == pb.Scalar.FLOAT64:
        return s.r
    return complex(s.c.r, s.c.i)


_DECODE = {
    AttrType.INT: lambda a: a.i,
    AttrType.FLOAT: lambda a: a.f,
    AttrType.STRING: lambda a: a.s,
    AttrType.INTS: lambda a: list(a.ints),
    AttrType.FLOATS: lambda a: list(a.floats),
    AttrType.STRINGS: lambda a: list(a.strings),
    AttrType.BOOLEAN: lambda a: a.b,
    AttrType.BOOLEANS: lambda a: list(a.bools),
    AttrType.BLOCK: lambda a: BlockRef(a.block_idx),
    AttrType.LONG: lambda a: a.l,
    AttrType.BLOCKS: lambda a: BlocksRef(a.blocks_idx),
    AttrType.LONGS: lambda a: list(a.longs),
    AttrType.FLOAT64S: lambda a: list(a.float64s),
    AttrType.VAR: lambda a: a.var_name,
    AttrType.VARS: lambda a: list(a.vars_name),
    AttrType.FLOAT64: lambda a: a.float64,
    AttrType.SCALAR: lambda a: _scalar(a.scalar),
    AttrType.SCALARS: lambda a: [_scalar(s) for s in a.scalars],
}


def decode(attr: pb.OpDesc.Attr) -> Any:
    """The Python value of an attr, by its declared AttrType."""
    try:
        return _DECODE[attr.type](attr)
    except KeyError:
        raise ValueError(f"attr '{attr.name}' has unknown AttrType {attr.type}") from None


def infer_type(value: Any) -> int:
    """The AttrType Paddle would give a Python value."""
    if isinstance(value, BlockRef):
        return BLOCK
    if isinstance(value, BlocksRef):
        return BLOCKS
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, Long):
        return LONG
    if isinstance(value, int):
        return INT if -2**31 <= value < 2**31 else LONG
    if isinstance(value, Float64):
        return FLOAT64
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STRING
    if isinstance(value, (list, tuple)):
        if not value:
            return INTS
        first = value[0]
        if all(isinstance(v, bool) for v in value):
            return BOOLEANS
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return (INTS if all(-2**31 <= v < 2**31 for v in value)
                    else LONGS)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return FLOAT64S if isinstance(first, Float64) else FLOATS
        if all(isinstance(v, str) for v in value):
            return STRINGS
    raise TypeError(f"cannot store a value of type {type(value).__name__} as an op attr: {value!r}")


def encode(attr: pb.OpDesc.Attr, name: str, value: Any, attr_type: int | None = None) -> None:
    """Fill `attr` (cleared first) with `value` under the given or inferred type."""
    attr.Clear()
    attr.name = name
    t = infer_type(value) if attr_type is None else attr_type
    attr.type = t
    if t == INT:
        attr.i = int(value)
    elif t == FLOAT:
        attr.f = float(value)
    elif t == STRING:
        attr.s = value
    elif t == INTS:
        attr.ints.extend(int(v) for v in value)
    elif t == FLOATS:
        attr.floats.extend(float(v) for v in value)
    elif t == STRINGS:
        attr.strings.extend(value)
    elif t == BOOLEAN:
        attr.b = bool(value)
    elif t == BOOLEANS:
        attr.bools.extend(bool(v) for v in value)
    elif t == BLOCK:
        attr.block_idx = int(value)
    elif t == LONG:
        attr.l = int(value)
    elif t == BLOCKS:
        attr.blocks_idx.extend(int(v) for v in value)
    elif t == LONGS:
        attr.longs.extend(int(v) for v in value)
    elif t == FLOAT64S:
        attr.float64s.extend(float(v) for v in value)
    elif t == VAR:
        attr.var_name = value
    elif t == VARS:
        attr.vars_name.extend(value)
    elif t == FLOAT64:
        attr.float64 = float(value)
    elif t in (SCALAR, SCALARS):
        values = [value] if t == SCALAR else value
        for v in values:
            s = attr.scalar if t == SCALAR else attr.scalars.add()
            if isinstance(v, bool):
                s.type, s.b = pb.Scalar.BOOLEAN, v
            elif isinstance(v, int):
                s.type, s.i = pb.Scalar.LONG, v
            elif isinstance(v, float):
                s.type, s.r = pb.Scalar.FLOAT64, v
            else:
                s.type = pb.Scalar.COMPLEX128
                s.c.r, s.c.i = complex(v).real, complex(v).imag
    else:
        raise ValueError(f"unknown AttrType {t} for attr '{name}'")
