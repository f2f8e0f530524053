"""Gradient variable naming, exactly as Paddle spells it."""
from __future__ import annotations

import re

from ..ops.registry import EMPTY_VAR_NAME, GRAD_SUFFIX  # noqa: F401  (re-exported)

# Paddle searches f"{GRAD_SUFFIX}+@", i.e. "@GRA", one or more "D", then "@":
# the `+` binds to the last letter. Kept as is so stripping matches Paddle's.
_GRAD_THEN_AT = re.compile(re.escape("@GRA") + "D+@")
_GRAD_AT_END = re.compile(re.escape(GRAD_SUFFIX) + "$")


def grad_name(name: str) -> str:
    """`x` -> `x@GRAD`."""
    return name + GRAD_SUFFIX


def is_grad_name(name: str) -> bool:
    return GRAD_SUFFIX in name


def strip_grad_suffix(name: str) -> str:
    """The forward var a grad name belongs to, by Paddle's rule.

    x@GRAD -> x; x@GRAD@GRAD -> x; y@GRAD@RENAME@block0@1 -> y;
    z@GRAD_slice_0@GRAD -> z@GRAD_slice_0; grad/grad/z@GRAD@RENAME@block0@1@GRAD -> z;
    x@GRAD_0 -> x@GRAD_0 (unchanged).
    """
    if name.endswith(GRAD_SUFFIX) and name.find("@GRA") == len(name) - 5 and "grad/" not in name:
        return name[:-5]  # the common `x@GRAD`, without the regexes
    m = _GRAD_THEN_AT.search(name) or _GRAD_AT_END.search(name)
    stripped = name[: m.start()] if m else name
    pos = name.rfind("grad/")
    return stripped[pos + 5:] if pos != -1 else stripped


def renamed_version(name: str, block_idx: int, n: int) -> str:
    """The n-th partial gradient of `name`, before accumulation."""
    return f"{name}@RENAME@block{block_idx}@{n}"


def repeated_grad_name(name: str, appending_times: int) -> str:
    """A grad name of the k-th backward pass that clashes with an existing var."""
    return "grad/" * appending_times + name
