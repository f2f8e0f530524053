"""Program files of either IR, told apart by their content: Paddle's legacy
`ProgramDesc` (protobuf, binary or text) or PIR (JSON).

    prog = pybackward.load("inference.json")     # a pybackward.pir.Program
    prog = pybackward.load("model.pdmodel")      # a pybackward.Program (legacy)
    pybackward.save(prog, "copy.json")           # each IR in its own format

Paddle 3.x writes PIR by default and the legacy format under
`FLAGS_enable_pir_api=0`, and both end up under any suffix (`.pdmodel`,
`.json`, `__model__`), so the format is read from the bytes, never guessed
from the name. A file of values handed over as a program (a `.pdparams`
pickle, a `.pdiparams` tensor stream, an `.npz`) is named for what it is.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Union

from .base.errors import ArgumentError, ArgumentTypeError, ProgramFileError
from .base.files import check_regular_input, input_source, read_input_file, read_input_head

if TYPE_CHECKING:
    from . import pir
    from .legacy.program import Program

PathLike = Union[str, os.PathLike]
AnyProgram = Union["Program", "pir.Program"]

#: What the first bytes of a file of values look like, and what to call it.
_VALUE_FILES = ((b"\x80", "a pickle of arrays (.pdparams / .pdopt)"),
                (b"PK\x03\x04", "a zip of arrays (.npz)"),
                (b"\x93NUMPY", "a NumPy array (.npy)"),
                (b"\x00\x00\x00\x00", "Paddle's tensor stream (.pdiparams / save_combine)"))


#: Below this size no program file is refused for its size (pir.MAX_PIR_BYTES is far above it).
_SMALL = 1 << 20


def _pir():
    """The PIR package, imported when a program may be PIR (its codec costs start-up time)."""
    from . import pir
    return pir


def _legacy():
    """The legacy IR's io module, imported for a program that may be legacy (protobuf and the
    legacy program model cost ~0.1 s of start-up that a PIR command does not need)."""
    from .legacy import io as legacy_io
    return legacy_io


def _opens_json(data: bytes) -> bool:
    """Whether the data may open a JSON object: the cheap test before `pir.is_pir_bytes`
    (which requires it), so a legacy program never imports the PIR package."""
    return bytes(data[:1 << 16]).lstrip(b"\xef\xbb\xbf \t\r\n\f\v").startswith(b"{")


def file_kind(data: bytes) -> str:
    """`"pir"`, `"legacy"`, or what a file of values is (see `_VALUE_FILES`).

    A legacy `ProgramDesc` never starts with a zero byte (field 0 does not
    exist) nor with 0x80 (a continuation byte), so the checks do not overlap.
    """
    if _opens_json(data) and _pir().is_pir_bytes(data):
        return "pir"
    for magic, kind in _VALUE_FILES:
        if data.startswith(magic):
            return kind
    return "legacy"


def _check_kind(kind: str, source: str | None) -> None:
    if kind not in ("pir", "legacy"):
        name = source or "<data>"
        raise ProgramFileError(f"{name}: is {kind}, not a program: give it with --params (run, check, "
                               f"append --run), or turn it into another array format with "
                               f"`pybackward convert {name} OUT.npz`")


def loads(data: bytes, source: str | None = None, check_vars: bool = True, text: bool = False) -> AnyProgram:
    """A program from bytes: PIR JSON, or a legacy `ProgramDesc` (binary; text format with `text`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentTypeError(f"loads() takes bytes, not {type(data).__name__}")
    data = bytes(data)
    kind = file_kind(data)
    if kind == "pir":
        return _pir().loads(data, source)
    if not text:
        _check_kind(kind, source)
    return _legacy().loads(data, source=source, check_vars=check_vars, text=text)


def load(source: Union[PathLike, bytes], check_vars: bool = True, text: bool | None = None) -> AnyProgram:
    """Load a program from a path or bytes, whichever IR it is in.

    A PIR file gives a `pybackward.pir.Program`; a legacy one a
    `pybackward.Program` (protobuf text format for `.pbtxt` / `.txt`, or with
    `text=True`). Only regular files are read.
    """
    name = input_source(source, text)
    if isinstance(name, bytes):
        return loads(name, None, check_vars, bool(text))
    size = check_regular_input(name, ProgramFileError, "program file")
    # (PIR is imported only for a file that may be PIR, the legacy IR only for one that may be legacy)
    if _looks_like_json(name):
        if size > _SMALL and size > _pir().MAX_PIR_BYTES:
            return _pir().load(name)        # refused from its size, before it is read
        data = read_input_file(name, ProgramFileError, "program file", limit=_pir().MAX_PIR_BYTES)
        if _pir().is_pir_bytes(data):
            return _pir().loads(data, name)
    else:
        data = _legacy().read_input_file(name, ProgramFileError, "program file")
    return loads(data, name, check_vars, _legacy().is_text_path(name) if text is None else text)


def _looks_like_json(name: str) -> bool:
    """Whether the file's first bytes open a JSON object (a PIR program, or no program at all)."""
    head = read_input_head(name, 64, ProgramFileError, "program file")
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


def dumps(program: AnyProgram, text: bool = False, readable: bool = False) -> bytes:
    """The program's bytes in its own IR's format (`text`: legacy text format; `readable`: indented PIR)."""
    if is_pir(program):
        if text:
            raise ArgumentError("a PIR program is JSON: text=True is for legacy programs (readable=True indents it)")
        return _pir().dumps(program, readable)
    return _legacy().dumps(program, text)


def save(program: AnyProgram, path: PathLike, text: bool | None = None, readable: bool = False) -> None:
    """Write the program atomically in its own IR's format (see `dumps`)."""
    if is_pir(program):
        if text:
            raise ArgumentError("a PIR program is JSON: text=True is for legacy programs (readable=True indents it)")
        _pir().save(program, path, readable)
        return
    _legacy().save(program, path, text)


def is_pir(program: object) -> bool:
    # no PIR program exists before pybackward.pir is imported: don't import it to say so
    model = sys.modules.get("pybackward.pir.model")
    return model is not None and isinstance(program, model.Program)


def require_legacy(program: AnyProgram, what: str, source: str | None = None) -> Program:
    """The program, if it is a legacy one; a clear refusal for a PIR program where only legacy ones work yet."""
    if is_pir(program):
        raise ArgumentError(f"{source or 'the program'}: is a PIR program (Paddle 3.x's JSON format); {what} "
                            "takes legacy ProgramDesc programs only so far (show, diff, dot, convert, run and check "
                            "take PIR programs; Paddle writes the legacy format under FLAGS_enable_pir_api=0)")
    return program
