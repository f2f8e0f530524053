"""Live ranges of a program's vars and the activation-memory peak they give.

The static model behind `pybackward.memory` (whose module doc says what is
counted): a var of block 0 is live from its first write to its last read;
bytes are its declared dims times its dtype's size, every -1 taken as
`batch_size`. An analysis: it reads a program and changes nothing.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable, Mapping

from ..base import dtypes
from ..legacy.names import GRAD_SUFFIX, strip_grad_suffix
from ..base.errors import ArgumentError
from ..base.names import printable
from ..legacy.program import Block, Program, Variable

# --------------------------------------------------------------------------
# The static model
# --------------------------------------------------------------------------
INPUT, ACTIVATION, GRADIENT, PARAM_GRAD, PARAMETER = (
    "input", "activation", "gradient", "param_grad", "parameter")
#: Kinds that count as activation memory.
ACTIVATION_KINDS = frozenset({INPUT, ACTIVATION, GRADIENT})


@dataclasses.dataclass
class VarLife:
    """One var of block 0: its size and the ops between which it is live."""

    name: str
    kind: str
    nbytes: int | None        # None: unknown (no dtype, a tensor array)
    start: int                # op index of the first write (0 for a feed)
    end: int                  # op index of the last read (or write)


@dataclasses.dataclass
class MemoryReport:
    """What `memory` found. Byte counts are ints."""

    batch_size: int
    peak_bytes: int                       # activations at the peak
    peak_op: int                          # index in block 0 of the op at the (first) peak
    peak_op_type: str
    top: list[tuple[str, str, int]]       # (var, kind, bytes) live at the peak, largest first
    parameter_bytes: int
    gradient_bytes: int                   # parameter gradients
    timeline: list[int]                   # activation bytes live at each op of block 0
    unknown: list[str]                    # vars whose size is unknown (counted as 0)
    num_ops: int
    lives: dict[str, VarLife] = dataclasses.field(repr=False, default_factory=dict)

    @property
    def total_bytes(self) -> int:
        """An upper bound of the whole: parameters + their gradients + peak activations."""
        return self.parameter_bytes + self.gradient_bytes + self.peak_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "peak_bytes": self.peak_bytes,
                "peak_op": self.peak_op, "peak_op_type": self.peak_op_type,
                "top": [{"var": n, "kind": k, "bytes": b} for n, k, b in self.top],
                "parameter_bytes": self.parameter_bytes, "gradient_bytes": self.gradient_bytes,
                "total_bytes": self.total_bytes, "num_ops": self.num_ops, "unknown": self.unknown,
                "timeline": self.timeline}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def __str__(self) -> str:
        # Names and the op type come from the program: escaped (`base.names.printable`), so a
        # name cannot move the cursor or start a line of its own (`stats` indents this by line).
        lines = [f"peak activation memory: {human(self.peak_bytes)} ({self.peak_bytes} bytes, "
                 f"batch {self.batch_size}) at op {self.peak_op} ({printable(self.peak_op_type)}) of {self.num_ops}",
                 f"parameters: {human(self.parameter_bytes)}; parameter gradients: "
                 f"{human(self.gradient_bytes)}; all together at most {human(self.total_bytes)}"]
        if self.top:
            lines.append("largest vars live at the peak:")
            shown = [printable(n) for n, _, _ in self.top]
            width = max(len(n) for n in shown)
            for n, (_, k, b) in zip(shown, self.top):
                lines.append(f"  {n:<{width}}  {human(b):>10}  {k}")
        if self.unknown:
            lines.append(f"size unknown (counted as 0): {', '.join(map(printable, self.unknown[:8]))}"
                         + (" ..." if len(self.unknown) > 8 else ""))
        return "\n".join(lines)


def human(n: int | float) -> str:
    """1536 -> '1.5 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def var_bytes(var: Variable, batch_size: int) -> int | None:
    """Bytes of a var's value with every -1 dim taken as `batch_size`; None if unknown."""
    if var.type != dtypes.VarType.DENSE_TENSOR and var.type != dtypes.VarType.SELECTED_ROWS:
        return None
    dt = var.data_type
    if dt is None:
        return None
    try:
        size = dtypes.to_numpy(dt).itemsize
    except KeyError:
        size = 2 if dt == dtypes.VarType.BF16 else 1 if dt in (dtypes.VarType.FP8_E4M3FN,
                                                               dtypes.VarType.FP8_E5M2) else None
        if size is None:
            return None
    n = 1
    for d in var.shape:
        n *= batch_size if d < 0 else d
    return n * size


