"""Program, Block and Variable for the builder: pybackward's program views
(`pybackward.legacy.program.Program/Block/Variable`, subclassed - not a second
model), with Paddle's legacy `Block.append_op`, `create_var` and
`create_parameter` behaviour, default programs and `program_guard`.

What the subclasses add to pybackward's views:

* `Variable` objects keep their identity for the life of the program (the
  gradient pass rewrites VarDescs; the block re-points the same objects at
  the new messages), so a user's `x_emb` stays usable and hashable;
* Python operators on variables (`+ - * / @ **`, unary `-`), `.op`,
  `astype`, Paddle's `str(var)` form;
* creation order: `Block.all_parameters()` lists parameters in the order they
  were created, as Paddle's in-memory program does, while the serialised
  program lists vars sorted by name, as Paddle's file does (the block is
  re-sorted lazily, whenever `program.desc` is read);
* parameter metadata Paddle keeps only in memory (`trainable`,
  `optimize_attr`, `regularizer`, ...).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

from ..base import attrs as _attrs
from ..base import dtypes
from ..base.errors import ArgumentError
from .._proto import framework_pb2 as pb
from ..legacy.program import Block as _Block
from ..legacy.program import Operator
from ..legacy.program import Program as _Program
from ..legacy.program import Variable as _Variable
from ..legacy.text import program_to_text
from . import _infer
from ._clone import prune_for_test
from ._opdesc import (NO_LOD, OP_VERSION_MAP, PROGRAM_VERSION, attr_positions, fill_op_desc,
                      fill_var_desc)
from .unique_name import UniqueNameGenerator

VarType = pb.VarType
_NO_STOP_GRADIENT_PASS = frozenset({"conditional_block", "conditional_block_grad", "pylayer",
                                    "pylayer_grad", "while", "while_grad"})


def _type_str(t: int) -> str:
    return VarType.Type.Name(t)


class Variable(_Variable):
    """A var of a builder program: pybackward's `Variable` view, plus Paddle's
    Python-side behaviour (operators, `op`, `astype`, readable `str`)."""

    __slots__ = ()

    @property
    def program(self) -> "Program":
        return self.block.program

    @property
    def op(self):
        """The last op of the block that writes this var (None for feeds, parameters)."""
        for op in reversed(self.block.ops):
            if self.name in op.output_arg_names:
                return op
        return None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    ndimension = dim

    @property
    def lod_level(self) -> int:
        return self.desc.type.dense_tensor.legacy_lod_level

    @property
    def trainable(self) -> bool:
        info = self.block.program._param_info.get(self.name)
        return True if info is None else bool(info.get("trainable", True))

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self.block.program._param_info.setdefault(self.name, {})["trainable"] = bool(value)

    def _to_readable_code(self) -> str:
        type_str = _type_str(self.type)
        if self.type in (VarType.SELECTED_ROWS, VarType.DENSE_TENSOR):
            dt = dtypes.to_numpy(self.data_type).name if self.data_type != VarType.BF16 else "bfloat16"
            text = (f"{self.name} : {type_str}.shape{self.shape}.dtype({dt})"
                    f".stop_gradient({self.stop_gradient})")
        else:
            text = f"{self.name} : {type_str})"
        if self.is_parameter:
            text = ("trainable param " if self.trainable else "param ") + text
        else:
            text = "var " + text
        return ("persist " + text) if self.persistable else text

    def __str__(self) -> str:
        return self._to_readable_code()

    __repr__ = __str__  # `print([x_grad])` shows what Paddle's docs show

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return self._to_readable_code()

    __hash__ = object.__hash__


class Parameter(Variable):
    """A persistable trainable var (`is_parameter` set), as Paddle's `Parameter`."""

    __slots__ = ()

    @property
    def optimize_attr(self) -> dict:
        return self.block.program._param_info.get(self.name, {}).get(
            "optimize_attr", {"learning_rate": 1.0})

    @property
    def regularizer(self):
        return self.block.program._param_info.get(self.name, {}).get("regularizer")

    @property
    def do_model_average(self):
        return self.block.program._param_info.get(self.name, {}).get("do_model_average")

    @property
    def need_clip(self) -> bool:
        return self.block.program._param_info.get(self.name, {}).get("need_clip", True)


