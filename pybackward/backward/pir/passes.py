"""Paddle 3.3.1's PIR gradient pass (`ir_backward.calc_gradient_helper`), step by step.

1. Every value with `stop_gradient` joins the no-grad set (sub-blocks too).
2. Seeds: `full` + `full_like(1.0)` per target (or the given target gradient);
   every other result of a target's defining op gets `full_like(0.0)`.
3. Prune the forward ops to those on a path from the inputs to the targets.
4. Visit them in reverse topological order (`graph.inverse_sort`): sum a value's
   gradients first (`builtin.combine` + `pd_op.add_n`), fill missing output
   gradients with `full_like(0.0)`, then append the op's VJP rule (`vjp.call_vjp`)
   or, for `pd_op.if` / `pd_op.while`, its grad op with regions
   (`control_flow`).
5. Post-pass: prune the grad ops against the wanted gradients (`gradients` only),
   then drop `full_like` ops nobody reads.

`GradState` holds what Paddle's `State` does: each value's gradients (a list of
lists: one entry per contribution, a list for a vector), the summed-away ones,
and which grad ops each forward op made.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ...base.errors import PaddleDeviationWarning, PyBackwardError, UnknownOpError
from ...pir.model import Block, Operation, Value
from ...pir.types import Attr, DenseTensorArrayType, Type, VectorType, dense
from ...pir.vjp_rules import has_vjp, rule
from . import control_flow, graph
from .control_flow import stop_flag
from .vjp import call_vjp

FLOAT32 = Attr.dtype("float32")
CPU = Attr.place(1, 0, "")
UNDEFINED_PLACE = Attr.place(0, 0, "")


class GradState:
    """Paddle's `State`: gradients of values and grad ops of forward ops."""

    def __init__(self) -> None:
        self.grads: dict[Value, list[list[Value | None]]] = {}
        self.sums: dict[Value, list[list[Value | None]]] = {}
        self.op_grads: dict[Operation, list[Operation]] = {}
        self.inside_to_outside: dict[Value, Value] = {}
        self.grad_of: dict[Value, Value] = {}       # built by turn_map
        self.summed_of: dict[Value, Value] = {}
        self.op_of: dict[Operation, Operation] = {}

    def copy(self) -> "GradState":
        s = GradState()
        s.grads = {k: list(v) for k, v in self.grads.items()}
        s.sums = {k: list(v) for k, v in self.sums.items()}
        s.op_grads = {k: list(v) for k, v in self.op_grads.items()}
        s.inside_to_outside = dict(self.inside_to_outside)
        return s

    def turn_map(self) -> None:
        self.grad_of = {g: k for k, v in self.grads.items() if v for g in v[0] if g is not None}
        self.summed_of = {g: k for k, v in self.sums.items() if v for g in v[0] if g is not None}
        self.op_of = {v[0]: k for k, v in self.op_grads.items() if v}

    def first(self, v: Value) -> Value | None:
        got = self.grads.get(v)
        return got[0][0] if got else None


def map_value(v: Value, mapping: dict[Value, Value]) -> Value:
    while v in mapping:
        v = mapping[v]
    return v


def map_values(vs: Sequence[Value | None], mapping: dict[Value, Value]) -> list[Value | None]:
    return [map_value(v, mapping) if v is not None and v in mapping else v for v in vs]


_FORWARD_ONLY: frozenset[str] | None = None


def is_forward_only(name: str) -> bool:
    """Whether Paddle marks PIR op `name` forward-only (ForwardOnlyTrait): its pass lets
    such an op through without a VJP (pybackward/data/pir_forward_only.json)."""
    global _FORWARD_ONLY
    if _FORWARD_ONLY is None:
        path = Path(__file__).resolve().parents[2] / "data" / "pir_forward_only.json"
        try:
            _FORWARD_ONLY = frozenset(json.loads(path.read_text())["ops"])
        except (OSError, ValueError, KeyError) as e:
            raise PyBackwardError(f"{path}: cannot read the forward-only PIR ops: {e}") from None
    return name in _FORWARD_ONLY


def has_grad_rule(op: Operation) -> bool:
    """Paddle's `op_has_vjp`: the op has a VJP (recorded or not), or is a pylayer."""
    return has_vjp(op.name) or op.name == "pd_op.pylayer"


_SEMANTICS: dict[tuple[str, int], list[bool]] = {}


