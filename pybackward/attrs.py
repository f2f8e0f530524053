"""Op attributes: decoding an `OpDesc.Attr` to Python and encoding back.

Decoding follows the attr's declared AttrType, so an attribute keeps its exact
wire type when copied (a LONG stays a LONG, a FLOAT64 stays a FLOAT64).
Encoding a fresh Python value picks the type Paddle would.
"""
from __future__ import annotations

from typing import Any

from ._proto import framework_pb2 as pb

AttrType = pb.AttrType


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
        return AttrType.BLOCK
    if isinstance(value, BlocksRef):
        return AttrType.BLOCKS
    if isinstance(value, bool):
        return AttrType.BOOLEAN
    if isinstance(value, Long):
        return AttrType.LONG
    if isinstance(value, int):
        return AttrType.INT if -2**31 <= value < 2**31 else AttrType.LONG
    if isinstance(value, Float64):
        return AttrType.FLOAT64
    if isinstance(value, float):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, (list, tuple)):
        if not value:
            return AttrType.INTS
        first = value[0]
        if all(isinstance(v, bool) for v in value):
            return AttrType.BOOLEANS
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return (AttrType.INTS if all(-2**31 <= v < 2**31 for v in value)
                    else AttrType.LONGS)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return AttrType.FLOAT64S if isinstance(first, Float64) else AttrType.FLOATS
        if all(isinstance(v, str) for v in value):
            return AttrType.STRINGS
    raise TypeError(f"cannot store a value of type {type(value).__name__} as an op attr: {value!r}")


def encode(attr: pb.OpDesc.Attr, name: str, value: Any, attr_type: int | None = None) -> None:
    """Fill `attr` (cleared first) with `value` under the given or inferred type."""
    attr.Clear()
    attr.name = name
    t = infer_type(value) if attr_type is None else attr_type
    attr.type = t
    if t == AttrType.INT:
        attr.i = int(value)
    elif t == AttrType.FLOAT:
        attr.f = float(value)
    elif t == AttrType.STRING:
        attr.s = value
    elif t == AttrType.INTS:
        attr.ints.extend(int(v) for v in value)
    elif t == AttrType.FLOATS:
        attr.floats.extend(float(v) for v in value)
    elif t == AttrType.STRINGS:
        attr.strings.extend(value)
    elif t == AttrType.BOOLEAN:
        attr.b = bool(value)
    elif t == AttrType.BOOLEANS:
        attr.bools.extend(bool(v) for v in value)
    elif t == AttrType.BLOCK:
        attr.block_idx = int(value)
    elif t == AttrType.LONG:
        attr.l = int(value)
    elif t == AttrType.BLOCKS:
        attr.blocks_idx.extend(int(v) for v in value)
    elif t == AttrType.LONGS:
        attr.longs.extend(int(v) for v in value)
    elif t == AttrType.FLOAT64S:
        attr.float64s.extend(float(v) for v in value)
    elif t == AttrType.VAR:
        attr.var_name = value
    elif t == AttrType.VARS:
        attr.vars_name.extend(value)
    elif t == AttrType.FLOAT64:
        attr.float64 = float(value)
    elif t in (AttrType.SCALAR, AttrType.SCALARS):
        values = [value] if t == AttrType.SCALAR else value
        for v in values:
            s = attr.scalar if t == AttrType.SCALAR else attr.scalars.add()
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
