"""What a program is, at a glance: its feeds, parameters, loss candidates,
whether a backward section is there, and which ops it uses.

`summary(program)` answers the questions a user has before `append` or
`run`: what must I feed, what must I load, which var is the loss? It reads
the program only (one pass over ops and vars); `pybackward show --summary`
prints it and `append` without `--loss` takes the loss from it.

The loss candidates: when an op is marked as the loss (`op_role` bit 256,
which Paddle's `append_backward` sets), its float outputs of one element.
Otherwise every var of block 0 that a forward op writes and no forward op
reads (a `fetch` does not count as a read), that holds one float element
(shape [] or all dims 1, no -1), is not persistable, and depends on a feed or
a persistable var (constants and counters are not losses).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..base import dtypes
from ..base.errors import ArgumentTypeError, UnsupportedDtypeError
from ..legacy.program import OP_ROLE_LOSS, Program, Variable
from ..legacy.text import is_backward, is_forward, op_role
from ..base.listing import human_bytes, name_rows
from ..base.names import printable, printable_lines

_pb = dtypes.VarType
#: Var types that are not values a user saves or feeds.
_NOT_VALUES = frozenset({_pb.FEED_MINIBATCH, _pb.FETCH_LIST, _pb.READER, _pb.RAW})
#: Element sizes of the types NumPy has no dtype for.
_ODD_SIZES = {_pb.BF16: 2, _pb.FP8_E4M3FN: 1, _pb.FP8_E5M2: 1, _pb.SIZE_T: 8}


@dataclass
class VarInfo:
    """One var: its name, declared shape (-1 unknown) and dtype name."""
    name: str
    shape: list[int]
    dtype: str
    op: str | None = None          # for a loss candidate: the op type that writes it

    def text(self) -> str:
        return f"{self.dtype}{self.shape}"


@dataclass
class ProgramSummary:
    source: str | None
    blocks: int
    ops: int
    vars: int
    feeds: list[VarInfo]
    parameters: list[VarInfo]
    parameter_elements: int
    parameter_bytes: int
    other_persistables: list[VarInfo]
    other_elements: int
    other_bytes: int
    losses: list[VarInfo]
    loss_marked: bool              # the candidates come from an op marked as the loss
    backward_ops: int
    optimizer_ops: int
    op_types: dict[str, int] = field(default_factory=dict)

    @property
    def has_backward(self) -> bool:
        return self.backward_ops > 0

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for key in ("feeds", "parameters", "other_persistables"):
            for row in doc[key]:
                row.pop("op")
        doc["has_backward"] = self.has_backward
        return doc

    def to_text(self, max_rows: int = 12) -> str:
        lines = [f"program: {self.source or '<program>'}  ({self.blocks} block{'s' * (self.blocks != 1)}, "
                 f"{self.ops} ops, {self.vars} vars)"]
        lines.append(f"feeds ({len(self.feeds)}):" if self.feeds else "feeds: none")
        lines.extend(name_rows(_escaped(self.feeds), max_rows))
        lines.append(f"parameters: {len(self.parameters)} ({self.parameter_elements:,} elements, "
                     f"{human_bytes(self.parameter_bytes)})")
        lines.extend(name_rows(_escaped(self.parameters), max_rows))
        if self.other_persistables:
            lines.append(f"other persistable vars: {len(self.other_persistables)} ({self.other_elements:,} "
                         f"elements, {human_bytes(self.other_bytes)}): " + _names(self.other_persistables, max_rows))
        if not self.losses:
            lines.append("loss candidates: none (no one-element float var that no op reads)")
        else:
            how = "marked as the loss" if self.loss_marked else "one float element, read by no op"
            lines.append(f"loss candidates ({how}): "
                         + ", ".join(f"{printable(v.name)} ({v.text()}, from {printable(v.op)})"
                                     for v in self.losses))
        if self.has_backward:
            lines.append(f"backward: present ({self.backward_ops} backward ops"
                         + (f", {self.optimizer_ops} optimizer ops" if self.optimizer_ops else "") + ")")
        else:
            lines.append("backward: none" + (f" ({self.optimizer_ops} optimizer ops)" if self.optimizer_ops else ""))
        lines.append(f"op types ({len(self.op_types)}): "
                     + ", ".join(f"{printable(t)} x{n}" for t, n in self.op_types.items()))
        # Names are escaped one by one (`base.names.printable`), so a newline in one cannot start a
        # line of its own; what is left (the source's path) is escaped line by line.
        return printable_lines("\n".join(lines))


def _escaped(items: list[VarInfo]) -> list[VarInfo]:
    """The rows with their names escaped (`base.names.printable`) for the text summary."""
    return [v if printable(v.name) == v.name else replace(v, name=printable(v.name)) for v in items]


def _names(items: list[VarInfo], limit: int) -> str:
    text = ", ".join(printable(v.name) for v in items[:limit])
    return text + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")



def _info(v: Variable, op: str | None = None) -> VarInfo:
    dt = v.data_type
    name = dtypes.type_name(dt if dt is not None else v.type).lower()
    if dt is not None:
        try:
            name = dtypes.numpy_name(dt)     # (without importing NumPy: `show` never needs it)
        except UnsupportedDtypeError:
            pass
    return VarInfo(v.name, list(v.shape), name, op)


def _elements(v: Variable) -> int | None:
    n = 1
    for d in v.shape:
        if d < 0:
            return None
        n *= d
    return n


def _itemsize(v: Variable) -> int:
    dt = v.data_type
    if dt is None:
        return 0
    try:
        name = dtypes.numpy_name(dt)
    except UnsupportedDtypeError:
        return _ODD_SIZES.get(dt, 0)
    return 1 if name == "bool" else int(name.lstrip("abcdefghijklmnopqrstuvwxyz")) // 8


def _is_scalar_float(v: Variable) -> bool:
    return v.data_type is not None and dtypes.is_float(v.data_type) and all(d == 1 for d in v.shape)


def feed_vars(program: Program) -> list[Variable]:
    """The vars a run feeds: outputs of `feed` ops (by their `col`), then the
    data vars (`need_check_feed`, what `paddle.static.data` makes) of block 0."""
    block = program.global_block()
    fed: list[tuple[int, str]] = []
    for op in block.ops:
        if op.type == "feed":
            col = op.attr("col", 0)
            fed.extend((col if isinstance(col, int) else 0, n) for n in op.output("Out"))
    names = [n for _, n in sorted(fed, key=lambda item: item[0])]
    seen = set(names)
    for v in block.vars.values():
        if v.desc.need_check_feed and v.name not in seen:
            names.append(v.name)
            seen.add(v.name)
    return [block.vars[n] for n in names if n in block.vars]


def summary(program: Program) -> ProgramSummary:
    """Feeds, parameters, loss candidates, backward present, op histogram (see the module doc)."""
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"summary() takes a Program, not {type(program).__name__}")
    block = program.global_block()
    op_types: Counter[str] = Counter()
    backward_ops = optimizer_ops = 0
    n_ops = n_vars = 0
    read: set[str] = set()
    for b in program.blocks:
        n_vars += len(b.vars)
        for op in b.ops:
            n_ops += 1
            op_types[op.type] += 1
            if is_backward(op):
                backward_ops += 1
            elif not is_forward(op):
                optimizer_ops += 1
            elif op.type != "fetch":
                read.update(op.input_arg_names)
    feeds = feed_vars(program)
    params, others = [], []
    totals = {True: [0, 0], False: [0, 0]}    # is_parameter -> [elements, bytes]
    for v in block.vars.values():
        if not v.persistable or v.type in _NOT_VALUES:
            continue
        (params if v.is_parameter else others).append(_info(v))
        n = _elements(v) or 0
        totals[v.is_parameter][0] += n
        totals[v.is_parameter][1] += n * _itemsize(v)
    losses, marked = _loss_candidates(program, feeds, read)
    return ProgramSummary(
        source=program.source, blocks=len(program.blocks), ops=n_ops, vars=n_vars,
        feeds=[_info(v) for v in feeds], parameters=params, parameter_elements=totals[True][0],
        parameter_bytes=totals[True][1], other_persistables=others, other_elements=totals[False][0],
        other_bytes=totals[False][1], losses=losses, loss_marked=marked,
        backward_ops=backward_ops, optimizer_ops=optimizer_ops,
        op_types=dict(sorted(op_types.items(), key=lambda kv: (-kv[1], kv[0]))))


def _loss_candidates(program: Program, feeds: list[Variable], read: set[str]) -> tuple[list[VarInfo], bool]:
    block = program.global_block()
    marked = [op for op in block.ops if op_role(op) & OP_ROLE_LOSS and is_forward(op)]
    if marked:
        out = []
        for op in marked:
            for n in op.output_arg_names:
                v = block.find_var_recursive(n)
                if v is not None and _is_scalar_float(v) and all(o.name != n for o in out):
                    out.append(_info(v, op.type))
        return out, True
    # Forward reachability from the feeds and the persistable vars.
    live = {v.name for v in feeds}
    live.update(v.name for v in block.vars.values() if v.persistable and v.type not in _NOT_VALUES)
    writer: dict[str, str] = {}
    order: list[str] = []
    for op in block.ops:
        if not is_forward(op) or op.type in ("feed", "fetch"):
            continue
        reached = any(n in live for n in op.input_arg_names)
        for n in op.output_arg_names:
            if n not in writer:
                order.append(n)
            writer[n] = op.type
            if reached:
                live.add(n)
    out = []
    for n in order:
        if n in read or n not in live:
            continue
        v = block.vars.get(n)
        if v is not None and not v.persistable and _is_scalar_float(v):
            out.append(_info(v, writer[n]))
    return out, False


def persistables_behind(program: Program, name: str) -> list[Variable]:
    """The persistable vars of block 0 (values, not feed / fetch holders) that
    forward ops compute `name` from, in the program's var order. In an
    inference model or a `jit.save` program these are the weights: Paddle
    saves them as persistable vars, not parameters, so `append_backward`
    finds no parameter behind the loss (the CLI says so, naming them)."""
    block = program.global_block()
    needed = {name}
    for op in reversed(block.ops):
        if not is_forward(op) or op.type in ("feed", "fetch"):
            continue
        if any(n in needed for n in op.output_arg_names):
            needed.update(op.input_arg_names)
    return [v for v in block.vars.values()
            if v.name in needed and v.persistable and v.type not in _NOT_VALUES]


def needed_inputs(program: Program) -> tuple[list[Variable], list[Variable]]:
    """(feeds, persistable vars) block 0 reads before any of its ops writes them:
    what a run must be given. A `feed` op's output counts as a feed (the
    value comes from outside), and a var in neither group (a temporary no op
    writes) is left to the interpreter's own error."""
    block = program.global_block()
    feeds = {v.name for v in feed_vars(program)}
    written: set[str] = set()
    seen: set[str] = set()
    need_feeds: list[Variable] = []
    need_state: list[Variable] = []
    for op in block.ops:
        if op.type in ("feed", "fetch"):
            continue
        for n in op.input_arg_names:
            if n in written or n in seen:
                continue
            seen.add(n)
            v = block.find_var_recursive(n)
            if v is None:
                continue
            if n in feeds:
                need_feeds.append(v)
            elif v.persistable and v.type not in _NOT_VALUES:
                need_state.append(v)
        written.update(op.output_arg_names)
    return need_feeds, need_state
