"""Building a block's grad ops: Paddle's `_append_backward_ops_`, step by step.

For each op of the path, in reverse: its grad ops from the registry (a
sub-block op first gets a grad block filled recursively), the device copied,
second-pass renames (`grad/` prefixes), and pruning by the gradients the
targets actually feed. Then accumulation, no-grad branch removal, disconnected
subgraph pruning, and emission into the target block with callbacks.
"""
from __future__ import annotations

import dataclasses
from operator import itemgetter
from typing import Any, Iterable, Sequence

from .._proto import framework_pb2 as pb
from ..base.errors import ArgumentError, UnknownOpError, where
from ..ops import registry
from ..ops.registry import FwdOp, GradOp
from ..legacy.program import OP_DEVICE_ATTR, Block, Operator, Program, Variable
from .accumulate import accumulate_repeated_outputs
from .deviations import (accumulate_array_read_grads, carried_in_place, copy_grads_read_in_place,
                         insert_value_copies, keep_read_values, pass_gradients_through_untaken_branches,
                         refuse_aliased_outputs, report_grads_written_in_place, split_loop_var_versions,
                         zero_seeds_of_loop_grads)
from .emit import Callback, emit, fill_op_desc
from .fused import fused_walk
from ..legacy.names import EMPTY_VAR_NAME, GRAD_SUFFIX, grad_name, repeated_grad_name
from .prune import find_not_needed, remove_no_grad_branch
from ..legacy.wire import attrs_tail


@dataclasses.dataclass
class PassState:
    """What one append_backward / gradients call shares across blocks."""

    program: Program
    no_grad: dict[int, set[str]]                  # block idx -> no-grad `name@GRAD`s
    grad_to_var: dict[str, Any]                   # grad name -> forward name (the callback context)
    sub_paths: dict[int, list[Operator]]
    callbacks: Sequence[Callback] | None = None
    max_inplace_add: int = 0
    #: Paddle's program, bugs included (no corrections from deviations.py)
    paddle_exact: bool = False
    #: while body idx -> loop-carried gradients its grad block now reads
    #: (deviations.split_loop_var_versions); zero-filled if nothing made them
    loop_seeds: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    #: grad block idx -> the op that owns it (while_grad / conditional_block_grad)
    grad_block_owner: dict[int, Operator] = dataclasses.field(default_factory=dict)
    #: block idx -> forward ops put in it (deviations.insert_value_copies):
    #: op indices taken before the pass shift by that many
    forward_copies: dict[int, int] = dataclasses.field(default_factory=dict)
    #: id(desc) -> (desc, its attrs' wire bytes) of each grad op emitted as
    #: bytes (`emit`), for `steps.tag_op_role_var` (not read back from the op)
    emitted_attrs: dict[int, tuple[Any, bytes]] = dataclasses.field(default_factory=dict)
    #: the grad ops the fused walk emitted (`fused.py`; an `emit.FlatRun`), whose
    #: vars `steps.finish` has `create_grad_vars` declare from the walk's names
    flat_run: Any = None


class _SubBlockFwdOp(FwdOp):
    """The FwdOp of an op with a sub-block: its grad maker also sees the
    program, to read the grad block (while_grad's Out@GRAD comes from it)."""

    __slots__ = ("program",)


def _fwd_view(op: Operator, no_grad: set[str] | frozenset[str], grad_blocks: Sequence[int],
              copy: bool = True) -> FwdOp:
    desc = op.desc
    # (what Operator.inputs / .outputs return, from the slots the view keeps:
    # read once, on load; copied, as a maker may edit what it is given -
    # `registry.make_grad_ops`, which only copies from them, gets them as they are)
    rec_ins, rec_outs = op.slot_records()
    if copy:
        ins = {p: args[:] for p, args in rec_ins}
        outs = {p: args[:] for p, args in rec_outs}
    else:
        ins, outs = dict(rec_ins), dict(rec_outs)
    if grad_blocks:
        f = _SubBlockFwdOp(desc.type, ins, outs, desc.attrs, no_grad)
        f.program = op.block.program
    else:
        f = FwdOp(desc.type, ins, outs, desc.attrs, no_grad)
    f.grad_blocks = list(grad_blocks)
    return f


