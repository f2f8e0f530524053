"""Apply one op's recorded VJP rule: append its grad ops to a block and return the
gradients of the op's inputs, as Paddle's `call_vjp` does with prim off.

The rule (`pybackward.pir.vjp_rules`) was recorded on a one-op program; a
vector input (`builtin.combine` of N values) was recorded with two elements.
`expand` carries the recording over to the op at hand: a run `x.0, x.1` of
sources becomes `x.0 .. x.(N-1)`, and a rule whose ops repeat per element
(`add_n`: one `full` + `scale` per input) repeats them N times. Two rules
derive an attribute from the forward op by code (`DERIVED`); every other
attribute is copied or constant, as recorded.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ...base.errors import UnknownOpError
from ...pir.model import Block, Operation, Value
from ...pir.records import replace
from ...pir.types import NULL_TYPE, Attr, DenseTensorArrayType, DenseTensorType, Type, VectorType
from ...pir.vjp_rules import EmittedOp, RuleBody, Source, VjpRule, require_rule
from .control_flow import stop_flag

Grad = "Value | None | list[Value | None]"


class OpView:
    """The forward op as the rule sees it: operand I (its combine's elements when a
    vector), result J (its split's outputs), and each result's out-grads."""

    def __init__(self, op: Operation, inputs: Sequence[Sequence[Value | None]], outputs: Sequence[Sequence[Value]],
                 out_grads: Sequence[Sequence[Value | None]]) -> None:
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.out_grads = out_grads
        self.elements: list[list[Value | None] | None] = []
        for i, v in enumerate(op.operands):
            d = v.defining_op if v is not None else None
            vector = d is not None and d.name == "builtin.combine"
            self.elements.append(list(inputs[i]) if vector and i < len(inputs) else None)

    def count(self, src: Source) -> int:
        """How many elements the vector behind `src` has."""
        if src.kind == "in":
            els = self.elements[src.index]
            return len(els) if els is not None else 1
        if src.kind == "out":
            return len(self.outputs[src.index])
        if src.kind == "grad":
            return len(self.out_grads[src.index]) if src.index < len(self.out_grads) else 1
        raise ValueError(src)

    def value(self, src: Source, emitted: Sequence[Operation]) -> Value | None:
        k, i, e = src.kind, src.index, src.elem
        if k == "in":
            if e is None:
                # a vector operand is named whole only for its type
                return self.op.operands[i] if self.elements[i] is not None else self.inputs[i][0]
            return self.elements[i][e]  # type: ignore[index]
        if k == "out":
            if e is None:
                r = self.op.results[i] if i < len(self.op.results) else None
                # a vector result (split downstream) is named whole only for its type
                return r if r is not None and isinstance(r.type, VectorType) else self.outputs[i][0]
            return self.outputs[i][e]
        if k == "grad":
            g = self.out_grads[i]
            return g[0 if e is None else e]
        return emitted[i].results[e or 0]


# --------------------------------------------------------------------------
# Carrying a two-element recording over to N elements
# --------------------------------------------------------------------------
def _shift(src: Source | None, de: int, dop: int) -> Source | None:
    if src is None:
        return None
    if src.kind == "op":
        return Source("op", src.index + dop, src.elem)
    return Source(src.kind, src.index, None if src.elem is None else src.elem + de)


def _shift_result(r: "Source | Type | None", de: int, dop: int) -> "Source | Type | None":
    return _shift(r, de, dop) if isinstance(r, Source) else r


def _shift_op(e: EmittedOp, de: int, dop: int) -> EmittedOp:
    return replace(e, operands=tuple(_shift(s, de, dop) for s in e.operands),
                   results=tuple(_shift_result(r, de, dop) for r in e.results))


def _expand_list(items: Sequence, view: OpView, whole: bool = False) -> tuple:
    """A run `x.0, x.1, ..` (as recorded, of any length) becomes `x.0 .. x.(N-1)`; so
    does a lone `x.0` when `whole` (a `builtin.combine`'s operands, a `builtin.split`'s
    results: a recording with a one-element vector)."""
    out: list = []
    i = 0
    while i < len(items):
        s = items[i]
        if isinstance(s, Source) and s.kind != "op" and s.elem == 0:
            j = i + 1
            while j < len(items) and items[j] == Source(s.kind, s.index, j - i):
                j += 1
            if j > i + 1 or whole:
                out.extend(Source(s.kind, s.index, k) for k in range(view.count(s)))
                i = j
                continue
        out.append(s)
        i += 1
    return tuple(out)


def expand(body: RuleBody, rule: VjpRule, view: OpView) -> RuleBody:
    """The rule's body for the op at hand (its vector inputs' real element counts)."""
    if not rule.vector_inputs and not any(
            isinstance(s, Source) and s.elem is not None
            for e in body.ops for s in (*e.operands, *e.results)):
        return body
    ops = body.ops
    returns = dict(body.returns)
    half = len(ops) // 2
    if half and len(ops) % 2 == 0 and all(_shift_op(a, 1, half) == b for a, b in zip(ops[:half], ops[half:])):
        # One group of ops per element (add_n): repeat the first group.
        key0 = next(k for k in returns if k.endswith(".0"))
        base = key0[:-2]
        n = view.count(Source.parse(base + ".0"))
        group = ops[:half]
        ops = tuple(_shift_op(e, k, k * half) for k in range(n) for e in group)
        r0 = returns[key0]
        returns = {f"{base}.{k}": _shift(r0, k, k * half) for k in range(n)}
        return RuleBody(ops, returns)
    ops = tuple(replace(e, operands=_expand_list(e.operands, view, e.name == "builtin.combine"),
                        results=_expand_list(e.results, view, e.name == "builtin.split"))
                for e in ops)
    new_returns: dict[str, Source | None] = {}
    for key, src in returns.items():
        if "." in key and not key.endswith(".0") and key.rsplit(".", 1)[0] + ".0" in returns:
            continue          # a recorded element past the first: carried over from .0 and .1
        if key.endswith(".0") and key[:-2] + ".1" not in returns and src is not None \
                and src.kind == "op" and ops[src.index].name == "builtin.split":
            # a one-element recording: element k is the split's result k
            base = key[:-2]
            for k in range(view.count(Source.parse(key))):
                new_returns[f"{base}.{k}"] = Source("op", src.index, (src.elem or 0) + k)
            continue
        if key.endswith(".0") and key[:-2] + ".1" in returns:
            base = key[:-2]
            r1 = returns[key[:-2] + ".1"]
            n = view.count(Source.parse(key))
            for k in range(n):
                if src is None:
                    new_returns[f"{base}.{k}"] = None
                elif r1 is not None and r1.index == src.index:
                    new_returns[f"{base}.{k}"] = Source("op", src.index, (src.elem or 0) + k * ((r1.elem or 0) - (src.elem or 0)))
                else:
                    step = (r1.index - src.index) if r1 is not None else 0
                    new_returns[f"{base}.{k}"] = Source("op", src.index + k * step, src.elem)
        else:
            new_returns[key] = src
    return RuleBody(ops, new_returns)


def _null(body: RuleBody, stopped: set[str]) -> RuleBody:
    nulls: dict[int, set[int]] = {}
    returns = dict(body.returns)
    for key in stopped:
        src = returns.get(key)
        if src is not None and src.kind == "op":
            nulls.setdefault(src.index, set()).add(src.elem or 0)
        returns[key] = None
    ops = tuple(e.with_null_results(nulls[i]) if i in nulls else e for i, e in enumerate(body.ops))
    return RuleBody(ops, returns)


_BODIES: dict[tuple[str, tuple[str, ...], tuple[str, ...]], RuleBody] = {}
_PER_ELEMENT: dict[str, bool] = {}


def _per_element(rule: VjpRule) -> bool:
    """Whether the rule's ops depend on how many elements a vector has (then its body
    is made for each op, not cached by stop flags)."""
    got = _PER_ELEMENT.get(rule.op)
    if got is None:
        bodies = [rule.body] + [v for v in rule.variants.values() if isinstance(v, RuleBody)]
        got = bool(rule.vector_inputs) or any(
            isinstance(x, Source) and x.elem is not None
            for b in bodies for e in b.ops for x in (*e.operands, *e.results))
        _PER_ELEMENT[rule.op] = got
    return got


def body_for(rule: VjpRule, view: OpView, stopped: Sequence[str], absent: Sequence[str]) -> RuleBody:
    """The ops the rule appends for this op with these input keys stopped and these
    optional operands absent: a recorded variant whole, else the default with the
    stopped inputs' gradients null (where the recording showed that is all a stop does)."""
    if _per_element(rule):
        return _body_for(rule, view, stopped, absent)
    key = (rule.op, tuple(stopped), tuple(absent))
    got = _BODIES.get(key)
    if got is None:
        got = _BODIES[key] = _body_for(rule, view, stopped, absent)
    return got


