"""LoD (level of detail): the sequence offsets Paddle's LoDTensors carry.

The interpreter's values are plain NumPy arrays; a LoD rides beside them in a
side table, var name -> LoD, filled from the feeds and by the kernels
(docs/lod.md). A LoD is Paddle's `lod()`: a list of levels, outer first, each
a list of ascending offsets starting at 0; the last level ends at the
tensor's row count, every other level at the next level's sequence count.
E.g. rows 0..4 as sequences [0, 2) and [2, 5): `[[0, 2, 5]]`.

A program without LoD pays nothing for this: the interpreter touches the
table only when it is not empty or when a kernel returns `LOD_KEY`.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..base.errors import ExecutionError
from .registry import EMPTY_VAR_NAME, GRAD_SUFFIX, LOD_KEY

LoD = list  # list[list[int]]


class ArrayLoDs(list):
    """The LoDs of a tensor array's elements, one per element (None for an
    element without one), as the table holds them for a var whose value is a
    tensor array: Paddle's LoDTensorArray keeps a LoD in each element.
    write_to_array records X's LoD at index I and read_from_array hands
    element I's back; `Call.lod(slot)` of an array input is this list."""


def split_feeds(block: Any, feed: Mapping[str, Any], at: str) -> tuple[dict, dict]:
    """Split a feed dict into values and LoDs. A LoD is given either with the
    value, as `(array, lod)`, or as extra arrays `<var>@LOD0`, `<var>@LOD1`...
    (the form an .npz of feeds holds), unless the program declares a var of
    that very name."""
    values: dict[str, Any] = {}
    lods: dict[str, Any] = {}
    levels: dict[str, dict[int, Any]] = {}
    for name, value in feed.items():
        base, sep, k = name.rpartition("@LOD")
        if sep and k.isdigit() and base and block.find_var_recursive(name) is None:
            levels.setdefault(base, {})[int(k)] = value
        elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], (list, tuple)) \
                and isinstance(value[0], np.ndarray):
            values[name], lods[name] = value
        else:
            values[name] = value
    for base, by_level in levels.items():
        if base in lods:
            raise ExecutionError(f"{at}: var {base}: LoD given twice (as (array, lod) and as {base}@LOD0...)")
        if sorted(by_level) != list(range(len(by_level))):
            raise ExecutionError(f"{at}: var {base}: LoD levels {sorted(by_level)} fed; expected "
                                 f"{base}@LOD0 .. {base}@LOD{len(by_level) - 1}")
        if base not in values:
            raise ExecutionError(f"{at}: {base}@LOD0 is fed, but no value for var {base}")
        lods[base] = [by_level[k] for k in range(len(by_level))]
    return values, lods


def checked(lod: Any, arr: np.ndarray, at: str) -> LoD:
    """A LoD as lists of ints, checked as Paddle checks one (CheckLoD)."""
    try:
        levels = [[int(v) for v in np.asarray(level).reshape(-1)] for level in lod]
    except (TypeError, ValueError):
        levels = []
    ok = bool(levels) and np.ndim(arr) > 0
    for i, level in enumerate(levels if ok else ()):
        end = len(levels[i + 1]) - 1 if i + 1 < len(levels) else arr.shape[0]
        if len(level) < 2 or level[0] != 0 or any(b < a for a, b in zip(level, level[1:])) or level[-1] != end:
            ok = False
    if not ok:
        raise ExecutionError(f"{at}: bad LoD {lod!r} for a value of shape {list(np.shape(arr))}: each level "
                             "holds ascending offsets from 0 and ends at the next level's sequence count "
                             "(the last level at the row count)")
    return levels


def share_pairs(shares: bool, in_names: Mapping[str, list[str]],
                outs: Mapping[str, list[str]]) -> dict[str, str]:
    """output -> input whose LoD it takes when the kernel gives none: a grad
    output `S@GRAD[i]` takes that of input `S[i]` (the grad ops' ShareLoD(S,
    S@GRAD)); otherwise, for ops whose shape inference shares a LoD
    (`OpDef.sets_lod_level`), the outputs of the first output slot take the
    first input's (ShareLoD("X", "Out") and the like)."""
    pairs: dict[str, str] = {}
    for slot, names in outs.items():
        if slot.endswith(GRAD_SUFFIX):
            for n, s in zip(names, in_names.get(slot[: -len(GRAD_SUFFIX)], ())):
                pairs[n] = s
    if not pairs and shares and in_names and outs:
        first_in = next(iter(in_names.values()))
        if first_in:
            for n in next(iter(outs.values())):
                pairs[n] = first_in[0]
    pairs.pop(EMPTY_VAR_NAME, None)
    return pairs


def input_lods(ins: tuple, lods: Mapping[str, LoD]) -> dict | None:
    """slot -> [lod or None per var] for `Call.lods`; None if no input has a LoD."""
    found = None
    for slot, names in ins:
        for i, n in enumerate(names):
            lod = lods.get(n)
            if lod is not None:
                if found is None:
                    found = {}
                found.setdefault(slot, [None] * len(names))[i] = lod
    return found


def set_output_lods(outs: Mapping[str, list[str]], share: Mapping[str, str], res: Mapping[str, Any],
                    lods: dict) -> None:
    """Record the LoDs of an op's outputs: the kernel's own (`res[LOD_KEY]`,
    slot -> LoD of its first var, None for none), else the shared input's
    when the row counts agree, else none."""
    given = res.get(LOD_KEY) or {}
    for slot, names in outs.items():
        val = res.get(slot)
        vals = val if isinstance(val, (list, tuple)) else (val,)
        for i, n in enumerate(names):
            v = vals[i] if i < len(vals) else None
            if i == 0 and slot in given:
                lod = given[slot]
                if isinstance(lod, ArrayLoDs):
                    lod = lod if any(e is not None for e in lod) else None
                else:
                    lod = [[int(v) for v in level] for level in lod] if lod else None
            else:
                lod = lods.get(share.get(n, ""))
                if isinstance(lod, ArrayLoDs):  # an array's element LoDs go to an array of as many
                    if not isinstance(v, list) or len(v) != len(lod):
                        lod = None
                elif lod is not None:
                    if not isinstance(v, np.ndarray) or v.ndim == 0 or v.shape[0] != lod[-1][-1]:
                        lod = None
            if lod:
                lods[n] = lod
            else:
                lods.pop(n, None)