class Block(_Block):
    """pybackward's `Block` view with Paddle's legacy builders."""

    def __init__(self, program: "Program", desc: pb.BlockDesc):
        state = program._block_state.setdefault(desc.idx, {"objs": {}, "order": {}})
        self._objs: dict[str, Variable] = state["objs"]
        #: Names in creation order (a dict used as an ordered set: O(1) membership).
        self._order: dict[str, None] = state["order"]
        #: Which ops write each name: (the `ops` list indexed, how many of its
        #: ops, its last indexed op, name -> ops); see `_ops_writing`.
        self._writers: tuple[list, int, Any, dict[str, list]] | None = None
        super().__init__(program, desc)

    # -- keeping Variable objects --------------------------------------------
    def _adopt(self) -> None:
        objs = self.__dict__.get("_objs")
        if objs is None:  # during the base __init__
            return
        adopted: dict[str, _Variable] = {}
        for name, v in self._vars.items():
            cls = Parameter if v.desc.is_parameter else Variable
            obj = objs.get(name)
            if obj is None or type(obj) is not cls:
                obj = cls(self, v.desc)
                objs[name] = obj
            else:
                obj.block, obj.desc = self, v.desc
            adopted[name] = obj
        self._vars = adopted

    def sync(self) -> None:
        super().sync()
        self._adopt()

    def reindex_vars(self, start: int, names: Sequence[str] | None = None) -> None:
        super().reindex_vars(start, names)
        self._adopt()

    def create_var_like(self, name: str, like: _Variable, **overrides: Any) -> Variable:
        new = name not in self._vars
        super().create_var_like(name, like, **overrides)
        self._adopt()
        if new:
            self._note_new(name)
        return self._vars[name]  # type: ignore[return-value]

    def _note_new(self, name: str) -> None:
        self._order.setdefault(name)
        self.program._dirty.add(self.idx)

    def _ops_writing(self, name: str) -> list:
        """The ops of this block whose outputs include `name`, in block order.

        Answered from an index of op outputs that is extended as ops are
        appended, so creating N parameters costs O(N) rather than a scan of the
        block per parameter. The index is rebuilt whenever `ops` was replaced
        or edited other than by appending (insert, remove, sync); every hit is
        checked against the op's current outputs."""
        ops = self.ops
        n = len(ops)
        w = self._writers
        if w is None or w[0] is not ops or w[1] > n or (w[1] and ops[w[1] - 1] is not w[2]):
            w = (ops, 0, None, {})
        index, start = w[3], w[1]
        if start < n:
            for i in range(start, n):
                op = ops[i]
                for a in op.output_arg_names:
                    index.setdefault(a, []).append(op)
            w = (ops, n, ops[-1], index)
        self._writers = w
        hits = index.get(name)
        return [op for op in hits if name in op.output_arg_names] if hits else []

    # -- Paddle's create_var / create_parameter --------------------------------
    def create_var(self, name: str | None = None, shape: Sequence[int] | None = None,
                   dtype: Any = None, type: int = VarType.DENSE_TENSOR,
                   persistable: bool | None = None, stop_gradient: bool = False,
                   is_parameter: bool = False, need_check_feed: bool = False, *,
                   lod_level: int | None = None, initializer: Any = None,
                   **_ignored: Any) -> Variable:
        """Paddle's `Block.create_var`: declare (or re-open) a var; an
        `initializer` appends its init op to this block."""
        if name is None:
            name = self.program._name_generator("_generated_var")
            while self.find_var_recursive(name) is not None:
                name = self.program._name_generator("_generated_var")
        if shape is not None:
            shape = tuple([-1 if d is None else int(d) for d in shape])
        existing = self._vars.get(name)
        if existing is None:
            desc = self.desc.vars.add()
            fill_var_desc(desc, name, type=type, dims=shape, dtype=dtype, lod_level=lod_level,
                          persistable=persistable, stop_gradient=stop_gradient,
                          need_check_feed=need_check_feed, is_parameter=is_parameter)
            cls = Parameter if is_parameter else Variable
            var = self._objs.get(name)
            if var is None or type(var) is not cls:
                var = cls(self, desc)
                self._objs[name] = var
            else:
                var.block, var.desc = self, desc
            self._vars[name] = var
            self._note_new(name)
        else:
            var = existing
            _check_same(var, type, shape, dtype, persistable)
            var.stop_gradient = stop_gradient
            if is_parameter and not var.desc.is_parameter:
                var.desc.is_parameter = True
                self._adopt()
                var = self._vars[name]
        if initializer is not None:
            initializer(var, self)
        return var

    def create_parameter(self, name: str, shape: Sequence[int], dtype: Any,
                         type: int = VarType.DENSE_TENSOR, trainable: bool = True,
                         initializer: Any = None, optimize_attr: dict | None = None,
                         regularizer: Any = None, do_model_average: Any = None,
                         need_clip: bool = True, **_ignored: Any) -> Parameter:
        """Paddle's `Block.create_parameter`: a parameter in the global block;
        with an initializer, its init op in this block (unless one exists)."""
        for d in shape:
            if d < 0:
                raise ValueError("Each dimension of shape for Parameter must be greater than 0, "
                                 f"but received {list(shape)}")
        root = self.program.global_block()
        stop_gradient = not trainable
        param = root.create_var(name=name, shape=shape, dtype=dtype, type=type, persistable=True,
                                stop_gradient=stop_gradient, is_parameter=True)
        self.program._param_info[name] = {
            "trainable": trainable, "optimize_attr": optimize_attr or {"learning_rate": 1.0},
            "regularizer": regularizer, "do_model_average": do_model_average,
            "need_clip": need_clip}
        if initializer is not None:
            inited = [op for op in root._ops_writing(name)
                      if op.type not in ("broadcast", "c_sync_comm_stream", "coalesce_tensor")]
            if len(inited) > 1:
                raise RuntimeError(f"param {name} is inited by multiple init ops")
            if not inited:
                initializer(param, self)
                # (the init op, reading no var, passed stop_gradient to it)
                param.stop_gradient = stop_gradient
        return param  # type: ignore[return-value]

    def all_parameters(self) -> list[Parameter]:
        """Parameters in creation order (Paddle's in-memory order)."""
        params = [self._vars[n] for n in self._order if n in self._vars and self._vars[n].is_parameter]
        seen = {p.name for p in params}
        params += [v for v in self._vars.values() if v.is_parameter and v.name not in seen]
        return params  # type: ignore[return-value]

    def iter_parameters(self) -> Iterator[Parameter]:
        yield from self.all_parameters()

    # -- Paddle's append_op ---------------------------------------------------
    def append_op(self, type: str, inputs: Mapping[str, Any] | None = None,
                  outputs: Mapping[str, Any] | None = None,
                  attrs: Mapping[str, Any] | None = None, **_ignored: Any):
        """Append an op as Paddle's legacy `Block.append_op`: every proto input
        slot, Paddle's attrs and their order, the outputs' stop_gradient, and
        compile-time shape inference on the outputs."""
        in_names = None if inputs is None else {k: _arg_names(v) for k, v in inputs.items()
                                                 if v is not None}
        out_names = {k: _arg_names(v) for k, v in outputs.items() if v is not None} if outputs else {}
        if type not in _NO_STOP_GRADIENT_PASS:
            _pass_stop_gradient(self, inputs, outputs)
        # Filled in place (no detached desc to copy); a failure takes it out again.
        ops = self.desc.ops
        desc = ops.add()
        try:
            in_slots, out_slots = fill_op_desc(desc, type, in_names, out_names, attrs,
                                               op_role=self.program._op_role)
        except BaseException:
            del ops[-1]
            raise
        op = Operator(self, desc)
        self.ops.append(op)
        # (an op type without a shape rule writes nothing; nor does an
        # initializer's op, whose shape is its parameter's dims already)
        if type in _LOD_KNOWN and not _out_is_shape(self, type, attrs, out_slots):
            self._infer_outputs(type, desc, in_slots, out_slots)
        return op

    def _infer_outputs(self, op_type: str, desc: pb.OpDesc, in_slots: Mapping[str, Sequence[str]],
                       out_slots: Mapping[str, Sequence[str]]) -> None:
        """Shape inference of a new op (its slots as written, in order): the
        outputs' dims, and the LoD level of the outputs that share it."""
        find = self.find_var_recursive
        ins: dict[str, list] = {}
        for slot, args in in_slots.items():
            dims = []
            for a in args:
                v = find(a)
                dims.append(_dims_of(v.desc) if v is not None else [])
            ins[slot] = dims
        n_out = {slot: len(args) for slot, args in out_slots.items()}
        shapes = _infer.infer(op_type, ins, _AttrView(desc, attr_positions(op_type, self.program._op_role)),
                              n_out)
        x_in = (ins.get("X") or [[]])[0]
        for slot, args in out_slots.items():
            lod = (op_type, slot) not in NO_LOD
            lod_if = _infer.LOD_IF.get((op_type, slot)) if lod else None
            dims = shapes.get(slot)
            for i, a in enumerate(args):
                v = find(a)
                if v is not None:
                    _set_output(v.desc, dims[i] if dims is not None and i < len(dims) else None,
                                lod, lod_if, x_in)


