"""Legacy ProgramDesc -> PIR, as Paddle 3.3.1's program translator does it.

`to_pir(program)` gives the PIR program `paddle.pir.translate_to_pir(desc)`
makes from the same legacy program, canonically equal
(`pybackward.pir.canonical.equal`) to what Paddle serializes after the
translation. The translation follows Paddle's (`paddle/fluid/ir_adaptor/
translator/`), step by step, because its output depends on the order it
works in:

1. a `builtin.parameter` for every persistable var block 0 reads before
   writing it (in first-use order);
2. a `pd_op.data` (or `pd_op.create_array` for a tensor array), inserted at
   the very top, for every var block 0 reads before any op writes it (so
   they come out in reverse order);
3. each op in turn: `conditional_block` -> `pd_op.if` (a true branch from its
   sub-block and a fake false branch of zeros), `while` -> `pd_op.while`
   (loop vars as block arguments), every other op through the op map
   (`pybackward.pir.opmap`: names, operands, results, attributes, mutable
   attributes fed by `full` / `full_int_array`, duplicable slots through
   `builtin.combine`, vector results read back through `builtin.slice`), or
   through the named function of the few ops Paddle translates by hand
   (`_SPECIAL`);
4. the `stop_gradient` / `persistable` result attributes of every value a
   block-0 var name was bound to, from that var.

What Paddle's translator refuses (ops without a PIR counterpart,
`while_grad`) is refused here too, with an `UnknownOpError` naming the op
types and how many ops have them.

A legacy program written by `to_legacy` carries the PIR program it came from
(`convert.record`: an unknown ProgramDesc field Paddle ignores). `to_pir` gives
that program back, instead of translating, when the record still fits: when
`to_legacy` of the recorded program is this legacy program exactly. An edited
program (any op, var, slot or attribute changed) no longer fits and is
translated as Paddle would; so is every program with no record. `restore=False`
always translates (Paddle's translation of the legacy program as it is);
`recorded(program)` tells whether the record is there and fits, and if not why.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable

from ..base.errors import ArgumentTypeError, ProgramFileError, UnknownOpError
from ..legacy.program import Block as LBlock, Operator, Program as LProgram, Variable
from ..legacy.wire import one_line
from ..ops.paddle_data import paddle_op
from ..pir import opmap
from ..pir.codec import loads as _pir_loads
from ..pir.model import Block, Operation, Program, Value, make_value_ids
from ..pir.types import (
    NULL_TYPE, Attr, DenseTensorArrayType, DenseTensorType, SelectedRowsType, Type, VectorType, scalar)
from . import record as _record
from .to_legacy import convert as _to_legacy

# Legacy VarType.Type numbers (framework.proto).
_DENSE, _SELECTED_ROWS, _ARRAY = 7, 8, 13
_FEED_FETCH_VARS = frozenset({"feed", "fetch"})
#: Legacy attr proto types (framework.proto AttrType) of the scalars a `full` can carry.
_INT, _FLOAT, _BOOLEAN, _LONG, _FLOAT64, _SCALAR = 0, 1, 6, 9, 15, 16
#: The dtype Paddle's `InsertFullOperationForAttributeInput` gives a scalar attribute.
_FULL_DTYPE_OF_ATTR = {_FLOAT: "float32", _FLOAT64: "float64", _INT: "int32", _LONG: "int64",
                       _BOOLEAN: "bool", _SCALAR: "float64"}
_CPU = Attr.place(1)
_UNDEFINED_PLACE = Attr.place(0)
#: fill_constant's `place_type` -> PIR place (-1: undefined; force_cpu makes it 0).
_PLACE_OF_TYPE = {-1: Attr.place(0), 0: Attr.place(1), 1: Attr.place(2), 2: Attr.place(3), 3: Attr.place(4)}

#: Attributes Paddle's translator fills when the legacy op lacks them
#: (`HandleNonexistentAttribute` of its per-op transcribers).
_MISSING_ATTRS: dict[str, dict[str, Attr]] = {
    "argsort": {"stable": Attr.bool_(False)},
    "batch_norm": {"use_global_stats": Attr.bool_(False), "trainable_statistics": Attr.bool_(False)},
    "conv2d": {"padding_algorithm": Attr.str_("EXPLICIT")},
    "conv3d": {"padding_algorithm": Attr.str_("EXPLICIT")},
    "depthwise_conv2d": {"padding_algorithm": Attr.str_("EXPLICIT")},
    "scale": {"bias": Attr.f32(0.0), "bias_after_scale": Attr.bool_(True)},
    "dropout": {"mode": Attr.str_("downscale_in_infer")},
    "sequence_pool": {"pad_value": Attr.f32(0.0)},
    "lookup_table_v2": {"padding_idx": Attr.i64(-1), "sparse": Attr.bool_(False)},
    "lookup_table": {"padding_idx": Attr.i64(-1), "sparse": Attr.bool_(False)},
    "lookup_table_v2_grad": {"padding_idx": Attr.i64(-1), "sparse": Attr.bool_(False)},
    "cross_entropy_with_softmax": {"axis": Attr.i32(-1)},
    "softmax": {"axis": Attr.i32(-1)},
    "softmax_with_cross_entropy": {"use_softmax": Attr.bool_(True), "axis": Attr.i32(-1)},
    "pool2d": {"exclusive": Attr.bool_(True), "adaptive": Attr.bool_(False),
               "padding_algorithm": Attr.str_("EXPLICIT")},
    "pool3d": {"exclusive": Attr.bool_(True), "adaptive": Attr.bool_(False),
               "padding_algorithm": Attr.str_("EXPLICIT")},
    "matmul": {"transpose_x": Attr.bool_(False), "transpose_y": Attr.bool_(False)},
}

#: Grad ops whose legacy form reads XShape: (PIR op, takes an `axis` operand).
_XSHAPE_GRADS: dict[str, tuple[str, bool]] = {
    "reshape2_grad": ("pd_op.reshape_grad", False),
    "flatten_contiguous_range_grad": ("pd_op.flatten_grad", False),
    "squeeze2_grad": ("pd_op.squeeze_grad", True),
    "unsqueeze2_grad": ("pd_op.unsqueeze_grad", True),
}
#: Legacy ops Paddle always translates to the in-place PIR op.
_ALWAYS_INPLACE = frozenset({"adagrad", "adam", "adamax", "adamw"})
#: Legacy ops Paddle 3.3.1's program translator refuses although they have a PIR op.
_REFUSED = {"while_grad": "Paddle's translator does not support while_grad",
            "conditional_block_grad": "Paddle 3.3.1's translator fails on conditional_block_grad (it aborts "
                                      "the process or misses the forward block's vars)"}
_ELEMENTWISE = frozenset(f"elementwise_{k}" for k in ("add", "sub", "mul", "div", "max", "min", "mod",
                                                      "floordiv"))


@dataclass
class _Def:
    """What a legacy var name is bound to: a value, and its index when the value is a vector."""

    value: Value
    vec: int = -1


class _Ctx:
    """Paddle's TranslationContext: var name -> stack of definitions, with a parent."""

    def __init__(self, parent: "_Ctx | None" = None) -> None:
        self.map: dict[str, list[_Def]] = {}
        self.parent = parent

    def has(self, name: str) -> bool:
        return name in self.map or (self.parent is not None and self.parent.has(name))

    def at(self, name: str) -> _Def:
        ctx: _Ctx | None = self
        while ctx is not None:
            defs = ctx.map.get(name)
            if defs:
                return defs[-1]
            ctx = ctx.parent
        raise _Refused(f"var '{name}' is read before any op writes it")

    def push(self, name: str, d: _Def) -> None:
        self.map.setdefault(name, []).append(d)

    def pop(self, name: str) -> None:
        self.map[name].pop()
        if not self.map[name]:
            del self.map[name]


