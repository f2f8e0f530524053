"""Program bytes -> a checked `ProgramDesc`: the wire form's parse and its errors.

The model (`Program.from_bytes`, `io.loads`) reads bytes through here: parse
(binary protobuf, or protobuf text format), a clear error naming what the
bytes are instead (a PNG, a zip, a truncated file), and, once the views exist,
the per-op-type structure rules the op registry declares.
"""
from __future__ import annotations

import itertools
from typing import Any

from google.protobuf import message as _message
from google.protobuf import text_format

from .._proto import framework_pb2 as pb
from ..base.errors import ArgumentTypeError, ProgramFileError, where
from ..ops import registry

#: protobuf cannot serialise a message of 2 GiB or more.
MAX_PROGRAM_BYTES = 2**31 - 1


def parse_program_desc(data: Any, source: str | None = None, text: bool = False,
                       max_bytes: int = MAX_PROGRAM_BYTES) -> tuple[pb.ProgramDesc, str]:
    """Parse program bytes (binary, or text format if `text`) into a
    `ProgramDesc`; returns it and the label errors name (`source` or "<bytes>")."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        hint = (" (pass a path to load(), or text.encode() with text=True)" if isinstance(data, str) else "")
        raise ArgumentTypeError(f"loads() takes bytes, not {type(data).__name__}{hint}")
    if source is not None and not isinstance(source, str):
        raise ArgumentTypeError(f"loads(source=...) takes a str label, not {type(source).__name__}")
    label = source or "<bytes>"
    desc = pb.ProgramDesc()
    if text:
        check_text_lines(data, label)
        try:
            text_format.Parse(data.decode("utf-8"), desc)
        except UnicodeDecodeError as e:
            raise ProgramFileError(f"{label}: not protobuf text format: not UTF-8 at byte {e.start}") from None
        except text_format.ParseError as e:
            raise ProgramFileError(f"{label}: not a ProgramDesc in text format: {_cut(one_line(e))}") from None
    else:
        if len(data) > max_bytes:
            raise ProgramFileError(f"{label}: {len(data)} bytes is past protobuf's 2 GiB message limit")
        try:
            desc.ParseFromString(data)
        except (_message.DecodeError, RecursionError, ValueError) as e:
            raise ProgramFileError(f"{label}: not a valid ProgramDesc protobuf ({describe_decode_error(data, e)})") from None
    if not desc.blocks and len(data) > 0:
        raise ProgramFileError(f"{label}: not a ProgramDesc: {len(data)} bytes with no program blocks "
                               "(a protobuf of another message type?)")
    if not data:
        raise ProgramFileError(f"{label}: empty file")
    return desc, label


#: The longest line the text-format reader takes. protobuf's text tokenizer matches a string
#: literal (which cannot span lines) with a backtracking pattern that takes ~120 bytes of memory
#: a byte of escapes: 8 MB of them took 570 MB to 970 MB. A line of this length costs ~120 MB;
#: a program protobuf writes in text format puts each field on a line of its own.
MAX_TEXT_LINE = 1 << 20


def check_text_lines(data: bytes, label: str) -> None:
    """Refuse text-format bytes with a line longer than MAX_TEXT_LINE, before they are parsed
    (a linear scan for line breaks, in C)."""
    start, n = 0, len(data)
    line = 1
    while start < n:
        end = data.find(b"\n", start)
        if end < 0:
            end = n
        if end - start > MAX_TEXT_LINE:
            raise ProgramFileError(f"{label}: line {line} is {end - start} bytes long; pybackward reads text "
                                   f"format lines of at most {MAX_TEXT_LINE} bytes (write the program in "
                                   "binary for longer strings)")
        start, line = end + 1, line + 1


def _cut(text: str, limit: int = 300) -> str:
    """A message quoting the file cut in the middle (protobuf's quotes a whole token)."""
    return text if len(text) <= limit else f"{text[:limit // 2]} ... {text[-(limit // 2):]}"


def length_delimited(tag: int, data: bytes, size: int | None = None) -> bytes:
    """A length-delimited protobuf field: `tag` (one byte: field number << 3 | 2,
    for fields 1-15), the varint length, then `data`; `size` gives the length
    when the field's bytes follow in other pieces (`data` then b"")."""
    n = len(data) if size is None else size
    if n < 0x80:
        return bytes((tag, n)) + data
    head = bytearray((tag,))
    while n >= 0x80:
        head.append((n & 0x7F) | 0x80)
        n >>= 7
    head.append(n)
    return bytes(head) + data


#: OpDesc's inputs (1), outputs (2) and type (3) field tags: what precedes its attrs
_HEAD_TAGS = frozenset((0x0A, 0x12, 0x1A))


def attrs_tail(data: bytes) -> bytes:
    """The wire bytes of an OpDesc's attrs (and anything after them), from
    the OpDesc's serialization: all but the leading inputs, outputs and type
    fields (upb writes fields in field-number order: 1 inputs, 2 outputs,
    3 type, 4 attrs). Equal tails: equal attr lists."""
    # (the common case first: every leading field shorter than 128 bytes, a
    # one-byte length; an op with nothing after its type runs off the end)
    pos = 0
    try:
        while data[pos] in _HEAD_TAGS:
            n = data[pos + 1]
            if n >= 0x80:
                break
            pos += 2 + n
        else:
            return data[pos:]
    except IndexError:
        pass
    pos, n = 0, len(data)
    while pos < n and data[pos] in (0x0A, 0x12, 0x1A):
        pos += 1
        length = shift = 0
        while True:
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        pos += length
    return data[pos:]


def check_op_structure(program: Any, types: list[list[str | None]] | None = None) -> None:
    """Run the structural rules the registry declares per op type (`OpDef.structure_check`).
    `types`: the ops' types per block as the loader read them (None: not read)."""
    checks: dict[str, object] = {}
    for bi, b in enumerate(program.blocks):
        known = types[bi] if types is not None and bi < len(types) else ()
        for op, op_type in zip(b.ops, itertools.chain(known, itertools.repeat(None))):
            if op_type is None:
                op_type = op.type
            check = checks.get(op_type, _UNSEEN)
            if check is _UNSEEN:
                opdef = registry.find(op_type)
                check = checks[op_type] = opdef.structure_check if opdef is not None else None
            if check is not None:
                check(op)


def check_block_attrs(program: Any, found: list[tuple[int, int, tuple[str, ...]]]) -> None:
    """Refuse a BLOCK / BLOCKS attr on an op whose type carries none
    (`OpDef.block_attrs`): the gradient pass makes a grad block for every
    op with a `sub_block`, so a `where` carrying one would get grad ops that
    read vars nothing declares. `found`: validation's (block, op, attr names).
    Types the registry does not know, and custom ones, are not judged."""
    for b, i, names in found:
        op = program.blocks[b].ops[i]
        opdef = registry.find(op.type)
        if opdef is None or opdef.family == "custom":
            continue
        for name in names:
            if name not in opdef.block_attrs:
                carried = (f"only {', '.join(repr(n) for n in opdef.block_attrs)}" if opdef.block_attrs
                           else "none")
                raise ProgramFileError(f"{where(program.source, b, i, op.type)}: attr '{name}' names a "
                                       f"block, but a {op.type} op runs no such block (its block attrs: "
                                       f"{carried})")


_UNSEEN = object()


def one_line(e: Exception) -> str:
    """An exception's message on one line (protobuf's span several)."""
    return " ".join(str(e).split())


def describe_decode_error(data: bytes, e: Exception) -> str:
    """What bytes that do not parse as a ProgramDesc are, as far as it can be told."""
    msg = one_line(e)
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "this is a PNG image"
    if data[:2] in (b"PK", b"\x1f\x8b"):
        return "this is a zip/gzip archive"
    if "required" in msg:
        return f"required fields missing: {msg}"
    if isinstance(e, RecursionError):
        return "nesting too deep"
    return f"truncated or corrupt: {msg}" if msg else "truncated or corrupt"
