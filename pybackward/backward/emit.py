"""Writing grad ops into a block, and creating the grad vars they need.

`materialize` turns a `GradOp` into an `OpDesc` the way Paddle serialises
one: slots sorted by name; attrs copied verbatim from the forward op (or,
for ops made from nothing, Paddle's defaults in Paddle's order), with
overrides applied in place and new names inserted in sorted position.
`create_grad_vars` is Paddle's `_append_backward_vars_`: it drops grad ops
that write nothing or read only gradients nobody made, trims `sum` inputs,
and declares each new var with its forward var's type, shape and dtype.
"""
from __future__ import annotations

from operator import attrgetter, is_
from typing import Any, Callable, Sequence

from ..base import attrs as _attrs
from .._proto import framework_pb2 as pb
from ..base.errors import PyBackwardError, where
from ..ops import registry
from ..ops.registry import GradOp
from ..legacy.program import OP_ROLE_ATTR, Block, Operator, insert_sorted
from ..legacy.wire import length_delimited
from ..legacy.names import EMPTY_VAR_NAME, GRAD_SUFFIX, strip_grad_suffix

OP_ROLE_BACKWARD = 1


def _set(attr: pb.OpDesc.Attr, name: str, value: Any) -> None:
    if isinstance(value, tuple):
        _attrs.encode(attr, name, value[0], value[1])
    else:
        _attrs.encode(attr, name, value, attr.type if attr.name == name else None)


def _attr(name: str, value: Any, attr_type: int | None) -> pb.OpDesc.Attr:
    a = pb.OpDesc.Attr()
    if isinstance(value, tuple):
        value, attr_type = value
    _attrs.encode(a, name, value, attr_type)
    return a


def fill_op_desc(desc: pb.OpDesc, g: GradOp, role: int | None = OP_ROLE_BACKWARD) -> bytes | None:
    """Fill `desc` from `g` as Paddle would serialise it; returns the wire
    bytes of its attrs when they came from the cache (None otherwise).

    Attrs: the forward op's (copied verbatim) or, for an op made from nothing,
    none; then every default Paddle's checker adds for the op type and the op
    lacks; then the overrides (keeping an existing attr's type). Order: the
    type's extra attrs first, then the rest, each sorted by name - the order
    Paddle writes (checked on every op of the golden files).
    """
    desc.type = g.type
    for slot in sorted(g.inputs):
        desc.inputs.add(parameter=slot, arguments=g.inputs[slot])
    for slot in sorted(g.outputs):
        desc.outputs.add(parameter=slot, arguments=g.outputs[slot])
    # The attrs depend only on (type, base attrs' bytes, overrides, role):
    # the same grad op type over equal forward attrs (every layer's `mul`)
    # gets the same attr list, so it is built once and merged from its bytes.
    key = _attrs_key(g, role)
    if key is None:
        _fill_attrs(desc, g, role)
        return None
    data = _ATTR_BYTES.get(key)
    if data is None:
        data = _cache_attr_bytes(key, g, role)
    desc.MergeFromString(data)
    return data


def _cache_attr_bytes(key: tuple, g: GradOp, role: int | None) -> bytes:
    scratch = pb.OpDesc()
    _fill_attrs(scratch, g, role)
    data = scratch.SerializePartialToString()
    if len(_ATTR_BYTES) >= _ATTR_BYTES_MAX:
        _ATTR_BYTES.clear()
    _ATTR_BYTES[key] = data
    return data


def attr_bytes(g: GradOp, role: int | None = OP_ROLE_BACKWARD) -> bytes:
    """The wire bytes of the attrs `fill_op_desc` writes for `g` (its
    `OpDesc.attrs` fields), from the cache when they can be keyed."""
    key = _attrs_key(g, role)
    if key is None:
        scratch = pb.OpDesc()
        _fill_attrs(scratch, g, role)
        return scratch.SerializePartialToString()
    data = _ATTR_BYTES.get(key)
    return data if data is not None else _cache_attr_bytes(key, g, role)


_ATTR_BYTES: dict[tuple, bytes] = {}
_ATTR_BYTES_MAX = 20000
_PLAIN = frozenset((int, float, bool, str, type(None)))


def _plain(v: Any) -> bool:
    """A value whose repr says exactly how it encodes (no float subclasses,
    NumPy scalars or arrays, whose reprs may hide a difference)."""
    t = type(v)
    if t in _PLAIN:
        return True
    if t is list or t is tuple:
        return all(type(e) in _PLAIN or ((type(e) is list or type(e) is tuple)
                                         and all(type(x) in _PLAIN for x in e)) for e in v)
    return False


def _attrs_key(g: GradOp, role: int | None) -> tuple | None:
    """The cache key of g's attr list, or None when it cannot be keyed: base
    attrs whose bytes the maker's caller did not record (`g.base_key`, set
    by `grad_ops.make_op_grads`), or an override that is not a plain value."""
    base = g.base_attrs
    if base:
        bk = g.__dict__.get("base_key")
        # (a changed attr count: someone edited the forward op after its
        # grads were made; its recorded bytes are stale)
        if bk is None or bk[0] is not base or len(base) != bk[2]:
            return None
        base_bytes = bk[1]
    else:
        base_bytes = b""
    ov = g.attrs
    if ov:
        for v in ov.values():
            if not _plain(v):
                return None
        ov_key = repr(ov)
    else:
        ov_key = ""
    return (g.type, g.fresh, role, base_bytes, ov_key)


