"""PIR -> legacy: a PaddlePaddle 3.x PIR program (`.json`) as a legacy ProgramDesc
(`.pdmodel`) that computes the same thing, which Paddle 3.3.1 itself cannot do.

    from pybackward import pir
    from pybackward.convert.to_legacy import to_legacy, convert
    legacy_prog = to_legacy(pir.load("model.json"))
    conv = convert(pir.load("model.json"))       # + which var holds each PIR value
    conv.program, conv.var_of(value)

Each PIR op becomes the legacy op `pybackward.pir.opmap` pairs it with (Paddle's
own translator's facts, read backwards): operands into the legacy slots, a
`builtin.combine` into a duplicable slot, attributes under their legacy names
(over Paddle's checker defaults, `registry.default_attrs`), the attributes PIR
passes as `pd_op.full` / `pd_op.full_int_array` operands folded back into attrs
(or into the legacy `*Tensor` slots when they are computed). SSA values become
named vars: parameters, data and fetch targets keep their names, gradients are
`X@GRAD` after the forward var they belong to (`@RENAME@` for the partial ones
an `add_n` sums), everything else is named as Paddle's legacy LayerHelper does
(`matmul_v2_0.tmp_0`, `_generated_var_3`). Ops PIR adds around the
computations have rules of their own (the `_SPECIAL` table):

* `pd_op.if` -> Paddle's legacy `cond` pattern: `conditional_block` on the
  condition and on `logical_not` of it, each branch assigning its yields to
  a var of the parent block, then `select_input` on `cast(cond, int32)`;
* `pd_op.while` -> a `while` whose loop vars are fresh vars (`assign` of the
  inits) and whose body assigns the yields back to them;
* the stacks a control-flow backward keeps (`cf.stack_create`, `tuple_push`,
  `tuple_pop`, `has_elements`) -> one tensor array per popped-and-used
  position and an int64 counter: `write_to_array` + `increment`,
  `increment(-1)` + `read_from_array`, `greater_than(counter, 0)`;
* `pd_op.data` / `builtin.parameter` -> vars (persistable parameters); with a
  `pd_op.fetch`, `feed` and `fetch` ops as Paddle's legacy inference files
  have them.
* `pd_op.tensor_to_array` -> `tensor_array_to_tensor_grad`; `pd_op.create_array_like`
  -> a `while` writing `fill_any_like` of each item (no legacy op fills an array);
  `pd_op.rnn`'s computed dropout state -> the var legacy `rnn` writes as its
  `DropoutState` output (it has no such input; `STATE_OUT_ONLY`).

An op with no legacy counterpart (`pd_op.pylayer`, an op the map lacks) is
refused before anything is built: `NoLegacyCounterpartError`, one line naming
it and how many such ops the program has. Nothing is dropped silently.

The result carries the original PIR program as a record Paddle ignores (an
unknown ProgramDesc field, `convert.record`; `record=False` leaves it out), so
that `to_pir` gives the original back while the legacy program is unchanged.
May import: base, ops (the registry), legacy, pir.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from .._proto import framework_pb2 as pb
from ..base import attrs as _attrs
from ..base import dtypes
from ..base.errors import PyBackwardError, UnknownOpError
from ..legacy.program import Block as LBlock
from ..legacy.program import Program as LProgram
from ..ops import registry
from ..pir import opmap
from ..pir.opmap import resolve
from ..pir.codec import dumps
from ..pir.model import Block, Operation, Program, Value
from ..pir.types import DenseTensorArrayType, DenseTensorType, VectorType, dense
from . import record as _record

VarType = pb.VarType
GRAD = "@GRAD"
OP_ROLE_FORWARD, OP_ROLE_BACKWARD = 0, 1


class NoLegacyCounterpartError(UnknownOpError):
    """A PIR op the legacy ProgramDesc has no op for (the program is refused, not cut)."""


class ConversionError(PyBackwardError):
    """A PIR program this converter cannot express as a legacy one (one line: op and value)."""


# --------------------------------------------------------------------------
# Per-op facts
# --------------------------------------------------------------------------
#: The layer name Paddle's legacy builders give an op's LayerHelper when it differs
#: from the op type (`paddle.mean` -> `mean_0.tmp_0`); naming only.
LAYER_NAMES = {"reduce_mean": "mean", "reduce_sum": "sum", "transpose2": "transpose",
               "reshape2": "reshape2", "fill_any_like": "full_like", "elementwise_pow": "elementwise_pow",
               "softmax_with_cross_entropy": "softmax_with_cross_entropy",
               "flatten_contiguous_range": "flatten", "unsqueeze2": "unsqueeze", "squeeze2": "squeeze"}

#: Legacy outputs PIR drops that the legacy grad ops read: made on the forward op
#: (`[0, *X.dims]`, X's dtype), found again for the grad op by its forward input.
XSHAPE = "XShape"

#: Legacy ops with a state PIR passes as an operand (and returns as a result) that the legacy op
#: only writes, through an output slot: legacy type -> (PIR operand, PIR result). Paddle's
#: legacy `rnn` has no `DropoutState` input, only the output its grad op reads back.
STATE_OUT_ONLY = {"rnn": ("dropout_state_in", "dropout_state_out")}

#: Legacy attrs PIR drops because the operand's type carries them: legacy type -> (attr, operand index).
DTYPE_OF_OPERAND = {"cast": ("in_dtype", 0)}

#: Inputs Paddle's legacy grad maker adds when one of the attrs is set, read from the output
#: slots PIR passes: legacy type -> (attrs, ((input slot, from slot), ...)). Eval-mode
#: `batch_norm_grad` reads the running statistics as Mean / Variance too; its kernel
#: dereferences them with global statistics (the legacy Executor crashes without them).
INPUTS_WHEN = {"batch_norm_grad": (("is_test", "use_global_stats"),
                                   (("Mean", "MeanOut"), ("Variance", "VarianceOut")))}

#: Legacy ops that compute in their inputs' dtype where PIR's compute in the result's (the
#: `dtype` attr): legacy type -> the input slots cast to the result's dtype. Legacy `range`
#: computes in Start's dtype, PIR's `arange` in `dtype` from float64 `full`s.
CAST_TO_RESULT = {"range": ("Start", "End", "Step")}

#: PIR attribute types -> legacy AttrType, for attrs Paddle's checker records no default for.
#: Legacy op protos declare int / float (PIR widened some to int64 / double, patches 2 and 4):
#: INT / INTS / FLOAT unless a value does not fit (then LONG / LONGS).
_ATTR_TYPES = {"bool": _attrs.BOOLEAN, "int32": _attrs.INT, "int64": _attrs.INT, "float32": _attrs.FLOAT,
               "float64": _attrs.FLOAT, "str": _attrs.STRING, "int32[]": _attrs.INTS,
               "int64[]": _attrs.INTS, "float32[]": _attrs.FLOATS, "float64[]": _attrs.FLOATS,
               "str[]": _attrs.STRINGS, "bool[]": _attrs.BOOLEANS, "DataType": _attrs.INT,
               "IntArray": _attrs.INTS, "Scalar": _attrs.FLOAT}

#: PIR ops without an op map entry, converted by the named method of _Converter.
_SPECIAL: dict[str, str] = {
    "builtin.parameter": "_parameter",
    "pd_op.data": "_data",
    "pd_op.fetch": "_fetch",
    "builtin.shadow_output": "_shadow_output",
    "builtin.combine": "_nothing",          # its vector is opened into the consumer's slot
    "builtin.split": "_split",
    "builtin.slice": "_slice",
    "pd_op.full": "_full",
    "pd_op.full_int_array": "_full_int_array",
    "pd_op.if": "_if",
    "pd_op.while": "_while",
    "cf.yield": "_yield",
    "cf.stack_create": "_stack_create",
    "cf.tuple_push": "_tuple_push",
    "cf.tuple_pop": "_tuple_pop",
    "cf.has_elements": "_has_elements",
    "pd_op.create_array": "_create_array",
    "pd_op.array_read": "_array_read",
    "pd_op.assign_value": "_assign_value",
    "pd_op.assign_value_": "_assign_value",
    "pd_op.assign_out_": "_assign_out",
    "pd_op.select_input": "_select_input",
    "pd_op.tensor_to_array": "_tensor_to_array",
    "pd_op.create_array_like": "_create_array_like",
}

#: Legacy assign_value's attr for each dtype: (attr, AttrType, Python type).
_ASSIGN_VALUES = {VarType.BOOL: ("bool_values", _attrs.BOOLEANS, bool),
                  VarType.INT32: ("int32_values", _attrs.INTS, int),
                  VarType.INT64: ("int64_values", _attrs.LONGS, int),
                  VarType.FP32: ("fp32_values", _attrs.FLOATS, float),
                  VarType.FP64: ("fp64_values", _attrs.FLOAT64S, float)}

#: The PIR ops converted by a rule of their own rather than through the op map.
SPECIAL_OPS = frozenset(_SPECIAL)

#: Ops PIR has that no legacy op computes (refused with the reason).
_REFUSED = {"pd_op.pylayer": "its backward is a Python function of the process that wrote the file"}

#: Ops whose results stand for a legacy attribute (folded into the consumer when it takes one).
CONST_OPS = frozenset({"pd_op.full", "pd_op.full_int_array"})


def refusals(program: Program) -> Counter:
    """PIR op name -> count, for every op of `program` with no legacy counterpart."""
    bad: Counter = Counter()
    for op in program.walk():
        if op.name in _REFUSED or (op.name not in _SPECIAL and resolve(op.name) is None):
            bad[op.name] += 1
    return bad


def _refuse(program: Program) -> None:
    bad = refusals(program)
    if not bad:
        return
    name, n = bad.most_common(1)[0]
    total = sum(bad.values())
    why = _REFUSED.get(name, "the PIR op map (Paddle 3.3.1's translator) pairs no legacy op with it")
    others = [f"{k} x{v}" for k, v in sorted(bad.items()) if k != name]
    where = f"{program.source}: " if program.source else ""
    raise NoLegacyCounterpartError(
        f"{where}PIR op '{name}' has no legacy counterpart ({why}): {total} op"
        f"{'s' if total != 1 else ''} in the program {'have' if total != 1 else 'has'} none"
        + (f" (also {', '.join(others)})" if others else "") + "; nothing was converted")


# --------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------
@dataclass
class Conversion:
    """A converted program and where each PIR value went: `names[value]` is its legacy
    var (a vector value: one var per item, `vectors[value]`). Folded constants
    (`pd_op.full` feeding an attribute) have no var."""

    program: LProgram
    names: dict[Value, str] = field(default_factory=dict)
    vectors: dict[Value, list[str]] = field(default_factory=dict)

    def var_of(self, value: Value) -> str | None:
        """The legacy var holding `value` (None: folded into an attribute, or a vector)."""
        return self.names.get(value)

    def by_id(self) -> dict[str, str]:
        """`%N` -> var name, for every value that has a var."""
        return {f"%{v.id}": n for v, n in self.names.items() if v.id is not None}


def to_legacy(program: Program, record: bool = True) -> LProgram:
    """A legacy Program computing what the PIR `program` computes (see the module doc).
    With `record`, it carries `program` itself in a field Paddle ignores
    (`convert.record`), from which `to_pir` gives it back unchanged.
    Raises NoLegacyCounterpartError for ops with no legacy op, ConversionError for
    constructs it cannot express."""
    return convert(program, record).program


def convert(program: Program, record: bool = True) -> Conversion:
    """`to_legacy`, also telling which legacy var holds each PIR value."""
    if not isinstance(program, Program):
        raise ConversionError(f"to_legacy converts a pir.Program, not {type(program).__name__}")
    _refuse(program)
    conv = _Converter(program).run()
    if record:
        _record.attach(conv.program, dumps(program))
    return conv


# --------------------------------------------------------------------------
# The converter
# --------------------------------------------------------------------------
@dataclass
class _Stack:
    counter: str
    zero: str
    keep: dict[int, str]             # tuple position -> array var


def _tensor_type(t: Any) -> tuple[int, list[int], int] | None:
    """(VarType, dims, data type) of a PIR value type, None when it has no legacy var form."""
    if isinstance(t, DenseTensorArrayType):
        return VarType.DENSE_TENSOR_ARRAY, list(t.dims), dtypes.from_any(t.dtype)
    if isinstance(t, DenseTensorType):
        try:
            dt = dtypes.from_any(t.dtype)
        except (ValueError, KeyError, PyBackwardError):
            dt = VarType.FP32
        return VarType.DENSE_TENSOR, list(t.dims), dt
    return None


def _const(v: Value | None) -> Any:
    """The value a `pd_op.full` / `full_int_array` (or a combine of `full`s) gives, else None."""
    op = v.defining_op if v is not None else None
    if op is None:
        return None
    if op.name == "pd_op.full":
        return op.attr("value", None)
    if op.name == "pd_op.full_int_array":
        return [int(x) for x in op.attr("value", [])]
    if op.name == "builtin.combine":
        items = [_const(x) for x in op.operands]
        if items and all(i is not None and not isinstance(i, list) for i in items):
            return [int(i) if float(i).is_integer() else i for i in items]
    return None


def _popped_const(v: Value) -> Any:
    """The constant a `cf.tuple_pop` result always is: every `cf.tuple_push` into its stack
    pushes the same `full` / `full_int_array` value at that position (a control-flow
    backward pops the forward's constants back), else None."""
    op = v.defining_op
    if op is None or op.name != "cf.tuple_pop" or not op.operands or op.operands[0] is None:
        return None
    create = op.operands[0].defining_op
    if create is None or create.name != "cf.stack_create" or len(create.results) < 3:
        return None
    k = op.results.index(v) + 1
    pushed = [u.operands[k] for u, _ in create.results[1].uses
              if u.name == "cf.tuple_push" and k < len(u.operands)]
    values = [_const(x) for x in pushed]
    if not values or any(c is None for c in values) or any(c != values[0] for c in values):
        return None
    return values[0]


class _Converter:
    def __init__(self, program: Program) -> None:
        self.src = program
        self.out = LProgram()
        self.out.source = program.source
        self.names: dict[Value, str] = {}
        self.vectors: dict[Value, list[str]] = {}
        self.taken: set[str] = set()
        self.counters: Counter = Counter()
        self.renames: Counter = Counter()
        self.stacks: dict[Value, _Stack] = {}
        self.xshapes: dict[tuple[str, str], str] = {}
        self.transposes: list[tuple[list[int], tuple[int, ...], str]] = []
        self.block_of: dict[int, int] = {}       # id(pir block) -> legacy block idx
        self.inference = any(op.name == "pd_op.fetch" for op in program.block.ops)
        self.feeds: list[str] = []
        #: legacy type -> (inputs, outputs) of each forward op emitted (to name gradients)
        self.fwd_ops: dict[str, list[tuple[dict[str, list[str]], dict[str, list[str]]]]] = {}
        #: The vars each open `pd_op.if` branch assigns its yields to (innermost last).
        self.yield_targets: list[list[str | None]] = []
        #: Values a pd_op.fetch / builtin.shadow_output names: their var takes that name.
        self.preferred: dict[Value, str] = {}
        #: State vars a STATE_OUT_ONLY op already writes in place (a second writer gets its own var).
        self.states_written: set[str] = set()
        #: Arrays a tensor_array_to_tensor_grad already reads as X (its kernel's scope vars are named after X).
        self.array_grads_of: set[str] = set()

    # ------------------------------------------------------------- names
    def unique(self, key: str) -> str:
        """Paddle's unique_name.generate(key): key_0, key_1, ..."""
        while True:
            n = f"{key}_{self.counters[key]}"
            self.counters[key] += 1
            if n not in self.taken:
                return n

    def claim(self, name: str) -> str:
        """`name` if free, else its next `@RENAME@block0@N` form."""
        if name not in self.taken:
            self.taken.add(name)
            return name
        while True:
            n = f"{name}@RENAME@block0@{self.renames[name]}"
            self.renames[name] += 1
            if n not in self.taken:
                self.taken.add(n)
                return n

    def name(self, v: Value, op: Operation | None = None) -> str:
        n = self.names.get(v)
        if n is None:
            if v.defining_op is not None and v.defining_op.name in CONST_OPS:
                raise ConversionError(self._at(op, f"operand {self._vid(v)} is a constant that was folded "
                                                   "into an attribute and has no var"))
            raise ConversionError(self._at(op, f"operand {self._vid(v)} has no legacy var "
                                               "(a result its op does not write in legacy form)"))
        return n

    @staticmethod
    def _vid(v: Value) -> str:
        return f"%{v.id}" if v.id is not None else "a value"

    def _at(self, op: Operation | None, msg: str) -> str:
        where = f"{self.src.source}: " if self.src.source else ""
        return f"{where}{op.name + ': ' if op is not None else ''}{msg}"

    def declare(self, block: LBlock, name: str, t: Any, stop_gradient: bool | None = None,
                persistable: bool = False, is_parameter: bool = False) -> str:
        tt = _tensor_type(t)
        if tt is None:
            raise ConversionError(f"{self.src.source or 'the program'}: var '{name}' has type {t!r}, "
                                  "which a legacy var cannot hold")
        kind, dims, dt = tt
        if kind == VarType.DENSE_TENSOR_ARRAY:
            v = block.create_var(name, (), dt, type=kind)
        else:
            v = block.create_var(name, dims, dt, persistable=persistable, is_parameter=is_parameter,
                                 stop_gradient=bool(stop_gradient))
        self.taken.add(name)
        return v.name

    def _tmp(self, block: LBlock, key: str, t: Any, stop_gradient: bool | None = None) -> str:
        return self.declare(block, self.claim(f"{self.unique(key)}.tmp_0"), t, stop_gradient)

    def _generated(self, block: LBlock, kind: int = VarType.STEP_SCOPES, like: Any = None) -> str:
        name = self.claim(self.unique("_generated_var"))
        if like is not None:
            return self.declare(block, name, like)
        block.create_var(name, (), "float32", type=kind)
        return name

    # ------------------------------------------------------------- ops
    def emit(self, block: LBlock, type_: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
             attrs: dict[str, Any] | None = None, role: int = OP_ROLE_FORWARD,
             defaults_of: str | None = None, types: dict[str, int] | None = None) -> None:
        """Append a legacy op: Paddle's checker defaults for its type (or `defaults_of`'s),
        then `attrs`; `types` overrides attr types."""
        merged: dict[str, tuple[Any, int | None]] = {}
        for name, atype, default in (defaults_of and registry.default_attrs(defaults_of)) or \
                registry.default_attrs(type_) or ():
            merged[name] = (default, atype)
        for name, value in (attrs or {}).items():
            atype = merged[name][1] if name in merged else (types or {}).get(name)
            merged[name] = (value, atype)
        merged["op_role"] = (role, _attrs.INT)
        desc = pb.OpDesc(type=type_)
        for slot, args in inputs.items():
            desc.inputs.add(parameter=slot, arguments=list(args))
        for slot, args in outputs.items():
            desc.outputs.add(parameter=slot, arguments=list(args))
        for name, (value, atype) in merged.items():
            a = desc.attrs.add()
            if isinstance(value, pb.OpDesc.Attr):
                a.CopyFrom(value)
                continue
            value = _fit(value, atype)
            if atype == _attrs.INT and not -2**31 <= int(value) < 2**31:
                atype = _attrs.LONG
            elif atype == _attrs.INTS and any(not -2**31 <= int(x) < 2**31 for x in value):
                atype = _attrs.LONGS
            _attrs.encode(a, name, value, atype)
        block.append_op_desc(desc)
        if not type_.endswith("_grad"):
            self.fwd_ops.setdefault(type_, []).append((inputs, outputs))

    # ------------------------------------------------------------- run
    def run(self) -> Conversion:
        top = self.out.global_block()
        for op in self.src.block.ops:            # names users see first: never renamed
            if op.name == "builtin.parameter":
                self.taken.add(op.attr("parameter_name"))
            elif op.name == "pd_op.data":
                self.taken.add(op.attr("name"))
        for op in self.src.block.ops:            # a fetched / shadow-output value takes that name
            attr = {"pd_op.fetch": "name", "builtin.shadow_output": "output_name"}.get(op.name)
            v = op.operands[0] if attr and op.operands else None
            name = op.attr(attr, None) if attr else None
            d = v.defining_op if v is not None else None
            if d is not None and d.name not in ("builtin.parameter", "pd_op.data") and v not in self.preferred \
                    and isinstance(name, str) and name not in self.taken:
                self.preferred[v] = name
                self.taken.add(name)
        if self.inference:
            top.create_var("feed", (), "float32", type=VarType.FEED_MINIBATCH, persistable=True)
            top.create_var("fetch", (), "float32", type=VarType.FETCH_LIST, persistable=True)
            self.taken.update(("feed", "fetch"))
        self.block(self.src.block, top)
        if self.feeds:
            descs = list(top.desc.ops)
            feed_ops = []
            for i, name in enumerate(self.feeds):
                d = pb.OpDesc()
                self._feed_fetch(d, "feed", "feed", name, i)
                feed_ops.insert(0, d)
            del top.desc.ops[:]
            top.desc.ops.extend(feed_ops + descs)
        self.out.sync()
        return Conversion(self.out, self.names, self.vectors)

    def block(self, pblock: Block, lblock: LBlock) -> None:
        self.block_of[id(pblock)] = lblock.idx
        for op in pblock.ops:
            special = _SPECIAL.get(op.name)
            if special is not None:
                getattr(self, special)(op, lblock)
            else:
                self.generic(op, lblock)

    # ------------------------------------------------------------- generic ops
    def generic(self, op: Operation, lb: LBlock) -> None:
        r = resolve(op.name)
        assert r is not None          # refused up front otherwise
        m = r.map
        legacy = m.legacy_type
        opdef = registry.find(legacy)
        is_grad = legacy.endswith("_grad") or op.name.endswith("_grad")
        role = OP_ROLE_BACKWARD if is_grad else OP_ROLE_FORWARD
        attrs: dict[str, Any] = dict(r.implied)
        types: dict[str, int] = {}
        for am in m.attrs:
            a = op.attrs.get(am.name)
            if am.legacy is None or a is None:
                continue
            v = a.py()
            if a.tag == "1.a_place":
                if am.legacy == "force_cpu":
                    attrs["force_cpu"] = bool(v and v[0] == 1)
                continue
            if a.tag == "1.a_dtype":
                try:
                    v = opmap.dtype_from_pir(v)
                except PyBackwardError:
                    v = -1
            attrs[am.legacy] = v
            t = _ATTR_TYPES.get(am.type)
            if t is not None:
                types[am.legacy] = t
        if legacy in DTYPE_OF_OPERAND:
            attr, index = DTYPE_OF_OPERAND[legacy]
            t = _tensor_type(op.operands[index].type) if index < len(op.operands) and op.operands[index] else None
            if t is not None:
                attrs[attr] = t[2]
        inputs: dict[str, list[str]] = {}
        written = {a for a, _ in r.inplace}
        state: str | None = None            # rnn's computed dropout state (STATE_OUT_ONLY)
        for i, v in enumerate(op.operands):
            if v is None:
                continue
            if legacy in STATE_OUT_ONLY and i < len(m.operands) and m.operands[i].name == STATE_OUT_ONLY[legacy][0]:
                state = None if _const(v) is not None else self.materialize(v, op, lb)
                continue                    # no legacy input slot: a computed state is the output var
            if i in written and (i >= len(m.operands) or m.operands[i].slot is None):
                continue                    # the var the op writes in place (array_write_'s array)
            if i >= len(m.operands):
                raise ConversionError(self._at(op, f"operand {i} ({self._vid(v)}) is not in the op map"))
            om = m.operands[i]
            if om.is_mutable_attr:
                c = _const(v)
                if c is not None:
                    attrs[om.attr] = _as_attr(c, om.const_op == "pd_op.full_int_array")  # type: ignore[index]
                    continue
                c = None if om.tensor_slots else _popped_const(v)
                if c is not None:           # a constant the forward pushed, popped in the backward
                    attrs[om.attr] = _as_attr(c, om.const_op == "pd_op.full_int_array")  # type: ignore[index]
                    continue
                if not om.tensor_slots:
                    raise ConversionError(self._at(op, f"operand '{om.name}' ({self._vid(v)}) carries the legacy "
                                                       f"attribute '{om.attr}' but is computed, and the legacy op "
                                                       "has no tensor input for it"))
                vec = isinstance(v.type, VectorType)
                slot = _tensor_slot(om.tensor_slots, vec)
                inputs[slot] = self.args(v, op, lb)
                continue
            if om.slot is None:
                raise ConversionError(self._at(op, f"operand '{om.name}' ({self._vid(v)}) has no legacy slot"))
            if om.slot == XSHAPE:
                inputs[XSHAPE] = [self.xshape_for(op, m, v, lb)]
                continue
            inputs.setdefault(om.slot, []).extend(self.args(v, op, lb))
        if legacy == "transpose2_grad" and XSHAPE not in inputs:
            inputs[XSHAPE] = [self.transpose_xshape(op, attrs, inputs, lb)]
        if legacy in INPUTS_WHEN and any(attrs.get(a) for a in INPUTS_WHEN[legacy][0]):
            for slot, src in INPUTS_WHEN[legacy][1]:
                if slot not in inputs and src in inputs:
                    inputs[slot] = list(inputs[src])
        if legacy in CAST_TO_RESULT and op.results and isinstance(op.results[0].type, DenseTensorType):
            # (as legacy paddle.arange does)
            want = op.results[0].type.dtype
            for k, slot in enumerate(CAST_TO_RESULT[legacy]):
                v = op.operands[k] if k < len(op.operands) else None
                if v is not None and isinstance(v.type, DenseTensorType) and v.type.dtype != want and slot in inputs:
                    cast = self._tmp(lb, "cast", dense(want, tuple(v.type.dims)), True)
                    self.emit(lb, "cast", {"X": inputs[slot]}, {"Out": [cast]},
                              {"in_dtype": dtypes.from_any(v.type.dtype), "out_dtype": dtypes.from_any(want)}, role)
                    inputs[slot] = [cast]
        outputs: dict[str, list[str]] = {}
        layer = LAYER_NAMES.get(legacy, legacy)
        key: str | None = None
        j = 0
        inplace = dict((b, a) for a, b in r.inplace)
        forced = self.state_outputs(op, m, legacy, state)
        for k, res in enumerate(op.results):
            if k >= len(m.results) or m.results[k].slot is None:
                if res.uses:
                    raise ConversionError(self._at(op, f"result {k} ({self._vid(res)}) is used but the legacy op "
                                                       "has no output for it"))
                continue
            slot = m.results[k].slot
            if res.is_null:
                continue
            if isinstance(res.type, VectorType):
                grads = self.grad_vector_names(op, m, slot, res) if is_grad else None
                if key is None and grads is None:
                    key = self.unique(layer)
                names = []
                for n, t in enumerate(res.type.items):
                    if grads is not None:
                        names.append(self.declare(lb, self.claim(grads[n]), t, res.stop_gradient))
                        continue
                    names.append(self.declare(lb, self.claim(f"{key}.tmp_{j}"), t, res.stop_gradient))
                    j += 1
                self.vectors[res] = names
                outputs[slot] = names                               # type: ignore[index]
                continue
            if forced.get(k) is not None:
                name = forced[k]                                    # type: ignore[assignment]
            elif k in inplace and op.operands[inplace[k]] is not None and k not in forced:
                name = self.name(op.operands[inplace[k]], op)       # type: ignore[arg-type]
            elif res in self.preferred:
                name = self.preferred[res]
                self.declare(lb, name, res.type, res.stop_gradient)
            else:
                name = self.grad_name(op, m, k, res) if is_grad else self.grad_seed_name(res)
                if name is not None and name.endswith(GRAD):
                    role = OP_ROLE_BACKWARD
                if name is None:
                    if key is None:
                        key = self.unique(layer)
                    name = self.claim(f"{key}.tmp_{j}")
                    j += 1
                self.declare(lb, name, res.type, res.stop_gradient)
            self.names[res] = name
            outputs[slot] = [name]                                  # type: ignore[index]
        for slot in m.dropped_outputs:
            if slot == XSHAPE and "X" in inputs:
                if key is None:
                    key = self.unique(layer)
                xv = op.operands[0]
                name = self.claim(f"{key}.tmp_{j}")
                j += 1
                t = xv.type if xv is not None else None
                if isinstance(t, DenseTensorType):
                    self.declare(lb, name, dense(t.dtype, (0, *t.dims)), True)
                else:
                    lb.create_var(name, (0,), "float32", stop_gradient=True)
                outputs[XSHAPE] = [name]
                self.xshapes[(legacy, inputs["X"][0])] = name
                if legacy == "transpose2":
                    self.transposes.append(([int(a) for a in attrs.get("axis", [])],
                                            tuple(t.dims) if isinstance(t, DenseTensorType) else (), name))
        if opdef is not None:
            inputs = _ordered(inputs, opdef.inputs)
            outputs = _ordered(outputs, opdef.outputs)
        self.emit(lb, legacy, inputs, outputs, attrs, role,
                  defaults_of=(opdef.grad_of or m.forward) if is_grad and opdef is not None else
                  (m.forward if is_grad else None), types=types)

    def args(self, v: Value, op: Operation, lb: LBlock) -> list[str]:
        """The var names an operand stands for: a combine's operands, a vector's items, or one var."""
        d = v.defining_op
        if isinstance(v.type, VectorType):
            if d is not None and d.name == "builtin.combine":
                return [self.materialize(x, op, lb) for x in d.operands if x is not None]
            if v in self.vectors:
                return list(self.vectors[v])
            raise ConversionError(self._at(op, f"operand {self._vid(v)} is a vector with no legacy vars"))
        return [self.materialize(v, op, lb)]

    def materialize(self, v: Value, op: Operation, lb: LBlock) -> str:
        """The var of `v`; a folded constant read as a tensor gets its op now."""
        n = self.names.get(v)
        if n is not None:
            return n
        d = v.defining_op
        if d is not None and d.name in CONST_OPS:
            target = self.out.block(self.block_of.get(id(d.block), 0)) if d.block is not None else lb
            self._emit_const(d, target)
            return self.names[v]
        return self.name(v, op)

    # ------------------------------------------------------------- names of gradients
    def grad_name(self, op: Operation, m: opmap.OpMap, k: int, res: Value) -> str | None:
        """`X@GRAD` for result slot `X@GRAD`, X the forward var of slot X (read by the grad
        op, or found on the forward op it belongs to); the partial gradients an add_n
        sums get `@RENAME@` forms."""
        slot = m.results[k].slot or ""
        target = self.fwd_var(op, m, slot[: -len(GRAD)]) if slot.endswith(GRAD) else None
        if target is None:
            target = self.consumer_target(res)
        if target is None:
            return None
        if self.is_partial(res):
            return self.claim(target + GRAD + "@RENAME@block0")
        return self.claim(target + GRAD)

    def grad_vector_names(self, op: Operation, m: opmap.OpMap, slot: str | None, res: Value) -> list[str] | None:
        """`X@GRAD` per item of a vector result in slot `X@GRAD` (`rnn_grad`'s
        `WeightList@GRAD`, `concat_grad`'s `X@GRAD`), X the vars the grad op reads as
        slot X, as Paddle's legacy pass names them (`@RENAME@` for an item an add_n
        sums); None when X is not a vector of as many distinct named vars."""
        if not slot or not slot.endswith(GRAD) or not isinstance(res.type, VectorType):
            return None
        want = slot[: -len(GRAD)]
        for i, om in enumerate(m.operands):
            v = op.operands[i] if i < len(op.operands) else None
            if v is None or om.slot != want or not isinstance(v.type, VectorType):
                continue
            d = v.defining_op
            if d is not None and d.name == "builtin.combine":
                fwd = [self.names.get(x) if x is not None else None for x in d.operands]
            else:
                fwd = list(self.vectors.get(v, []))
            n = len(res.type.items)
            if len(fwd) != n or not all(fwd) or len(set(fwd)) != n:
                return None
            parts: list[Value | None] = [None] * n
            for u, _ in res.uses:
                if u.name == "builtin.split":
                    parts = list(u.results[:n]) + [None] * (n - len(u.results))
            return [f + GRAD + ("@RENAME@block0" if p is not None and self.is_partial(p) else "")
                    for f, p in zip(fwd, parts)]                                # type: ignore[operator]
        return None

    def grad_seed_name(self, res: Value) -> str | None:
        """A forward-looking name for a value a grad op reads as `S@GRAD` (the loss seed)."""
        t = self.consumer_target(res)
        return None if t is None else self.claim(t + GRAD)

    def consumer_target(self, res: Value) -> str | None:
        for user, idx in res.uses:
            r = resolve(user.name) if user.name not in _SPECIAL else None
            if r is None or idx >= len(r.map.operands):
                continue
            slot = r.map.operands[idx].slot or ""
            if slot.endswith(GRAD):
                t = self.fwd_var(user, r.map, slot[: -len(GRAD)])
                if t is not None:
                    return t
        return None

    def fwd_var(self, op: Operation, m: opmap.OpMap, slot: str) -> str | None:
        """The forward var in legacy slot `slot` of the forward op grad op `op` belongs to:
        an operand of `op` in that slot, else the slot of the forward op whose vars
        match the ones `op` reads."""
        known: dict[str, str] = {}
        for i, om in enumerate(m.operands):
            v = op.operands[i] if i < len(op.operands) else None
            if v is None or om.slot is None or om.slot.endswith(GRAD) or v not in self.names:
                continue
            if om.slot == slot or (om.slot == XSHAPE and slot == "X"):
                return self.names[v]
            if om.slot != XSHAPE:
                known[om.slot] = self.names[v]
        for ins, outs in reversed(self.fwd_ops.get(m.forward or "", [])):
            shared = [s for s in known if s in ins or s in outs]
            if shared and all((ins.get(s) or outs.get(s)) == [known[s]] for s in shared):
                hit = ins.get(slot) or outs.get(slot)
                if hit and len(hit) == 1:
                    return hit[0]
        return None

    def state_outputs(self, op: Operation, m: opmap.OpMap, legacy: str, state: str | None) -> dict[int, str | None]:
        """For a legacy op in STATE_OUT_ONLY (`rnn`): result index of the state output ->
        the var it writes. A computed state (the RNN layer's dropout state, a
        `builtin.parameter`) is written in place, as Paddle's legacy `nn.GRU` / `nn.LSTM`
        write `DropoutState`: the grad op reads it back. A constant one (`full`: Paddle's
        translator's stand-in) or one already written by another op gets a var of its
        own (None)."""
        if legacy not in STATE_OUT_ONLY:
            return {}
        out = STATE_OUT_ONLY[legacy][1]
        ks = [k for k, rm in enumerate(m.results) if rm.name == out and k < len(op.results)]
        if state is not None and state in self.states_written:
            state = None
        if state is not None:
            self.states_written.add(state)
        return {k: state for k in ks}

    @staticmethod
    def is_partial(res: Value) -> bool:
        return len(res.uses) == 1 and res.uses[0][0].name == "builtin.combine" and any(
            u.name == "pd_op.add_n" for r in res.uses[0][0].results for u, _ in r.uses)

    # ------------------------------------------------------------- XShape
    def xshape_for(self, op: Operation, m: opmap.OpMap, x: Value, lb: LBlock) -> str:
        """The XShape var of the forward op on `x` (PIR passes x itself); without one,
        an XShape made for x here (`reshape2(x, shape=[0, ...])`: XShape holds only dims)."""
        name = self.name(x, op)
        xs = self.xshapes.get((m.forward or "", name))
        return xs if xs is not None else self.make_xshape(name, x.type, lb)

    def make_xshape(self, x: str, t: Any, lb: LBlock) -> str:
        key = self.unique("reshape2")
        out = self.declare(lb, self.claim(f"{key}.tmp_0"), t, True)
        xs = self.claim(f"{key}.tmp_1")
        if isinstance(t, DenseTensorType):
            self.declare(lb, xs, dense(t.dtype, (0, *t.dims)), True)
        else:
            lb.create_var(xs, (0,), "float32", stop_gradient=True)
        rank = len(t.dims) if isinstance(t, DenseTensorType) else 0
        self.emit(lb, "reshape2", {"X": [x]}, {"Out": [out], XSHAPE: [xs]}, {"shape": [0] * rank})
        self.xshapes[("reshape2", x)] = xs
        return xs

    def transpose_xshape(self, op: Operation, attrs: dict[str, Any], inputs: dict[str, list[str]],
                         lb: LBlock) -> str:
        """transpose2_grad's XShape (PIR's transpose_grad reads none): a forward transpose's
        with the same perm and input dims, else one made here from Out@GRAD transposed back."""
        perm = [int(a) for a in attrs.get("axis", [])]
        res = op.results[0] if op.results else None
        dims = tuple(res.type.dims) if res is not None and isinstance(res.type, DenseTensorType) else ()
        exact = [x for p, d, x in self.transposes if p == perm and d == dims]
        if exact:
            return exact[-1]
        if res is None or not isinstance(res.type, DenseTensorType) or not inputs.get("Out@GRAD"):
            raise ConversionError(self._at(op, f"the legacy transpose2_grad reads the forward XShape, and no "
                                               f"forward transpose with perm {perm} is in the program"))
        inverse = [perm.index(i) for i in range(len(perm))]
        back = self._tmp(lb, "transpose", res.type, True)
        xs = self.claim(back.replace(".tmp_0", ".tmp_1"))
        self.declare(lb, xs, dense(res.type.dtype, (0, *res.type.dims)), True)
        self.emit(lb, "transpose2", {"X": inputs["Out@GRAD"]}, {"Out": [back], XSHAPE: [xs]}, {"axis": inverse},
                  role=OP_ROLE_BACKWARD)
        return xs

    # ------------------------------------------------------------- constants
    def _uses_need_var(self, op: Operation) -> bool:
        """Whether some use of a constant's result reads it as a tensor (not as an attribute);
        a constant nobody uses is kept too (converted, never dropped)."""
        if not any(res.uses for res in op.results):
            return True
        for res in op.results:
            for user, idx in res.uses:
                if user.name == "builtin.combine":
                    if _const(user.results[0]) is None or any(
                            not self._attr_use(u, i) for u, i in user.results[0].uses):
                        return True
                    continue
                if user.name == "cf.tuple_push":
                    st = self.stacks.get(user.operands[0])           # type: ignore[arg-type]
                    if st is not None and (idx - 1) not in st.keep:
                        continue
                    return True
                if not self._attr_use(user, idx):
                    return True
        return False

    @staticmethod
    def _attr_use(user: Operation, idx: int) -> bool:
        r = resolve(user.name) if user.name not in _SPECIAL else None
        return r is not None and idx < len(r.map.operands) and r.map.operands[idx].is_mutable_attr

    def _full(self, op: Operation, lb: LBlock) -> None:
        if self._uses_need_var(op):
            self._emit_const(op, lb)

    _full_int_array = _full

    def _emit_const(self, op: Operation, lb: LBlock) -> None:
        res = op.results[0]
        if res in self.names:
            return
        if op.name == "pd_op.full":
            self.generic(op, lb)
            value = op.attr("value", 0.0)
            d = lb.desc.ops[-1]
            fixed = _f32_exact(value)
            for a in d.attrs:
                if a.name == "str_value" and not fixed:
                    a.s = repr(int(value)) if float(value).is_integer() else repr(float(value))
            lb.sync()
            return
        values = [int(x) for x in op.attr("value", [])]
        dt = opmap.dtype_from_pir(op.attr("dtype", "int64"))
        name = self._tmp(lb, "assign_value", res.type, True)
        self.names[res] = name
        attr, atype, cast = _ASSIGN_VALUES.get(dt, ("int64_values", _attrs.LONGS, int))
        self.emit(lb, "assign_value", {}, {"Out": [name]},
                  {"dtype": dt, "shape": [len(values)], attr: [cast(x) for x in values]},
                  types={"dtype": _attrs.INT, "shape": _attrs.INTS, attr: atype})

    def _select_input(self, op: Operation, lb: LBlock) -> None:
        """`select_input(mask, x0, x1, ...)` -> legacy select_input(X=[x0, x1, ...], Mask)."""
        mask, xs = op.operands[0], op.operands[1:]
        res = op.results[0]
        name = self._tmp(lb, "select_input", res.type, res.stop_gradient)
        self.names[res] = name
        self.emit(lb, "select_input", {"X": [self.materialize(x, op, lb) for x in xs],   # type: ignore[arg-type]
                                       "Mask": [self.materialize(mask, op, lb)]},      # type: ignore[arg-type]
                  {"Out": [name]})

    def _assign_out(self, op: Operation, lb: LBlock) -> None:
        """`assign_out_(x, output)`: legacy `assign` writing the output var in place."""
        x, target = op.operands[0], op.operands[1]
        out = self.materialize(target, op, lb)                      # type: ignore[arg-type]
        self.emit(lb, "assign", {"X": [self.materialize(x, op, lb)]}, {"Out": [out]})  # type: ignore[arg-type]
        if op.results:
            self.names[op.results[0]] = out

    def _assign_value(self, op: Operation, lb: LBlock) -> None:
        """`assign_value`: the values under the typed attr legacy Paddle reads for the dtype."""
        res = op.results[0]
        if op.name.endswith("_") and op.operands and op.operands[0] is not None:
            name = self.materialize(op.operands[0], op, lb)
        else:
            name = self._tmp(lb, "assign_value", res.type, res.stop_gradient)
        self.names[res] = name
        dt = opmap.dtype_from_pir(op.attr("dtype", "float32"))
        values = op.attr("values", [])
        attr, atype, cast = _ASSIGN_VALUES.get(dt, ("fp32_values", _attrs.FLOATS, float))
        self.emit(lb, "assign_value", {}, {"Out": [name]},
                  {"dtype": dt, "shape": [int(d) for d in op.attr("shape", [])], attr: [cast(x) for x in values]},
                  types={"dtype": _attrs.INT, "shape": _attrs.INTS, attr: atype})

    # ------------------------------------------------------------- inputs and outputs
    def _parameter(self, op: Operation, lb: LBlock) -> None:
        res = op.results[0]
        name = op.attr("parameter_name")
        persistable = op.result_flag("persistable", 0)
        if res.uses and all(_is_state_operand(u, i) for u, i in res.uses):
            # the RNN layer's dropout state: Paddle's PIR builder makes it a parameter, its legacy
            # builder a plain uint8 var the rnn op writes (`..dropout_state__non_persistable`)
            self.declare(lb, name, res.type, False)
        else:
            self.declare(lb, name, res.type, res.stop_gradient,
                         persistable=True if persistable is None else persistable,
                         is_parameter=bool(op.attr("is_parameter", True)))
        self.names[res] = name

    def _data(self, op: Operation, lb: LBlock) -> None:
        res = op.results[0]
        name = op.attr("name")
        self.declare(lb, name, res.type, res.stop_gradient)
        lb.vars[name].desc.need_check_feed = True
        self.names[res] = name
        if self.inference:
            self.feeds.append(name)

    def _fetch(self, op: Operation, lb: LBlock) -> None:
        x = op.operands[0]
        name = self.materialize(x, op, lb)                          # type: ignore[arg-type]
        if op.results:
            self.names[op.results[0]] = name
        d = lb.desc.ops.add()
        self._feed_fetch(d, "fetch", name, "fetch", int(op.attr("col", 0)))
        lb.sync()

    @staticmethod
    def _feed_fetch(d: pb.OpDesc, type_: str, x: str, out: str, col: int) -> None:
        """A feed or fetch op as Paddle's `_prepend_feed_ops` / `_append_fetch_ops` write it."""
        d.type = type_
        d.inputs.add(parameter="X", arguments=[x])
        d.outputs.add(parameter="Out", arguments=[out])
        for name, value, t in (("col", col, _attrs.INT), ("op_callstack", [], _attrs.STRINGS),
                               ("op_device", "", _attrs.STRING), ("op_namescope", "/", _attrs.STRING),
                               ("op_role", 0, _attrs.INT), ("op_role_var", [], _attrs.STRINGS),
                               ("with_quant_attr", False, _attrs.BOOLEAN)):
            _attrs.encode(d.attrs.add(), name, value, t)

    def _shadow_output(self, op: Operation, lb: LBlock) -> None:
        x = op.operands[0]
        out = op.attr("output_name")
        src = self.materialize(x, op, lb)                           # type: ignore[arg-type]
        if src == out:
            return
        if lb.find_var_recursive(out) is None:
            self.declare(lb, out, x.type, None)                     # type: ignore[union-attr]
        self.emit(lb, "assign", {"X": [src]}, {"Out": [out]})

    def _nothing(self, op: Operation, lb: LBlock) -> None:
        pass

    def _split(self, op: Operation, lb: LBlock) -> None:
        v = op.operands[0]
        names = self.args(v, op, lb)                                # type: ignore[arg-type]
        for res, n in zip(op.results, names):
            self.names[res] = n

    def _slice(self, op: Operation, lb: LBlock) -> None:
        names = self.args(op.operands[0], op, lb)                   # type: ignore[arg-type]
        self.names[op.results[0]] = names[int(op.attr("index"))]

    def _create_array(self, op: Operation, lb: LBlock) -> None:
        res = op.results[0]
        self.names[res] = self.declare(lb, self.claim(f"{self.unique('create_array')}.out"), res.type)

    def _array_read(self, op: Operation, lb: LBlock) -> None:
        arr, i = op.operands[0], op.operands[1]
        res = op.results[0]
        name = self._tmp(lb, "array_read", res.type, res.stop_gradient)
        self.names[res] = name
        self.emit(lb, "read_from_array", {"X": [self.name(arr, op)], "I": [self.materialize(i, op, lb)]},
                  {"Out": [name]})

    # ------------------------------------------------------------- array gradients
    def _tensor_to_array(self, op: Operation, lb: LBlock) -> None:
        """`tensor_to_array(x, out_grad)` (array_to_tensor's VJP) -> legacy
        `tensor_array_to_tensor_grad(X, Out@GRAD) -> X@GRAD`, the grad op Paddle's legacy
        backward gives `tensor_array_to_tensor`. Paddle's kernel keeps the items in scope vars
        named after X (`<X>_temp_grad_<i>`) and shares them with the output array, so a second
        such op on the same X gets a copy of X (`assign`), or it would overwrite the first's."""
        x, g = op.operands[0], op.operands[1]
        res = op.results[0]
        xname = self.materialize(x, op, lb)                         # type: ignore[arg-type]
        gname = self.materialize(g, op, lb)                         # type: ignore[arg-type]
        axis = int(op.attr("axis", 0))
        if axis < 0:        # Paddle's legacy kernel indexes dims with it as it is: normalise it
            rank = len(getattr(g.type, "dims", ()))                 # type: ignore[union-attr]
            if not rank:
                raise ConversionError(self._at(op, f"axis {axis} of an out_grad of unknown rank cannot be made "
                                                   "non-negative for the legacy tensor_array_to_tensor_grad"))
            axis += rank
        if xname in self.array_grads_of:
            copy = self.declare(lb, self.claim(f"{self.unique('assign')}.tmp_0"), x.type)   # type: ignore[union-attr]
            self.emit(lb, "assign", {"X": [xname]}, {"Out": [copy]}, role=OP_ROLE_BACKWARD)
            xname = copy
        self.array_grads_of.add(xname)
        out = self.declare(lb, self.claim(xname + GRAD), res.type)
        self.names[res] = out
        self.emit(lb, "tensor_array_to_tensor_grad", {"X": [xname], "Out@GRAD": [gname]}, {"X@GRAD": [out]},
                  {"axis": axis, "use_stack": bool(op.attr("use_stack", False))}, role=OP_ROLE_BACKWARD,
                  defaults_of="tensor_array_to_tensor", types={"axis": _attrs.INT, "use_stack": _attrs.BOOLEAN})

    def _create_array_like(self, op: Operation, lb: LBlock) -> None:
        """`create_array_like(x)`: an array as long as x, item i `full_like(x[i], val)`. No legacy
        op makes one (`fill_any_like` refuses an array: "numel() can't be used in TensorArray"),
        so a legacy loop over x does, as any item shapes and an empty x allow:
        `n = lod_array_length(x)`, `i = 0`, `while i < n: write_to_array(fill_any_like(
        read_from_array(x, i), val), i) -> out; increment(i)`."""
        x = op.operands[0]
        res = op.results[0]
        xname = self.materialize(x, op, lb)                         # type: ignore[arg-type]
        out = self.declare(lb, self.claim(f"{self.unique('create_array')}.out"), res.type)
        self.names[res] = out
        role = OP_ROLE_BACKWARD
        i64 = dense("int64", (1,))
        n = self._tmp(lb, "lod_array_length", i64, True)
        self.emit(lb, "lod_array_length", {"X": [xname]}, {"Out": [n]}, role=role)
        i = self._tmp(lb, "fill_constant", i64, True)
        self.emit(lb, "fill_constant", {}, {"Out": [i]},
                  {"dtype": VarType.INT64, "shape": [1], "value": 0.0, "str_value": "0"}, role=role)
        cond = self._tmp(lb, "less_than", dense("bool", (1,)), True)
        self.emit(lb, "less_than", {"X": [i], "Y": [n]}, {"Out": [cond]}, role=role)
        sub = self.out.create_block(parent_idx=lb.idx)
        t = x.type                                                  # type: ignore[union-attr]
        item_t = dense(t.dtype, tuple(t.dims)) if isinstance(t, DenseTensorArrayType) else dense("float32", ())
        item = self._tmp(sub, "read_from_array", item_t, True)
        self.emit(sub, "read_from_array", {"X": [xname], "I": [i]}, {"Out": [item]}, role=role)
        full = self._tmp(sub, "full_like", item_t, True)
        self.emit(sub, "fill_any_like", {"X": [item]}, {"Out": [full]},
                  {"value": float(op.attr("val", 0.0)), "dtype": -1}, role=role)
        self.emit(sub, "write_to_array", {"X": [full], "I": [i]}, {"Out": [out]}, role=role)
        self.emit(sub, "increment", {"X": [i]}, {"Out": [i]}, {"step": 1.0}, role=role)
        self.emit(sub, "less_than", {"X": [i], "Y": [n]}, {"Out": [cond]}, role=role)
        reads, writes = self._outer_io(sub)
        scope = self._generated(lb)
        self.emit(lb, "while", {"X": reads, "Condition": [cond]}, {"Out": writes, "StepScopes": [scope]},
                  {"is_test": False, "sub_block": _attrs.BlockRef(sub.idx)},
                  types={"is_test": _attrs.BOOLEAN, "sub_block": _attrs.BLOCK}, role=role)

    # ------------------------------------------------------------- control flow
    def _sub_block(self, region_block: Block, lb: LBlock) -> LBlock:
        sub = self.out.create_block(parent_idx=lb.idx)
        self.block(region_block, sub)
        return sub

    def _outer_io(self, sub: LBlock) -> tuple[list[str], list[str]]:
        """The outer vars a sub-block (and the blocks under it, through their ops' lists)
        reads before writing, and the ones it writes: its op's X/Input and Out."""
        local = set(sub.vars)
        written: set[str] = set()
        reads: list[str] = []
        writes: list[str] = []
        for o in sub.ops:
            for n in o.input_arg_names:
                if n not in local and n not in written and n not in reads and n != "@EMPTY@":
                    reads.append(n)
            for n in o.output_arg_names:
                if n not in local and n not in writes and sub.find_var_recursive(n) is not None:
                    writes.append(n)
                written.add(n)
        skip = {n for n in reads + writes if (v := sub.find_var_recursive(n)) is not None
                and v.type == VarType.STEP_SCOPES}
        return [n for n in reads if n not in skip], [n for n in writes if n not in skip]

    def _yield(self, op: Operation, lb: LBlock) -> None:
        targets = self.yield_targets.pop()          # set by the region op before converting its block
        for v, t in zip(op.operands, targets):
            if v is None or t is None:
                continue
            src = self.materialize(v, op, lb)
            if src != t:
                self.emit(lb, "assign", {"X": [src]}, {"Out": [t]})

    def _if(self, op: Operation, lb: LBlock) -> None:
        cond = self.materialize(op.operands[0], op, lb)             # type: ignore[arg-type]
        outs: dict[bool, list[str | None]] = {}
        for branch, region in ((True, op.regions[0]), (False, op.regions[1])):
            names: list[str | None] = []
            for res in op.results:
                names.append(None if res.is_null else self._generated(lb, like=res.type))
            outs[branch] = names
        cond_vars = {True: cond}
        for branch, region in ((True, op.regions[0]), (False, op.regions[1])):
            if not branch:
                not_cond = self._tmp(lb, "logical_not", op.operands[0].type, True)   # type: ignore[union-attr]
                self.emit(lb, "logical_not", {"X": [cond]}, {"Out": [not_cond]})
                cond_vars[False] = not_cond
            self.yield_targets.append(outs[branch])
            sub = self._sub_block(region.blocks[0], lb)
            if self.yield_targets and self.yield_targets[-1] is outs[branch]:
                self.yield_targets.pop()             # the branch had no yield
            reads, writes = self._outer_io(sub)
            scope = self._generated(lb)
            self.emit(lb, "conditional_block", {"Cond": [cond_vars[branch]], "Input": reads},
                      {"Out": writes, "Scope": [scope]},
                      {"is_scalar_condition": True, "sub_block": _attrs.BlockRef(sub.idx)},
                      types={"is_scalar_condition": _attrs.BOOLEAN, "sub_block": _attrs.BLOCK})
        live = [k for k, res in enumerate(op.results) if not res.is_null]
        if not live:
            return
        cond_t = op.operands[0].type                                 # type: ignore[union-attr]
        mask = self._tmp(lb, "cast", dense("int32", tuple(getattr(cond_t, "dims", ()))), True)
        self.emit(lb, "cast", {"X": [cond]}, {"Out": [mask]},
                  {"in_dtype": VarType.BOOL, "out_dtype": VarType.INT32})
        for k in live:
            res = op.results[k]
            name = self._tmp(lb, "select_input", res.type, res.stop_gradient)
            self.names[res] = name
            self.emit(lb, "select_input", {"X": [outs[False][k], outs[True][k]], "Mask": [mask]},  # type: ignore
                      {"Out": [name]})

    def _while(self, op: Operation, lb: LBlock) -> None:
        body = op.regions[0].blocks[0]
        cond_v, inits = op.operands[0], op.operands[1:]
        loop: list[str] = []
        for k, init in enumerate(inits):
            t = body.args[k].type if k < len(body.args) else init.type   # type: ignore[union-attr]
            name = self._tmp(lb, "assign", t, None)
            self.emit(lb, "assign", {"X": [self.materialize(init, op, lb)]}, {"Out": [name]})  # type: ignore
            loop.append(name)
        cname = self._tmp(lb, "assign", cond_v.type, True)               # type: ignore[union-attr]
        self.emit(lb, "assign", {"X": [self.materialize(cond_v, op, lb)]}, {"Out": [cname]})  # type: ignore
        for a, n in zip(body.args, loop):
            self.names[a] = n
        sub = self.out.create_block(parent_idx=lb.idx)
        self.block_of[id(body)] = sub.idx
        yield_op = body.ops[-1] if body.ops and body.ops[-1].name == "cf.yield" else None
        for o in body.ops:
            if o is yield_op:
                self._loop_yield(o, sub, [cname, *loop])
                continue
            special = _SPECIAL.get(o.name)
            if special is not None:
                getattr(self, special)(o, sub)
            else:
                self.generic(o, sub)
        reads, writes = self._outer_io(sub)
        scope = self._generated(lb)
        self.emit(lb, "while", {"X": reads, "Condition": [cname]}, {"Out": writes, "StepScopes": [scope]},
                  {"is_test": False, "sub_block": _attrs.BlockRef(sub.idx)},
                  types={"is_test": _attrs.BOOLEAN, "sub_block": _attrs.BLOCK})
        for res, n in zip(op.results, loop):
            self.names[res] = n

    def _loop_yield(self, op: Operation, lb: LBlock, targets: list[str]) -> None:
        """Assign the yields to the loop vars (through temporaries when one loop var's
        new value is another loop var, so no assignment reads a var already rewritten)."""
        srcs = [self.materialize(v, op, lb) if v is not None else None for v in op.operands]
        pending = [(s, t) for s, t in zip(srcs, targets) if s is not None and s != t]
        clash = {s for s, _ in pending} & {t for _, t in pending}
        moves = []
        for s, t in pending:
            if s in clash:
                tmp = self._copy_tmp(lb, s)
                self.emit(lb, "assign", {"X": [s]}, {"Out": [tmp]})
                s = tmp
            moves.append((s, t))
        for s, t in moves:
            self.emit(lb, "assign", {"X": [s]}, {"Out": [t]})

    def _copy_tmp(self, lb: LBlock, like: str) -> str:
        src = lb.var(like)
        name = self.claim(f"{self.unique('assign')}.tmp_0")
        lb.create_var_like(name, src)
        return name

    # ------------------------------------------------------------- stacks
    def _stack_create(self, op: Operation, lb: LBlock) -> None:
        stack, inlet, outlet = op.results[0], op.results[1], op.results[2]
        keep: dict[int, Value] = {}
        for user, _ in outlet.uses:
            if user.name == "cf.tuple_pop":
                for k, r in enumerate(user.results):
                    if r.uses:
                        keep.setdefault(k, r)
        counter = self._tmp(lb, "fill_constant", dense("int64", (1,)), True)
        self.emit(lb, "fill_constant", {}, {"Out": [counter]},
                  {"dtype": VarType.INT64, "shape": [1], "value": 0.0, "str_value": "0"})
        zero = self._tmp(lb, "fill_constant", dense("int64", (1,)), True)
        self.emit(lb, "fill_constant", {}, {"Out": [zero]},
                  {"dtype": VarType.INT64, "shape": [1], "value": 0.0, "str_value": "0"})
        arrays: dict[int, str] = {}
        for k, r in sorted(keep.items()):
            t = r.type
            tt = _tensor_type(t)
            if tt is None or tt[0] != VarType.DENSE_TENSOR:
                raise ConversionError(self._at(op, f"pops a {t!r} at position {k}: only dense tensors go into a "
                                                   "legacy tensor array"))
            name = self.claim(f"{self.unique('array')}.out")
            lb.create_var(name, (), tt[2], type=VarType.DENSE_TENSOR_ARRAY)
            arrays[k] = name
        st = _Stack(counter, zero, arrays)
        for v in (stack, inlet, outlet):
            self.stacks[v] = st

    def _tuple_push(self, op: Operation, lb: LBlock) -> None:
        st = self.stacks[op.operands[0]]                            # type: ignore[index]
        for k, arr in st.keep.items():
            v = op.operands[k + 1]
            self.emit(lb, "write_to_array", {"X": [self.materialize(v, op, lb)], "I": [st.counter]},  # type: ignore
                      {"Out": [arr]}, role=OP_ROLE_FORWARD)
        self.emit(lb, "increment", {"X": [st.counter]}, {"Out": [st.counter]}, {"step": 1.0})

    def _tuple_pop(self, op: Operation, lb: LBlock) -> None:
        st = self.stacks[op.operands[0]]                            # type: ignore[index]
        self.emit(lb, "increment", {"X": [st.counter]}, {"Out": [st.counter]}, {"step": -1.0},
                  role=OP_ROLE_BACKWARD)
        for k, res in enumerate(op.results):
            if not res.uses:
                continue
            name = self._tmp(lb, "read_from_array", res.type, res.stop_gradient)
            self.names[res] = name
            self.emit(lb, "read_from_array", {"X": [st.keep[k]], "I": [st.counter]}, {"Out": [name]},
                      role=OP_ROLE_BACKWARD)

    def _has_elements(self, op: Operation, lb: LBlock) -> None:
        st = self.stacks[op.operands[0]]                            # type: ignore[index]
        res = op.results[0]
        name = self._tmp(lb, "greater_than", res.type, True)
        self.names[res] = name
        self.emit(lb, "greater_than", {"X": [st.counter], "Y": [st.zero]}, {"Out": [name]},
                  role=OP_ROLE_BACKWARD)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _is_state_operand(user: Operation, idx: int) -> bool:
    """Whether operand `idx` of `user` is a STATE_OUT_ONLY state (rnn's dropout_state_in)."""
    r = resolve(user.name) if user.name not in _SPECIAL else None
    if r is None or r.map.legacy_type not in STATE_OUT_ONLY or idx >= len(r.map.operands):
        return False
    return r.map.operands[idx].name == STATE_OUT_ONLY[r.map.legacy_type][0]


def _tensor_slot(slots: tuple[str, ...], vector: bool) -> str:
    """The legacy `*Tensor` slot for a computed attribute: the list slot for a vector."""
    lists = [s for s in slots if s.endswith("List")]
    singles = [s for s in slots if not s.endswith("List")]
    if vector:
        return lists[0] if lists else slots[-1]
    return singles[0] if singles else slots[0]


def _as_attr(c: Any, int_array: bool) -> Any:
    if int_array:
        return [int(x) for x in (c if isinstance(c, list) else [c])]
    return c


def _f32_exact(value: Any) -> bool:
    import numpy as np
    try:
        f = float(value)
    except (TypeError, ValueError):
        return False
    if f != f or f in (float("inf"), float("-inf")):
        return True
    return float(np.float32(f)) == f


def _fit(value: Any, atype: int | None) -> Any:
    """A value in the form its AttrType stores."""
    if atype in (_attrs.INT, _attrs.LONG) and isinstance(value, float) and value.is_integer():
        return int(value)
    if atype in (_attrs.INTS, _attrs.LONGS) and isinstance(value, (list, tuple)):
        return [int(x) for x in value]
    if atype in (_attrs.FLOATS, _attrs.FLOAT64S) and isinstance(value, (list, tuple)):
        return [float(x) for x in value]
    if atype in (_attrs.FLOAT, _attrs.FLOAT64) and isinstance(value, (int, bool)):
        return float(value)
    if atype in (_attrs.FLOAT, _attrs.FLOAT64) and isinstance(value, list) and len(value) == 1:
        return float(value[0])
    if atype == _attrs.BOOLEAN:
        return bool(value)
    return value


def _ordered(slots: dict[str, list[str]], order: Iterable[str]) -> dict[str, list[str]]:
    order = list(order)
    known = [s for s in order if s in slots]
    return {**{s: slots[s] for s in known}, **{s: v for s, v in slots.items() if s not in order}}

