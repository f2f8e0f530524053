"""Checking the arguments of public functions: one clear error per mistake.

A wrong Python type raises `ArgumentTypeError` (also a TypeError); a value
of the right type but out of range (a zero step, NaN, a negative count)
raises `ArgumentError`. Both are `PyBackwardError`s, so the CLI reports them
as one line and exit 2. `bool` is refused where a number belongs: True is an
int to Python, never a count or a step to a user.
"""
from __future__ import annotations

import math
import numbers
import os
from typing import Any

from .errors import ArgumentError, ArgumentTypeError


def number(value: Any, name: str, *, minimum: float | None = None, open_min: bool = False,
           allow_none: bool = False) -> float | None:
    """A finite real number (NaN and infinities refused), above `minimum`."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number, not {type(value).__name__}: {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ArgumentError(f"{name} must be a finite number, not {value!r}")
    if minimum is not None and (v <= minimum if open_min else v < minimum):
        raise ArgumentError(f"{name} must be {'greater than' if open_min else 'at least'} {minimum:g}, "
                            f"not {value!r}")
    return v


def integer(value: Any, name: str, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
    """An int (numpy integers too) of at least `minimum`."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be an int, not {type(value).__name__}: {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ArgumentError(f"{name} must be at least {minimum}, not {v}")
    return v


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, not {type(value).__name__}: {value!r}")
    return value


def names(value: Any, name: str, *, allow_none: bool = True) -> list[str] | None:
    """A list / tuple / set of str names (a bare string is one mistake worth naming)."""
    if value is None and allow_none:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ArgumentTypeError(f"{name} must be a list of names, not {type(value).__name__}: {value!r}")
    for v in value:
        if not isinstance(v, str):
            raise ArgumentTypeError(f"{name} entries must be names (str), not {type(v).__name__}: {v!r}")
    return list(value)


def mapping(value: Any, name: str) -> dict:
    """A mapping with str keys (None: empty)."""
    if value is None:
        return {}
    if not hasattr(value, "items") or not hasattr(value, "keys"):
        raise ArgumentTypeError(f"{name} must be a mapping of names to arrays, not {type(value).__name__}")
    for k in value.keys():
        if not isinstance(k, str):
            raise ArgumentTypeError(f"{name} keys must be var names (str), not {type(k).__name__}: {k!r}")
    return dict(value.items())


def path(value: Any, name: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(f"{name} must be a path (str or os.PathLike), not {type(value).__name__}")
    return os.fspath(value)