def _fill_attrs(desc: pb.OpDesc, g: GradOp, role: int | None) -> None:
    overrides = dict(g.attrs)
    if role is not None:
        overrides[OP_ROLE_ATTR] = (role, _INT)
    if not g.fresh and _copies_in_order(g.type, tuple(a.name for a in g.base_attrs), overrides):
        # The common case: the forward attrs already are the grad op's, in
        # Paddle's order; copy them in one call and set the overrides in place.
        desc.attrs.extend(g.base_attrs)
        for a in desc.attrs:
            if a.name in overrides:
                _set(a, a.name, overrides[a.name])
        return
    defaults = registry.default_attrs(g.type)
    extras = registry.extra_attrs(g.type)
    items: dict[str, pb.OpDesc.Attr] = {}
    for base in g.base_attrs:
        a = pb.OpDesc.Attr()
        a.CopyFrom(base)
        items[a.name] = a
    for name, t, default in defaults or ():
        if name not in items:
            items[name] = _attr(name, default, t)
    for name, value in overrides.items():
        a = items.get(name)
        if a is None:
            items[name] = _attr(name, value, None)
        else:
            _set(a, name, value)
    if extras is not None:
        order = sorted(items, key=lambda n: (n not in extras, n))
        desc.attrs.extend(items[n] for n in order)
        return
    # A type Paddle's defaults were not recorded for: keep the forward op's
    # order and put new attrs among the trailing sorted ones.
    # A name written twice (Paddle serialises an extra attr that is also set
    # as a plain one in both sections) is read back once, where it first stands.
    ordered = [items[n] for n in dict.fromkeys(a.name for a in g.base_attrs)]
    known = {a.name for a in g.base_attrs}
    for name, a in items.items():
        if name not in known:
            insert_sorted(ordered, a)
    desc.attrs.extend(ordered)


_INT = pb.AttrType.INT
_IN_ORDER: dict[tuple[str, tuple[str, ...]], bool] = {}


def _copies_in_order(op_type: str, names: tuple[str, ...], overrides: dict) -> bool:
    """True if an op of `op_type` with these forward attrs needs no added
    defaults and no reordering (cached per type and attr-name list)."""
    if not all(k in names for k in overrides):
        return False
    key = (op_type, names)
    hit = _IN_ORDER.get(key)
    if hit is None:
        extras = registry.extra_attrs(op_type)
        defaults = registry.default_attrs(op_type) or ()
        have = set(names)
        hit = (extras is not None and len(have) == len(names)
               and all(n in have for n, _, _ in defaults)
               and list(names) == sorted(names, key=lambda n: (n not in extras, n)))
        _IN_ORDER[key] = hit
    return hit


class PaddleOpDesc:
    """What callbacks get as `context['__current_op_desc__']`: the op just
    appended, with the method names of Paddle's `core.OpDesc` (`type()`,
    `input(slot)`, `attr(name)`, `_set_attr(...)`), so callbacks written for
    Paddle work unchanged. `.op` is pybackward's `Operator` view."""

    def __init__(self, op: Operator):
        self.op = op

    def type(self) -> str:
        return self.op.type

    def input(self, slot: str) -> list[str]:
        return self.op.input(slot)

    def output(self, slot: str) -> list[str]:
        return self.op.output(slot)

    def input_names(self) -> list[str]:
        return self.op.input_names

    def output_names(self) -> list[str]:
        return self.op.output_names

    def input_arg_names(self) -> list[str]:
        return self.op.input_arg_names

    def output_arg_names(self) -> list[str]:
        return self.op.output_arg_names

    def has_attr(self, name: str) -> bool:
        return self.op.has_attr(name)

    def attr(self, name: str) -> Any:
        return self.op.attr(name)

    def attr_names(self) -> list[str]:
        return self.op.attr_names

    def _set_attr(self, name: str, value: Any) -> None:
        self.op.set_attr(name, value)

    set_attr = _set_attr

    def __repr__(self) -> str:
        return f"PaddleOpDesc({self.op!r})"


Callback = Callable[..., Any]


def emit(block: Block, ops: Sequence[GradOp], context: dict, callbacks: Sequence[Callback] | None,
         attrs_out: dict[int, tuple[pb.OpDesc, bytes]] | None = None) -> None:
    """Append grad ops to `block` with op_role=1, calling back after each.

    Without callbacks the ops go in as wire bytes, parsed into the block in
    one call (`_emit_bytes`): the same messages as `fill_op_desc` makes one by
    one, at a fraction of the calls into the protobuf runtime. Then
    `attrs_out` (if given) gets id(desc) -> (desc, the wire bytes of its
    attrs) for every op written."""
    if not callbacks:
        _emit_bytes(block, ops, attrs_out)
        return
    for g in ops:
        desc = block.desc.ops.add()
        attr_bytes = fill_op_desc(desc, g)
        op = Operator(block, desc)
        # The view's caches, from what was just written (the later steps read
        # every new op's arguments; reading them back from the desc costs more).
        ins, outs = g.inputs, g.outputs
        op._in_args = tuple([a for s in sorted(ins) for a in ins[s]])
        op._out_args = tuple([a for s in sorted(outs) for a in outs[s]])
        if attr_bytes is not None and _SUB_BLOCK_BYTES not in attr_bytes:
            op._sub_block = None
        block.ops.append(op)
        if callbacks:
            context["__current_op_desc__"] = PaddleOpDesc(op)
            for cb in callbacks:
                cb(block=block, context=context)