def make_op_grads(op: Operator, no_grad: set[str] | frozenset[str],
                  grad_blocks: Sequence[int] = ()) -> list[GradOp]:
    """The grad ops of one forward op, as Paddle's maker makes them
    (`core.get_grad_op_desc`), with the forward op's `op_device` copied on,
    as append_backward does. `no_grad` holds `name@GRAD` names; `grad_blocks`
    the grad blocks already made for the op's sub-blocks. Slots are sorted."""
    return make_op_grads_mapped(op, no_grad, grad_blocks)[0]


def make_op_grads_mapped(op: Operator, no_grad: set[str] | frozenset[str],
                         grad_blocks: Sequence[int] = ()) -> tuple[list[GradOp], dict[str, str] | None]:
    """`make_op_grads`, and the ops' `grad_to_var` map when a template gave
    it (None: the caller computes it).

    The grad ops of an op whose type declares a `GradSpec` depend only on
    the spec, the op's attr bytes (its device, the attrs the grad ops copy),
    its slots' names and arities, and which of its inputs' gradients are
    no-grad: the names are substituted by position. So they are made once
    per such key by the spec's maker, recorded as a template (`_Template`),
    and repeated layers take the template with their own names."""
    opdef = registry.find(op.type)
    if opdef is None:
        raise UnknownOpError(f"{where(op.block.program.source, op.block.idx, op_type=op.type)}: "
                             f"unknown op type '{op.type}' on the gradient path")
    desc = op.desc
    # The attr bytes key emit.fill_op_desc's cache and the templates, and
    # give the device once per distinct attr list rather than by a scan of
    # every op's attrs.
    tail = attrs_tail(desc.SerializePartialToString())
    # (a GradSpec made by the registry's own maker: an OpDef subclass with
    # its own `make_grad` may read more than slots and positions)
    spec = (opdef.grad if not grad_blocks and opdef.grad_kind == "spec"
            and type(opdef).make_grad is _SPEC_MAKER else None)
    if spec is not None:
        # (the argument tuples every later step reads: made here from the
        # slot records, once)
        ins, outs = op.input_arg_names, op.output_arg_names
        if GRAD_SUFFIX in "\0".join(ins + outs):
            # (a grad op differentiated again: which of the names it copies
            # read as gradients in the grad-to-var map depends on the names)
            spec = None
    if spec is not None:
        gins = [a + GRAD_SUFFIX for a in ins]
        key = _template_key(spec, tail, op, tuple(map(no_grad.__contains__, gins)))
        tmpl = _TEMPLATES.get(key)
        if tmpl is not None and tmpl.spec is spec:
            return tmpl.instantiate([*ins, *outs, *gins, *[a + GRAD_SUFFIX for a in outs], EMPTY_VAR_NAME],
                                    desc.attrs)
    view = _fwd_view(op, no_grad, grad_blocks, copy=opdef.grad_kind != "spec")
    try:
        grads = opdef.make_grad(view)
    except UnknownOpError as e:
        raise UnknownOpError(f"{where(op.block.program.source, op.block.idx, op.idx, op.type)}: {e}") from None
    if not grads:
        return grads, None
    seen = _DEVICES.get(tail)
    if seen is None:
        device = op.attr(OP_DEVICE_ATTR)
        if device is None or type(device) is str:
            if len(_DEVICES) >= 20000:
                _DEVICES.clear()
            _DEVICES[tail] = (tail, device)
    else:
        tail, device = seen  # one bytes object per distinct attr list (memory)
    base = view.attrs_desc
    base_key = (base, tail, len(base))
    for g in grads:
        if g.base_attrs is base:
            g.base_key = base_key
        g.inputs = dict(sorted(g.inputs.items()))
        g.outputs = dict(sorted(g.outputs.items()))
        if device is not None:
            g.attrs[OP_DEVICE_ATTR] = device
    if spec is None:
        return grads, None
    mapped = grad_to_var(op, grads)
    if device is None or type(device) is str:
        tmpl = _Template.record(spec, grads, mapped, [*ins, *outs, *gins, *[a + GRAD_SUFFIX for a in outs],
                                                      EMPTY_VAR_NAME], base, tail)
        if tmpl is not None:
            if len(_TEMPLATES) >= _TEMPLATES_MAX:
                _TEMPLATES.clear()
            _TEMPLATES[key] = tmpl
    return grads, mapped


