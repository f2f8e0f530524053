"""The program model: thin views over Paddle's ProgramDesc protobuf.

`Program` -> `Block` -> `Operator` / `Variable`. Views hold a reference to the
protobuf message they describe and never copy its data, so what is read is
what will be written. Each block builds its name index once (on load or on
creation) and keeps it up to date through its own builders; code that edits
`desc` directly must call `Block.sync()`.
"""
from __future__ import annotations

from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from ..base import attrs as _attrs
from ..base import dtypes
from .._proto import framework_pb2 as pb
from ..base._gc import paused_gc
from ..base.errors import ArgumentError, VarNotFoundError, where
# Paddle's OpRole values and op attr names: many modules import them from here.
from ..base.op_roles import (
    OP_DEVICE_ATTR, OP_ROLE_ATTR, OP_ROLE_BACKWARD, OP_ROLE_FORWARD, OP_ROLE_LOSS, OP_ROLE_OPTIMIZE,
    OP_ROLE_VAR_ATTR)  # noqa: F401
from .text import program_to_text
from .validate import validate
from .wire import MAX_PROGRAM_BYTES, check_block_attrs, check_op_structure, parse_program_desc

if TYPE_CHECKING:   # annotations only: loading a program does not import NumPy
    import numpy as np

VarType = pb.VarType
_TENSOR_FIELDS = dtypes.TENSOR_VAR_TYPES



class Variable:
    """A view of one `VarDesc` in a block."""

    __slots__ = ("block", "desc")

    def __init__(self, block: "Block", desc: pb.VarDesc) -> None:
        self.block = block
        self.desc = desc

    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def type(self) -> int:
        """The VarType.Type of the var itself (DENSE_TENSOR, FEED_MINIBATCH, ...)."""
        return self.desc.type.type

    def _tensor_desc(self) -> pb.VarType.TensorDesc | None:
        vt = self.desc.type
        field = _TENSOR_FIELDS.get(vt.type)
        if field is None:
            return None
        sub = getattr(vt, field)
        return sub if field == "selected_rows" else sub.tensor

    @property
    def shape(self) -> tuple[int, ...]:
        """Declared dims; -1 marks an unknown size. () for 0-D and non-tensors."""
        t = self._tensor_desc()
        return tuple(t.dims[:]) if t is not None else ()  # (a slice is made in C)

    @property
    def data_type(self) -> int | None:
        """The VarType.Type element type (FP32, INT64, ...), or None for non-tensors."""
        t = self._tensor_desc()
        return t.data_type if t is not None else None

    @property
    def dtype(self) -> np.dtype | None:
        """The element type as a NumPy dtype (None for non-tensors)."""
        dt = self.data_type
        return None if dt is None else dtypes.to_numpy(dt)

    @property
    def persistable(self) -> bool:
        return self.desc.persistable

    @persistable.setter
    def persistable(self, value: bool) -> None:
        self.desc.persistable = bool(value)

    @property
    def stop_gradient(self) -> bool:
        return self.desc.stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, value: bool) -> None:
        self.desc.stop_gradient = bool(value)

    @property
    def is_parameter(self) -> bool:
        """True for what Paddle calls a Parameter: a VarDesc with `is_parameter` set.

        Paddle sets the flag on every parameter it creates and re-creates
        `Parameter` objects from it when it parses a file
        (`Block._sync_with_cpp`); vars without it are never parameters there,
        whatever their persistable flag, and pybackward follows that rule.
        """
        return self.desc.is_parameter

    def __repr__(self) -> str:
        dt = dtypes.type_name(self.data_type) if self.data_type is not None else dtypes.type_name(self.type)
        flags = "".join(f", {f}" for f in ("persistable", "is_parameter", "stop_gradient")
                        if getattr(self.desc, f))
        return f"Variable({self.name!r}, shape={list(self.shape)}, {dt}{flags})"


def _all_args(slots: Sequence[pb.OpDesc.Var]) -> tuple[str, ...]:
    """The arguments of all slots, in order (slices of the repeated fields are
    made in C; iterating them from Python costs more)."""
    if len(slots) == 1:
        return tuple(slots[0].arguments[:])
    return tuple([a for v in slots for a in v.arguments[:]])


