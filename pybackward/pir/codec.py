"""PIR program files: read (`load`, `loads`) and write (`dumps`, `save`).

    prog = pybackward.pir.load("model.json")      # checked; versions 1-3 upgraded to 4
    pybackward.pir.save(prog, "copy.json")        # Paddle's bytes for a file Paddle wrote
    pybackward.pir.save(prog, "copy.json", readable=True)   # Paddle's readable=True form

`is_pir_bytes` (module `sniff`) tells PIR from legacy files by content.
Every problem with an input raises `ProgramFileError` with one line naming the
file, the op and the value; output is written atomically.
"""
from __future__ import annotations

import os
from typing import Union

from ..base.errors import ProgramFileError
from ..base.files import read_input_file, write_atomic
from .model import Program
from .reader import MAX_DEPTH, MAX_PIR_BYTES, read_program
from .writer import dumps_program

PathLike = Union[str, "os.PathLike[str]"]

def loads(data: bytes, source: str | None = None, *, max_bytes: int = MAX_PIR_BYTES, max_depth: int = MAX_DEPTH,
          allow_unknown_ops: bool = False) -> Program:
    """Read a PIR program from bytes. `source` names it in error messages.

    `max_bytes` bounds the input (JSON takes about ten times its size in
    memory), `max_depth` how deep ops may nest in regions; `allow_unknown_ops`
    accepts op names Paddle 3.3.1 does not register (custom ops), which are
    otherwise refused.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProgramFileError(f"{source or '<data>'}: a PIR program is bytes, not {type(data).__name__}")
    return read_program(bytes(data), source, max_bytes=max_bytes, max_depth=max_depth,
                        allow_unknown_ops=allow_unknown_ops)


def load(path: PathLike, *, max_bytes: int = MAX_PIR_BYTES, max_depth: int = MAX_DEPTH,
         allow_unknown_ops: bool = False) -> Program:
    """Read a PIR program file (a regular file of at most `max_bytes`)."""
    name = os.fspath(path)
    data = read_input_file(name, ProgramFileError, "PIR program file", limit=max_bytes,
                           too_big=f"is past the limit of {max_bytes} for a PIR program (max_bytes)")
    return loads(data, name, max_bytes=max_bytes, max_depth=max_depth, allow_unknown_ops=allow_unknown_ops)


def dumps(program: Program, readable: bool = False) -> bytes:
    """The program as Paddle 3.3.1 writes it: compact JSON, or indented by 4 with
    `readable`. Values are numbered as Paddle numbers them (stored in `value.id`)."""
    return dumps_program(program, readable)


def save(program: Program, path: PathLike, readable: bool = False) -> None:
    """Write the program to `path` atomically (a temporary file renamed over it)."""
    write_atomic(path, dumps_program(program, readable))