def spec_made(ops: Iterable[Operator]) -> list[tuple[Operator, Any, Any]] | None:
    """(op, desc, GradSpec) of each op, or None if some op's grads are not
    made by the registry's spec maker (a cheap first test: the OpDef of each
    type looked up once; most real models have such an op)."""
    specs: dict[str, Any] = {}
    typed = []
    for op in ops:
        desc = op.desc
        t = desc.type
        spec = specs.get(t, _NO_SPEC)
        if spec is _NO_SPEC:
            opdef = registry.find(t)
            spec = specs[t] = (opdef.grad if opdef is not None and opdef.grad_kind == "spec"
                               and type(opdef).make_grad is _SPEC_MAKER else None)
        if spec is None:
            return None
        typed.append((op, desc, spec))
    return typed


def op_templates(typed: list[tuple[Operator, Any, Any]], no_grad: set[str] | frozenset[str]
                 ) -> list[tuple["_Template", list[str] | None, Operator]] | None:
    """The `_Template` `make_op_grads_mapped` instantiates for each op of
    `spec_made`'s list (recorded now by one call to it if none is yet), the
    names it substitutes (`vals`; None if they are not all distinct) and the
    op; None as soon as an op has none
    (names holding `@GRAD`, names not all distinct when it is recorded, a
    device that is not a string): the fused walk then declines the block.
    The list ends early at a template the walk found it cannot take
    (`tmpl.fused is False`): it declines there."""
    out = []
    # (the no-grad mask asked of the forward names: `a` is in `ng_fwd`
    # exactly when `a@GRAD` is in `no_grad` - the names' hashes are cached,
    # and most ops read no name whose gradient is no-grad)
    cut = -len(GRAD_SUFFIX)
    ng_fwd = {n[:cut] for n in no_grad if n.endswith(GRAD_SUFFIX)}
    for op, desc, spec in typed:
        ins = op.input_arg_names
        names = ins + op.output_arg_names
        if GRAD_SUFFIX in "\0".join(names):
            return None
        mask = (False,) * len(ins) if ng_fwd.isdisjoint(ins) else tuple(map(ng_fwd.__contains__, ins))
        key = _template_key(spec, attrs_tail(desc.SerializePartialToString()), op, mask)
        tmpl = _TEMPLATES.get(key)
        if tmpl is None or tmpl.spec is not spec:
            make_op_grads_mapped(op, no_grad)
            tmpl = _TEMPLATES.get(key)
            if tmpl is None or tmpl.spec is not spec or tmpl.positions is None:
                return None
        # (vals: the inputs, the outputs, then the @GRAD of each of them in
        # that order - names + their @GRADs - then @EMPTY@. None where they
        # are not all distinct: with no name holding `@GRAD`, exactly where
        # the names repeat or hold `@EMPTY@` - asked of the names, whose
        # hashes are cached)
        out.append((tmpl, [*names, *[a + GRAD_SUFFIX for a in names], EMPTY_VAR_NAME]
                    if len(set(names)) == len(names) and EMPTY_VAR_NAME not in names else None, op))
        if tmpl.fused is False:
            # (the walk declines at this template, as it did before: the ops
            # after it are not looked at)
            return out
    return out


_NO_SPEC = object()