class _Refused(Exception):
    """Paddle's translator would refuse this program (the message says why)."""


def to_pir(program: LProgram, restore: bool = True) -> Program:
    """The PIR program Paddle 3.3.1's translator makes from `program` (see the module doc);
    for a program `to_legacy` wrote and nobody edited since (and `restore`), the PIR
    program it was written from.

    Raises UnknownOpError when an op has no PIR counterpart (one line naming the
    op types and the count of such ops) and ProgramFileError when Paddle's
    translator would refuse the program for another reason.
    """
    return to_pir_with_map(program, restore)[0]


def to_pir_with_map(program: LProgram, restore: bool = True) -> tuple[Program, dict[str, Value]]:
    """`to_pir`, plus what Paddle's `translate_to_pir_with_param_map` returns beside
    the program: each block-0 var name -> the PIR value it ends up bound to (for a
    restored program: the top-level value whose var `to_legacy` named so)."""
    if not isinstance(program, LProgram):
        raise ArgumentTypeError(f"to_pir converts a legacy Program, not {type(program).__name__}")
    if restore:
        r = recorded(program)
        if r.program is not None:
            return r.program, r.names
    _check_ops(program)
    t = _Translator(program)
    try:
        prog = t.run()
    except _Refused as e:
        where = f"{program.source}: " if getattr(program, "source", None) else ""
        op = f" (op {t.current})" if t.current else ""
        raise ProgramFileError(f"{where}cannot translate to PIR{op}: {e}") from None
    prog.source = getattr(program, "source", None)
    make_value_ids(prog)            # ids as Paddle's writer gives them, so values can be named '%N'
    return prog, {n: defs[-1].value for n, defs in t.top.map.items() if defs}


@dataclass
class Restored:
    """What `recorded` found in a legacy program: the PIR program `to_legacy` recorded in
    it when the record fits the program (else None, and `reason` says why not), with
    each block-0 var name -> the top-level value it holds."""

    program: Program | None
    names: dict[str, Value]
    reason: str = ""


def recorded(program: LProgram) -> Restored:
    """The PIR program recorded in `program` by `to_legacy`, if it still fits: `to_legacy`
    of it must give `program` exactly (blocks, vars, ops, slots, attributes; unknown
    fields aside). Anything else (no record, a record that cannot be read, an edited
    program) gives `Restored(None, {}, reason)`: then `to_pir` translates."""
    if not isinstance(program, LProgram):
        raise ArgumentTypeError(f"recorded() reads a legacy Program, not {type(program).__name__}")
    payloads = _record.records(program)
    if not payloads:
        return Restored(None, {}, "no PIR record")
    if len(payloads) > 1:
        return Restored(None, {}, f"{len(payloads)} PIR records (to_legacy writes one)")
    source = getattr(program, "source", None)
    try:
        prog = _pir_loads(_record.decode(payloads[0]), source=f"{source or '<program>'} (PIR record)")
        conv = _to_legacy(prog, record=False)
    except Exception as e:          # a record that does not read or convert back: never trusted
        return Restored(None, {}, f"the PIR record cannot be used: {one_line(e)}")
    if _record.program_without_records(conv.program) != _record.program_without_records(program):
        return Restored(None, {}, "the program is no longer the one converted from the PIR program recorded in "
                                  "it (edited since)")
    prog.source = source
    top = {r for op in prog.block.ops for r in op.results}
    b0 = program.blocks[0]
    names: dict[str, Value] = {}
    for v, n in conv.names.items():
        if v in top and b0.has_var(n):
            names[n] = v
    for v, ns in conv.vectors.items():
        if v in top:
            for n in ns:
                if b0.has_var(n):
                    names.setdefault(n, v)
    return Restored(prog, names)


def _check_ops(program: LProgram) -> None:
    """Refuse, in one line, a program with ops Paddle cannot translate."""
    bad: dict[str, int] = {}
    for b in program.blocks:
        for op in b.ops:
            t = op.type
            if t in _REFUSED or (t not in ("conditional_block", "while") and t not in _SPECIAL
                                 and t not in _XSHAPE_GRADS and opmap.legacy_to_pir(t) is None):
                bad[t] = bad.get(t, 0) + 1
    if bad:
        where = f"{program.source}: " if getattr(program, "source", None) else ""
        names = ", ".join(f"'{t}'" + (f" ({_REFUSED.get(t) or opmap.unmapped_reason(t)})"
                                      if _REFUSED.get(t) or opmap.unmapped_reason(t) else "")
                          for t in sorted(bad))
        n = sum(bad.values())
        raise UnknownOpError(f"{where}{n} op{'s' if n != 1 else ''} with no PIR counterpart in Paddle 3.3.1's "
                             f"translator: {names}")