def _absent_body(rule: VjpRule, absent: Sequence[str]) -> RuleBody:
    """The rule's body with these operands absent: as recorded. The recording has one
    optional operand absent at a time; with more absent (`bilinear_interp` built from
    `scale` alone: no `out_size`, `size_tensor` or `scale_tensor`) it is the default with
    each absent operand null (and an absent vector's `builtin.combine` gone), provided every
    one-absent recording is exactly that. Anything else stays unrecorded (UnknownOpError)."""
    try:
        return rule.apply(absent=absent)
    except UnknownOpError:
        if len(absent) < 2 and all(a in rule.optional_inputs for a in absent):
            raise
    body = rule.body
    for name in absent:
        i = rule.inputs.index(name)
        if name in rule.optional_inputs and rule.apply(absent=[name]) not in (_without(rule.body, i), rule.body):
            raise UnknownOpError(f"PIR op '{rule.op}' without {', '.join(sorted(absent))} was not "
                                 f"recorded (without {name} alone is more than a null operand)")
        if name not in rule.optional_inputs and name not in rule.vector_inputs:
            raise UnknownOpError(f"PIR op '{rule.op}' without {name} was not recorded")
        body = _without(body, i)
    return body


def _without(body: RuleBody, index: int) -> RuleBody:
    """`body` with every use of forward operand `index` (whole or an element) null, and
    a `builtin.combine` of nothing but its elements dropped (its uses null too)."""
    def gone(s: Source | None) -> bool:
        return s is not None and s.kind == "in" and s.index == index
    dropped = [k for k, e in enumerate(body.ops)
               if e.name == "builtin.combine" and e.operands and all(gone(s) for s in e.operands)]

    def moved(s):
        if s is None or gone(s):
            return None
        if isinstance(s, Source) and s.kind == "op":
            if s.index in dropped:
                return None
            return Source("op", s.index - sum(1 for k in dropped if k < s.index), s.elem)
        return s
    ops = tuple(replace(e, operands=tuple(moved(s) for s in e.operands),
                        results=tuple(moved(r) if isinstance(r, Source) else r for r in e.results))
                for k, e in enumerate(body.ops) if k not in dropped)
    return RuleBody(ops, {key: moved(src) for key, src in body.returns.items()})


