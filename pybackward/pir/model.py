"""The PIR program model: values in SSA form, ops with operands, results, attributes
and regions, blocks with arguments.

A `Program` has one top region with one block (the body of Paddle's module
op). An `Operation` has a full name (`pd_op.matmul`, `builtin.parameter`,
`cf.yield`), operands (a `Value` or None for Paddle's null operand), results
(each a `Value` with a `Type`), attributes in file order (`attrs`, the file's
"A") and result attributes (`result_attrs`, "OA": `stop_gradient`,
`persistable`, one bool per result), and regions (`pd_op.if` has two,
`pd_op.while` and `pd_op.pylayer` one). A `Value` knows its defining op (or
block, for a block argument) and its uses, so a pass can walk def-use chains
without scanning the program.

Values keep the id they have in the file (`%5` is `value.id == 5`; block
arguments are negative). The writer numbers values the way Paddle does (walk
order), so a program read from a Paddle file keeps its ids; `Program.value()`
also finds a value by the names a user sees (parameter, data, fetch and
shadow_output names).
"""
from __future__ import annotations

import difflib
from typing import Any, Iterator

from ..base.errors import ArgumentError, VarNotFoundError
from .types import NULL_TYPE, Attr, Type

#: Ops whose result (or operand) carries a user-visible name, and the attribute holding it.
NAMED_RESULT_OPS = {"builtin.parameter": "parameter_name", "pd_op.data": "name", "builtin.constant": "value"}
NAMED_OPERAND_OPS = {"pd_op.fetch": "name", "builtin.shadow_output": "output_name",
                     "builtin.set_parameter": "parameter_name"}


class Value:
    """An SSA value: an op result or a block argument."""

    __slots__ = ("id", "type", "owner", "index", "uses", "key")

    def __init__(self, type_: Type, owner: "Operation | Block", index: int, id_: int | None = None) -> None:
        self.type, self.owner, self.index, self.id = type_, owner, index, id_
        self.uses: list[tuple[Operation, int]] = []
        self.key: str | None = None      # the keyword of a keyword block argument

    @property
    def is_block_arg(self) -> bool:
        return isinstance(self.owner, Block)

    @property
    def defining_op(self) -> "Operation | None":
        return self.owner if isinstance(self.owner, Operation) else None

    @property
    def is_null(self) -> bool:
        """A result with Paddle's null type (a gradient nobody asked for)."""
        return self.type is NULL_TYPE

    @property
    def stop_gradient(self) -> bool | None:
        """The result's `stop_gradient` flag (None for a block argument or when absent)."""
        op = self.defining_op
        return None if op is None else op.result_flag("stop_gradient", self.index)

    def __repr__(self) -> str:
        where = (f"arg {self.index}" if self.is_block_arg
                 else f"{self.owner.name} result {self.index}")  # type: ignore[union-attr]
        return f"<pir value %{self.id if self.id is not None else '?'} ({where})>"