def _template_key(spec: Any, tail: bytes, op: Operator, mask: tuple[bool, ...]) -> tuple:
    """What a `_Template` is keyed by: the spec, the forward op's attr bytes,
    its slots' names and arities, and which of its inputs' gradients are
    no-grad (`mask`: per input arg, whether its `@GRAD` is in the no-grad set)."""
    rec_ins, rec_outs = op.slot_records()
    return (id(spec), tail, tuple([(s, len(args)) for s, args in rec_ins]),
            tuple([(s, len(args)) for s, args in rec_outs]), mask)


class _Template:
    """The grad ops a `GradSpec` made for one forward op, with every name
    replaced by its position among the forward op's names (`vals`: its
    input args, output args, their `@GRAD`s, `@EMPTY@`), and their
    `grad_to_var` map the same way. Recorded only from an op whose names
    are all distinct, so each position is unambiguous; the spec's maker
    finds names by slot and position only, so any op with the same key
    gets these ops with its own names."""

    __slots__ = ("spec", "ops", "mapped", "tail", "positions", "fused")

    def __init__(self, spec: Any, ops: list, mapped: list, tail: bytes, positions: list | None = None):
        self.spec = spec
        self.ops = ops          # [(type, input slots, output slots (`_slot_plan`), attrs, uses base attrs)]
        self.mapped = mapped    # [(grad pos, forward pos), ...] in the map's order
        self.tail = tail        # the forward op's attr bytes (part of the key: equal for every hit)
        #: per op, ([(slot, [pos, ...]), ...] of its inputs, the same of its outputs): the
        #: positions `_slot_plan` hides in its getters, for the fused walk (`fused.py`)
        self.positions = positions
        #: what the fused walk made of this template (None: not yet; False: not for it)
        self.fused: Any = None

    @classmethod
    def record(cls, spec: Any, grads: list[GradOp], mapped: dict[str, str], vals: list[str],
               base: Any, tail: bytes) -> "_Template | None":
        where_ = {v: i for i, v in enumerate(vals)}
        if len(where_) != len(vals):
            return None
        try:
            positions = [([(s, [where_[a] for a in args]) for s, args in g.inputs.items()],
                          [(s, [where_[a] for a in args]) for s, args in g.outputs.items()]) for g in grads]
            ops = [(g.type, _slot_plan(dict(ins)), _slot_plan(dict(outs)), dict(g.attrs), g.base_attrs is base)
                   for g, (ins, outs) in zip(grads, positions)]
            pairs = [(where_[k], where_[v]) for k, v in mapped.items()]
        except KeyError:        # a name that is no forward name (not a spec's)
            return None
        for g in grads:
            if g.fresh or g.grad_to_var is not None or type(g) is not GradOp or (
                    g.base_attrs is not base and g.base_attrs):
                return None
        return cls(spec, ops, pairs, tail, positions)

    def instantiate(self, vals: list[str], attrs_desc: Any) -> tuple[list[GradOp], dict[str, str]]:
        base_key = (attrs_desc, self.tail, len(attrs_desc))
        grads = []
        for type_, ins, outs, attrs, based in self.ops:
            g = GradOp(type_, {s: [vals[k]] if k is not None else list(f(vals)) if f is not None else []
                               for s, k, f in ins},
                       {s: [vals[k]] if k is not None else list(f(vals)) if f is not None else []
                        for s, k, f in outs},
                       attrs_desc if based else (), dict(attrs))
            if based:
                g.base_key = base_key
            grads.append(g)
        return grads, {vals[i]: vals[j] for i, j in self.mapped}


def _slot_plan(slots: dict[str, list[int]]) -> tuple:
    """A template's slots as (slot, position, None) for a slot of one name
    (the common case, filled by one index), (slot, None, getter) for more
    (an itemgetter), (slot, None, None) for none."""
    return tuple([(s, pos[0], None) if len(pos) == 1 else (s, None, itemgetter(*pos) if pos else None)
                  for s, pos in slots.items()])


_SPEC_MAKER = registry.OpDef.make_grad
#: (id(spec), attr bytes, input slot arities, output slot arities, no-grad
#: mask of the inputs' gradients) -> its `_Template`
_TEMPLATES: dict[tuple, _Template] = {}
_TEMPLATES_MAX = 4096