def grad_semantics(op: Operation) -> list[bool]:
    """Which real inputs have grad semantics (Paddle's `get_grad_semantic_info`)."""
    name = op.name
    if name in ("builtin.combine", "pd_op.if", "pd_op.while", "pd_op.pylayer", "cf.tuple_push"):
        info = [True] * len(graph.real_inputs(op))
        if name == "pd_op.if" and info:
            info[0] = False
        return info
    key = (name, len(op.operands))
    got = _SEMANTICS.get(key)
    if got is None:
        r = rule(name)
        n = len(op.operands)
        if r is None:
            got = [False] * n
        else:
            grad = set(r.grad_inputs)
            got = [x in grad for x in r.inputs][:n] + [False] * max(0, n - len(r.inputs))
        _SEMANTICS[key] = got
    return got


def _combine_of(v: Value | None) -> Operation | None:
    d = v.defining_op if v is not None else None
    return d if d is not None and d.name == "builtin.combine" else None


def split_of(v: Value) -> Operation | None:
    for user, _ in v.uses:
        if user.name == "builtin.split":
            return user
    return None


class Builder:
    """Appends ops at the end of a block, as Paddle's insertion point does."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def op(self, name: str, operands: Sequence[Value | None], types: Sequence[Type], attrs: dict[str, Attr],
           stop: Sequence[bool] | None = None) -> Operation:
        flags = list(stop) if stop is not None else [False] * len(types)
        return self.block.append(Operation(name, operands, types, attrs, {"stop_gradient": Attr.bools(flags)}))


class PirBackward:
    """One run of the pass over one program (state shared by the nested calls)."""

    def __init__(self, no_grad: set[Value], on_new_op: Callable[[Operation, Operation | None], None] | None = None,
                 max_inplace_add: int = 0, paddle_exact: bool = False) -> None:
        self.no_grad = no_grad
        self.on_new_op = on_new_op
        self.max_inplace_add = max_inplace_add
        self.paddle_exact = paddle_exact
        self.deviations: list[str] = []

    def deviation(self, what: str) -> None:
        """Note (once) that the output departs from Paddle's here, and warn the caller."""
        if what in self.deviations:
            return
        self.deviations.append(what)
        from ..deviations import user_stacklevel   # imported here: the legacy pass it brings costs ~0.1 s
        warnings.warn(f"PIR: {what}; paddle_exact=True gives Paddle's program", PaddleDeviationWarning,
                      stacklevel=user_stacklevel())

    # ------------------------------------------------------------ helpers
    def record(self, backward_ops: list[Operation], state: GradState, fwd: Operation | None,
               ops: Iterable[Operation]) -> None:
        lst = state.op_grads.setdefault(fwd, []) if fwd is not None else None
        for op in ops:
            backward_ops.append(op)
            if lst is not None:
                lst.append(op)
            if self.on_new_op is not None:
                self.on_new_op(op, fwd)

    def full_like(self, value: float, like: Value, key: Value, state: GradState, backward_ops: list[Operation],
                  block: Block) -> Value:
        """Paddle's `append_full_like`: a gradient of `key` filled with `value`, shaped as `like`."""
        b = Builder(block)
        # Paddle's builder flags a result stop_gradient when every operand is: the `full`
        # always is, so the fill is stop_gradient exactly when `like` is
        stop = [stop_flag(like)]
        if isinstance(like.type, DenseTensorArrayType):
            # create_array_like's InferMeta sets the dtype only: the array's dims are []
            t = DenseTensorArrayType(like.type.dtype_type, (), like.type.layout)
            op = b.op("pd_op.create_array_like", [like], [t], {"val": Attr.f32(value)}, stop)
            self.record(backward_ops, state, key.defining_op, [op])
        else:
            full = b.op("pd_op.full", [], [_scalar_type()],
                        {"shape": Attr.int_array([1]), "value": Attr.f64(value), "dtype": FLOAT32, "place": CPU},
                        [True])
            dtype = getattr(like.type, "dtype", "float32")
            op = b.op("pd_op.full_like", [like, full.results[0]], [like.type],
                      {"dtype": Attr.dtype(dtype), "place": UNDEFINED_PLACE}, stop)
            self.record(backward_ops, state, key.defining_op, [op, full])
        state.grads[key] = [[op.results[0]]]
        return op.results[0]

    def add_n(self, fwd: Operation, value: Value, state: GradState, backward_ops: list[Operation], block: Block,
              arg_map: dict[Value, Value]) -> None:
        """Paddle's `append_add_n`: sum the gradients `value` collected."""
        items = state.grads.get(value, [])
        terms = [map_value(it[0], arg_map) for it in items if it[0] is not None]
        sums = state.sums.setdefault(value, [])
        if not terms:
            sums.extend(items)
            state.grads[value] = []
            return
        b = Builder(block)
        if len(terms) <= self.max_inplace_add:
            acc = terms[0]
            made = []
            for t in terms[1:]:
                o = b.op("pd_op.add_", [acc, t], [acc.type], {})
                made.append(o)
                acc = o.results[0]
            self.record(backward_ops, state, fwd, made)
            sums.extend(items)
            state.grads[value] = [[acc]]
            return
        if len(terms) == 1:
            sums.extend(items)
            state.grads[value] = [terms]
            return
        combine = b.op("builtin.combine", terms, [VectorType(tuple(t.type for t in terms))], {})
        name = "pd_op.add_n_array" if isinstance(value.type, DenseTensorArrayType) else "pd_op.add_n"
        total = b.op(name, [combine.results[0]], [terms[0].type], {})
        self.record(backward_ops, state, fwd, [combine, total])
        sums.extend(items)
        state.grads[value] = [[total.results[0]]]

    # ------------------------------------------------------------ one op's gradients in and out
    def outputs_with_grads(self, op: Operation, state: GradState, backward_ops: list[Operation], block: Block,
                           arg_map: dict[Value, Value], copy_map: dict[Value, Value]
                           ) -> tuple[list[bool], list[list[Value]], list[list[Value | None]]]:
        """Paddle's `make_output_with_output_grad`."""
        if op.name == "pd_op.array_write_":
            outs = [op.operands[0]]
        elif op.name == "pd_op.assign_out_":
            outs = [op.operands[1]]
        else:
            outs = list(op.results)
        zero = [False] * len(op.results)
        outputs: list[list[Value]] = []
        grads: list[list[Value | None]] = []
        for i, value in enumerate(outs):
            new_value: list[Value] = [map_value(value, copy_map)]
            value = map_value(value, state.inside_to_outside)
            if len(state.grads.get(value, ())) > 1:
                self.add_n(op, value, state, backward_ops, block, arg_map)
            got = state.grads.get(value)
            if not got or got[0][0] is None:
                split = split_of(value) if value.uses else None
                if split is not None:
                    s_zero, s_outs, s_grads = self.outputs_with_grads(split, state, backward_ops, block,
                                                                      arg_map, copy_map)
                    zero[i] = all(s_zero)
                    state.grads[value] = [[g[0] for g in s_grads]]
                    new_value = [o[0] for o in s_outs]
                else:
                    self.full_like(0.0, new_value[0], value, state, backward_ops, block)
                    zero[i] = True
            outputs.append(new_value)
            grad = state.grads[value][0]
            if grad[0] is None:
                zero[i] = True
            grads.append(map_values(grad, arg_map))
        if op.name == "pd_op.array_read":
            value = map_value(op.operands[0], state.inside_to_outside)
            if len(state.grads.get(value, ())) > 1:
                self.add_n(op, value, state, backward_ops, block, arg_map)
            if not state.grads.get(value):
                self.full_like(0.0, map_value(value, copy_map), value, state, backward_ops, block)
            grads.append(map_values(state.grads[value][0], arg_map))
        return zero, outputs, grads

    def inputs_with_stops(self, op: Operation, copy_map: dict[Value, Value]
                          ) -> tuple[list[list[Value | None]], list[list[bool]]]:
        """Paddle's `make_input_with_input_stopgradient`."""
        inputs: list[list[Value | None]] = []
        stops: list[list[bool]] = []
        for v, sem in zip(graph.real_inputs(op), grad_semantics(op)):
            comb = _combine_of(v) if op.name != "cf.tuple_push" else None
            if not sem:
                if comb is not None and op.name != "pd_op.if":
                    inputs.append([map_value(t, copy_map) for t in comb.operands])
                else:
                    inputs.append([map_value(v, copy_map) if v is not None else None])
                continue
            if comb is not None:
                c_in, c_stop = self.inputs_with_stops(comb, copy_map)
                inputs.append([x[0] for x in c_in])
                stops.append([x[0] for x in c_stop])
            else:
                inputs.append([map_value(v, copy_map) if v is not None else None])
                stops.append([v is None or v in self.no_grad or stop_flag(v)])
        return inputs, stops

    def update_input_grads(self, op: Operation, input_grads: Sequence, all_inputs: Sequence[Value | None],
                           state: GradState) -> None:
        """Paddle's `update_input_grad_map`."""
        i = 0
        for v, sem in zip(all_inputs, grad_semantics(op)):
            if not sem:
                continue
            comb = _combine_of(v) if op.name != "cf.tuple_push" else None
            if comb is not None:
                self.update_input_grads(comb, input_grads[i], comb.operands, state)
            elif v is not None:
                g = input_grads[i]
                state.grads.setdefault(v, []).append(g if isinstance(g, list) else [g])
            i += 1

    # ------------------------------------------------------------ the walk
    def append_backward_ops(self, base_op: Operation | None, base_inputs, base_input_grads,
                            fwd_block: Block, bwd_block: Block, effective: Sequence[Operation],
                            backward_ops: list[Operation], state: GradState,
                            arg_map: dict[Value, Value] | None = None,
                            copy_map: dict[Value, Value] | None = None) -> None:
        arg_map = {} if arg_map is None else arg_map
        copy_map = {} if copy_map is None else copy_map
        forward_ops = list(effective)
        if len(forward_ops) > 1 and forward_ops[-1].name == "cf.yield" and base_op is not None:
            yield_op = forward_ops[-1]
            inside = yield_op.operands[1:] if base_op.name == "pd_op.while" else yield_op.operands
            for outside, ins in zip(base_op.results, inside):
                state.inside_to_outside[ins] = outside
            forward_ops = forward_ops[:-1]
        order = list(reversed(forward_ops)) if graph.is_inplace_net(forward_ops) else graph.inverse_sort(forward_ops)
        tuple_ops: list[Operation] = []   # the pop, push and stack of this region's pipe
        for op in order:
            if op.name in ("builtin.combine", "builtin.split"):
                continue
            if has_grad_rule(op):
                zero, outputs, out_grads = self.outputs_with_grads(op, state, backward_ops, bwd_block,
                                                                   arg_map, copy_map)
                inputs, stops = self.inputs_with_stops(op, copy_map)
                if op.name == "cf.tuple_push":
                    control_flow.tuple_push(self, op, inputs, outputs, out_grads, stops, bwd_block, backward_ops, state,
                                  copy_map, tuple_ops)
                    continue
                if (not out_grads or all(zero) or all(g is None for lst in out_grads for g in lst)) and \
                        op.name not in ("pd_op.while", "pd_op.if", "pd_op.increment_"):
                    continue
                if all(all(s) for s in stops) and \
                        op.name not in ("pd_op.array_read", "pd_op.array_write_", "pd_op.increment_"):
                    continue
                if op.name in ("pd_op.if", "pd_op.while", "pd_op.pylayer"):
                    control_flow.region_op(self, op, inputs, outputs, out_grads, stops, bwd_block, backward_ops, state,
                                 arg_map, copy_map)
                    continue
                input_grads, made = call_vjp(op, inputs, outputs, out_grads, stops, bwd_block)
                self.record(backward_ops, state, op, made)
                self.update_input_grads(op, input_grads, op.operands, state)
            elif (not op.operands and op.results) or op.name in ("pd_op.full_like", "cf.tuple_pop"):
                for value in op.results:
                    if value not in state.grads:
                        continue
                    if len(state.grads[value]) > 1:
                        self.add_n(op, value, state, backward_ops, bwd_block, arg_map)
                    else:
                        state.op_grads[op] = []
            else:
                all_stop = all(stop_flag(r) for r in op.results)
                if op.dialect != "builtin" and not is_forward_only(op.name) and not all_stop:
                    raise UnknownOpError(f"op '{op.name}' has no grad op (Paddle 3.3.1 has no VJP for it), "
                                         "and its result needs a gradient")
                state.op_grads[op] = []
        if fwd_block is not bwd_block:
            control_flow.finish_block(self, base_op, base_inputs, base_input_grads, bwd_block, backward_ops, state,
                            arg_map, copy_map, tuple_ops)