_TENSOR_FIELDS = dtypes.TENSOR_VAR_TYPES


def _set_output(desc: pb.VarDesc, dims: Sequence[int] | None, lod: bool, lod_if: Any,
                x_in: list[int]) -> None:
    """What shape inference writes on an output var: `set_dims` (unless dims
    is None), then `set_lod_level` if `lod` and `lod_if` (of X's dims and the
    var's) holds - reading the var's type message once for both."""
    vt = desc.type
    field = _TENSOR_FIELDS.get(vt.type)
    if field is None:  # no dims to write, no LoD level
        if lod and lod_if is not None:
            lod_if(x_in, [])
        return
    sub = getattr(vt, field)
    t = (sub if field == "selected_rows" else sub.tensor).dims
    if dims is not None:
        new = [int(d) for d in dims]
        if not t:
            t.extend(new)
        elif t[:] != new:  # (equal: a parameter's dims, nothing to write)
            del t[:]
            t.extend(new)
    if lod and (lod_if is None or lod_if(x_in, t[:])) and field == "dense_tensor":
        sub.legacy_lod_level = 0


def _dims_of(desc: pb.VarDesc) -> list[int]:
    """A var's dims as a list (`list(Variable.shape)`, without the view; a
    slice of the repeated field makes the list in C, `list()` iterates it)."""
    vt = desc.type
    field = _TENSOR_FIELDS.get(vt.type)
    if field is None:
        return []
    sub = getattr(vt, field)
    return (sub if field == "selected_rows" else sub.tensor).dims[:]