#: An op's slots as `Operator.slot_records` gives them: (inputs, outputs),
#: each [(slot name, [argument, ...]), ...] in file order.
SlotRecords = tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]]
_NAME = attrgetter("name")


class Operator:
    """A view of one `OpDesc` in a block.

    Argument name lists are cached; edit slots through `rename_input` /
    `rename_output` (or call `Block.sync()` after editing `desc` directly).
    """

    __slots__ = ("block", "desc", "_in_args", "_out_args", "_sub_block", "_slots")

    def __init__(self, block: "Block", desc: pb.OpDesc, slots: "SlotRecords | None" = None,
                 sub_block: int | None | bool = False, in_args: tuple[str, ...] | None = None,
                 out_args: tuple[str, ...] | None = None) -> None:
        """`slots` / `sub_block`: what the loader's validation read (the
        records `slot_records` gives; None when the op has no sub-block), so
        that the view need not read them again. `in_args` / `out_args`: the
        argument names of all input / output slots in order, when the caller
        just wrote `desc` from them (`input_arg_names` / `output_arg_names`)."""
        self.block = block
        self.desc = desc
        self._in_args: tuple[str, ...] | None = in_args
        self._out_args: tuple[str, ...] | None = out_args
        self._sub_block: int | None | bool = sub_block  # False: not looked up yet
        self._slots: SlotRecords | None = slots

    @property
    def sub_block(self) -> int | None:
        """The index named by the `sub_block` attr (conditional_block, while, ...), or None."""
        if self._sub_block is False:
            # Most ops have no such attr: their bytes, serialised in C, say so
            # faster than a scan of the attr messages (never wrongly: an op
            # with the attr always holds its name's bytes).
            if b"\n\tsub_block" not in self.desc.SerializePartialToString():
                self._sub_block = None
                return None
            a = self._find_attr("sub_block")
            self._sub_block = None if a is None else a.block_idx
        return self._sub_block  # type: ignore[return-value]

    @property
    def type(self) -> str:
        return self.desc.type

    @property
    def idx(self) -> int:
        """Position of the op in its block (a scan: use in messages, not loops)."""
        for i, op in enumerate(self.block.ops):
            if op.desc is self.desc:
                return i
        return -1

    # -- slots -------------------------------------------------------------
    @staticmethod
    def _slot(vars_: Iterable[pb.OpDesc.Var], slot: str) -> list[str]:
        for v in vars_:
            if v.parameter == slot:
                return list(v.arguments)
        return []

    def input(self, slot: str) -> list[str]:
        """Argument names of an input slot ([] when the slot is absent)."""
        return self._slot(self.desc.inputs, slot)

    def output(self, slot: str) -> list[str]:
        """Argument names of an output slot ([] when the slot is absent)."""
        return self._slot(self.desc.outputs, slot)

    @property
    def input_names(self) -> list[str]:
        """The input slot names, in file order."""
        return [v.parameter for v in self.desc.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.parameter for v in self.desc.outputs]

    @property
    def input_arg_names(self) -> tuple[str, ...]:
        """Every input argument, slot by slot."""
        if self._in_args is None:
            rec = self._slots
            self._in_args = (_all_args(self.desc.inputs) if rec is None
                             else tuple([a for _, args in rec[0] for a in args]))
        return self._in_args

    @property
    def output_arg_names(self) -> tuple[str, ...]:
        if self._out_args is None:
            rec = self._slots
            self._out_args = (_all_args(self.desc.outputs) if rec is None
                              else tuple([a for _, args in rec[1] for a in args]))
        return self._out_args

    def slot_records(self) -> "SlotRecords":
        """(inputs, outputs), each a list of (slot name, arguments) in file
        order: the slots read once (validation hands them over on load) and
        cached like the argument names. Shared: do not edit them."""
        rec = self._slots
        if rec is None:
            desc = self.desc
            rec = self._slots = ([(v.parameter, v.arguments[:]) for v in desc.inputs],
                                 [(v.parameter, v.arguments[:]) for v in desc.outputs])
        return rec

    @property
    def inputs(self) -> dict[str, list[str]]:
        return {v.parameter: list(v.arguments) for v in self.desc.inputs}

    @property
    def outputs(self) -> dict[str, list[str]]:
        return {v.parameter: list(v.arguments) for v in self.desc.outputs}

    def rename_input(self, old: str, new: str) -> None:
        _rename_args(self.desc.inputs, old, new)
        self._in_args = self._slots = None

    def rename_output(self, old: str, new: str) -> None:
        _rename_args(self.desc.outputs, old, new)
        self._out_args = self._slots = None

    def set_input(self, slot: str, args: Sequence[str]) -> None:
        """Replace the arguments of an input slot (adding the slot if absent)."""
        _set_slot(self.desc.inputs, slot, args)
        self._in_args = self._slots = None

    # -- attrs -------------------------------------------------------------
    def _find_attr(self, name: str) -> pb.OpDesc.Attr | None:
        for a in self.desc.attrs:
            if a.name == name:
                return a
        return None

    def has_attr(self, name: str) -> bool:
        return self._find_attr(name) is not None

    def attr(self, name: str, default: Any = None) -> Any:
        """An attr decoded to Python by its AttrType; `default` when absent."""
        a = self._find_attr(name)
        return default if a is None else _attrs.decode(a)

    def attr_type(self, name: str) -> int | None:
        a = self._find_attr(name)
        return None if a is None else a.type

    @property
    def attr_names(self) -> list[str]:
        return [a.name for a in self.desc.attrs]

    @property
    def all_attrs(self) -> dict[str, Any]:
        return {a.name: _attrs.decode(a) for a in self.desc.attrs}

    def set_attr(self, name: str, value: Any, attr_type: int | None = None) -> None:
        """Set an attr, keeping its existing AttrType unless one is given."""
        set_attr(self.desc, name, value, attr_type)
        if name == "sub_block":
            self._sub_block = False

    def sub_blocks(self) -> list[int]:
        """Indices of the blocks named by this op's BLOCK / BLOCKS attrs."""
        return sub_block_indices(self.desc)

    def __repr__(self) -> str:
        ins = ", ".join(f"{k}={v}" for k, v in self.inputs.items())
        outs = ", ".join(f"{k}={v}" for k, v in self.outputs.items())
        return f"Operator({outs} = {self.type}({ins}))"