_DEVICES: dict[bytes, tuple[bytes, str | None]] = {}


def grad_op_descs(op: Operator, no_grad_set: Iterable[str | Variable] = (),
                  grad_sub_blocks: Sequence[int] = ()) -> tuple[list[pb.OpDesc], dict[str, str]]:
    """The grad op descs of one op and their grad-to-var map, exactly as the
    pass will save them (sorted slots, Paddle's default attrs, `op_role`):
    pybackward's counterpart of Paddle's `core.get_grad_op_desc`.

    `no_grad_set` takes vars or names, with or without the `@GRAD` suffix.
    The descs are free-standing; the program is not changed."""
    if not isinstance(op, Operator):
        raise ArgumentError(f"grad_op_descs: expected an Operator, got {type(op).__name__}")
    no_grad = set()
    for v in no_grad_set:
        name = v.name if isinstance(v, Variable) else v
        if not isinstance(name, str):
            raise ArgumentError(f"grad_op_descs: no_grad_set holds {type(v).__name__}, not a var or name")
        no_grad.add(name if name.endswith(GRAD_SUFFIX) else grad_name(name))
    grads = make_op_grads(op, no_grad, grad_sub_blocks)
    descs = []
    for g in grads:
        d = pb.OpDesc()
        fill_op_desc(d, g)
        descs.append(d)
    return descs, grad_to_var(op, grads)


def grad_to_var(op: Operator, grads: list[GradOp]) -> dict[str, str]:
    """grad name -> forward name for the gradients these grad ops read or write.

    A maker may record the map itself on its grad op (`g.grad_to_var`), where
    Paddle's records more than the op's final slots show (while_grad: grads
    it then replaces with @EMPTY@)."""
    fwd_args: set[str] | tuple[str, ...] | None = None
    out: dict[str, str] = {}
    cut = -len(GRAD_SUFFIX)
    for g in grads:
        explicit = g.grad_to_var
        if explicit is not None:
            out.update(explicit)
            continue
        names = [n for args in g.inputs.values() for n in args if n.endswith(GRAD_SUFFIX)]
        names += [n for args in g.outputs.values() for n in args if n.endswith(GRAD_SUFFIX)]
        if not names:
            continue
        if fwd_args is None:
            fwd_args = op.input_arg_names + op.output_arg_names
            if len(fwd_args) > 8:        # (a few names: a tuple answers as fast as a set)
                fwd_args = set(fwd_args)
        for name in names:
            fwd = name[:cut]
            if fwd in fwd_args:
                out[name] = fwd
    return out


def _ancestors(block: Block) -> list[Block]:
    out, b = [], block.parent
    while b is not None:
        out.append(b)
        b = b.parent
    return out