class _AttrView(Mapping):
    """A fresh OpDesc's attrs as a read-only mapping that decodes only what is
    read (shape inference reads one or two of an op's dozen attrs), found by
    their known positions."""

    __slots__ = ("_desc", "_at")

    def __init__(self, desc: pb.OpDesc, positions: dict[str, int]):
        self._desc = desc
        self._at = positions

    def __getitem__(self, name: str) -> Any:
        attrs = self._desc.attrs
        k = self._at.get(name)
        if k is not None and k < len(attrs) and attrs[k].name == name:
            return _attrs.decode(attrs[k])
        found = None
        for a in attrs:  # the last of a repeated name wins, as in a dict
            if a.name == name:
                found = a
        if found is None:
            raise KeyError(name)
        return _attrs.decode(found)

    def get(self, name: str, default: Any = None) -> Any:  # without Mapping's try/except
        attrs = self._desc.attrs
        k = self._at.get(name)
        if k is not None and k < len(attrs):
            a = attrs[k]
            if a.name == name:
                return _attrs.decode(a)
        try:
            return self[name]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(a.name for a in self._desc.attrs))

    def __len__(self) -> int:
        return len(dict.fromkeys(a.name for a in self._desc.attrs))


_LOD_KNOWN = _infer.rule_types()
#: Ops whose shape inference only sets `Out`'s dims to the `shape` attr.
_SHAPE_ATTR_OPS = frozenset(t for t in _infer.FROM_SHAPE if (t, "Out") in NO_LOD)