def _rename_args(vars_: Iterable[pb.OpDesc.Var], old: str, new: str) -> None:
    for v in vars_:
        for i, a in enumerate(v.arguments):
            if a == old:
                v.arguments[i] = new


def _set_slot(vars_, slot: str, args: Sequence[str]) -> None:
    for v in vars_:
        if v.parameter == slot:
            del v.arguments[:]
            v.arguments.extend(args)
            return
    vars_.add(parameter=slot, arguments=list(args))


def set_attr(desc: pb.OpDesc, name: str, value: Any, attr_type: int | None = None) -> None:
    """Set attr `name` on an OpDesc (in place if present, keeping its type)."""
    for a in desc.attrs:
        if a.name == name:
            _attrs.encode(a, name, value, a.type if attr_type is None else attr_type)
            return
    new = pb.OpDesc.Attr()
    _attrs.encode(new, name, value, attr_type)
    insert_sorted(desc.attrs, new)


def insert_sorted(attrs, new: pb.OpDesc.Attr) -> None:
    """Insert `new` into `attrs` (an OpDesc's repeated field, or a list) as
    Paddle serialises attrs - sorted by name after the type's extra attrs: a
    new one joins the trailing sorted run (e.g. op_role_var set on a
    conditional_block_grad lands before sub_block), not the end."""
    j = len(attrs)
    while j > 0 and attrs[j - 1].name > new.name:
        j -= 1
    attrs.insert(j, new)


def prepend_to_list_attr(desc: pb.OpDesc, name: str, values: list, attr_type: int) -> None:
    """Set list attr `name` to `values` + its current value (none if absent),
    as `set_attr(desc, name, values + old, attr_type)` would, in one scan of
    the attrs (the gradient pass tags thousands of grad ops this way)."""
    for a in desc.attrs:
        if a.name == name:
            _attrs.encode(a, name, list(values) + list(_attrs.decode(a) or []), attr_type)
            return
    new = pb.OpDesc.Attr()
    _attrs.encode(new, name, list(values), attr_type)
    insert_sorted(desc.attrs, new)