# --------------------------------------------------------------------------
# Types and attributes
# --------------------------------------------------------------------------
def var_type(var: Variable) -> Type:
    """The PIR type Paddle's TypeTranslator gives a legacy var."""
    dt = var.data_type
    if dt is None:
        raise _Refused(f"var '{var.name}' has no tensor type")
    dtype = scalar(opmap.dtype_to_pir(dt))
    if var.type == _ARRAY:
        return DenseTensorArrayType(dtype, var.shape)
    if var.type == _SELECTED_ROWS:
        return SelectedRowsType(dtype, var.shape)
    return DenseTensorType(dtype, var.shape)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def _attr(kind: str, value: Any) -> Attr | None:
    """A legacy attribute value as the PIR attribute of type `kind` (the op map's names)."""
    if kind == "bool":
        return Attr.bool_(bool(value))
    if kind == "int32":
        return Attr.i32(int(value))
    if kind == "int64":
        return Attr.i64(int(value))
    if kind == "float32":
        return Attr.f32(float(value))
    if kind == "float64":
        return Attr.f64(float(value))
    if kind == "str":
        return Attr.str_(str(value))
    if kind.endswith("[]"):
        item = kind[:-2]
        return Attr.array([_attr(item, v) for v in value])  # type: ignore[misc]
    if kind == "IntArray":
        return Attr.int_array(list(value))
    if kind == "DataType":
        return Attr.dtype(value if isinstance(value, str) else opmap.dtype_to_pir(int(value)))
    if kind == "Place":
        return Attr.place(*value) if isinstance(value, (list, tuple)) else None
    return None


def _legacy_default(op_type: str, name: str) -> Any:
    e = paddle_op(op_type) or {}
    return (e.get("defaults") or {}).get(name, ...)