def _out_is_shape(block: Block, op_type: str, attrs: Mapping[str, Any] | None,
                  out_slots: Mapping[str, Sequence[str]]) -> bool:
    """Whether shape inference of a new op would write nothing: an op that
    makes `Out` from its `shape` attr (fill_constant, uniform_random, ...)
    given a list of plain ints (which encode and decode as they are) equal to
    `Out`'s dims already - as every initializer gives its parameter's."""
    if op_type not in _SHAPE_ATTR_OPS or not attrs or len(out_slots) != 1:
        return False
    shape = attrs.get("shape")
    out = out_slots.get("Out")
    if type(shape) is not list or out is None or len(out) != 1:
        return False
    for d in shape:
        if type(d) is not int:
            return False
    v = block.find_var_recursive(out[0])
    return v is not None and _dims_of(v.desc) == shape


def _check_same(var: Variable, type: int, shape, dtype, persistable) -> None:
    if var.type != type:
        raise ValueError(f"Variable '{var.name}' has been created before. The previous type is "
                         f"{_type_str(var.type)}, the new type is {_type_str(type)}. They are not matched")
    if shape is not None and tuple(shape) != var.shape:
        raise ValueError(f"Variable '{var.name}' has been created before. The previous shape is "
                         f"{var.shape}, the new shape is {tuple(shape)}. They are not matched.")
    if dtype is not None and var.data_type is not None and dtypes.from_any(dtype) != var.data_type:
        raise ValueError(f"Variable '{var.name}' has been created before. The previous data type "
                         f"is {var.dtype}, the new data type is {dtype}. They are not matched.")
    if persistable is not None and bool(persistable) != var.persistable:
        raise ValueError(f"Variable '{var.name}' has been created before.The previous persistable "
                         f"is {var.persistable}, the new persistable is {persistable}. They are not matched")


def _flatten(x: Any) -> list:
    """The leaves of nested dicts / lists / tuples (the inputs or outputs of an op)."""
    if isinstance(x, _Variable):
        return [x]
    if type(x) is dict:  # the usual case first: {slot: var or [vars]}
        out = []
        for v in x.values():
            if isinstance(v, _Variable):
                out.append(v)
            else:
                out += _flatten(v)
        return out
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            if isinstance(v, _Variable):
                out.append(v)
            else:
                out += _flatten(v)
        return out
    if isinstance(x, str):  # before the (slow) abstract Mapping check
        return [x]
    if isinstance(x, Mapping):
        return [v for k in x for v in _flatten(x[k])]
    return [x]


def _arg_names(v: Any) -> list[str]:
    if isinstance(v, _Variable):
        return [v.name]
    items = v if isinstance(v, (list, tuple)) else [v]
    out = []
    for a in items:
        if isinstance(a, _Variable):
            out.append(a.name)
        elif isinstance(a, str):
            out.append(a)
        elif isinstance(a, bytes):
            out.append(a.decode())
        else:
            raise TypeError(f"an op argument should be a str, bytes or Variable, but received: {a!r}")
    return out


def _pass_stop_gradient(block: Block, inputs: Any, outputs: Any) -> None:
    """Paddle's rule: an op whose inputs all stop the gradient stops it on its outputs."""
    for var in _flatten(inputs):
        if isinstance(var, _Variable) and not var.desc.stop_gradient:
            return
    for var in _flatten(outputs):
        if isinstance(var, _Variable):
            var.desc.stop_gradient = True