_BLOCK, _BLOCKS = pb.AttrType.BLOCK, pb.AttrType.BLOCKS


def dedupe_attrs(desc: pb.OpDesc) -> bool:
    """Keep one attr per name, as Paddle does when it parses an OpDesc: a name
    written twice (an "extra" attr also set as a plain one serialises in both
    sections) stays where it first stands, with its last value. True if
    anything changed."""
    attrs = desc.attrs
    names = [a.name for a in attrs]
    if len(set(names)) == len(names):
        return False
    last = {a.name: a for a in attrs}
    keep = []
    for n in dict.fromkeys(names):
        a = pb.OpDesc.Attr()
        a.CopyFrom(last[n])
        keep.append(a)
    del attrs[:]
    attrs.extend(keep)
    return True


def sub_block_indices(desc: pb.OpDesc) -> list[int]:
    out: list[int] = []
    for a in desc.attrs:
        t = a.type
        if t == _BLOCK:
            out.append(a.block_idx)
        elif t == _BLOCKS:
            out.extend(a.blocks_idx)
    return out


def make_op_desc(type: str, inputs: Mapping[str, Sequence[str]] | None = None,
                 outputs: Mapping[str, Sequence[str]] | None = None,
                 attrs: Mapping[str, Any] | None = None) -> pb.OpDesc:
    """A detached OpDesc. Slot and attr order is kept as given."""
    desc = pb.OpDesc(type=type)
    for slot, args in (inputs or {}).items():
        desc.inputs.add(parameter=slot, arguments=[_arg_name(a) for a in args])
    for slot, args in (outputs or {}).items():
        desc.outputs.add(parameter=slot, arguments=[_arg_name(a) for a in args])
    for name, value in (attrs or {}).items():
        if isinstance(value, pb.OpDesc.Attr):
            desc.attrs.add().CopyFrom(value)
        else:
            _attrs.encode(desc.attrs.add(), name, value)
    return desc


def _arg_name(a: Any) -> str:
    if isinstance(a, Variable):
        return a.name
    if isinstance(a, str):
        return a
    raise TypeError(f"an op argument must be a Variable or a name, got {type(a).__name__}")


