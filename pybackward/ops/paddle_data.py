"""Paddle 3.3.1's facts about its op types, read once from `paddle_ops.json`.

Written by `tools/derive_grad_rules.py` from what
`testdata/grad_makers/gen_grad_makers.py` recorded of a live Paddle: per op
type its slots (with flags: `d` duplicable, `?` dispensable, `i`
intermediate, `x` extra), default attrs, extra attrs, grad kind and grad
templates, and whether Paddle runs the op (and its grad) on CPU. The
registry reads defaults from it; `paddle_table` reads the rest.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

_DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "paddle_ops.json"


@lru_cache(maxsize=1)
def paddle_ops() -> dict[str, dict[str, Any]]:
    """{op_type: {"inputs", "outputs", "defaults", "extras", "grad", "rule"}}."""
    return json.loads(_DATA_FILE.read_text())


def paddle_op(op_type: str) -> dict[str, Any] | None:
    """What Paddle 3.3.1 records for an op type, or None if it has no such op."""
    return paddle_ops().get(op_type)


def paddle_runs_on_cpu(op_type: str, grad_of: str | None = None) -> bool | None:
    """Whether Paddle 3.3.1 has a CPU kernel for an op type (for a grad op
    type, pass the forward type as `grad_of`); None if Paddle has no such op."""
    entry = paddle_op(grad_of or op_type)
    if entry is None or "cpu" not in entry:
        return None
    return bool(entry["grad_cpu"] if grad_of else entry["cpu"])


@lru_cache(maxsize=1)
def _lod_by_grad_type() -> dict[str, bool]:
    out: dict[str, bool] = {}
    for entry in paddle_ops().values():
        for rule in entry.get("rule") or ():
            if "lod" in rule:
                out[rule["type"]] = rule["lod"]
    return out


def grad_sets_lod_level(op_type: str) -> bool | None:
    """Whether Paddle's shape inference writes `legacy_lod_level` on the new
    vars an op of this type makes when a grad maker emits it (recorded by
    testdata/grad_makers/probe_lod.py); None if not recorded."""
    return _lod_by_grad_type().get(op_type)