class Program(_Program):
    """A builder program: pybackward's `Program` (so `pybackward.append_backward`,
    `Executor`, `save` take it as it is), with Paddle's in-memory state."""

    def __init__(self, desc: pb.ProgramDesc | None = None, source: str | None = None):
        fresh = desc is None
        if fresh:
            desc = pb.ProgramDesc()
            desc.blocks.add(idx=0, parent_idx=-1)
            desc.version.version = PROGRAM_VERSION
            for name, version in OP_VERSION_MAP:
                desc.op_version_map.pair.add(op_name=name).op_version.version = version
        self._block_state: dict[int, dict] = {}
        self._param_info: dict[str, dict] = {}
        self._dirty: set[int] = set()
        super().__init__(desc, source)
        self.blocks = [Block(self, b) for b in self._desc.blocks]
        self._name_generator = UniqueNameGenerator()
        self._name_generator("__auto_checkpoint_program__")
        self.current_block_idx = 0
        self._seed = _global_prog_seed
        self._op_role = 0
        self._is_start_up_program_ = False

    # `program.desc` is what gets serialised: sort the vars first (lazily).
    @property
    def desc(self) -> pb.ProgramDesc:
        if self.__dict__.get("_dirty"):
            self._flush()
        return self._desc

    @desc.setter
    def desc(self, value: pb.ProgramDesc) -> None:
        self._desc = value

    def _flush(self) -> None:
        """Paddle's file order: the vars a parsed file had, as they were, then
        every var added since, sorted by name (all of them, for a new program)."""
        dirty, self._dirty = self._dirty, set()
        for idx in sorted(dirty):
            if idx >= len(self.blocks):
                continue
            block = self.blocks[idx]
            keep = self.loaded_var_counts[idx] if idx < len(self.loaded_var_counts) else 0
            names = [v.name for v in block.desc.vars[keep:]]
            if names == sorted(names):
                continue
            copies = sorted((_copy(v) for v in block.desc.vars[keep:]), key=lambda v: v.name)
            del block.desc.vars[keep:]
            block.desc.vars.extend(copies)
            block.reindex_vars(keep)

    def sync(self) -> None:
        self.blocks = [Block(self, b) for b in self._desc.blocks]

    def create_block(self, parent_idx: int | None = None, forward_block_idx: int = -1) -> Block:
        """Append a new block (parent: block 0 unless given). Reads `_desc`, not
        `desc`: adding a block needs no sorted vars, and sorting them for every
        new block made building many blocks quadratic."""
        blocks = self._desc.blocks
        idx = len(blocks)
        parent = 0 if parent_idx is None else parent_idx
        if not -1 <= parent < idx:
            raise ArgumentError(f"parent block {parent} out of range 0..{idx - 1}")
        desc = blocks.add(idx=idx, parent_idx=parent)
        if forward_block_idx != -1:
            desc.forward_block_idx = forward_block_idx
        block = Block(self, desc)
        self.blocks.append(block)
        return block

    # -- Paddle's Program API -------------------------------------------------
    @classmethod
    def parse_from_string(cls, binary_str: bytes) -> "Program":
        """A program from serialised bytes, as Paddle parses one: parameters
        come back trainable (their stop_gradient cleared), in file order."""
        desc = pb.ProgramDesc()
        desc.ParseFromString(binary_str)
        p = cls(desc)
        for b in p.blocks:
            for v in b.vars.values():
                if v.is_parameter:
                    v.stop_gradient = False
        return p

    @property
    def random_seed(self) -> int:
        return self._seed

    @random_seed.setter
    def random_seed(self, seed: int) -> None:
        if not isinstance(seed, int):
            raise ValueError(f"Program.random_seed's input seed must be an integer, but received {type(seed)}.")
        self._seed = seed

    def global_seed(self, seed: int = 0) -> None:
        global _global_prog_seed
        _global_prog_seed = seed
        self._seed = seed

    def current_block(self) -> Block:
        return self.blocks[self.current_block_idx]  # type: ignore[return-value]

    def list_vars(self) -> Iterator[Variable]:
        for b in self.blocks:
            order = [n for n in b._order if n in b.vars]
            seen = set(order)
            yield from (b.vars[n] for n in order)
            yield from (v for n, v in b.vars.items() if n not in seen)

    def all_parameters(self) -> list[Parameter]:
        return [p for b in self.blocks for p in b.all_parameters()]

    def clone(self, for_test: bool = False) -> "Program":
        """A copy; `for_test=True` drops the backward and optimizer ops (and the
        vars only they use) and sets `is_test` on every op that has it, removing
        batch_norm's ReserveSpace output - Paddle's `clone(for_test=True)`."""
        desc = pb.ProgramDesc()
        desc.CopyFrom(self.desc)
        if for_test:
            prune_for_test(desc)
        p = Program(desc, self.source)
        p.loaded_var_counts = ([0] * len(desc.blocks) if for_test else
                               list(self.loaded_var_counts) + [0] * len(desc.blocks))[:len(desc.blocks)]
        p.appending_grad_times = self.appending_grad_times
        p._seed = self._seed
        p._param_info = {k: dict(v) for k, v in self._param_info.items()}
        p._name_generator = self._name_generator.clone()
        for idx, state in self._block_state.items():
            if idx < len(p.blocks):
                p.blocks[idx]._order.update(dict.fromkeys(n for n in state["order"]
                                                          if n in p.blocks[idx].vars))
        return p

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return program_to_text(self, all_attrs=with_details)

    def _to_readable_code(self, skip_op_callstack: bool = True) -> str:
        return self.to_string()

    def __str__(self) -> str:
        return self.to_string()


