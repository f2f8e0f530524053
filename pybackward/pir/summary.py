"""What a PIR program is, at a glance: what to feed, what to load, which value is
the loss, whether a backward section is there, which ops it uses.

* feeds: the `pd_op.data` ops (name, shape, dtype);
* parameters: the `builtin.parameter` ops (name, shape, dtype, trainable);
* fetches: the names of `pd_op.fetch` and `builtin.shadow_output` ops;
* loss candidates: top-level values of one float element (shape [] or all
  dims 1) that no forward op consumes (a fetch or shadow_output does not
  count, nor the backward section: from its seed `full` / `full_like` on)
  and that depend on a feed or a parameter (constants are not losses);
* backward: any `*_grad` op (also `*_grad_` and higher-order `*_grad_grad`);
* op types: how many ops of each name, nested ones included.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from .model import Operation, Program, Value
from .records import Record, as_plain, set_fields
from .text import type_text
from .types import FLOAT_DTYPES, DenseTensorType
from ..base.listing import human_bytes, name_rows

NOT_CONSUMING = frozenset({"pd_op.fetch", "builtin.shadow_output"})
SEED_OPS = frozenset({"pd_op.full", "pd_op.full_like"})


class ValueInfo(Record):         # records.Record: a dataclass's methods, not compiled at import
    """One value: its name (a user's name or `%N`), shape (-1: unknown), dtype, defining op."""
    _fields = ("name", "shape", "dtype", "op")
    name: str
    shape: list[int]
    dtype: str
    op: str | None

    def __init__(self, name: str, shape: list[int], dtype: str, op: str | None = None) -> None:
        set_fields(self, name=name, shape=shape, dtype=dtype, op=op)

    def text(self) -> str:
        return f"{self.dtype}{self.shape}"


class PirSummary(Record):
    _fields = ("source", "file_version", "ops", "top_level_ops", "feeds", "parameters", "trainable_parameters",
               "parameter_elements", "parameter_bytes", "fetches", "losses", "backward_ops", "op_types")
    source: str | None
    file_version: int
    ops: int
    top_level_ops: int
    feeds: list[ValueInfo]
    parameters: list[ValueInfo]
    trainable_parameters: int
    parameter_elements: int
    parameter_bytes: int
    fetches: list[str]
    losses: list[ValueInfo]
    backward_ops: int
    op_types: dict[str, int]

    def __init__(self, source: str | None, file_version: int, ops: int, top_level_ops: int, feeds: list[ValueInfo],
                 parameters: list[ValueInfo], trainable_parameters: int, parameter_elements: int,
                 parameter_bytes: int, fetches: list[str], losses: list[ValueInfo], backward_ops: int,
                 op_types: dict[str, int] | None = None) -> None:
        set_fields(self, source=source, file_version=file_version, ops=ops, top_level_ops=top_level_ops, feeds=feeds,
                   parameters=parameters, trainable_parameters=trainable_parameters,
                   parameter_elements=parameter_elements, parameter_bytes=parameter_bytes, fetches=fetches,
                   losses=losses, backward_ops=backward_ops, op_types={} if op_types is None else op_types)

    @property
    def has_backward(self) -> bool:
        return self.backward_ops > 0

    def to_json(self) -> dict[str, Any]:
        doc = as_plain(self)
        for key in ("feeds", "parameters"):
            for row in doc[key]:
                row.pop("op")
        doc["has_backward"] = self.has_backward
        doc["ir"] = "pir"
        return doc

    def to_text(self, max_rows: int = 12) -> str:
        """The summary for people, in the layout of the legacy program summary."""
        version = f", format version {self.file_version} read as 4" if self.file_version != 4 else ""
        lines = [f"program: {self.source or '<program>'}  (PIR, {self.ops} ops, {self.top_level_ops} at the top"
                 f"{version})"]
        lines.append(f"feeds ({len(self.feeds)}):" if self.feeds else "feeds: none")
        lines.extend(name_rows(self.feeds, max_rows))
        lines.append(f"parameters: {len(self.parameters)} ({self.parameter_elements:,} elements, "
                     f"{human_bytes(self.parameter_bytes)}; {self.trainable_parameters} trainable)")
        lines.extend(name_rows(self.parameters, max_rows))
        if self.fetches:
            lines.append(f"fetches ({len(self.fetches)}): " + ", ".join(self.fetches[:max_rows])
                         + (f", ... ({len(self.fetches) - max_rows} more)" if len(self.fetches) > max_rows else ""))
        if not self.losses:
            lines.append("loss candidates: none (no one-element float value that no forward op reads)")
        else:
            lines.append("loss candidates (one float element, read by no forward op): "
                         + ", ".join(f"{v.name} ({v.text()}, from {v.op})" for v in self.losses))
        lines.append(f"backward: present ({self.backward_ops} grad ops)" if self.has_backward else "backward: none")
        lines.append(f"op types ({len(self.op_types)}): " + ", ".join(f"{t} x{n}" for t, n in self.op_types.items()))
        return "\n".join(lines)


#: Bytes per element of each dtype (for the parameters' size).
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "bfloat16": 2, "float16": 2, "int32": 4, "float32": 4,
            "int64": 8, "float64": 8, "index": 8, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
            "float8_e5m2": 1}