def append_backward_ops(block: Block, path: list[Operator], targets: list[Variable],
                        target_block: Block, state: PassState,
                        input_grad_names: set[str] | None = None,
                        rename_map: dict[str, str] | None = None, loop_owner: Operator | None = None) -> None:
    """Create, accumulate, prune and emit the grad ops of `path` into `target_block`.

    `loop_owner`: the `while` op when `block` is its body. A block the fused
    walk qualifies (`fused.py`: block 0 of a first pass, straight-line, every
    grad op from a template, ...) is done by it in one walk, with the same
    result; the steps below are the general case."""
    program = state.program
    if fused_walk(block, path, targets, target_block, state, input_grad_names, loop_owner,
                  (spec_made, op_templates)):
        return
    times = program.appending_grad_times
    rename_map = {} if rename_map is None else rename_map
    descs: list[GradOp] = []
    origins: list[int] = []      # the index in `block` of each grad op's forward op
    index = {} if state.paddle_exact else {id(op.desc): i for i, op in enumerate(block.ops)}
    for op in reversed(path):
        if not state.paddle_exact:
            refuse_aliased_outputs(block, op, index.get(id(op.desc)))
        grad_blocks: list[int] = []
        if op.sub_block is not None:
            sub = program.block(op.sub_block)
            gblock = program.create_block(parent_idx=target_block.idx, forward_block_idx=sub.idx)
            opdef = registry.find(op.type)
            loop = op if opdef is not None and opdef.sub_block_path == "loop" else None
            append_backward_ops(sub, state.sub_paths.get(sub.idx, []), targets, gblock, state, None,
                                loop_owner=loop)
            grad_blocks.append(gblock.idx)
        grads, op_grad_to_var = make_op_grads_mapped(op, state.no_grad[block.idx], grad_blocks)
        if op.sub_block is not None and op.sub_block in state.loop_seeds:
            grads[:0] = zero_seeds_of_loop_grads(state.loop_seeds.pop(op.sub_block), descs)
            op_grad_to_var = None
        if op_grad_to_var is None:
            op_grad_to_var = grad_to_var(op, grads)
        if times > 1:
            fwd_inputs = set(op.input_arg_names)
            for g in grads:
                for name in list(g.input_args()):
                    if name in rename_map and name not in fwd_inputs:
                        g.rename_input(name, rename_map[name])
                for name in list(g.output_args()):
                    if GRAD_SUFFIX in name and block.has_var(name):
                        new = repeated_grad_name(name, times)
                        g.rename_output(name, new)
                        rename_map[name] = new
                        if name in op_grad_to_var:
                            op_grad_to_var[new] = op_grad_to_var.pop(name)
        if input_grad_names is not None:
            grad_ins = [n for g in grads for n in g.input_args()
                        if GRAD_SUFFIX in n or n in input_grad_names]
            if not grad_ins:
                continue
            if any(n in input_grad_names for n in grad_ins):
                descs.extend(grads)
                for g in grads:
                    input_grad_names.update(g.output_args())
                state.grad_to_var.update(op_grad_to_var)
        else:
            descs.extend(grads)
            state.grad_to_var.update(op_grad_to_var)
        origins.extend([index.get(id(op.desc), -1)] * (len(descs) - len(origins)))

    if not state.paddle_exact:
        descs = pass_gradients_through_untaken_branches(block, descs, origins, loop_owner,
                                                        {t.name for t in targets})
    if loop_owner is not None and not state.paddle_exact:
        descs = accumulate_array_read_grads(block, loop_owner, descs, origins)
        descs, seeds = split_loop_var_versions(block, loop_owner, target_block, descs, origins,
                                               state.grad_to_var)
        if seeds:
            have = state.loop_seeds.setdefault(block.idx, [])
            have.extend(s for s in seeds if s not in have)
    if not state.paddle_exact:
        n = insert_value_copies(block, keep_read_values(block, loop_owner, descs, origins))
        state.forward_copies[block.idx] = state.forward_copies.get(block.idx, 0) + n
    kept: list[str] | None = None if state.paddle_exact else []
    incoming = carried_in_place(block, loop_owner) if loop_owner is not None and kept is not None else ()
    no_grad = state.no_grad[block.idx]
    if kept is not None and block.parent is not None:      # stop_gradient vars of the enclosing blocks too
        no_grad = no_grad.union(*(state.no_grad.get(b.idx, ()) for b in _ancestors(block)))
    descs = accumulate_repeated_outputs(descs, block.idx, state.max_inplace_add, kept, incoming, no_grad)
    if kept:
        report_grads_written_in_place(block, kept)
    descs = remove_no_grad_branch(descs, state.no_grad[block.idx], {grad_name(t.name) for t in targets})
    doomed = find_not_needed(descs, path, input_grad_names)
    if doomed:
        descs = [g for g in descs if id(g) not in doomed]
    if not state.paddle_exact:
        descs = copy_grads_read_in_place(block, descs)
    start = len(target_block.ops)
    emit(target_block, descs, state.grad_to_var, state.callbacks, state.emitted_attrs)
    for op in target_block.ops[start:]:
        if op.sub_block is not None:
            state.grad_block_owner[op.sub_block] = op