# --------------------------------------------------------------------------
# The translator
# --------------------------------------------------------------------------
class _Translator:
    def __init__(self, program: LProgram) -> None:
        self.legacy = program
        self.prog = Program(trainable=True)
        self.top = _Ctx()
        self.params: dict[str, Variable] = {}
        self.current = ""

    # ---------------------------------------------------------------- driver
    def run(self) -> Program:
        b0 = self.legacy.blocks[0]
        self._parameters(b0)
        self._data_ops(b0)
        self._block(b0, self.top, self.prog.block)
        self._result_flags()
        return self.prog

    def _parameters(self, b0: LBlock) -> None:
        persist = {n: v for n, v in b0.vars.items() if v.persistable and n not in _FEED_FETCH_VARS}
        inner: set[str] = set()
        for op in b0.ops:
            for slot in sorted(op.input_names):
                for n in op.input(slot):
                    if n in persist and n not in inner and not self.top.has(n):
                        var = b0.find_var_recursive(n)
                        p = Operation("builtin.parameter", (), [var_type(var)],
                                      {"is_distributed": Attr.bools([False]), "is_parameter": Attr.bools([True]),
                                       "need_clip": Attr.bools([False]), "parameter_name": Attr.str_(n)},
                                      {"trainable": Attr.bools([True])})
                        self.prog.block.append(p)
                        self.top.push(n, _Def(p.results[0]))
                        inner.add(n)
            for slot in op.output_names:
                inner.update(op.output(slot))

    def _data_ops(self, b0: LBlock) -> None:
        names = set(b0.vars)
        for n in _external_inputs(b0):
            if n in names and not self.top.has(n) and n not in _FEED_FETCH_VARS:
                self._undefined_var(n, b0)

    def _undefined_var(self, name: str, block: LBlock) -> _Def:
        """Paddle's CreateUndefinedVariable: a data op (create_array for an array) at the top."""
        var = block.find_var_recursive(name)
        if var is None:
            raise _Refused(f"var '{name}' has no VarDesc")
        dtype = opmap.dtype_to_pir(var.data_type)
        if var.type == _ARRAY:
            op = _built("pd_op.create_array", (), [DenseTensorArrayType(scalar(dtype), (0,))],
                        {"dtype": Attr.dtype(dtype)})
        else:
            op = _data_op(name, var.shape, dtype)
        self.prog.block.insert(0, op)
        d = _Def(op.results[0])
        self.top.push(name, d)
        return d

    def _value_or_top(self, name: str, ctx: _Ctx) -> _Def:
        return ctx.at(name) if ctx.has(name) else self._undefined_var(name, self.legacy.blocks[0])

    def _block(self, lblock: LBlock, ctx: _Ctx, dst: Block) -> None:
        for op in lblock.ops:
            self.current = op.type
            if op.type == "conditional_block":
                self._if(op, ctx, dst)
            elif op.type == "while":
                self._while(op, ctx, dst)
            else:
                self._op(op, ctx, dst)

    def _result_flags(self) -> None:
        """Paddle's SetStopGradient / SetIsPersistable passes over the block-0 context."""
        for attr, flag in (("stop_gradient", "stop_gradient"), ("persistable", "persistable")):
            for b in self.legacy.blocks:
                for name, defs in self.top.map.items():
                    if name in _FEED_FETCH_VARS:
                        continue
                    var = b.find_var_recursive(name)
                    if var is None:
                        continue
                    for d in defs:
                        op = d.value.defining_op
                        if op is None:
                            continue
                        _set_flag(op, attr, d.value.index, getattr(var, flag))

    # ---------------------------------------------------------------- control flow
    def _if(self, op: Operator, ctx: _Ctx, dst: Block) -> None:
        for n in op.input("Input"):
            self._value_or_top(n, ctx)
        outs = [n for n in op.output("Out") if n != "@EMPTY@"]
        lb = op.block
        out_vars = [lb.find_var_recursive(n) for n in outs]
        cond = ctx.at(op.input("Cond")[0]).value
        if_op = Operation("pd_op.if", [cond], [var_type(v) for v in out_vars], num_regions=2)
        dst.append(if_op)
        sub = op.sub_block
        if sub is not None and sub != -1:
            true_block = if_op.regions[0].add_block()
            inner = _Ctx(ctx)
            self._block(self.legacy.blocks[sub], inner, true_block)
            self.current = "conditional_block"
            yields = [inner.at(n).value for n in outs]
            true_block.append(Operation("cf.yield", yields))
            false_block = if_op.regions[1].add_block()
            fyields = []
            for n, v in zip(outs, yields):
                if ctx.has(n):          # the false branch keeps the value the var had before
                    fyields.append(ctx.at(n).value)
                    continue
                init = _init_op(v.type)
                if init is None:
                    raise _Refused("a conditional_block output is neither a dense tensor nor a tensor array")
                false_block.insert(0, init)
                fyields.append(init.results[0])
            false_block.append(Operation("cf.yield", fyields))
            if_op.attrs["fake_false_branch"] = Attr.bool_(True)
        for n, r in zip(outs, if_op.results):
            ctx.push(n, _Def(r))

    def _while(self, op: Operator, ctx: _Ctx, dst: Block) -> None:
        cond_name = op.input("Condition")[0]
        loop_vars = [n for n in op.output("Out") if n != cond_name]
        operands = [self._value_or_top(cond_name, ctx).value]
        body_ctx = _Ctx(ctx)
        types = []
        for n in loop_vars:
            v = self._value_or_top(n, ctx).value
            operands.append(v)
            types.append(v.type)
        w = Operation("pd_op.while", operands, types, num_regions=1)
        dst.append(w)
        body = w.regions[0].add_block()
        for n, t in zip(loop_vars, types):
            body_ctx.push(n, _Def(body.add_arg(t)))
        self._block(self.legacy.blocks[op.sub_block], body_ctx, body)
        self.current = "while"
        body.append(Operation("cf.yield", [body_ctx.at(cond_name).value] +
                              [body_ctx.at(n).value for n in loop_vars]))
        for n, r in zip(loop_vars, w.results):
            ctx.push(n, _Def(r))

    # ---------------------------------------------------------------- ops
    def _op(self, op: Operator, ctx: _Ctx, dst: Block) -> None:
        fn = _SPECIAL.get(op.type)
        if fn is not None:
            fn(self, op, ctx, dst)
            return
        grad = _XSHAPE_GRADS.get(op.type)
        if grad is not None:
            self._xshape_grad(op, ctx, dst, *grad)
            return
        self._general(op, ctx, dst)

    def _form(self, op: Operator) -> opmap.OpMap:
        inputs = {s: op.input(s) for s in op.input_names}
        m = opmap.legacy_to_pir(op.type, inputs, op.all_attrs)
        if m is None or m.pir is None:
            raise _Refused(f"op '{op.type}' has no one-op PIR form")
        return m

    def _pir_name(self, op: Operator, m: opmap.OpMap) -> str:
        name = m.pir
        assert name is not None
        if (op.type in _ALWAYS_INPLACE or _is_inplace(op)) and not name.endswith("_"):
            name += "_"
        return name

    def _general(self, op: Operator, ctx: _Ctx, dst: Block, m: opmap.OpMap | None = None,
                 name: str | None = None, attrs: dict[str, Attr] | None = None,
                 operands: list[Value | None] | None = None) -> Operation:
        """Paddle's OpTranscriber: slices for vector-made inputs, operands, results, attributes."""
        m = m or self._form(op)
        name = name or self._pir_name(op, m)
        self._slices_for_inputs(op, ctx, dst)
        if operands is None:
            operands = self._operands(op, m, ctx, dst)
        types, mapping = self._results(op, m)
        if attrs is None:
            attrs = self._attrs(op, m)
        new = Operation(name, operands, types, attrs)
        dst.append(new)
        self._record(new, mapping, ctx)
        return new

    def _slices_for_inputs(self, op: Operator, ctx: _Ctx, dst: Block) -> None:
        for slot in sorted(op.input_names):
            for n in op.input(slot):
                if ctx.has(n) and ctx.at(n).vec >= 0:
                    self._slice(n, ctx, dst)

    def _slice(self, name: str, ctx: _Ctx, dst: Block) -> _Def:
        d = ctx.at(name)
        vec_t = d.value.type
        assert isinstance(vec_t, VectorType)
        s = Operation("builtin.slice", [d.value], [vec_t.items[d.vec]], {"index": Attr.i32(d.vec)})
        dst.append(s)
        nd = _Def(s.results[0])
        ctx.push(name, nd)
        return nd

    def _operands(self, op: Operator, m: opmap.OpMap, ctx: _Ctx, dst: Block) -> list[Value | None]:
        out: list[Value | None] = []
        for o in m.operands:
            if o.via is not None:       # array_write_'s array: the Out var, or a new array
                out.append(self._array_of(op, ctx, dst))
                continue
            names: list[str] = op.input(o.slot) if o.slot else []
            if o.is_mutable_attr and not names:
                for s in o.tensor_slots:
                    names = op.input(s)
                    if names:
                        break
                if not names:
                    out.append(self._attr_input(op, o, dst))
                    continue
                if o.const_op == "pd_op.full_int_array" and not (len(names) == 1 and _is_array(op, names[0])):
                    out.append(self._combine(names, ctx, dst))
                    continue
            if not names:
                out.append(None)
                continue
            if _is_vector_slot(op, o.slot) and not (len(names) == 1 and _is_array(op, names[0])):
                out.append(self._combine(names, ctx, dst))
            else:
                out.append(ctx.at(names[0]).value)
        return out

    def _array_of(self, op: Operator, ctx: _Ctx, dst: Block) -> Value:
        n = op.output("Out")[0]
        if ctx.has(n):
            return ctx.at(n).value
        var = op.block.find_var_recursive(n)
        dtype = opmap.dtype_to_pir(var.data_type)
        c = _built("pd_op.create_array", (), [DenseTensorArrayType(scalar(dtype), (0,))],
                   {"dtype": Attr.dtype(dtype)})
        dst.append(c)
        return c.results[0]

    def _combine(self, names: list[str], ctx: _Ctx, dst: Block) -> Value:
        vals = [ctx.at(n).value for n in names]
        c = Operation("builtin.combine", vals, [VectorType(tuple(v.type for v in vals))])
        dst.append(c)
        return c.results[0]

    def _attr_input(self, op: Operator, o: opmap.OperandMap, dst: Block) -> Value:
        """A mutable attribute as a `full_int_array` / `full` op (GetAttributeAsInput)."""
        if o.attr is None:
            value, kind = o.value, _FLOAT
        else:
            if not op.has_attr(o.attr):
                raise _Refused(f"op '{op.type}' has no attribute '{o.attr}' for operand '{o.name}'")
            value, kind = op.attr(o.attr), op.attr_type(o.attr)
        if o.const_op == "pd_op.full_int_array":
            return self._full_int_array(list(value), dst)
        return self._full([1], _f32(float(value)), _FULL_DTYPE_OF_ATTR.get(kind, "float64"), dst)

    def _full_int_array(self, values: list[int], dst: Block) -> Value:
        f = _built("pd_op.full_int_array", (), [DenseTensorType(scalar("int64"), (len(values),))],
                   {"value": Attr.array([Attr.i64(v) for v in values]), "dtype": Attr.dtype("int64"),
                    "place": _CPU})
        dst.append(f)
        return f.results[0]

    def _full(self, shape: list[int], value: float, dtype: str, dst: Block,
              place: Attr = _CPU) -> Value:
        f = _built("pd_op.full", (), [DenseTensorType(scalar(dtype), tuple(shape))],
                   {"shape": Attr.int_array(shape), "value": Attr.f64(value), "dtype": Attr.dtype(dtype),
                    "place": place})
        dst.append(f)
        return f.results[0]

    def _results(self, op: Operator, m: opmap.OpMap) -> tuple[list[Type], list[tuple[str, int, int]]]:
        types: list[Type] = []
        mapping: list[tuple[str, int, int]] = []
        lb = op.block
        for r in m.results:
            idx = len(types)
            if r.slot is None or r.slot not in op.output_names:
                types.append(NULL_TYPE)
                continue
            names = op.output(r.slot)
            if len(names) == 1:
                var = lb.find_var_recursive(names[0])
                if var is None:         # Paddle: "[op:rnn_grad] Output @EMPTY@ should not be null"
                    raise _Refused(f"output {r.slot} var '{names[0]}' has no VarDesc")
                if var.type == _ARRAY:
                    types.append(var_type(var))
                    mapping.append((names[0], idx, -1))
                    continue
            if not _is_vector_slot(op, r.slot, output=True):
                if not names:
                    types.append(NULL_TYPE)
                    continue
                var = lb.find_var_recursive(names[0])
                if var is None:         # Paddle: "[op:rnn_grad] Output @EMPTY@ should not be null"
                    raise _Refused(f"output {r.slot} var '{names[0]}' has no VarDesc")
                types.append(var_type(var))
                mapping.append((names[0], idx, -1))
            else:
                items: list[Type] = []
                for k, n in enumerate(names):
                    if n == "@EMPTY@":
                        items.append(NULL_TYPE)
                        mapping.append((n, idx, k))
                        continue
                    var = lb.find_var_recursive(n)
                    if var is None:
                        raise _Refused(f"output var '{n}' has no VarDesc")
                    items.append(var_type(var))
                    mapping.append((n, idx, k))
                types.append(VectorType(tuple(items)))
        return types, mapping

    def _record(self, new: Operation, mapping: list[tuple[str, int, int]], ctx: _Ctx) -> None:
        for n, idx, k in mapping:
            v = new.results[idx]
            vec = isinstance(v.type, VectorType)
            ctx.push(n, _Def(v, k if vec else -1))

    def _attrs(self, op: Operator, m: opmap.OpMap) -> dict[str, Attr]:
        attrs: dict[str, Attr] = {}
        missing = _MISSING_ATTRS.get(op.type, {})
        for a in m.attrs:
            if a.legacy is not None and op.has_attr(a.legacy):
                v = _attr(a.type, op.attr(a.legacy))
            elif a.name in missing:
                v = missing[a.name]
            elif a.has_value:
                v = _attr(a.type, a.value)
            else:
                d = _legacy_default(op.type, a.legacy) if a.legacy else ...
                v = None if d is ... else _attr(a.type, d)
            if v is not None:
                attrs[a.name] = v
        return attrs

    # ---------------------------------------------------------------- named translations
    def _xshape_grad(self, op: Operator, ctx: _Ctx, dst: Block, pir_name: str, with_axis: bool) -> None:
        xshape_name, og_name = op.input("XShape")[0], op.input("Out@GRAD")[0]
        var = op.block.find_var_recursive(xshape_name)
        data = _data_op(xshape_name, var.shape[1:], opmap.dtype_to_pir(var.data_type))
        dst.append(data)
        if ctx.has(xshape_name):
            old = ctx.at(xshape_name).value
            for user, i in list(old.uses):
                user.set_operand(i, data.results[0])
            if xshape_name in ctx.map:
                ctx.pop(xshape_name)
            if old.defining_op is not None and old.defining_op.block is not None:
                old.defining_op.block.remove(old.defining_op)
        ctx.push(xshape_name, _Def(data.results[0]))
        if ctx.at(og_name).vec >= 0:
            self._slice(og_name, ctx, dst)
        operands = [data.results[0], ctx.at(og_name).value]
        if with_axis:
            operands.append(self._axis(op, ctx, dst))
        g = _built(pir_name, operands, [data.results[0].type], {})
        dst.append(g)
        ctx.push(op.output("X@GRAD")[0], _Def(g.results[0]))

    def _axis(self, op: Operator, ctx: _Ctx, dst: Block) -> Value:
        if op.input("AxesTensor"):
            return ctx.at(op.input("AxesTensor")[0]).value
        if op.input("AxesTensorList"):
            return self._combine(op.input("AxesTensorList"), ctx, dst)
        return self._full_int_array(list(op.attr("axes")), dst)

    def _reshape(self, x: Value, shape: list[int], dst: Block) -> Value:
        """Builder::Build<ReshapeOp>(x, shape): a full_int_array and a reshape."""
        s = self._full_int_array(shape, dst)
        r = _built("pd_op.reshape", [x, s], [_reshaped(x.type, shape)], {})
        dst.append(r)
        return r.results[0]