def _body_for(rule: VjpRule, view: OpView, stopped: Sequence[str], absent: Sequence[str]) -> RuleBody:
    if absent:
        body = expand(_absent_body(rule, absent), rule, view)
        return _null(body, set(stopped)) if stopped else body
    probes = sorted({s if "." not in s else s.split(".")[0] + ".0" for s in stopped})
    if len(probes) == 1 and f"stop:{probes[0]}" in rule.variants and (
            "." not in probes[0] or all(s.startswith(probes[0][:-2] + ".") for s in stopped)):
        got = rule.variants[f"stop:{probes[0]}"]
        if isinstance(got, str):
            raise UnknownOpError(f"PIR op '{rule.op}': Paddle refuses stop:{probes[0]}: {got}")
        if "." not in probes[0]:
            return expand(got, rule, view)
    for p in probes:
        if f"stop:{p}" not in rule.variants_checked:
            raise UnknownOpError(f"PIR op '{rule.op}' with {p} stopped was not recorded")
    return _null(expand(rule.body, rule, view), set(stopped))


# --------------------------------------------------------------------------
# Emitting
# --------------------------------------------------------------------------
def _derived_increment(fwd: Operation, name: str, a: Attr) -> Attr:
    return Attr(a.tag, -float(fwd.attr("value")))


def _derived_logsumexp(fwd: Operation, name: str, a: Attr) -> Attr:
    axis = fwd.attr("axis", [])
    x = fwd.operands[0]
    rank = len(getattr(x.type, "dims", ())) if x is not None else 0
    return Attr.bool_(len(axis) == 0 or len(axis) == rank)


#: (forward op, appended op index, attribute) -> the code that derives it.
DERIVED: Mapping[tuple[str, int, str], Callable[[Operation, str, Attr], Attr]] = {
    ("pd_op.increment_", 0, "value"): _derived_increment,
    ("pd_op.logsumexp", 0, "reduce_all"): _derived_logsumexp,
}


def _result_type(r: "Source | Type | None", view: OpView, emitted: Sequence[Operation]) -> Type:
    if r is None:
        return NULL_TYPE
    if isinstance(r, Type):
        return r
    v = view.value(r, emitted)
    if v is None:
        return NULL_TYPE
    return v.type