#: How a `sub_block` attr's name starts on the wire (Attr field 1, 9 bytes).
_SUB_BLOCK_BYTES = b"\n\tsub_block"
#: OpDesc fields: inputs = 1, outputs = 2 (OpDesc.Var: parameter = 1,
#: arguments = 2), type = 3; BlockDesc.ops = 4.
_INPUTS_TAG, _OUTPUTS_TAG, _TYPE_TAG, _OPS_TAG = 0x0A, 0x12, 0x1A, 0x22
_TYPE_FIELDS_BY_NAME: dict[str, bytes] = {}


def _emit_bytes(block: Block, ops: Sequence[GradOp],
                attrs_out: dict[int, tuple[pb.OpDesc, bytes]] | None = None) -> None:
    """`emit` without callbacks: every op's `OpDesc` as wire bytes - slots
    sorted by name, the type, the attr bytes `fill_op_desc` would merge -
    joined and merged into the block's desc at once. Each name's encoding
    is made once per call (a grad var is named by the op that writes it and
    by those that read it)."""
    if not ops:
        return
    args: dict[str, bytes] = {}
    params: dict[str, bytes] = {}
    pieces = []
    views = []
    short = _SHORT
    for g in ops:
        body = []
        ins, outs = g.inputs, g.outputs
        in_names: list[str] = []
        out_names: list[str] = []
        for slots, heads, names_out in ((ins, _IN_HEADS, in_names), (outs, _OUT_HEADS, out_names)):
            for slot in (sorted(slots) if len(slots) > 1 else slots):
                names = slots[slot]
                p = params.get(slot)
                if p is None:
                    p = params[slot] = _field(0x0A, slot.encode())
                if len(names) == 1:       # (most slots: no list to join)
                    a = names[0]
                    e = args.get(a)
                    if e is None:
                        e = a.encode()
                        n = len(e)
                        e = args[a] = short[n] + e if n < 0x80 else length_delimited(0x12, e)
                    data = p + e
                else:
                    enc = [p]
                    for a in names:
                        e = args.get(a)
                        if e is None:
                            e = a.encode()
                            n = len(e)
                            e = args[a] = short[n] + e if n < 0x80 else length_delimited(0x12, e)
                        enc.append(e)
                    data = b"".join(enc)
                n = len(data)
                body.append(heads[n] + data if n < 0x80 else length_delimited(heads[0][0], data))
                names_out.extend(names)
        t = _TYPE_FIELDS_BY_NAME.get(g.type)
        if t is None:
            if len(_TYPE_FIELDS_BY_NAME) >= 10000:
                _TYPE_FIELDS_BY_NAME.clear()
            t = _TYPE_FIELDS_BY_NAME[g.type] = length_delimited(_TYPE_TAG, g.type.encode())
        body.append(t)
        attrs = attr_bytes(g)
        body.append(attrs)
        op_data = b"".join(body)
        n = len(op_data)
        pieces.append(_OP_HEADS[n] + op_data if n < 0x80 else
                      bytes((_OPS_TAG, (n & 0x7F) | 0x80, n >> 7)) + op_data if n < 0x4000
                      else length_delimited(_OPS_TAG, op_data))
        views.append((tuple(in_names), tuple(out_names), attrs))
    start = len(block.desc.ops)
    block.desc.MergeFromString(b"".join(pieces))
    new_ops = block.ops
    for desc, (ins, outs, attrs) in zip(block.desc.ops[start:], views):
        # The view's caches, from what was just written (the later steps read
        # every new op's arguments; reading them back from the desc costs more).
        new_ops.append(Operator(block, desc, None, False if _SUB_BLOCK_BYTES in attrs else None, ins, outs))
        if attrs_out is not None:
            attrs_out[id(desc)] = (desc, attrs)