class Block:
    """A view of one `BlockDesc`, with its var index built once."""

    def __init__(self, program: "Program", desc: pb.BlockDesc, loaded: "tuple | None" = None) -> None:
        self.program = program
        self.desc = desc
        if loaded is None:
            self.sync()
        else:
            self._adopt(*loaded)

    def _adopt(self, names: list[str], records: list, with_blocks: set[int]) -> None:
        """`sync()` from what the loader's validation read: the var names (in
        file order, distinct), every op's slot records, and which ops carry
        BLOCK / BLOCKS attrs (every other op has no sub-block)."""
        me = repeat(self)
        self._vars: dict[str, Variable] = dict(zip(names, map(Variable, me, self.desc.vars)))
        if with_blocks:
            self.ops: list[Operator] = [Operator(self, d, rec, False if i in with_blocks else None)
                                        for i, (d, rec) in enumerate(zip(self.desc.ops, records))]
        else:
            self.ops = list(map(Operator, me, self.desc.ops, records, repeat(None)))

    def sync(self) -> None:
        """Rebuild the var index and op views from `desc` (after direct edits)."""
        descs = self.desc.vars
        self._vars: dict[str, Variable] = {v.name: Variable(self, v) for v in descs}
        if len(self._vars) != len(descs):
            # A duplicate name is rejected by validation; the first one wins here.
            self._vars = {}
            for v in descs:
                self._vars.setdefault(v.name, Variable(self, v))
        self.ops: list[Operator] = [Operator(self, d) for d in self.desc.ops]

    def reindex_vars(self, start: int, names: Sequence[str] | None = None) -> None:
        """Re-point the var index at `desc.vars[start:]` (after they were rewritten),
        keeping the index in file order. `names`: those vars' names, in order,
        when the caller just wrote them (not read back from the descs)."""
        old = self._vars
        new = dict(old) if len(old) == start else dict(list(old.items())[:start])   # (a new dict, as before)
        descs = self.desc.vars[start:]
        # (the names and views made in C loops: the same entries, in the same order)
        new.update(zip(map(_NAME, descs) if names is None else names, map(Variable, repeat(self), descs)))
        self._vars = new

    @property
    def idx(self) -> int:
        return self.desc.idx

    @property
    def parent_idx(self) -> int:
        return self.desc.parent_idx

    @property
    def forward_block_idx(self) -> int:
        return self.desc.forward_block_idx

    @property
    def parent(self) -> "Block | None":
        p = self.desc.parent_idx
        return self.program.blocks[p] if 0 <= p < len(self.program.blocks) and p != self.idx else None

    # -- vars --------------------------------------------------------------
    @property
    def vars(self) -> dict[str, Variable]:
        """This block's own vars by name, in file order."""
        return self._vars

    def has_var(self, name: str) -> bool:
        """Declared in this block itself."""
        return name in self._vars

    def find_var_recursive(self, name: str) -> Variable | None:
        """The var as seen from this block: here, else in the nearest ancestor."""
        v = self._vars.get(name)
        if v is not None:
            return v
        b: Block | None = self
        seen = 0
        while b is not None and seen <= len(self.program.blocks):
            v = b._vars.get(name)
            if v is not None:
                return v
            b = b.parent
            seen += 1
        return None

    def has_var_recursive(self, name: str) -> bool:
        return self.find_var_recursive(name) is not None

    def var(self, name: str) -> Variable:
        """The var named `name` in this block or an ancestor; VarNotFoundError if none."""
        v = self.find_var_recursive(name)
        if v is None:
            raise VarNotFoundError(
                f"{where(self.program.source, self.idx, var=name)}: no such variable"
                + _did_you_mean(name, self._all_visible_names()))
        return v

    def _all_visible_names(self) -> Iterator[str]:
        b: Block | None = self
        seen = 0
        while b is not None and seen <= len(self.program.blocks):
            yield from b._vars
            b = b.parent
            seen += 1

    def create_var(self, name: str, shape: Sequence[int] = (), dtype: Any = "float32",
                   type: int = VarType.DENSE_TENSOR, persistable: bool = False,
                   stop_gradient: bool = False, is_parameter: bool = False,
                   need_check_feed: bool = False) -> Variable:
        """Declare a var in this block and return it; an existing one is returned as is."""
        existing = self._vars.get(name)
        if existing is not None:
            return existing
        desc = self.desc.vars.add()
        fill_var_desc(desc, name, shape, dtype, type, persistable, stop_gradient,
                      is_parameter, need_check_feed)
        v = Variable(self, desc)
        self._vars[name] = v
        return v

    def create_var_like(self, name: str, like: Variable, **overrides: Any) -> Variable:
        """Declare `name` with the type, shape and dtype of `like`."""
        existing = self._vars.get(name)
        if existing is not None:
            return existing
        desc = self.desc.vars.add()
        desc.name = name
        desc.type.CopyFrom(like.desc.type)
        for k, val in overrides.items():
            setattr(desc, k, val)
        v = Variable(self, desc)
        self._vars[name] = v
        return v

    def all_parameters(self) -> list[Variable]:
        """The parameters declared in this block, in file order."""
        return [v for v in self._vars.values() if v.is_parameter]

    # -- ops ---------------------------------------------------------------
    def append_op(self, type: str, inputs: Mapping[str, Sequence[Any]] | None = None,
                  outputs: Mapping[str, Sequence[Any]] | None = None,
                  attrs: Mapping[str, Any] | None = None) -> Operator:
        """Append an op; arguments may be Variables or names."""
        return self.append_op_desc(make_op_desc(type, inputs, outputs, attrs))

    def append_op_desc(self, desc: pb.OpDesc) -> Operator:
        """Append a copy of a detached OpDesc and return its view."""
        new = self.desc.ops.add()
        new.CopyFrom(desc)
        op = Operator(self, new)
        self.ops.append(op)
        return op

    def extend_op_descs(self, descs: Iterable[pb.OpDesc]) -> list[Operator]:
        """Append many detached OpDescs at once (linear in their number)."""
        start = len(self.desc.ops)
        self.desc.ops.extend(descs)
        new = [Operator(self, self.desc.ops[i]) for i in range(start, len(self.desc.ops))]
        self.ops.extend(new)
        return new

    def insert_op(self, index: int, type: str, inputs: Mapping[str, Sequence[Any]] | None = None,
                  outputs: Mapping[str, Sequence[Any]] | None = None,
                  attrs: Mapping[str, Any] | None = None) -> Operator:
        """Insert an op before position `index` (linear in the block's size)."""
        return self.insert_op_desc(index, make_op_desc(type, inputs, outputs, attrs))

    def insert_op_desc(self, index: int, desc: pb.OpDesc) -> Operator:
        n = len(self.desc.ops)
        if not -n <= index <= n:
            raise ArgumentError(f"block {self.idx}: op index {index} out of range 0..{n}")
        index = index % (n + 1) if index < 0 else index
        descs = [pb.OpDesc() for _ in range(n - index)]
        for d, old in zip(descs, self.desc.ops[index:]):
            d.CopyFrom(old)
        del self.desc.ops[index:]
        self.desc.ops.add().CopyFrom(desc)
        self.desc.ops.extend(descs)
        self.ops = [Operator(self, d) for d in self.desc.ops]
        return self.ops[index]

    def remove_op(self, index: int) -> None:
        del self.desc.ops[index]
        self.ops = [Operator(self, d) for d in self.desc.ops]

    def __repr__(self) -> str:
        return f"Block(idx={self.idx}, parent={self.parent_idx}, vars={len(self._vars)}, ops={len(self.ops)})"