def emit(fwd: Operation, body: RuleBody, view: OpView, block: Block) -> list[Operation]:
    """Append the body's ops to `block` (at its end) and return them."""
    emitted: list[Operation] = []
    for m, e in enumerate(body.ops):
        operands = [None if s is None else view.value(s, emitted) for s in e.operands]
        if e.name == "builtin.combine":
            types: list[Type] = [VectorType(tuple(v.type for v in operands if v is not None))]
        else:
            types = [_result_type(r, view, emitted) for r in e.results]
        if e.name == "pd_op.array_read" and e.results and isinstance(e.results[0], Type):
            # a recorded constant: Paddle infers it from the array's dims as they are now
            # (a returned grad is recorded as its input's Source: call_vjp's set_type)
            types[0] = array_read_type(operands[0], types[0])
        attrs: dict[str, Attr] = {}
        for k, a in e.attrs.items():
            if isinstance(a, Attr):
                d = DERIVED.get((fwd.name, m, k))
                attrs[k] = d(fwd, k, a) if d is not None else a
            else:
                got = fwd.attrs.get(a.name)
                if got is None:
                    raise UnknownOpError(f"PIR op '{fwd.name}' has no attribute '{a.name}' its grad op "
                                         f"{e.name} copies")
                attrs[k] = got
        if e.stop_gradient is not None:
            sg = e.stop_gradient
        elif e.name == "builtin.combine":
            # Paddle's combine stops gradients when every element does
            sg = (all(stop_flag(v) for v in operands),)
        elif e.name.endswith("_") and operands and operands[0] is not None and len(types) == 1:
            # an in-place op's result is its first operand, flags included
            sg = (stop_flag(operands[0]),)
        else:
            sg = (False,) * len(types)
        # sg == (): the op sets no flags (array_write_), and a file writes none for it
        op = Operation(e.name, operands, types, attrs, {"stop_gradient": Attr.bools(list(sg))} if sg else {})
        block.append(op)
        if e.name == "pd_op.array_write_":
            _array_takes_dims(operands)
        emitted.append(op)
    return emitted


def array_read_type(array: Value | None, recorded: Type) -> Type:
    """The type Paddle's `ArrayReadOp` builder gives its result: `ArrayReadInferMeta` at
    compile time reads only the array's current rank (which each `array_write_` resets,
    `_array_takes_dims`): rank > 1 gives that many -1 dims, else `[-1]`; dtype and layout
    are the array's. `recorded` (the type seen when the rule was recorded) is kept when
    the operand is not a tensor array."""
    if array is None or not isinstance(array.type, DenseTensorArrayType):
        return recorded
    t = array.type
    dims = (-1,) * len(t.dims) if len(t.dims) > 1 else (-1,)
    return DenseTensorType(t.dtype_type, dims, t.layout)


def _array_takes_dims(operands: Sequence[Value | None]) -> None:
    """What Paddle's array_write_ builder does to its array operand: the array value's type
    takes the written tensor's dims (the last write wins)."""
    array, x = operands[0], operands[1] if len(operands) > 1 else None
    if array is None or x is None or not isinstance(array.type, DenseTensorArrayType):
        return
    dims = getattr(x.type, "dims", None)
    if dims is not None:
        array.type = DenseTensorArrayType(array.type.dtype_type, tuple(dims), array.type.layout)


def returned_grads(rule: VjpRule, body: RuleBody, view: OpView, emitted: Sequence[Operation]) -> list:
    """One entry per grad-semantic input, in input order: its gradient value (None when
    null), or for a vector input the list of its elements' gradients. A rule may return
    an appended op's result or a value it was given (`assign_out_`: its out-grad)."""
    out: list = []
    for name in rule.grad_inputs:
        i = rule.inputs.index(name)
        if name in rule.vector_inputs:
            n = view.count(Source("in", i, 0))
            out.append([_returned(body, f"in{i}.{k}", view, emitted) for k in range(n)])
        else:
            out.append(_returned(body, f"in{i}", view, emitted))
    return out


def _returned(body: RuleBody, key: str, view: OpView, emitted: Sequence[Operation]) -> Value | None:
    src = body.returns.get(key)
    if src is None:
        return None
    v = view.value(src, emitted)
    return None if v is None or v.type is NULL_TYPE else v


def call_vjp(fwd: Operation, inputs: Sequence[Sequence[Value | None]], outputs: Sequence[Sequence[Value]],
             out_grads: Sequence[Sequence[Value | None]], stop: Sequence[Sequence[bool]], block: Block
             ) -> tuple[list, list[Operation]]:
    """Differentiate `fwd` by its rule: append the grad ops to `block`; return the
    gradients of its grad-semantic inputs and the ops appended. `stop` has one list of
    flags per grad-semantic input (one per element for a vector input); `inputs` one
    list per operand (a vector's elements), as the pass sees them (inside a loop,
    the values popped from the stack)."""
    rule = require_rule(fwd.name)
    view = OpView(fwd, inputs, outputs, out_grads)
    stopped: list[str] = []
    for name, flags in zip(rule.grad_inputs, stop):
        i = rule.inputs.index(name)
        if name in rule.vector_inputs:
            stopped.extend(f"in{i}.{k}" for k, f in enumerate(flags) if f)
        elif flags and flags[0]:
            stopped.append(f"in{i}")
    absent = [n for n in rule.optional_inputs if fwd.operands[rule.inputs.index(n)] is None]
    absent += [n for n in rule.vector_inputs
               if n not in absent and n in rule.inputs and fwd.operands[rule.inputs.index(n)] is None]
    body = body_for(rule, view, stopped, absent)
    emitted = emit(fwd, body, view, block)
    return returned_grads(rule, body, view, emitted), emitted