class FlatInfo:
    """What every grad op of one kind shares, for the fused walk
    (`fused.py`): its type, its slots (inputs then outputs, each sorted by
    name, as `_emit_bytes` writes them) with how many names each holds, the
    attr bytes `fill_op_desc` writes (`attr_bytes`), its device (as
    accumulation reads it), and what `create_grad_vars` reads of its OpDef.
    A `FlatOp`'s names fill the slots in that order."""

    __slots__ = ("type", "nin", "slots", "single", "type_field", "attrs", "tail", "device", "gin", "gout", "lod",
                 "lod_range", "trims", "plain")

    def __init__(self, op_type: str, ins: Sequence[tuple[str, int]], outs: Sequence[tuple[str, int]],
                 attrs: bytes, device: str, gin: Sequence[int] = (), gout: Sequence[int] = ()):
        self.type = op_type
        self.nin = sum(n for _, n in ins)
        #: the indices among the names of the input gradients, and of the output
        #: gradients (names holding `@GRAD`; no `@EMPTY@`): the same for every op
        #: of the kind (forward names hold no `@GRAD`, renames keep it)
        self.gin = tuple(gin)
        self.gout = tuple(gout)
        fields = ([(_field(0x0A, s.encode()), _IN_HEADS, n) for s, n in ins]
                  + [(_field(0x0A, s.encode()), _OUT_HEADS, n) for s, n in outs])
        #: every slot holds one name: `slots` as (param field, its length, heads);
        #: else (param field, its length, heads, count)
        self.single = all(n == 1 for _, _, n in fields)
        self.slots = tuple([(p, len(p), h) if self.single else (p, len(p), h, n) for p, h, n in fields])
        self.type_field = length_delimited(_TYPE_TAG, op_type.encode())
        self.attrs = attrs
        self.tail = self.type_field + attrs
        self.device = device
        opdef = registry.find(op_type)
        # (what create_grad_vars reads of the OpDef, per op: here once)
        ranges, at = {}, 0
        for s, n in ins:
            ranges[s] = (at, at + n)
            at += n
        self.lod = 1
        self.lod_range = None
        self.trims: tuple = ()
        self.plain = True      # nothing create_grad_vars does for this type that the flat loop does not
        if opdef is not None:
            self.lod = int(bool(opdef.sets_lod_level))
            if self.lod and opdef.lod_needs_input is not None:
                self.lod_range = ranges.get(opdef.lod_needs_input, (0, 0))
            self.trims = tuple([(s, *ranges.get(s, (0, 0))) for s in opdef.trims_missing_inputs])
        if not plain_grad_type(op_type) or _SUB_BLOCK_BYTES in attrs:
            self.plain = False


def plain_grad_type(op_type: str) -> bool:
    """Whether `create_grad_vars` does nothing for a grad op of this type
    beyond what `_declare_flat` does (no var-type syncs, no sparse grads)."""
    if op_type in _SPARSE_GRAD_OPS:
        return False
    opdef = registry.find(op_type)
    return opdef is None or not opdef.sync_type_slots


class FlatOp:
    """One grad op of the fused walk: its `FlatInfo` and its names, the
    slots' names one after another (inputs first: `info.nin` of them)."""

    __slots__ = ("info", "names")

    def __init__(self, info: FlatInfo, names: list[str]):
        self.info = info
        self.names = names


class FlatRun:
    """The grad ops the fused walk emitted into `block` (ops `begin` to
    `end`), for `create_grad_vars` to declare their vars from (`usable`
    says whether they still stand as written)."""

    __slots__ = ("block", "begin", "end", "ops", "views", "ins", "outs")

    def __init__(self, block: Block, begin: int, ops: list[FlatOp]):
        self.block = block
        self.begin = begin
        self.ops = ops
        self.views = block.ops[begin:]
        self.end = begin + len(self.views)
        self.ins = list(map(_IN_ARGS, self.views))
        self.outs = list(map(_OUT_ARGS, self.views))

    def usable(self, block: Block) -> bool:
        """The ops are those emitted, unedited: the same views, holding the
        argument tuples `emit_flat` gave them (a rename or `set_input`
        drops them; reading the names again makes new ones)."""
        return (block is self.block and len(block.ops) == self.end and len(self.views) == len(self.ops)
                and all(map(is_, block.ops[self.begin:], self.views))
                and all(map(is_, map(_IN_ARGS, self.views), self.ins))
                and all(map(is_, map(_OUT_ARGS, self.views), self.outs)))


_IN_ARGS, _OUT_ARGS = attrgetter("_in_args"), attrgetter("_out_args")


def emit_flat(block: Block, ops: Sequence[FlatOp],
              attrs_out: dict[int, tuple[pb.OpDesc, bytes]] | None = None) -> None:
    """`_emit_bytes` for the fused walk's ops: the same wire bytes, from
    each op's `FlatInfo` and names, and the same views' caches."""
    if not ops:
        return
    args: dict[str, bytes] = {}
    # Each op's fields go straight into `pieces` after its head (its length
    # summed on the way): no per-op join, no copy of the op's bytes to put
    # the head on.
    pieces: list[bytes] = []
    short = _SHORT
    op_heads = _OP_HEADS
    for fo in ops:
        info, names = fo.info, fo.names
        at = len(pieces)
        pieces.append(b"")            # (the op's head, once its size is known)
        size = len(info.tail)
        if info.single:
            # (every slot one name, the common case: no per-slot list)
            for (p, lp, heads), a in zip(info.slots, names):
                e = args.get(a)
                if e is None:
                    e = a.encode()
                    n = len(e)
                    e = args[a] = short[n] + e if n < 0x80 else length_delimited(0x12, e)
                n = lp + len(e)
                if n < 0x80:
                    pieces += (heads[n], p, e)
                    size += n + 2
                else:
                    d = length_delimited(heads[0][0], p + e)
                    pieces.append(d)
                    size += len(d)
        else:
            k = 0
            for p, lp, heads, cnt in info.slots:
                enc = [p]
                for a in names[k:k + cnt]:
                    e = args.get(a)
                    if e is None:
                        e = a.encode()
                        n = len(e)
                        e = args[a] = short[n] + e if n < 0x80 else length_delimited(0x12, e)
                    enc.append(e)
                data = b"".join(enc)
                k += cnt
                n = len(data)
                d = heads[n] + data if n < 0x80 else length_delimited(heads[0][0], data)
                pieces.append(d)
                size += len(d)
        pieces.append(info.tail)
        pieces[at] = (op_heads[size] if size < 0x80 else bytes((_OPS_TAG, (size & 0x7F) | 0x80, size >> 7))
                      if size < 0x4000 else length_delimited(_OPS_TAG, b"", size))
    start = len(block.desc.ops)
    block.desc.MergeFromString(b"".join(pieces))
    new_ops = block.ops
    for desc, fo in zip(block.desc.ops[start:], ops):
        names, info = fo.names, fo.info
        nin = info.nin
        # (FlatInfo.plain: no sub_block attr; the argument caches from the names written)
        new_ops.append(Operator(block, desc, None, None, tuple(names[:nin]), tuple(names[nin:])))
        if attrs_out is not None:
            attrs_out[id(desc)] = (desc, info.attrs)