def _t_feed(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    out = op.output_arg_names[0]
    t._general(op, ctx, dst, m, "pd_op.feed",
               {"name": Attr.str_(out), "col": Attr.i32(op.attr("col", 0) or 0)}, [])


def _t_fetch(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    t._slices_for_inputs(op, ctx, dst)
    x = ctx.at(op.input("X")[0]).value
    f = Operation("pd_op.fetch", [x], [x.type],
                  {"name": Attr.str_(op.input_arg_names[0]), "col": Attr.i32(op.attr("col", 0) or 0)})
    dst.append(f)


def _t_data(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    attrs = {"name": Attr.str_(op.attr("name", "")), "shape": Attr.int_array(op.attr("shape")),
             "dtype": Attr.dtype(opmap.dtype_to_pir(op.attr("dtype"))), "place": Attr.place(op.attr("place", 0))}
    t._general(op, ctx, dst, m, "pd_op.data", attrs, [])


def _t_fill_constant(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    dtype = Attr.dtype(opmap.dtype_to_pir(op.attr("dtype")))
    filled = [s for s in ("ShapeTensor", "ShapeTensorList", "ValueTensor") if op.input(s)]
    if not filled:
        place_type = op.attr("place_type", -1) if op.has_attr("place_type") else -1
        if op.has_attr("force_cpu") and op.attr("force_cpu"):
            place_type = 0
        attrs = {"shape": Attr.int_array(op.attr("shape")), "value": Attr.f32(op.attr("value")),
                 "dtype": dtype, "place": _PLACE_OF_TYPE.get(place_type, _UNDEFINED_PLACE)}
        t._general(op, ctx, dst, opmap.legacy_forms("fill_constant")[0], "pd_op.full", attrs, [])
        return
    operands: list[Value | None] = []
    if op.input("ValueTensor"):
        operands.append(ctx.at(op.input("ValueTensor")[0]).value)
    else:
        operands.append(t._full([1], _f32(op.attr("value")), "float32", dst))
    if op.input("ShapeTensor"):
        operands.append(ctx.at(op.input("ShapeTensor")[0]).value)
    elif op.input("ShapeTensorList"):
        c = t._combine(op.input("ShapeTensorList"), ctx, dst)
        n = len(op.input("ShapeTensorList"))
        item = c.type.items[0]  # type: ignore[attr-defined]
        s = _built("pd_op.stack", [c], [DenseTensorType(item.dtype_type, (n,))], {"axis": Attr.i32(0)})
        dst.append(s)
        operands.append(s.results[0])
    else:
        operands.append(t._full_int_array(list(op.attr("shape")), dst))
    form = next(f for f in opmap.legacy_forms("fill_constant") if f.pir == "pd_op.full_with_tensor")
    t._general(op, ctx, dst, form, "pd_op.full_with_tensor", {"dtype": dtype}, operands)


def _t_assign(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    out = op.output("Out")[0]
    m = opmap.legacy_forms("assign")[0]
    if ctx.has(out):
        t._slices_for_inputs(op, ctx, dst)
        operands = [ctx.at(op.input("X")[0]).value, ctx.at(out).value]
        t._general(op, ctx, dst, m, "pd_op.assign_out_", {}, operands)
        return
    x = op.block.find_var_recursive(op.input("X")[0])
    name = "pd_op.assign_array_" if x is not None and x.type == _ARRAY else t._pir_name(op, m)
    t._general(op, ctx, dst, m, name)


def _t_assign_value(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    dtype = op.attr("dtype")
    attrs = {"shape": Attr.array([Attr.i32(v) for v in op.attr("shape")]),
             "dtype": Attr.dtype(opmap.dtype_to_pir(dtype)), "place": _UNDEFINED_PLACE}
    for name, kind in (("bool_values", "bool"), ("fp32_values", "float32"), ("int32_values", "int32"),
                       ("int64_values", "int64"), ("values", "scalar")):
        vals = op.attr(name) if op.has_attr(name) else None
        if vals:
            if kind == "scalar":
                attrs["values"] = Attr.array([Attr("1.a_scalar", ("float64", float(v))) for v in vals])
            else:
                attrs["values"] = Attr.array([Attr("1.a_scalar", (kind, v if kind != "float32" else _f32(v)))
                                              for v in vals])
            break
    else:
        raise _Refused("assign_value has no values")
    types, mapping = t._results(op, opmap.OpMap("assign_value", "pd_op.assign_value",
                                                results=(opmap.ResultMap("out", "Out"),)))
    new = Operation("pd_op.assign_value", [], types, attrs)
    dst.append(new)
    t._record(new, mapping, ctx)


def _t_increment(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    value = Attr.f32(op.attr("step")) if op.has_attr("step") else Attr.f32(1.0)
    t._general(op, ctx, dst, m, None, {"value": value})


def _t_split(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    num = op.attr("num", 0) or 0
    m = next(f for f in opmap.legacy_forms("split") if f.pir == ("pd_op.split_with_num" if num > 0 else "pd_op.split"))
    operands: list[Value | None] = [ctx.at(op.input("X")[0]).value]
    if num <= 0:
        if op.input("SectionsTensorList"):
            operands.append(t._combine(op.input("SectionsTensorList"), ctx, dst))
        else:
            operands.append(t._full_int_array(list(op.attr("sections")), dst))
    if op.input("AxisTensor"):
        operands.append(ctx.at(op.input("AxisTensor")[0]).value)
    else:
        operands.append(t._full([1], float(op.attr("axis")), "int32", dst))
    attrs = {"num": Attr.i32(num)} if num > 0 else {}
    t._general(op, ctx, dst, m, m.pir, attrs, operands)


def _t_add_n(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    name = m.pir + "_" if _is_inplace(op) else m.pir
    t._general(op, ctx, dst, m, name)


def _t_mul(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    xn, yn = op.attr("x_num_col_dims"), op.attr("y_num_col_dims")
    x, y = ctx.at(op.input("X")[0]).value, ctx.at(op.input("Y")[0]).value
    xs, ys = list(x.type.dims), list(y.type.dims)  # type: ignore[attr-defined]
    x2 = t._reshape(x, _flat2(xs, xn), dst)
    y2 = t._reshape(y, _flat2(ys, yn), dst)
    m = opmap.legacy_forms("matmul_v2")[0]
    mm = t._general(op, ctx, dst, m, "pd_op.matmul",
                    {"transpose_x": Attr.bool_(False), "transpose_y": Attr.bool_(False)}, [x2, y2])
    out = op.output("Out")
    if out:
        r = t._reshape(mm.results[0], xs[:xn] + ys[yn:], dst)
        ctx.push(out[0], _Def(r))


def _t_mul_grad(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    xn, yn = op.attr("x_num_col_dims"), op.attr("y_num_col_dims")
    x, y = ctx.at(op.input("X")[0]).value, ctx.at(op.input("Y")[0]).value
    og = ctx.at(op.input("Out@GRAD")[0]).value
    xs, ys = list(x.type.dims), list(y.type.dims)  # type: ignore[attr-defined]
    xshape, yshape = _flat2(xs, xn), _flat2(ys, yn)
    x2 = t._reshape(x, xshape, dst)
    y2 = t._reshape(y, yshape, dst)
    og2 = t._reshape(og, [xshape[0], yshape[-1]], dst)
    m = opmap.legacy_forms("matmul_v2_grad")[0]
    g = t._general(op, ctx, dst, m, "pd_op.matmul_grad",
                   {"transpose_x": Attr.bool_(False), "transpose_y": Attr.bool_(False)}, [x2, y2, og2])
    for slot, src in (("X@GRAD", "X"), ("Y@GRAD", "Y")):
        names = op.output(slot)
        if names:
            idx = 0 if slot == "X@GRAD" else 1
            var = op.block.find_var_recursive(op.input(src)[0])
            r = t._reshape(g.results[idx], list(var.shape), dst)
            ctx.push(names[0], _Def(r))


def _t_elementwise(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    axis = op.attr("axis", -1)
    if axis == -1 or axis is None:
        t._general(op, ctx, dst)
        return
    m = t._form(op)
    vals = []
    for slot in ("X", "Y"):
        n = op.input(slot)[0]
        if ctx.at(n).vec >= 0:
            t._slice(n, ctx, dst)
        vals.append(ctx.at(n).value)
    x, y = vals
    xs, ys = list(x.type.dims), list(y.type.dims)  # type: ignore[attr-defined]
    if axis < 0:
        axis += len(xs)
    append = len(xs) - axis - len(ys)
    if append > 0:
        if -1 in ys:
            raise _Refused(f"{op.type} with axis={axis} and a dynamic Y shape is not supported")
        y = t._reshape(y, [1] * axis + ys + [1] * append, dst)
    t._general(op, ctx, dst, m, None, None, [x, y])


def _t_elementwise_grad(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    g = t._general(op, ctx, dst)
    axis = op.attr("axis", -1)
    yg = op.output("Y@GRAD")
    if axis == -1 or not yg:
        return
    m = t._form(op)
    idx = next(i for i, r in enumerate(m.results) if r.slot == "Y@GRAD")
    y = ctx.at(op.input("Y")[0]).value
    v = g.results[idx]
    if isinstance(v.type, DenseTensorType) and isinstance(y.type, DenseTensorType) and v.type.dims == y.type.dims:
        return
    ctx.push(yg[0], _Def(t._reshape(v, list(y.type.dims), dst)))  # type: ignore[attr-defined]


def _t_matmul(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    """Legacy `matmul` (v1): `pd_op.matmul`, then a `scale` by `alpha` when it is not 1."""
    for a in ("Scale_x", "Scale_y", "Scale_out"):
        if op.has_attr(a) and abs(op.attr(a) - 1.0) > 1e-6:
            raise _Refused(f"matmul with {a}={op.attr(a)} (Paddle's translator refuses it)")
    mm = t._general(op, ctx, dst, opmap.legacy_forms("matmul")[0], "pd_op.matmul")
    alpha = op.attr("alpha", 1.0)
    if alpha is None or abs(alpha - 1.0) < 1e-6:
        return
    scale = t._full([1], _f32(alpha), "float32", dst)
    s = _built("pd_op.scale", [mm.results[0], scale], [mm.results[0].type],
               {"bias": Attr.f32(0.0), "bias_after_scale": Attr.bool_(True)})
    dst.append(s)
    ctx.push(op.output("Out")[0], _Def(s.results[0]))


def _t_cast(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    t._general(op, ctx, dst, m, None, {"dtype": Attr.dtype(opmap.dtype_to_pir(op.attr("out_dtype")))})


def _t_range(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    start = op.block.find_var_recursive(op.input("Start")[0])
    attrs = t._attrs(op, m)
    attrs["dtype"] = Attr.dtype(opmap.dtype_to_pir(start.data_type))
    t._general(op, ctx, dst, m, None, attrs)


def _t_rnn(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    t._slices_for_inputs(op, ctx, dst)
    operands: list[Value | None] = []
    for o in m.operands:
        if o.name == "dropout_state_in":
            names = op.output("DropoutState")
            if not names:
                operands.append(None)
                continue
            var = op.block.find_var_recursive(names[0])
            operands.append(t._full(list(var.shape), 0.0, opmap.dtype_to_pir(var.data_type), dst))
        else:
            operands.extend(t._operands(op, opmap.OpMap(m.legacy_type, m.pir, operands=(o,)), ctx, dst))
    t._general(op, ctx, dst, m, None, None, operands)


def _t_select_input(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    mask = ctx.at(op.input("Mask")[0]).value
    xs = [ctx.at(n).value for n in op.input("X")]
    a, b = xs[0].type, xs[1].type
    if a == b:
        out_t = a
    elif isinstance(a, DenseTensorType) and isinstance(b, DenseTensorType) and a.dtype == b.dtype:
        dims = tuple(x if x == y else -1 for x, y in zip(a.dims, b.dims))
        out_t = DenseTensorType(a.dtype_type, dims, a.layout, a.lod, a.offset)
    else:
        raise _Refused("select_input over values of different types")
    new = Operation("pd_op.select_input", [mask] + xs, [out_t])
    dst.append(new)
    ctx.push(op.output("Out")[0], _Def(new.results[0]))


def _t_lookup_grad(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = t._form(op)
    name = "pd_op.embedding_sparse_grad" if op.attr("is_sparse") else "pd_op.embedding_grad"
    t._general(op, ctx, dst, m, name)


def _t_write_to_array(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    t._general(op, ctx, dst, t._form(op), "pd_op.array_write_")


def _t_read_from_array(t: _Translator, op: Operator, ctx: _Ctx, dst: Block) -> None:
    m = opmap.OpMap("read_from_array", "pd_op.array_read",
                    operands=(opmap.OperandMap("array", "X"), opmap.OperandMap("i", "I")),
                    results=(opmap.ResultMap("out", "Out"),))
    t._general(op, ctx, dst, m, "pd_op.array_read", {})


#: The ops Paddle's translator handles with its own code (its `special_handlers`).
_SPECIAL: dict[str, Callable[[_Translator, Operator, _Ctx, Block], None]] = {
    "feed": _t_feed, "fetch": _t_fetch, "fetch_v2": _t_fetch, "data": _t_data,
    "fill_constant": _t_fill_constant, "assign": _t_assign, "assign_value": _t_assign_value,
    "increment": _t_increment, "split": _t_split, "sum": _t_add_n, "add_n": _t_add_n,
    "mul": _t_mul, "mul_grad": _t_mul_grad, "matmul": _t_matmul, "cast": _t_cast, "range": _t_range, "rnn": _t_rnn,
    "select_input": _t_select_input, "lookup_table_v2_grad": _t_lookup_grad,
    "write_to_array": _t_write_to_array, "read_from_array": _t_read_from_array,
    **{t: _t_elementwise for t in _ELEMENTWISE},
    **{f"{t}_grad": _t_elementwise_grad for t in _ELEMENTWISE},
}


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _built(name: str, operands: Any, types: list[Type], attrs: dict[str, Attr]) -> Operation:
    """An op Paddle makes with its Builder: every result starts with stop_gradient=true."""
    return Operation(name, operands, types, attrs, {"stop_gradient": Attr.bools([True] * len(types))})


def _data_op(name: str, shape: Any, dtype: str) -> Operation:
    return _built("pd_op.data", (), [DenseTensorType(scalar(dtype), tuple(shape))],
                  {"name": Attr.str_(name), "shape": Attr.int_array(list(shape)), "dtype": Attr.dtype(dtype),
                   "place": _UNDEFINED_PLACE})


def _init_op(t: Type) -> Operation | None:
    """The fake false branch's value for an if output (InsertInitOpOrCreateArrayToBlock)."""
    if isinstance(t, DenseTensorArrayType):
        return _built("pd_op.create_array", (), [t], {"dtype": Attr.dtype(t.dtype)})
    if isinstance(t, DenseTensorType):
        shape = [abs(d) for d in t.dims]
        return _built("pd_op.full", (), [DenseTensorType(t.dtype_type, tuple(shape), t.layout, t.lod, t.offset)],
                      {"shape": Attr.int_array(shape), "value": Attr.f64(0.0), "dtype": Attr.dtype(t.dtype),
                       "place": _CPU})
    return None


def _set_flag(op: Operation, name: str, index: int, value: bool) -> None:
    a = op.result_attrs.get(name)
    flags = [bool(x.value) for x in a.value] if a is not None else [False] * len(op.results)
    flags[index] = bool(value)
    op.result_attrs[name] = Attr.bools(flags)


def _flat2(shape: list[int], k: int) -> list[int]:
    def prod(xs: list[int]) -> int:
        p = 1
        for x in xs:
            p *= x
        return p
    return [max(prod(shape[:k]), -1), max(prod(shape[k:]), -1)]


def _reshaped(t: Type, shape: list[int]) -> Type:
    """ReshapeInferMeta: 0 copies the input dim, one -1 takes what is left."""
    assert isinstance(t, DenseTensorType)
    dims = [t.dims[i] if s == 0 and i < len(t.dims) else s for i, s in enumerate(shape)]
    if -1 in dims:
        known = 1
        for d in t.dims:
            if d < 0:
                known = -1
                break
            known *= d
        rest = 1
        for d in dims:
            if d != -1:
                rest *= d
        if known >= 0 and rest > 0 and dims.count(-1) == 1:
            dims[dims.index(-1)] = known // rest
    return DenseTensorType(t.dtype_type, tuple(dims), t.layout, t.lod, t.offset)


def _is_inplace(op: Operator) -> bool:
    ins, outs = set(op.input_arg_names), set(op.output_arg_names)
    return bool(ins and outs and ins & outs)


def _is_array(op: Operator, name: str) -> bool:
    var = op.block.find_var_recursive(name)
    return var is not None and var.type == _ARRAY


def _is_vector_slot(op: Operator, slot: str | None, output: bool = False) -> bool:
    """Whether a legacy slot is duplicable (a PIR vector): from Paddle's op protos; a
    grad op's `X@GRAD` / `Out@GRAD` slot is duplicable when the forward slot is."""
    if slot is None:
        return False
    t = op.type
    base = slot[:-5] if slot.endswith("@GRAD") else slot
    entry = paddle_op(t)
    if entry is None and t.endswith("_grad"):
        entry = paddle_op(t[:-5])
        for kind in ("inputs", "outputs"):
            for s, flags in (entry or {}).get(kind, ()):
                if s == base:
                    return "d" in flags
        return False
    kinds = ("outputs",) if output else ("inputs",)
    for kind in kinds:
        for s, flags in (entry or {}).get(kind, ()):
            if s == slot:
                return "d" in flags
    return False


def _external_inputs(block: LBlock) -> list[str]:
    """Vars an op of the block reads before any op of the block writes them, in read order."""
    out: list[str] = []
    written: set[str] = set()
    for op in block.ops:
        for slot in sorted(op.input_names):
            if op.type == "transpose2_grad" and slot == "XShape":
                continue
            for n in op.input(slot):
                if n not in written:
                    out.append(n)
        for slot in op.output_names:
            written.update(op.output(slot))
    return out