def _scalar_type() -> Type:
    return dense("float32", (1,))


# --------------------------------------------------------------------------
# calc_gradient_helper
# --------------------------------------------------------------------------
def stop_gradient_values(block: Block, into: set[Value]) -> None:
    """Paddle's `update_no_grad_set_by_stopgradient`: values flagged stop_gradient, sub-blocks too."""
    for op in block.ops:
        if op.name in graph.CONTROL_FLOW:
            for region in op.regions:
                for b in region.blocks:
                    stop_gradient_values(b, into)
        for r in op.results:
            if stop_flag(r):
                into.add(r)


def calc_gradient_helper(block: Block, outputs: list[Value], inputs: list[Value],
                         grad_outputs: list[Value | None] | None, no_grad: set[Value],
                         on_new_op: Callable[[Operation, Operation | None], None] | None = None,
                         paddle_exact: bool = False) -> tuple[GradState, list[Operation]]:
    """Append the backward section of `outputs` to `block`; return the state (each
    value's gradient) and the grad ops made."""
    state = GradState()
    if all(stop_flag(r) for op in block.ops for r in op.results):
        return state, []
    total_ops = list(block.ops)
    stop_gradient_values(block, no_grad)
    run = PirBackward(no_grad, on_new_op, paddle_exact=paddle_exact)
    grad_outputs = list(grad_outputs) if grad_outputs else [None] * len(outputs)
    backward_ops: list[Operation] = []
    complete_grads: list[Value | None] = []
    for out, g in zip(outputs, grad_outputs):
        if g is None:
            complete_grads.append(run.full_like(1.0, out, out, state, backward_ops, block))
        else:
            run.record(backward_ops, state, out.defining_op, [g.defining_op] if g.defining_op else [])
            state.grads[out] = [[g]]
            complete_grads.append(g)
    complete_outputs = list(outputs)
    visited: set[Value] = set()
    i = 0
    while i < len(complete_outputs):
        out = complete_outputs[i]
        i += 1
        if out in visited or out.defining_op is None:
            continue
        for r in out.defining_op.results:
            if r.type.tag == "0.t_vec":
                continue
            if r in state.grads:
                visited.add(r)
                continue
            g = run.full_like(0.0, r, r, state, backward_ops, block)
            visited.add(r)
            complete_outputs.append(r)
            if r not in state.grads:
                state.grads[r] = [[g]]
    outputs_set = {id(o) for o in complete_outputs if o not in no_grad}
    no_grad_ids = {id(v) for v in no_grad}
    if graph.is_inplace_net(total_ops):
        effective = total_ops
    else:
        effective, _ = graph.prune(total_ops, {id(v) for v in inputs}, outputs_set, no_grad_ids)
    # what the post-pass prunes against
    outputs_fwd: list[Value] = []
    for x in inputs:
        for user, _ in x.uses:
            outputs_fwd.extend(v for v in graph.real_inputs(user) if v is not None)
    run.append_backward_ops(None, None, None, block, block, effective, backward_ops, state)

    remove: dict[Operation, None] = {}
    if inputs and not graph.is_inplace_net(backward_ops):
        out_set = {id(state.first(v)) for v in outputs_fwd if state.grads.get(v)}
        in_vals = [state.first(v) for v in complete_outputs if state.grads.get(v)]
        in_set = {id(v) for v in in_vals}
        for g in in_vals:
            if g is not None and g.uses:
                in_set.update(id(v) for v in graph.real_inputs(g.uses[0][0]) if v is not None)
        no_grad_vars = {id(state.first(k)) for k in state.grads if k in no_grad and state.grads[k]}
        for k, v in state.sums.items():
            if k in no_grad and v:
                no_grad_vars.update(id(x) for x in v[0] if x is not None)
        _, unneeded = graph.prune(backward_ops, in_set, out_set, no_grad_vars)
        remove.update((op, None) for op in unneeded)
    state.turn_map()
    # Paddle walks the grad ops in reverse topological order to find the zero fills
    # nobody reads; which ones those are does not depend on the order.
    for op in backward_ops:
        if op.name == "pd_op.full_like":
            if not op.results[0].uses:
                remove[op] = None
                d = op.operands[1].defining_op if op.operands[1] is not None else None
                if d is not None:
                    remove[d] = None
        elif op.name in graph.CONTROL_FLOW:
            for region in op.regions:
                for b in region.blocks:
                    control_flow.remove_unused_full_likes(b, state)
    keep = {id(g) for g in complete_grads if g is not None}
    for op in graph.inverse_sort(list(remove)) if len(remove) < 64 else _consumers_first(remove):
        if op.results and id(op.results[0]) in keep:
            continue
        if op.results and not op.results[0].uses and op.block is not None:
            remove_op(op.block, op, state)
    state.turn_map()
    return state, backward_ops


def _consumers_first(ops: dict[Operation, None]) -> list[Operation]:
    """The ops to remove, every op before the ops whose results it reads (a zero
    fill before its `full`): the order `inverse_sort` gives, in linear time for
    this two-level shape."""
    firsts = [op for op in ops if op.name != "pd_op.full"]
    return firsts + [op for op in ops if op.name == "pd_op.full"]


def remove_op(block: Block, op: Operation, state: GradState) -> None:
    """Paddle's `remove_op`: take a grad op out; the value it was the gradient of has none."""
    fwd = state.op_of.get(op)
    if fwd is not None and op in state.op_grads.get(fwd, []):
        state.op_grads[fwd].remove(op)
    for r in op.results:
        v = state.grad_of.get(r)
        if v is not None:
            state.grads[v] = []
    block.remove(op)