def _field(tag: int, data: bytes) -> bytes:
    """`length_delimited(tag, data)`, with the common short case inline."""
    n = len(data)
    return _SHORT_HEADS[tag][n] + data if n < 0x80 else length_delimited(tag, data)


#: tag -> the two-byte heads (tag, length) of the fields shorter than 128 bytes
_HEADS = {tag: [bytes((tag, n)) for n in range(0x80)] for tag in (_INPUTS_TAG, _OUTPUTS_TAG, _OPS_TAG)}
_SHORT_HEADS = {tag: [bytes((tag, n)) for n in range(0x80)] for tag in (0x0A, 0x12)}
_SHORT = _SHORT_HEADS[0x12]           # OpDesc.Var.arguments = 2
_IN_HEADS, _OUT_HEADS, _OP_HEADS = _HEADS[_INPUTS_TAG], _HEADS[_OUTPUTS_TAG], _HEADS[_OPS_TAG]
_NAME_HEADS = [bytes((0x0A, n)) for n in range(0x80)]      # VarDesc.name = 1


def create_grad_vars(block: Block, start: int, grad_to_var: dict[str, str],
                     grad_info: dict[str, tuple[str, Block]], parent_ops: dict[int, Operator],
                     _pending: dict[int, dict[str, "pb.VarDesc | NewVar"]] | None = None,
                     flat: FlatRun | None = None) -> None:
    """Declare the vars the ops from `start` on write; drop grad ops that cannot run.

    `flat`: the ops the fused walk emitted into `block` (`FlatRun`); if they
    still stand as written, the end of the block, and `block` takes the fast
    case below, their vars are declared from its names and infos (the same
    steps, in the same order, as for the other ops).

    Lookups are Paddle's `has_var_recursive` (the forward block, then the
    parent, of every block on the way), and see the vars created so far in
    every block - Paddle creates each at once; here they are written to the
    blocks at the end (`_pending` carries them through the recursion into
    grad blocks)."""
    program = block.program
    owner = parent_ops.get(block.idx)
    loop_vars: set[str] = set()
    if owner is not None:
        outs = set(owner.output_arg_names)
        loop_vars = {n for n in owner.input_arg_names if n in outs}
    pending = {} if _pending is None else _pending
    created: dict[str, pb.VarDesc | NewVar] = pending.setdefault(block.idx, {})

    if block.idx == 0 and block.forward_block_idx == -1:
        # find_var_desc's fast case: the block's own vars and those created here
        own = block.vars

        def exists(name: str) -> bool:
            return name in created or (name in own and name != EMPTY_VAR_NAME)

        grad_types = _GRAD_TYPES

        def new_var(name: str, lod_level: bool) -> NewVar:
            # _grad_var_desc, with find_var_desc's fast case, strip_grad_suffix's
            # common case and _grad_type's cache hit inlined
            if name.endswith(GRAD_SUFFIX) and name.find("@GRA") == len(name) - 5 and "grad/" not in name:
                fwd_name = name[:-5]
            else:
                fwd_name = strip_grad_suffix(name)
            fwd = None if fwd_name == EMPTY_VAR_NAME else created.get(fwd_name)
            if fwd is None and fwd_name != EMPTY_VAR_NAME:
                v = own.get(fwd_name)
                fwd = v.desc if v is not None else None
            fwd_type = fwd.type if fwd is not None else _FP32
            t = grad_types.get((fwd_type.SerializePartialToString(), lod_level))
            return NewVar(name, t if t is not None else _grad_type(fwd_type, lod_level))
    else:
        def exists(name: str) -> bool:
            return name in created or find_var_desc(block, name, pending) is not None

        def new_var(name: str, lod_level: bool) -> NewVar:
            return _grad_var_desc(block, name, pending, lod_level)

    if flat is not None and not (block.idx == 0 and block.forward_block_idx == -1 and owner is None
                                 and start <= flat.begin and flat.usable(block)):
        flat = None
    opdefs: dict[str, Any] = {}
    remove: list[int] = []
    for i in range(start, len(block.ops) if flat is None else flat.begin):
        op = block.ops[i]
        if op.sub_block is not None:
            create_grad_vars(program.block(op.sub_block), 0, grad_to_var, grad_info, parent_ops, pending)
        ins = op.input_arg_names
        out_args = op.output_arg_names
        if not out_args or (out_args[0] == EMPTY_VAR_NAME and all(n == EMPTY_VAR_NAME for n in out_args)):
            remove.append(i)
            continue
        grad_ins = [n for n in ins if GRAD_SUFFIX in n]
        # (one made by an earlier op, the common case, answers in C)
        if grad_ins and created.keys().isdisjoint(grad_ins) and not any(
                exists(n) or n in loop_vars for n in grad_ins):
            remove.append(i)
            continue
        op_type = op.type
        opdef = opdefs.get(op_type, _UNSEEN)
        if opdef is _UNSEEN:
            opdef = opdefs[op_type] = registry.find(op_type)
        for slot in (opdef.trims_missing_inputs if opdef is not None else ()):
            # (a sum into one of its own inputs - deviations' in-place
            # accumulation - keeps that input: a loop-carried gradient the
            # while_grad links in has no var desc yet, but a value)
            kept = [n for n in op.input(slot) if exists(n) or n in out_args]
            if not kept:
                raise PyBackwardError(f"{where(program.source, block.idx, i, op.type)}: after dropping "
                                      f"the gradients no op produced, slot '{slot}' is empty")
            op.set_input(slot, kept)
        sets_lod = opdef is None or (opdef.sets_lod_level and (
            opdef.lod_needs_input is None or all(exists(n) for n in op.input(opdef.lod_needs_input))))
        for name in op.output_arg_names:
            if name == EMPTY_VAR_NAME:
                continue
            if not exists(name):
                created[name] = new_var(name, sets_lod)
                if name in grad_to_var:
                    grad_info[grad_to_var[name]] = (name, block)
                continue  # its LoD level is set already
            if sets_lod:
                # Shape inference shares the LoD onto every output it finds,
                # new or not - also a var of an enclosing block, as when a
                # second pass's grad block writes the first pass's w@GRAD.
                desc = created.get(name) or find_var_desc(block, name, pending)
                if desc is not None:
                    _set_lod_level(desc)
        for in_slot, out_slot in (opdef.sync_type_slots if opdef is not None else ()):
            _sync_empty_var(block, op, in_slot, out_slot, created, pending)
        if op_type in _SPARSE_GRAD_OPS and op.attr("is_sparse", False):
            _declare_selected_rows(op.output("W@GRAD"), created)
    if flat is not None:
        _declare_flat(block, flat, created, exists, grad_to_var, grad_info, remove)
    for i in reversed(remove):
        del block.desc.ops[i]
    if remove:
        block.ops = [Operator(block, d) for d in block.desc.ops]
    if created:
        _append_vars_sorted(block, list(created.values()))