class Operation:
    """One op. Build new ones with `Operation(name, operands, result_types, attrs)`."""

    __slots__ = ("name", "operands", "results", "attrs", "result_attrs", "regions", "block", "write_result_attrs")

    def __init__(self, name: str, operands: "list[Value | None] | tuple" = (), result_types: "list[Type] | tuple" = (),
                 attrs: dict[str, Attr] | None = None, result_attrs: dict[str, Attr] | None = None,
                 num_regions: int = 0) -> None:
        self.name = name
        self.operands: list[Value | None] = list(operands)
        for i, v in enumerate(self.operands):
            if v is not None:
                v.uses.append((self, i))
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict[str, Attr] = dict(attrs or {})
        self.result_attrs: dict[str, Attr] = dict(result_attrs or {})
        self.regions = [Region(self) for _ in range(num_regions)]
        self.block: Block | None = None
        self.write_result_attrs = True   # the file had an "OA" key (Paddle omits it when not trainable)

    @classmethod
    def bare(cls, name: str) -> "Operation":
        """An op with nothing yet (no operands, results, attributes or regions): what a
        reader fills in place, skipping the constructor's copies."""
        op = cls.__new__(cls)
        op.name, op.operands, op.results, op.attrs, op.result_attrs, op.regions = name, [], [], {}, {}, []
        op.block, op.write_result_attrs = None, True
        return op

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def type(self) -> str:
        """The name without its dialect: `matmul` for `pd_op.matmul`."""
        return self.name.split(".", 1)[1]

    def attr(self, name: str, default: Any = ...) -> Any:
        """An attribute's plain Python value (also looks in the result attributes)."""
        a = self.attrs.get(name) or self.result_attrs.get(name)
        if a is None:
            if default is ...:
                raise KeyError(f"{self.name} has no attribute {name!r}")
            return default
        return a.py()

    def result_flag(self, name: str, index: int) -> bool | None:
        """Result `index`'s entry in the bool-array result attribute `name` (stop_gradient, persistable)."""
        a = self.result_attrs.get(name)
        if a is None or a.tag != "0.a_array" or index >= len(a.value):
            return None
        return bool(a.value[index].value)

    def set_operand(self, index: int, value: Value | None) -> None:
        old = self.operands[index]
        if old is not None:
            old.uses.remove((self, index))
        self.operands[index] = value
        if value is not None:
            value.uses.append((self, index))

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, in file order (no recursion)."""
        stack: list[Iterator[Operation]] = [iter((self,))]
        while stack:
            op = next(stack[-1], None)
            if op is None:
                stack.pop()
                continue
            yield op
            if op.regions:
                stack.append(_ops_of_regions(op))

    def __repr__(self) -> str:
        return f"<pir op {self.name} ({len(self.operands)} operands, {len(self.results)} results)>"


def _ops_of_regions(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            yield from block.ops


class Block:
    """An ordered list of ops, with the block's arguments (a `while` body's loop variables)."""

    __slots__ = ("ops", "args", "kwargs", "region")

    def __init__(self, region: "Region | None" = None) -> None:
        self.ops: list[Operation] = []
        self.args: list[Value] = []
        self.kwargs: list[Value] = []
        self.region = region

    def add_arg(self, type_: Type) -> Value:
        v = Value(type_, self, len(self.args))
        self.args.append(v)
        return v

    def append(self, op: Operation) -> Operation:
        op.block = self
        self.ops.append(op)
        self._touch()
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.block = self
        self.ops.insert(index, op)
        self._touch()
        return op

    def remove(self, op: Operation) -> None:
        """Take `op` out (its results must be unused); its operands lose the use."""
        for r in op.results:
            if r.uses:
                raise ArgumentError(f"{op.name}'s result {r.index} is still used by {r.uses[0][0].name}")
        for i, v in enumerate(op.operands):
            if v is not None:
                v.uses.remove((op, i))
        self.ops.remove(op)
        op.block = None
        self._touch()

    @property
    def parent_op(self) -> Operation | None:
        return self.region.op if self.region is not None else None

    def _touch(self) -> None:
        """Drop the program's name index: a value was added or removed."""
        block: Block | None = self
        while block is not None and block.region is not None:
            region = block.region
            if region.program is not None:
                region.program.names_changed()
                return
            block = region.op.block if region.op is not None else None


class Region:
    """A list of blocks owned by an op (or, for the top region, by the program)."""

    __slots__ = ("blocks", "op", "program")

    def __init__(self, op: Operation | None = None) -> None:
        self.blocks: list[Block] = []
        self.op = op
        self.program: Program | None = None

    def add_block(self) -> Block:
        b = Block(self)
        self.blocks.append(b)
        return b


