"""Loading and saving programs: binary protobuf or protobuf text format.

`load` parses and validates (see `validate.py`), turning every parse failure
into a `ProgramFileError` that names the file. `save` writes atomically: a
temporary file in the target directory, flushed and fsynced, then renamed
over the target, so the path holds the old file or the complete new one and
never a partial program. Binary round trips are byte-identical: the protobuf
runtime keeps field order and unknown fields.
"""
from __future__ import annotations

import os
from typing import Union

from google.protobuf import message as _message
from google.protobuf import text_format
from google.protobuf import unknown_fields

from .._proto import framework_pb2 as pb
from ..base import files
from ..base.errors import ArgumentTypeError, OutputError, ProgramFileError
from ..base.files import TEMP_PREFIX, TEMP_SUFFIX, check_regular_input, write_atomic  # noqa: F401  (public here too)
from ..base.suffixes import check_program_path
from .program import Program, read_program
# MAX_PROGRAM_BYTES: protobuf's 2 GiB limit; `loads` passes this module's value
# on, so a test may lower it here. check_op_structure: public here too.
from .wire import MAX_PROGRAM_BYTES, check_op_structure, length_delimited, one_line  # noqa: F401

PathLike = Union[str, os.PathLike]

#: Suffixes read and written as protobuf text format.
TEXT_SUFFIXES = (".pbtxt", ".txt", ".prototxt")


def is_text_path(path: PathLike) -> bool:
    return str(path).lower().endswith(TEXT_SUFFIXES)


def load(source: Union[PathLike, bytes], check_vars: bool = True, text: bool | None = None) -> Program:
    """Load a program from a path or from bytes; text format for `.pbtxt`/`.txt`.

    Only regular files are read: a FIFO, a device (`/dev/zero`) or a socket is
    refused without blocking on it (see `read_input_file`).
    """
    name = files.input_source(source, text)
    if isinstance(name, bytes):
        return loads(name, source=None, check_vars=check_vars, text=bool(text))
    data = read_input_file(name, ProgramFileError, "program file")
    return loads(data, source=name, check_vars=check_vars,
                 text=is_text_path(name) if text is None else text)


def read_input_file(path: PathLike, error: type = ProgramFileError, what: str = "program file",
                    limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (default
    MAX_PROGRAM_BYTES, read from this module so a test may lower it);
    anything else raises `error` naming the file. See `base.files`."""
    limit = MAX_PROGRAM_BYTES if limit is None else limit
    return files.read_input_file(path, error, what, limit,
                                 "is past protobuf's 2 GiB message limit" if limit == MAX_PROGRAM_BYTES else None)


def loads(data: bytes, source: str | None = None, check_vars: bool = True, text: bool = False) -> Program:
    """Parse and validate program bytes (binary, or text format if `text`)."""
    return read_program(data, source=source, check_vars=check_vars, text=text, max_bytes=MAX_PROGRAM_BYTES)


def dumps(program: Program, text: bool = False) -> bytes:
    """The program as bytes: binary protobuf, or text format if `text`."""
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"dumps() takes a Program, not {type(program).__name__}")
    if text:
        return text_format.MessageToString(program.desc).encode("utf-8")
    try:
        return program.desc.SerializeToString()
    except _message.EncodeError as e:
        raise ProgramFileError(f"{program.source or '<program>'}: cannot serialise: {one_line(e)}") from None
    except ValueError as e:  # upb: message too large
        raise ProgramFileError(f"{program.source or '<program>'}: cannot serialise "
                               f"(past protobuf's 2 GiB limit?): {one_line(e)}") from None


def save(program: Program, path: PathLike, text: bool | None = None) -> None:
    """Write the program atomically; text format for `.pbtxt`/`.txt` unless told."""
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"save() takes a Program, not {type(program).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"save() takes a path (str or os.PathLike), not {type(path).__name__}")
    if text is not None and not isinstance(text, bool):
        raise ArgumentTypeError(f"save(text=...) takes True, False or None, not {type(text).__name__}")
    check_program_path(path)
    text = is_text_path(path) if text is None else text
    data = None if text else serialised_pieces(program)
    if data is None:
        data = dumps(program, text)
    try:
        write_atomic(path, data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror or e}") from None


#: A program with at least this many ops and vars is saved piece by piece.
PIECEWISE_MIN_ITEMS = 50_000


def serialised_pieces(program: Program, min_items: int | None = None) -> list[bytes] | None:
    """The program's binary serialisation as a list of pieces whose
    concatenation is `dumps(program)` byte for byte, for a program of at
    least `min_items` ops and vars (default `PIECEWISE_MIN_ITEMS`); None for
    a smaller one, or one with unknown fields on a program or block message.

    upb serialises a whole message into one growing buffer and then copies it
    into a bytes object: ~2-3x the output's size on top of the program while
    `save` runs, the peak of a large `append`. Pieces of one op or var each
    cost their own size once. Fields go in field-number order, as upb writes
    them (idx, parent_idx, vars, ops, forward_block_idx; blocks, version,
    op_version_map); required fields are checked per piece as upb checks them."""
    desc = program.desc
    limit = PIECEWISE_MIN_ITEMS if min_items is None else min_items
    if sum(len(b.ops) + len(b.vars) for b in desc.blocks) < limit or _unknown_fields(desc):
        return None
    pieces: list[bytes] = []
    total = 0
    try:
        for b in desc.blocks:
            if _unknown_fields(b):
                return None
            head = pb.BlockDesc(idx=b.idx, parent_idx=b.parent_idx).SerializeToString()
            body = [head]
            body.extend([length_delimited(0x1A, v.SerializeToString()) for v in b.vars])
            body.extend([length_delimited(0x22, op.SerializeToString()) for op in b.ops])
            if b.HasField("forward_block_idx"):
                body.append(pb.BlockDesc(forward_block_idx=b.forward_block_idx).SerializePartialToString())
            size = sum(map(len, body))
            pieces.append(length_delimited(0x0A, b"", size))
            pieces.extend(body)
            total += len(pieces[-len(body) - 1]) + size
        rest = pb.ProgramDesc()
        for name in ("version", "op_version_map"):
            if desc.HasField(name):
                getattr(rest, name).CopyFrom(getattr(desc, name))
        pieces.append(rest.SerializeToString())
    except _message.EncodeError as e:
        raise ProgramFileError(f"{program.source or '<program>'}: cannot serialise: {one_line(e)}") from None
    if total + len(pieces[-1]) > MAX_PROGRAM_BYTES:
        raise ProgramFileError(f"{program.source or '<program>'}: cannot serialise (past protobuf's 2 GiB "
                               f"limit): {total + len(pieces[-1])} bytes")
    return pieces


def _unknown_fields(message) -> bool:
    return len(unknown_fields.UnknownFieldSet(message)) > 0