def fill_var_desc(desc: pb.VarDesc, name: str, shape: Sequence[int], dtype: Any,
                  type: int = VarType.DENSE_TENSOR, persistable: bool = False,
                  stop_gradient: bool = False, is_parameter: bool = False,
                  need_check_feed: bool = False) -> None:
    desc.name = name
    desc.type.type = type
    field = dtypes.TENSOR_VAR_TYPES.get(type)
    if field is not None:
        sub = getattr(desc.type, field)
        t = sub if field == "selected_rows" else sub.tensor
        t.data_type = dtypes.from_any(dtype)
        t.dims.extend(-1 if d is None else int(d) for d in shape)
    if persistable:
        desc.persistable = True
    if need_check_feed:
        desc.need_check_feed = True
    if is_parameter:
        desc.is_parameter = True
    if stop_gradient:
        desc.stop_gradient = True


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    from ..base.names import close_names       # bounded: long names cost no more than short ones
    close = close_names(name, candidates, n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


class Program:
    """A view of one `ProgramDesc`: its blocks, block 0 the global one."""

    def __init__(self, desc: pb.ProgramDesc | None = None, source: str | None = None,
                 _loaded: list | None = None) -> None:
        if desc is None:
            desc = pb.ProgramDesc()
            desc.blocks.add(idx=0, parent_idx=-1)
        self.desc = desc
        #: Where the program came from, for error messages (a file name).
        self.source = source
        #: How many times a backward section was appended (Paddle's
        #: `_appending_grad_times`; not stored in the file).
        self.appending_grad_times = 0
        #: Read from bytes (as Paddle's `parse_from_string`), not built in
        #: memory: the pass then reads its ops as Paddle's parse does.
        self.parsed = False
        #: The ops of a parsed program that name an attr twice, found by the
        #: loader's validation; None: not known (look at every op).
        self.repeated_attr_ops: list[Operator] | None = None
        self.blocks: list[Block] = ([Block(self, b) for b in desc.blocks] if _loaded is None
                                    else [Block(self, b, ld) for b, ld in zip(desc.blocks, _loaded)])
        #: Vars per block as loaded. Paddle writes the vars a file had in file
        #: order and every var added since after them, sorted by name.
        self.loaded_var_counts: list[int] = [len(b.vars) for b in desc.blocks]

    @classmethod
    def from_bytes(cls, data: bytes, source: str | None = None) -> "Program":
        return read_program(data, source=source)

    def to_bytes(self) -> bytes:
        return self.desc.SerializeToString()

    def block(self, idx: int) -> Block:
        if not 0 <= idx < len(self.blocks):
            raise ArgumentError(f"{where(self.source)}: block index {idx} out of range "
                                f"(the program has {len(self.blocks)} blocks)")
        return self.blocks[idx]

    def global_block(self) -> Block:
        return self.blocks[0]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def var(self, name: str) -> Variable:
        """A var of the global block."""
        return self.blocks[0].var(name)

    def all_parameters(self) -> list[Variable]:
        return self.blocks[0].all_parameters()

    def create_block(self, parent_idx: int | None = None, forward_block_idx: int = -1) -> Block:
        """Append a new block (parent: block 0 unless given) and return it."""
        idx = len(self.desc.blocks)
        parent = 0 if parent_idx is None else parent_idx
        if not -1 <= parent < idx:
            raise ArgumentError(f"parent block {parent} out of range 0..{idx - 1}")
        desc = self.desc.blocks.add(idx=idx, parent_idx=parent)
        if forward_block_idx != -1:
            desc.forward_block_idx = forward_block_idx
        b = Block(self, desc)
        self.blocks.append(b)
        return b

    def clone(self) -> "Program":
        """A deep copy (the desc is copied; the views are new)."""
        desc = pb.ProgramDesc()
        desc.CopyFrom(self.desc)
        p = Program(desc, self.source)
        p.appending_grad_times = self.appending_grad_times
        p.parsed = self.parsed
        p.loaded_var_counts = list(self.loaded_var_counts)
        return p

    def sync(self) -> None:
        """Rebuild every view after direct edits of `desc`."""
        self.blocks = [Block(self, b) for b in self.desc.blocks]
        self.repeated_attr_ops = None

    def rebind(self) -> None:
        """Point the existing views at `desc` again after it was replaced as a
        whole (a failed pass restoring its copy): Block and Variable objects
        users hold stay valid; blocks and vars that no longer exist are dropped."""
        self.repeated_attr_ops = None   # the restored descs may name attrs twice again
        n = len(self.desc.blocks)
        del self.blocks[n:]
        for i, bdesc in enumerate(self.desc.blocks):
            if i >= len(self.blocks):
                self.blocks.append(Block(self, bdesc))
                continue
            b = self.blocks[i]
            b.desc = bdesc
            old = b._vars
            b._vars = {}
            for vd in bdesc.vars:
                v = old.get(vd.name)
                if v is None:
                    v = Variable(b, vd)
                else:
                    v.desc = vd
                b._vars.setdefault(vd.name, v)
            b.ops = [Operator(b, d) for d in bdesc.ops]

    def __repr__(self) -> str:
        n_ops = sum(len(b.ops) for b in self.blocks)
        return f"Program({self.source or '<memory>'}: {len(self.blocks)} blocks, {n_ops} ops)"

    def __str__(self) -> str:
        return program_to_text(self)


def read_program(data: bytes, source: str | None = None, check_vars: bool = True, text: bool = False,
                 max_bytes: int = MAX_PROGRAM_BYTES) -> Program:
    """Parse and validate program bytes (binary, or text format if `text`):
    what `io.loads` and `Program.from_bytes` do."""
    desc, label = parse_program_desc(data, source, text, max_bytes)
    with paused_gc():
        found = validate(desc, label, check_vars=check_vars)
        # Validation read every var name, every op's slots and every attr:
        # the views take the names and slots, and an op it found no BLOCK
        # attr on has no sub-block (the view need not look for one).
        with_blocks: list[set[int]] = [set() for _ in found.slots]
        for b, i, _ in found.block_attrs:
            with_blocks[b].add(i)
        program = Program(desc, source=source,
                          _loaded=list(zip(found.var_names, found.slots, with_blocks)))
        program.parsed = True
        blocks = program.blocks
        program.repeated_attr_ops = [blocks[b].ops[i] for b, i in found.repeated_attrs]
        check_block_attrs(program, found.block_attrs)
        check_op_structure(program, found.types)
        return program