def _copy(v: pb.VarDesc) -> pb.VarDesc:
    c = pb.VarDesc()
    c.CopyFrom(v)
    return c


_global_prog_seed = 0

# --------------------------------------------------------------------------
# default programs
# --------------------------------------------------------------------------
_main_program_ = Program()
_startup_program_ = Program()
_startup_program_._is_start_up_program_ = True


def default_main_program() -> Program:
    """The program layers append to (see `program_guard`)."""
    return _main_program_


def default_startup_program() -> Program:
    """The program parameter initializers append to."""
    return _startup_program_


def switch_main_program(program: Program) -> Program:
    global _main_program_
    prev, _main_program_ = _main_program_, program
    return prev


def switch_startup_program(program: Program) -> Program:
    global _startup_program_
    prev, _startup_program_ = _startup_program_, program
    return prev


@contextlib.contextmanager
def program_guard(main_program: Program, startup_program: Program | None = None) -> Iterator[None]:
    """Build into `main_program` (and `startup_program`) inside the `with` block."""
    if not isinstance(main_program, Program):
        raise TypeError("The type of 'main_program' in program_guard must be "
                        f"pybackward.static.Program, but received {type(main_program).__name__}")
    if startup_program is not None and not isinstance(startup_program, Program):
        raise TypeError("The type of 'startup_program' in program_guard must be "
                        f"pybackward.static.Program, but received {type(startup_program).__name__}")
    main_prev = switch_main_program(main_program)
    startup_prev = None
    if startup_program is not None:
        startup_program._is_start_up_program_ = True
        startup_prev = switch_startup_program(startup_program)
    try:
        yield
    finally:
        switch_main_program(main_prev)
        if startup_prev is not None:
            switch_startup_program(startup_prev)


def data(name: str, shape: Sequence[int | None], dtype: Any = None, lod_level: int = 0) -> Variable:
    """A feed var in the global block: `stop_gradient=True`, `need_check_feed`,
    `None`/-1 for unknown dims (Paddle's `static.data`)."""
    if not isinstance(name, (str, bytes)):
        raise TypeError(f"The type of 'name' in data must be (<class 'bytes'>, <class 'str'>), "
                        f"but received {type(name)}. ")
    if not isinstance(shape, (list, tuple)):
        raise TypeError("The type of 'shape' in data must be (<class 'list'>, <class 'tuple'>), "
                        f"but received {type(shape)}. ")
    name = name.decode() if isinstance(name, bytes) else name
    dims = []
    for d in shape:
        if d is None:
            d = -1
        if isinstance(d, int) and d < 0 and d != -1:
            raise ValueError("Only -1 can be used in shape to indicate unknown dimension, "
                             f"but received {d}")
        dims.append(d)
    return default_main_program().global_block().create_var(
        name=name, shape=dims, dtype="float32" if dtype is None else dtype,
        type=VarType.DENSE_TENSOR, stop_gradient=True, lod_level=lod_level,
        need_check_feed=True, persistable=False)