class Program:
    """A PIR program: one top region holding one block.

    `trainable` is the file's `base_code.trainable` (None when absent),
    `file_version` the format version the file had before any upgrade (the
    model is always version 4), `source` the file name it came from.
    """

    __slots__ = ("region", "trainable", "file_version", "source", "_index")

    def __init__(self, trainable: bool | None = True) -> None:
        self.region = Region()
        self.region.program = self
        self.region.add_block()
        self.trainable = trainable
        self.file_version = 4
        self.source: str | None = None
        self._index: dict[str, Value] | None = None

    @property
    def block(self) -> Block:
        """The top block."""
        return self.region.blocks[0]

    @property
    def ops(self) -> list[Operation]:
        return self.block.ops

    def walk(self) -> Iterator[Operation]:
        """Every op, nested ones right after the op that owns them (file order)."""
        for op in list(self.block.ops):
            yield from op.walk()

    def num_ops(self) -> int:
        return sum(1 for _ in self.walk())

    # ------------------------------------------------------------------ names
    def names(self) -> dict[str, Value]:
        """Every name a value can be found by: `%N` ids and the parameter / data /
        fetch / shadow_output names (built once, rebuilt after the program changes)."""
        if self._index is None:
            index: dict[str, Value] = {}
            named: dict[str, Value] = {}
            for op in self.walk():
                for v in op.results:
                    if v.id is not None:
                        index[f"%{v.id}"] = v
                for r in op.regions:
                    for b in r.blocks:
                        for v in b.args + b.kwargs:
                            if v.id is not None:
                                index[f"%{v.id}"] = v
                attr = NAMED_RESULT_OPS.get(op.name)
                if attr is not None and op.results and attr in op.attrs:
                    n = op.attrs[attr].value
                    if isinstance(n, str):
                        named.setdefault(n, op.results[0])
                attr = NAMED_OPERAND_OPS.get(op.name)
                if attr is not None and op.operands and op.operands[0] is not None and attr in op.attrs:
                    n = op.attrs[attr].value
                    if isinstance(n, str):
                        named.setdefault(n, op.operands[0])
            index.update(named)
            self._index = index
        return self._index

    def names_changed(self) -> None:
        """Forget the name index (`names()` rebuilds it): call after renumbering values."""
        self._index = None

    def value(self, ref: "str | int | Value") -> Value:
        """The value called `ref`: `%5` / `5` / `-1` (its id in the file) or a parameter,
        data, fetch or shadow_output name. Raises VarNotFoundError naming close matches."""
        if isinstance(ref, Value):
            return ref
        if isinstance(ref, bool) or not isinstance(ref, (str, int)):
            raise VarNotFoundError(f"a PIR value is named by '%N' or a name, not {type(ref).__name__}")
        key = f"%{ref}" if isinstance(ref, int) else ref
        if isinstance(ref, str) and ref.lstrip("-").isdigit():
            key = f"%{ref}"
        index = self.names()
        v = index.get(key)
        if v is not None:
            return v
        names = [k for k in index if not k.startswith("%")]
        close = difflib.get_close_matches(key, names, n=3)
        where = f"{self.source}: " if self.source else ""
        hint = f"; close: {', '.join(repr(c) for c in close)}" if close else (
            f"; names: {', '.join(repr(n) for n in names[:8])}{', ...' if len(names) > 8 else ''}" if names
            else "")
        ids = [k for k in index if k.startswith("%")]
        span = f" (ids %{min(int(k[1:]) for k in ids)}..%{max(int(k[1:]) for k in ids)})" if ids else ""
        raise VarNotFoundError(f"{where}no value {key!r} in the program{span}{hint}")

    def parameters(self) -> list[Operation]:
        return [op for op in self.block.ops if op.name == "builtin.parameter"]

    def __repr__(self) -> str:
        return f"<pir program {self.source or ''} ({len(self.block.ops)} top-level ops)>"


def iter_write_order(program: Program) -> Iterator[tuple[str, Any]]:
    """("block", b) as a block starts, ("op", op) for each op, ("end", b) as a block
    ends, in the order Paddle writes a program: an op, then its regions' blocks
    (first region first). Iterative, so deep nesting costs no Python stack."""
    stack: list[list[Any]] = [[program.block, None]]
    while stack:
        top = stack[-1]
        block, it = top
        if it is None:
            top[1] = it = iter(block.ops)
            yield "block", block
        op = next(it, None)
        if op is None:
            stack.pop()
            yield "end", block
            continue
        yield "op", op
        for region in reversed(op.regions):
            for b in reversed(region.blocks):
                stack.append([b, None])


def make_value_ids(program: Program) -> None:
    """Number every value as Paddle's writer does: results 1, 2, ... and block
    arguments -1, -2, ... in write order (an op's results, then its regions)."""
    next_id, next_arg = 1, -1
    for kind, x in iter_write_order(program):
        if kind == "op":
            for v in x.results:
                v.id, next_id = next_id, next_id + 1
        elif kind == "block":
            for v in x.args + x.kwargs:
                v.id, next_arg = next_arg, next_arg - 1
    program.names_changed()