def _declare_flat(block: Block, flat: FlatRun, created: dict, exists: Callable[[str], bool],
                  grad_to_var: dict[str, str],
                  grad_info: dict[str, tuple[str, Block]], remove: list[int]) -> None:
    """`create_grad_vars`' loop over the fused walk's ops (block 0, no loop
    owner, no sub-blocks, no var-type syncs or sparse grads: `FlatInfo.plain`),
    reading each op's names from the walk instead of its view."""
    own = block.vars
    # The grad types by the forward type's bytes, one dict per `sets_lod`:
    # `_GRAD_TYPES`' entries this call uses, without a key tuple per var
    # (the same templates: a miss asks `_grad_type`).
    types: tuple[dict[bytes, pb.VarType], dict[bytes, pb.VarType]] = ({}, {})
    source = block.program.source
    i = flat.begin - 1
    for fo in flat.ops:
        i += 1
        info, names = fo.info, fo.names
        out_args = names[info.nin:]
        if not out_args or (out_args[0] == EMPTY_VAR_NAME and all(n == EMPTY_VAR_NAME for n in out_args)):
            remove.append(i)
            continue
        gin = info.gin
        if len(gin) == 1:
            # (one grad input, the common case: isdisjoint and any() on it, without the list)
            g = names[gin[0]]
            if g not in created and not exists(g):
                remove.append(i)
                continue
        elif gin:
            grad_ins = [names[k] for k in gin]
            if created.keys().isdisjoint(grad_ins) and not any(exists(n) for n in grad_ins):
                remove.append(i)
                continue
        for slot, a, b in info.trims:
            kept = [n for n in names[a:b] if exists(n) or n in out_args]
            if not kept:
                raise PyBackwardError(f"{where(source, block.idx, i, info.type)}: after dropping "
                                      f"the gradients no op produced, slot '{slot}' is empty")
            if len(kept) != b - a:
                block.ops[i].set_input(slot, kept)
        sets_lod = info.lod == 1 and (info.lod_range is None
                                      or all(exists(n) for n in names[info.lod_range[0]:info.lod_range[1]]))
        got = types[sets_lod].get
        for name in out_args:
            if name == EMPTY_VAR_NAME:
                continue
            if name not in created and name not in own:       # (exists(name), inline)
                # (create_grad_vars' new_var for block 0, inline: the flat
                # run is declared only there)
                if name.endswith(GRAD_SUFFIX) and name.find("@GRA") == len(name) - 5 and "grad/" not in name:
                    fwd_name = name[:-5]
                else:
                    fwd_name = strip_grad_suffix(name)
                if fwd_name == EMPTY_VAR_NAME:
                    fwd_type = _FP32
                else:
                    fwd = created.get(fwd_name)
                    if fwd is None:
                        v = own.get(fwd_name)
                        fwd_type = v.desc.type if v is not None else _FP32
                    else:
                        fwd_type = fwd.type
                key = fwd_type.SerializePartialToString()
                t = got(key)
                if t is None:
                    t = types[sets_lod][key] = _grad_type(fwd_type, sets_lod)
                created[name] = NewVar(name, t)
                fwd = grad_to_var.get(name, _UNSEEN)
                if fwd is not _UNSEEN:
                    grad_info[fwd] = (name, block)
                continue
            if sets_lod:
                desc = created.get(name) or find_var_desc(block, name)
                if desc is not None:
                    _set_lod_level(desc)


