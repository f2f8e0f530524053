"""The one exception hierarchy of pybackward.

Every error a user can cause (a bad file, a bad argument, an op the tool does
not know, a program that fails to run) is a `PyBackwardError`, so callers and
the CLI can tell "your input is wrong" from "pybackward has a bug". Messages
name where the problem is: the file, block, op index and type, and variable.
"""
from __future__ import annotations


class PyBackwardError(Exception):
    """Base class of every error pybackward raises on purpose."""


class ProgramFileError(PyBackwardError):
    """A file or byte string that is not a valid program: not a protobuf,
    truncated, a foreign message, or a ProgramDesc that breaks the rules
    (block indices, parents, sub_block attrs, undeclared vars)."""


class UnknownOpError(PyBackwardError):
    """An op type the registry does not know, or one that lacks what is asked
    of it (a grad rule, a kernel)."""


class ArgumentError(PyBackwardError, ValueError):
    """A bad argument to the API or the CLI: a loss that is not in the
    program, a wrong type, a no-grad name that does not exist."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong Python type (a number where a path or a list
    of names belongs). Also a TypeError, so code that caught the TypeError
    Python raised before keeps working."""


class VarNotFoundError(ArgumentError, KeyError):
    """A variable name that no block in scope declares."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ExecutionError(PyBackwardError):
    """The interpreter could not run an op: missing feed, mismatched shapes,
    an attribute value a kernel does not handle, NaN/Inf when checked."""


class ArrayFileError(ArgumentError):
    """A file of tensor values (.npz, Paddle's .pdparams / .pdopt pickles,
    .pdiparams, per-var files) that is missing, foreign, damaged, refused
    (a pickle that asks for code) or does not fit the program."""


class OutputError(PyBackwardError):
    """An output file could not be written (missing directory, disk full,
    no permission); nothing partial is left behind."""


class UnsupportedDtypeError(ExecutionError, KeyError):
    """A data type NumPy cannot hold (bfloat16, fp8, SIZE_T)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ExecutionLimitError(ExecutionError):
    """A run stopped by a limit the caller set: a `while` past its step limit,
    or the run past its time limit."""


class CheckFailedError(PyBackwardError):
    """A gradient check or golden comparison found a difference (exit 1)."""


class PyBackwardWarning(UserWarning):
    """Something pybackward did on purpose that the user may not expect (a
    parameter skipped because it cannot have a gradient); the CLI prints it
    as one `warning:` line."""


class PaddleDeviationWarning(PyBackwardWarning):
    """pybackward's output departs from Paddle's on purpose, because Paddle's
    gradient would be wrong here (docs/deviations.md); `paddle_exact=True`
    gives Paddle's program instead."""


def where(source: str | None = None, block: int | None = None,
          op_index: int | None = None, op_type: str | None = None,
          var: str | None = None) -> str:
    """Format a location prefix such as ``model.pb: block 0, op 3 (mul), var 'x'``."""
    parts = []
    if block is not None:
        parts.append(f"block {block}")
    if op_index is not None:
        parts.append(f"op {op_index}" + (f" ({op_type})" if op_type else ""))
    elif op_type:
        parts.append(f"op {op_type}")
    if var is not None:
        parts.append(f"var '{var}'")
    loc = ", ".join(parts)
    if source:
        return f"{source}: {loc}" if loc else source
    return loc