def is_grad_op(op: Operation) -> bool:
    t = op.type.rstrip("_")
    return t.endswith("_grad")


def _info(v: Value, name: str | None = None) -> ValueInfo:
    t = v.type
    if isinstance(t, DenseTensorType):
        return ValueInfo(name or f"%{v.id}", list(t.dims), t.dtype, v.defining_op.name if v.defining_op else None)
    return ValueInfo(name or f"%{v.id}", [], type_text(t), v.defining_op.name if v.defining_op else None)


def backward_start(program: Program) -> int:
    """Index of the first top-level op of the backward section (len(ops) when none):
    the first grad op, moved back over the `full` / `full_like` seed before it."""
    ops = program.block.ops
    first = next((i for i, op in enumerate(ops) if is_grad_op(op) or op.name == "cf.has_elements"
                  or (op.regions and any(is_grad_op(o) for o in op.walk()))), len(ops))
    while first > 0 and ops[first - 1].name in SEED_OPS:
        first -= 1
    return first


def summary(program: Program) -> PirSummary:
    """Feeds, parameters, fetches, loss candidates, backward present, op histogram (module doc)."""
    counts: Counter[str] = Counter()
    backward = 0
    for op in program.walk():
        counts[op.name] += 1
        backward += is_grad_op(op)
    top = program.block.ops
    feeds = [_info(op.results[0], op.attr("name", None)) for op in top if op.name == "pd_op.data" and op.results]
    params = [_info(op.results[0], op.attr("parameter_name", None)) for op in top
              if op.name == "builtin.parameter" and op.results]
    trainable = sum(1 for op in top if op.name == "builtin.parameter" and op.result_flag("trainable", 0) is not False)
    elements = size = 0
    for p in params:
        n = 1
        for d in p.shape:
            n *= max(d, 0)
        elements += n
        size += n * ITEMSIZE.get(p.dtype, 0)
    fetches = [str(op.attr("name", op.attr("output_name", ""))) for op in program.walk()
               if op.name in NOT_CONSUMING]
    return PirSummary(source=program.source, file_version=program.file_version, ops=sum(counts.values()),
                      top_level_ops=len(top), feeds=feeds, parameters=params, trainable_parameters=trainable,
                      parameter_elements=elements, parameter_bytes=size,
                      fetches=fetches, losses=loss_candidates(program), backward_ops=backward,
                      op_types=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))


def loss_candidates(program: Program) -> list[ValueInfo]:
    """Top-level one-element float values no forward op consumes, that depend on a feed or parameter."""
    ops = program.block.ops
    end = backward_start(program)
    backward_ops = {id(op) for op in ops[end:]}
    live: set[int] = set()
    out: list[ValueInfo] = []
    for op in ops[:end]:
        # (set operations in C: this walks every op of the program on each `append` without --loss)
        if op.regions:
            inputs = [id(v) for inner in op.walk() for v in inner.operands if v is not None]
        else:
            inputs = [id(v) for v in op.operands if v is not None]
        if op.name in ("pd_op.data", "builtin.parameter") or not live.isdisjoint(inputs):
            live.update([id(v) for v in op.results])
        if op.name in ("builtin.parameter", "pd_op.data"):
            continue
        for v in op.results:
            t = v.type
            if not isinstance(t, DenseTensorType) or t.dtype not in FLOAT_DTYPES or t.numel() != 1:
                continue
            if id(v) not in live:
                continue
            consumers = [u for u, _ in v.uses if u.name not in NOT_CONSUMING and id(_top(u)) not in backward_ops]
            if not consumers:
                out.append(_info(v))
    return out


def _top(op: Operation) -> Operation:
    """The top-level op that holds `op` (itself when it is top-level)."""
    while op.block is not None and op.block.region is not None and op.block.region.op is not None:
        op = op.block.region.op
    return op