def var_kind(block: Block, name: str) -> str:
    """parameter, param_grad, gradient, activation or input (see the module doc)."""
    v = block.find_var_recursive(name)
    if v is not None and v.persistable:
        return PARAMETER
    if GRAD_SUFFIX in name:
        if "@RENAME@" not in name and "@ADD@" not in name:
            fwd = block.find_var_recursive(strip_grad_suffix(name))
            if fwd is not None and fwd.persistable:
                return PARAM_GRAD
        return GRADIENT
    return ACTIVATION


def lives(program: Program, batch_size: int = 1, keep: Iterable[str] = ()) -> dict[str, VarLife]:
    """Every var block 0's ops use, with its kind, size and live range."""
    block = program.global_block()
    ops = block.ops
    first_write: dict[str, int] = {}
    last_write: dict[str, int] = {}
    first_read: dict[str, int] = {}
    last_read: dict[str, int] = {}
    for i, op in enumerate(ops):
        for n in op.input_arg_names:
            first_read.setdefault(n, i)
            last_read[n] = i
        for n in op.output_arg_names:
            first_write.setdefault(n, i)
            last_write[n] = i
    keep = set(keep)
    out: dict[str, VarLife] = {}
    for n in list(first_read) + [n for n in first_write if n not in first_read]:
        if n == "@EMPTY@" or n in out:
            continue
        v = block.find_var_recursive(n)
        kind = var_kind(block, n)
        fw = first_write.get(n)
        if fw is None or first_read.get(n, fw) < fw:
            start = 0
            if fw is None and kind == ACTIVATION:
                kind = INPUT
        else:
            start = fw
        end = max(last_read.get(n, -1), last_write.get(n, -1))
        if n in keep:
            end = len(ops) - 1
        nbytes = var_bytes(v, batch_size) if v is not None else None
        out[n] = VarLife(n, kind, nbytes, start, end)
    return out


def activation_peak(life: Mapping[str, "VarLife"], n_ops: int
                    ) -> tuple[list[int], int, int, list[tuple[str, str, int]]]:
    """From live ranges over `n_ops` ops: the activation bytes live at each op, the peak,
    the (first) op at the peak, and (name, kind, bytes) of what is live there, largest
    first. Shared by the legacy and the PIR model."""
    delta = [0] * (n_ops + 1)
    for v in life.values():
        if v.kind in ACTIVATION_KINDS and v.nbytes:
            delta[v.start] += v.nbytes
            delta[v.end + 1] -= v.nbytes
    timeline, cur = [], 0
    for i in range(n_ops):
        cur += delta[i]
        timeline.append(cur)
    peak = max(timeline, default=0)
    at = timeline.index(peak) if timeline else 0
    live_there = sorted(((v.name, v.kind, v.nbytes) for v in life.values()
                         if v.kind in ACTIVATION_KINDS and v.nbytes and v.start <= at <= v.end),
                        key=lambda t: (-t[2], t[0]))
    return timeline, peak, at, live_there


def memory(program: Program, batch_size: int = 1, top: int = 8, keep: Iterable[str] = ()) -> MemoryReport:
    """The activation memory of `program` (block 0) by static liveness; see the module doc.

    `batch_size` replaces every -1 dim; `keep` names vars live to the end
    (fetched values, e.g. the loss); `top` is how many vars to list at the peak.
    """
    if not isinstance(program, Program):
        raise ArgumentError(f"memory() takes a pybackward Program, not {type(program).__name__}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ArgumentError(f"batch_size must be a positive int, not {batch_size!r}")
    block = program.global_block()
    n_ops = len(block.ops)
    life = lives(program, batch_size, keep)
    timeline, peak, at, live_there = activation_peak(life, n_ops)
    params = sum(var_bytes(v, batch_size) or 0 for b in program.blocks[:1] for v in b.vars.values()
                 if v.persistable and v.type == dtypes.VarType.DENSE_TENSOR)
    grads = sum(v.nbytes or 0 for v in life.values() if v.kind == PARAM_GRAD)
    unknown = sorted(n for n, v in life.items() if v.nbytes is None and v.kind != PARAMETER)
    return MemoryReport(batch_size, peak, at, block.ops[at].type if block.ops else "",
                        live_there[:top], params, grads, timeline, unknown, n_ops, life)