def _sync_empty_var(block: Block, op: Operator, in_slot: str, out_slot: str,
                    created: dict[str, "pb.VarDesc | NewVar"],
                    pending: dict[int, dict[str, "pb.VarDesc | NewVar"]]) -> None:
    """Paddle's compile-time `SyncTypeAndDataType(in_slot, out_slot, i)` (an
    op's var-type inference, declared on its OpDef as `sync_type_slots`) on
    an `@EMPTY@` output: `FindRecursiveOrCreateVar` declares a var named
    `@EMPTY@` in the op's block, typed like input i (conditional_block_grad
    with a no-grad Input). Other outputs get the same type from their
    forward var anyway."""
    ins, outs = op.input(in_slot), op.output(out_slot)
    for i, name in enumerate(outs):
        if name != EMPTY_VAR_NAME or i >= len(ins) or block.has_var(name):
            continue
        src = find_var_desc(block, ins[i], pending)
        desc = created.get(name)
        if desc is None:
            desc = created[name] = pb.VarDesc(name=name, stop_gradient=False)
            desc.type.type = pb.VarType.DENSE_TENSOR
        if src is None:
            continue
        desc.type.type = src.type.type
        field = {pb.VarType.DENSE_TENSOR: "dense_tensor",
                 pb.VarType.DENSE_TENSOR_ARRAY: "tensor_array"}.get(src.type.type)
        if field is not None and src.type.HasField(field):
            for other in ("dense_tensor", "tensor_array"):
                if other != field:
                    desc.type.ClearField(other)
            getattr(desc.type, field).tensor.data_type = getattr(src.type, field).tensor.data_type


def _append_vars_sorted(block: Block, new: list["NewVar | pb.VarDesc"]) -> None:
    """Add vars the way Paddle writes them: after the vars the file had, every
    var added since, sorted by name. They go in as wire bytes, parsed once
    into the block (no standalone message per var, no copy of each). Sorts
    `new` in place (the caller's list of this call's vars)."""
    counts = block.program.loaded_var_counts
    keep = counts[block.idx] if block.idx < len(counts) else 0
    added = [_Wire(v.name, v.SerializePartialToString()) for v in block.desc.vars[keep:]]
    if added:
        del block.desc.vars[keep:]
        new = added + new
    # (a stable sort by name of the vars added since, then the new ones: the
    # order of the rows sorted before, with each var's bytes made after it)
    new.sort(key=_NAME)
    heads = _VAR_HEADS
    # Each NewVar's whole `vars` field as four pieces of the one join
    # (NewVar.wire and the field's head, inline); its type field and the
    # stop_gradient field after it made once per type object (the NewVars
    # hold them: ids stay theirs for this call).
    fields, names = _TYPE_FIELDS, _NAME_HEADS
    tails: dict[int, bytes] = {}
    pieces: list[bytes] = []
    for v in new:
        if type(v) is NewVar:
            e = v.name.encode()
            n = len(e)
            t = tails.get(id(v.type))
            if t is None:
                t = fields.get(id(v.type))
                if t is None:
                    t = _type_field(v.type)
                t = tails[id(v.type)] = t + b"\x30\x00"
            size = 2 + n + len(t)
            if size < 0x80:
                pieces += (heads[size], names[n], e, t)
            else:
                data = (names[n] if n < 0x80 else length_delimited(0x0A, b"", n)) + e + t
                pieces.append(length_delimited(_VARS_TAG, data))
        else:
            data = v.data if type(v) is _Wire else v.SerializePartialToString()
            pieces.append(heads[len(data)] + data if len(data) < 0x80 else length_delimited(_VARS_TAG, data))
    block.desc.MergeFromString(b"".join(pieces))
    # (each var's name as written above: the names of desc.vars[keep:], in order)
    block.reindex_vars(keep, list(map(_NAME, new)))


class _Wire:
    """A var's name and its VarDesc's wire bytes (a var added before the pass
    wrote its own, taken out and put back in sorted position)."""

    __slots__ = ("name", "data")

    def __init__(self, name: str, data: bytes):
        self.name = name
        self.data = data


_NAME = attrgetter("name")


_VARS_TAG = 0x1A                     # BlockDesc.vars: field 3, length-delimited
_VAR_HEADS = [bytes((_VARS_TAG, n)) for n in range(0x80)]


class NewVar:
    """A grad var the pass declares, until it is written into its block: its
    name and its type, a `VarType` shared by every var of the same type
    (`_grad_type`; never edited in place). Reads like a `VarDesc` where the
    pass looks (`.name`, `.type`); serialises as `VarDesc(name, type,
    stop_gradient=False)` does."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type_: pb.VarType):
        self.name = name
        self.type = type_

    def wire(self) -> bytes:
        name = self.name.encode()
        n = len(name)
        head = _NAME_HEADS[n] if n < 0x80 else length_delimited(0x0A, b"", n)
        return head + name + _type_field(self.type) + b"\x30\x00"


#: Grad ops whose var type inference makes W@GRAD a SELECTED_ROWS when the op
#: is_sparse (Paddle's LookupTableV2OpGradVarTypeInference).
_SPARSE_GRAD_OPS = frozenset({"lookup_table_v2_grad", "lookup_table_grad"})


def _declare_selected_rows(names: list[str], created: dict) -> None:
    """Declare the grad vars `names` this pass just created as SELECTED_ROWS
    (data type and dims kept), as a sparse embedding's gradient is."""
    for name in names:
        d = created.get(name)
        if type(d) is NewVar and d.type.type == pb.VarType.DENSE_TENSOR:
            t = pb.VarType(type=pb.VarType.SELECTED_ROWS)
            t.selected_rows.CopyFrom(d.type.dense_tensor.tensor)
            d.type = t


def _set_lod_level(desc: "pb.VarDesc | NewVar") -> None:
    if type(desc) is NewVar:
        desc.type = _grad_type(desc.type, True)
        return
    t = desc.type
    if t.type == pb.VarType.DENSE_TENSOR:
        t.dense_tensor.legacy_lod_level = 0
    elif t.type == pb.VarType.DENSE_TENSOR_ARRAY:
        t.tensor_array.legacy_lod_level = 0


def find_var_desc(block: Block, name: str,
                  pending: dict[int, dict[str, "pb.VarDesc | NewVar"]] | None = None) -> "pb.VarDesc | NewVar | None":
    """Paddle's C++ `BlockDesc::FindVarRecursive`: breadth first from `block`,
    queueing each block's forward block (grad blocks have one) before its
    parent. `pending` adds vars created but not yet written, per block."""
    if name == EMPTY_VAR_NAME:
        return None
    blocks = block.program.blocks
    if block.forward_block_idx == -1 and block.idx == 0:     # the common case, fast
        d = pending.get(0, {}).get(name) if pending else None
        if d is not None:
            return d
        v = block.vars.get(name)
        return v.desc if v is not None else None
    frontier, seen = [block], set()
    while frontier:
        cur = frontier.pop(0)
        if cur.idx in seen:
            continue
        seen.add(cur.idx)
        if pending:
            d = pending.get(cur.idx, {}).get(name)
            if d is not None:
                return d
        v = cur.vars.get(name)
        if v is not None:
            return v.desc
        fwd = cur.forward_block_idx
        if 0 <= fwd < len(blocks) and fwd != cur.idx:
            frontier.append(blocks[fwd])
        if cur.parent is not None:
            frontier.append(cur.parent)
    return None


_GRAD_TYPES: dict[tuple[bytes, bool], pb.VarType] = {}
_TYPE_FIELDS: dict[int, bytes] = {}    # id(template) -> its VarDesc.type field bytes
_UNSEEN = object()


def _grad_type(fwd_type: pb.VarType, lod_level: bool) -> pb.VarType:
    """The type of a grad var whose forward var has `fwd_type`: the same less
    its LoD level (shape inference decides that), with the forward var's
    `legacy_lod_level` (0 if it has none) if `lod_level`: grad ops share the
    forward var's LoD onto its gradient (`ShareLoD("X", "X@GRAD")`, as
    sequence_pool_grad does onto a lod_level 1 input). One shared template per
    distinct result."""
    key = (fwd_type.SerializePartialToString(), lod_level)
    t = _GRAD_TYPES.get(key)
    if t is None:
        t = pb.VarType()
        t.CopyFrom(fwd_type)
        level = 0
        for field in ("dense_tensor", "tensor_array"):
            if t.HasField(field):
                level = getattr(t, field).legacy_lod_level
                getattr(t, field).ClearField("legacy_lod_level")
        if lod_level:  # as _set_lod_level does on a VarDesc
            if t.type == pb.VarType.DENSE_TENSOR:
                t.dense_tensor.legacy_lod_level = level
            elif t.type == pb.VarType.DENSE_TENSOR_ARRAY:
                t.tensor_array.legacy_lod_level = level
        if len(_GRAD_TYPES) >= 10000:
            _GRAD_TYPES.clear()
            _TYPE_FIELDS.clear()
        _GRAD_TYPES[key] = t
        _TYPE_FIELDS[id(t)] = length_delimited(0x12, t.SerializePartialToString())
    return t


def _type_field(t: pb.VarType) -> bytes:
    data = _TYPE_FIELDS.get(id(t))
    if data is None:       # (dropped with the cache it belonged to; the template lives on in its vars)
        data = length_delimited(0x12, t.SerializePartialToString())
    return data


def _fp32_type() -> pb.VarType:
    t = pb.VarType(type=pb.VarType.DENSE_TENSOR)
    t.dense_tensor.tensor.data_type = pb.VarType.FP32
    return t


_FP32 = _fp32_type()


def _grad_var_desc(block: Block, name: str,
                   pending: dict[int, dict[str, "pb.VarDesc | NewVar"]] | None = None,
                   lod_level: bool = False) -> NewVar:
    """A new grad var typed like its forward var (FP32 if there is none);
    with `lod_level`, the LoD level shape inference writes (`_set_lod_level`)."""
    fwd = find_var_desc(block, strip_grad_suffix(name), pending)
    # Paddle warns and falls back to FP32 when the forward var is unknown.
    return NewVar(name, _grad_type(fwd.type if fwd is not None else _FP32, lod_level))
