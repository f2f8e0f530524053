"""Structural checks of a ProgramDesc, each failure a `ProgramFileError`.

What is checked, and why it is the rule (Paddle's own loader relies on the
same facts, mostly without checking them):

* at least one block; block i has `idx == i`; block 0's parent is -1;
  every other block's parent is in range and the parent chain reaches
  block 0 without a cycle; `forward_block_idx` is -1 or in range;
* var names are unique within a block; tensor vars carry a tensor
  description; dims are >= -1 (-1 = unknown size);
* every BLOCK / BLOCKS attr (`sub_block`, `blocks_idx`) names an existing
  block other than the op's own block and block 0;
* every op argument names a var declared in the op's block or an ancestor,
  or - for a grad block (one with `forward_block_idx`) - in its forward
  block or that block's ancestors. `@EMPTY@` (Paddle's placeholder for a
  dropped gradient) is exempt. Paddle's own files declare `feed` / `fetch`
  vars, so this holds for everything Paddle writes. Pass
  `check_vars=False` to load files from tools that are looser.

* every required field is present and every enum value is one the schema
  defines (protobuf keeps unknown enum values aside, leaving the field unset);
  names are UTF-8 text;
* dims are sane: each below 2**40 and their product below 2**62;
* blocks nest at most MAX_NESTING deep (deeper programs would exhaust
  Python's recursion in the pass and the interpreter);
* the attrs the framework itself reads have their types: `sub_block` is a
  BLOCK, `op_role` an INT, `op_role_var` / `op_callstack` STRINGS,
  `op_device` / `op_namescope` STRING.

All checks are linear in the size of the program: each var and op is read
once and checked by lookups.
"""
from __future__ import annotations

from .._proto import framework_pb2 as pb
from ..base import dtypes
from ..base.errors import ProgramFileError, where

EMPTY_VAR_NAME = "@EMPTY@"
MAX_NESTING = 200
MAX_DIM = 2**40
MAX_ELEMENTS = 2**62
_FRAMEWORK_ATTR_TYPES = {
    "sub_block": pb.AttrType.BLOCK, "op_role": pb.AttrType.INT, "op_role_var": pb.AttrType.STRINGS,
    "op_callstack": pb.AttrType.STRINGS, "op_device": pb.AttrType.STRING,
    "op_namescope": pb.AttrType.STRING,
}


class Findings:
    """What validation saw on the way that later steps use: the (block, op)
    positions of ops naming an attr twice (Paddle's parse keeps one of each:
    `program.dedupe_attrs`), and of ops carrying BLOCK / BLOCKS attrs, with
    those attrs' names (checked against the op types' declarations in
    `wire.check_block_attrs`; every other op has no sub-block). And every
    op's slots as the check read them (`slots[block][op]`: ([(name, args),
    ...] of the inputs, of the outputs)), which the op views keep
    (`Operator.slot_records`) so that nothing reads them through upb again."""

    __slots__ = ("repeated_attrs", "block_attrs", "slots", "types", "var_names", "block_bytes")

    def __init__(self) -> None:
        self.repeated_attrs: list[tuple[int, int]] = []
        self.block_attrs: list[tuple[int, int, tuple[str, ...]]] = []
        self.slots: list[list[tuple[list, list] | None]] = []
        #: every op's type as validation read it (`types[block][op]`; None: not read)
        self.types: list[list[str | None]] = []
        #: every block's var names in file order (validation found them distinct)
        self.var_names: list[list[str]] = []
        #: per block, its serialisation and where its ops start (None: serialise
        #: each op; b"": read them through upb). Dropped when validation ends.
        self.block_bytes: list[tuple[bytes | None, int]] = []


def validate(desc: pb.ProgramDesc, source: str | None = None, check_vars: bool = True) -> Findings:
    """Raise ProgramFileError on the first structural problem found; return
    the `Findings` that later steps use.

    Each var and op is read once, and checked by lookups: names against a set
    per block, attrs against the (name, type) pairs already found sound. Only
    an item that fails a fast check is looked at again, by the detailed check
    that writes the message - so the first problem reported, and its words,
    are those of a check that reads everything in order."""
    n = len(desc.blocks)
    if n == 0:
        raise ProgramFileError(f"{where(source) or '<bytes>'}: not a program: it has no blocks "
                               "(an empty file, or a protobuf message of another kind)")
    init = _Required(desc, source)
    try:
        init.check_top()
        _check_blocks(desc, source)
        blocks = list(desc.blocks)
        found = Findings()
        declared = [_check_vars(b, source, init, found) for b in blocks]
        scope = _Scopes(desc, declared) if check_vars else None
        sound: dict[str, int] = {}  # attr name -> an AttrType it was found sound with
        for b in blocks:
            _check_ops(b, n, declared[b.idx], scope, sound, source, found, init)
        found.block_bytes = []
    except Exception:
        # A missing required field is the first problem reported, as when
        # it was checked before everything else.
        init.full()
        raise
    return found


class _Required:
    """The required-field check (`_check_initialized`), proven piece by piece
    on the way instead of by one `IsInitialized` over the whole program.

    upb's `IsInitialized` walks every field of every message by reflection,
    and upb reads an unset required string as "" (so reading values proves
    nothing). Presence is read from each item's own serialisation instead,
    which the checks make anyway: upb writes a message's known fields in
    field-number order, so a `VarDesc` whose bytes start with tag 0x0A has
    its `name`, an `OpDesc.Var` whose bytes start with 0x0A its
    `parameter`, and an `OpDesc` whose slots are followed by tag 0x1A its
    `type`. Everything else an item holds (a var's type and attrs, an op's
    attrs) is in the bytes after those fields; equal bytes hold equal
    messages, so `IsInitialized` runs on the first item with each distinct
    rest and answers for the others. Anything not proven so runs `full()`:
    the whole-program check that writes the message, once."""

    __slots__ = ("desc", "source", "done")

    def __init__(self, desc: pb.ProgramDesc, source: str | None) -> None:
        self.desc = desc
        self.source = source
        self.done = False   # the whole program was checked and passed

    def full(self) -> None:
        if not self.done:
            _check_initialized(self.desc, self.source)
            self.done = True

    def check_top(self) -> None:
        """The blocks' own required fields (`idx`, `parent_idx`) and the op
        version map's (`Version` has none)."""
        desc = self.desc
        if not ((not desc.HasField("op_version_map") or desc.op_version_map.IsInitialized())
                and all(b.HasField("idx") and b.HasField("parent_idx") for b in desc.blocks)):
            self.full()


def _check_vars(b: pb.BlockDesc, source: str | None, init: _Required, found: Findings) -> set[str]:
    """The names a block declares, after checking its vars (in file order
    in `found.var_names`).

    The vars are read from the block's serialisation (`found.block_bytes`
    keeps it for the ops): upb writes a BlockDesc as idx, parent_idx, the
    vars, the ops, forward_block_idx, unknown fields, so var k is the k-th
    field 3. A var's checks (its tensor description, dims, required fields)
    read only what follows its name, and most vars share those bytes with an
    earlier one (same type, dims and flags): each distinct rest is checked
    once, through upb. A var not in that form is read through upb."""
    names: set[str] = set()
    add = names.add
    order: list[str] = []
    found.var_names.append(order)
    keep = order.append
    sound_rests: set[bytes] = set()
    vars_ = b.vars
    # A block of many items is read item by item (each var's and op's own
    # serialisation): its whole serialisation would add its size to the
    # peak memory of a load.
    whole = FIELD_ORDER and len(vars_) + len(b.ops) <= WHOLE_BLOCK_MAX_ITEMS
    data = b.SerializePartialToString() if whole else b""
    pos, n = 0, len(data)
    while pos < n and data[pos] in (0x08, 0x10):      # idx, parent_idx: varints
        pos += 1
        while data[pos] & 0x80:
            pos += 1
        pos += 1
    for k in range(len(vars_)):
        name = rest = None
        if not whole:
            if FIELD_ORDER:
                data = vars_[k].SerializePartialToString()
                s, e = 0, len(data)
            else:
                s = e = 0
        elif pos < n and data[pos] == 0x1A:
            c = data[pos + 1]
            if c < 0x80:
                s = pos + 2
                e = s + c
            else:
                s, e = _span(data, pos + 1)
            pos = e
        else:
            n = s = e = 0       # not in the form read here: the rest through upb
        if s < e and data[s] == 0x0A:      # field 1 (name) first: it is present
            c = data[s + 1]
            if c < 0x80:
                p = s + 2
                q = p + c
            else:
                p, q = _span(data, s + 1)
            if q <= e:
                try:
                    name = data[p:q].decode()    # strict, as upb reads it
                    rest = data[q:e]
                except UnicodeDecodeError:
                    name = None
        if name is None:
            name = vars_[k].name
            rest = None
        if type(name) is not str or name in names:
            _check_text(name, "a var name", (b.idx,), source)
            raise ProgramFileError(f"{where(source, b.idx, var=name)}: variable declared twice")
        add(name)
        keep(name)
        if rest is not None and rest in sound_rests:
            continue
        v = vars_[k]
        if not v.IsInitialized():
            init.full()     # raises
        _check_var_type(v, b.idx, source)
        if rest is not None:
            sound_rests.add(rest)
    found.block_bytes.append((data if whole and n else None if FIELD_ORDER and not whole else b"", pos))
    return names


def _check_var_type(v: pb.VarDesc, block: int, source: str | None) -> None:
    """A var's tensor description and dims (quick yes, else `_check_var` says what is wrong)."""
    t = v.type
    field = dtypes.TENSOR_VAR_TYPES.get(t.type)
    if field is None:
        return
    if not t.HasField(field):
        _check_var(v, block, source)
    sub = getattr(t, field)
    dims = (sub if field == "selected_rows" else sub.tensor).dims
    if dims and not _dims_sound(dims):
        _check_var(v, block, source)


def _dims_sound(dims) -> bool:
    """A quick yes for dims that `_check_var` accepts (False: look closer)."""
    lo, hi = min(dims), max(dims)
    if lo < -1 or hi > MAX_DIM:
        return False
    # every element count is below hi ** len(dims) < 2 ** (bits(hi) * len(dims))
    return hi.bit_length() * len(dims) <= 62


def _check_ops(b: pb.BlockDesc, n: int, own: set[str], scope: "_Scopes | None",
               sound: dict[str, int], source: str | None, found: Findings, init: _Required) -> None:
    idx = b.idx
    own_has_all = own.issuperset
    # Attr lists repeat (every layer's `mul`): one whose wire bytes passed
    # before, and named no block, passes again without its attrs being read
    # one by one through upb (True: it names an attr twice). A block whose
    # attr lists rarely repeat (a call stack per op) stops keeping them
    # after the first few dozen.
    sound_tails: dict[bytes, bool] | None = {}
    hits = 0
    records: list[tuple[list, list] | None] = []
    types: list[str | None] = []
    found.slots.append(records)
    found.types.append(types)
    # The ops follow the vars in the block's serialisation: op i is the
    # i-th field 4 (`_check_vars`).
    data, pos = found.block_bytes[idx]
    whole = data is not None      # else: each op's own serialisation
    size = len(data) if whole else 0
    ops = b.ops
    for i in range(len(ops)):
        # The op's slots and type from its bytes (read in Python: cheaper
        # than through upb's messages), then its attrs' bytes.
        head = None
        if not whole:
            data = ops[i].SerializePartialToString()
            e = len(data)
            head = _read_head(data, 0, e, own_has_all)
        elif pos < size and data[pos] == 0x22:
            c = data[pos + 1]
            if c < 0x80:
                s = pos + 2
                e = s + c
            elif data[pos + 2] < 0x80:      # 128 bytes to 16 KiB: a two-byte length
                s = pos + 3
                e = s + (c & 0x7F | data[pos + 2] << 7)
            else:
                s, e = _span(data, pos + 1)
            pos = e
            head = _read_head(data, s, e, own_has_all)
        else:
            size = 0    # not in the form read here: the rest through upb
        if head is None:   # read through upb
            op = ops[i]
            rec = _check_op_upb(op, i, idx, n, own, own_has_all, scope, sound, found, init)
            if rec is None:
                # the detailed checks, in their order, say what is wrong
                _check_op(op, idx, i, n, scope, source)
            records.append(rec)
            types.append(None)
            continue
        ins, outs, op_type, q, all_own = head
        tail = data[q:e]
        repeated = None if sound_tails is None else sound_tails.get(tail)
        if repeated is not None:
            hits += 1
            if repeated:
                found.repeated_attrs.append((idx, i))
            ok = True
        else:
            if sound_tails is not None and len(sound_tails) > 32 and len(sound_tails) > 2 * hits:
                sound_tails = None
            op = ops[i]
            if not op.IsInitialized():
                init.full()     # raises
            nblock = len(found.block_attrs)
            twice = _attrs_sound(op, idx, i, n, sound, found)
            ok = twice is not None
            if ok and sound_tails is not None and len(found.block_attrs) == nblock:
                sound_tails[tail] = twice
        if ok and not all_own:
            for slots in (ins, outs):
                for _, args in slots:
                    if own_has_all(args):
                        continue
                    for arg in args:
                        if scope is not None and arg not in own and arg != EMPTY_VAR_NAME \
                                and not scope.visible(arg, idx):
                            ok = False
                            break
        if ok:
            records.append((ins, outs))
            types.append(op_type)
            continue
        _check_op(ops[i], idx, i, n, scope, source)
        records.append(None)
        types.append(None)


def _fields_in_number_order() -> bool:
    """Whether this protobuf runtime writes an OpDesc's and a VarDesc's
    fields in field-number order, as upb does (fields set here in another
    order), unknown fields last: what `_read_head` and `_check_vars` read
    their bytes by. If not, every op and var is read through upb."""
    op = pb.OpDesc(type="t", is_target=True)
    op.attrs.add(name="a", type=pb.AttrType.INT, i=1)
    op.outputs.add(parameter="O", arguments=["o"])
    op.inputs.add(parameter="I", arguments=["i"])
    v = pb.VarDesc(persistable=True, name="v")
    v.type.type = pb.VarType.DENSE_TENSOR
    return (op.SerializePartialToString() == b'\n\x06\n\x01I\x12\x01i\x12\x06\n\x01O\x12\x01o\x1a\x01t'
                                             b'"\x07\n\x01a\x10\x00\x18\x01(\x01'
            and v.SerializePartialToString() == b"\n\x01v\x12\x02\x08\x07\x18\x01")


#: `_fields_in_number_order()`, asked once.
FIELD_ORDER = _fields_in_number_order()
#: A block with at most this many vars and ops is read from one serialisation
#: of the whole block (one C call; its bytes live while the block is checked),
#: a larger one from each item's own.
WHOLE_BLOCK_MAX_ITEMS = 100_000


def _read_head(data: bytes, pos: int, end: int, has_all) -> tuple[list, list, str, int, bool] | None:
    """An OpDesc's slots and type from its serialisation `data[pos:end]`
    (upb writes fields in field-number order: 1 inputs, 2 outputs, 3 type,
    then 4 attrs, 5 is_target, unknown fields): (inputs, outputs, type,
    where the attrs start, whether `has_all` held for every slot's
    arguments), the slots as [(name, [argument, ...]), ...].
    None unless every slot starts with its name (its required field 1;
    then only arguments, field 2), the type follows the slots, and every
    string is UTF-8 (decoded strictly, as upb does: else upb gives bytes);
    the caller then reads the op through upb."""
    if not FIELD_ORDER:
        return None
    ins: list = []
    outs: list = []
    all_own = True
    try:
        while True:
            if pos >= end:
                return None
            tag = data[pos]
            if tag == 0x0A:
                dest = ins
            elif tag == 0x12:
                dest = outs
            elif tag == 0x1A:
                break
            else:
                return None
            k = data[pos + 1]
            if k < 0x80:
                pos += 2
                stop = pos + k
            else:
                pos, stop = _span(data, pos + 1)
            if pos >= stop or data[pos] != 0x0A or stop > end:   # no slot name
                return None
            k = data[pos + 1]
            if k < 0x80:
                p = pos + 2
                q = p + k
            else:
                p, q = _span(data, pos + 1)
            name = data[p:q].decode()
            args = []
            while q < stop:
                if data[q] != 0x12:
                    return None
                k = data[q + 1]
                if k < 0x80:
                    p = q + 2
                    q = p + k
                else:
                    p, q = _span(data, q + 1)
                args.append(data[p:q].decode())
            if q != stop:
                return None
            dest.append((name, args))
            if not has_all(args):
                all_own = False
            pos = stop
        k = data[pos + 1]
        if k < 0x80:
            p = pos + 2
            q = p + k
        else:
            p, q = _span(data, pos + 1)
        if q > end:
            return None
        return ins, outs, data[p:q].decode(), q, all_own
    except (IndexError, UnicodeDecodeError):
        return None


def _span(data: bytes, pos: int) -> tuple[int, int]:
    """(start, end) of the length-delimited payload whose varint length is at `pos`."""
    length = shift = 0
    while True:
        c = data[pos]
        pos += 1
        length |= (c & 0x7F) << shift
        if c < 0x80:
            return pos, pos + length
        shift += 7


def _attrs_sound(op: pb.OpDesc, idx: int, i: int, n: int, sound: dict[str, int], found: Findings) -> bool | None:
    """Check an op's attrs one by one: None if one fails the fast check, else
    whether the op names an attr twice (recorded in `found`, with its BLOCK /
    BLOCKS attrs)."""
    sound_type = sound.get
    block_named: list[str] = []   # the BLOCK / BLOCKS attrs `_attr_sound` passes
    attrs = op.attrs
    names = set()
    add = names.add
    for a in attrs:
        name = a.name
        if sound_type(name) != a.type and not _attr_sound(a, idx, n, sound, block_named):
            return None
        add(name)
    twice = len(names) != len(attrs)
    if twice:
        found.repeated_attrs.append((idx, i))
    if block_named:
        found.block_attrs.append((idx, i, tuple(block_named)))
    return twice


def _check_op_upb(op: pb.OpDesc, i: int, idx: int, n: int, own: set[str], own_has_all,
                  scope: "_Scopes | None", sound: dict[str, int], found: Findings,
                  init: _Required) -> tuple[list, list] | None:
    """The fast checks of one op read through upb (an op `_read_head` does
    not read): its slot records, or None if a check fails."""
    if not op.IsInitialized():
        init.full()     # raises
    if type(op.type) is not str or _attrs_sound(op, idx, i, n, sound, found) is None:
        return None
    ins = _slot_records(op.inputs, own, own_has_all, scope, idx)
    outs = None if ins is None else _slot_records(op.outputs, own, own_has_all, scope, idx)
    return None if outs is None else (ins, outs)


def _attr_sound(a: pb.OpDesc.Attr, block: int, n: int, sound: dict[str, int], block_named: list[str]) -> bool:
    name, t = a.name, a.type
    if type(name) is not str:
        return False
    want = _FRAMEWORK_ATTR_TYPES.get(name)
    if want is not None and t != want:
        return False
    if t == pb.AttrType.BLOCK:  # checked per op: the index must be a sub-block of this one
        block_named.append(name)
        k = a.block_idx
        return 0 < k < n and k != block
    if t == pb.AttrType.BLOCKS:
        block_named.append(name)
        return all(0 < k < n and k != block for k in a.blocks_idx)
    sound[name] = t
    return True


def _slot_records(slots, own: set[str], own_has_all, scope: "_Scopes | None",
                  block: int) -> list[tuple[str, list[str]]] | None:
    """The slots as [(name, arguments), ...] if they pass the fast checks, else None."""
    out = []
    for slot in slots:
        name = slot.parameter
        if type(name) is not str:
            return None
        args = slot.arguments[:]
        out.append((name, args))
        if own_has_all(args):
            continue
        for arg in args:
            if type(arg) is not str:
                return None
            if scope is not None and arg not in own and arg != EMPTY_VAR_NAME \
                    and not scope.visible(arg, block):
                return None
    return out


def _check_op(op: pb.OpDesc, block: int, i: int, n: int, scope: "_Scopes | None",
              source: str | None) -> None:
    """Every check of one op, in order; raise on the first that fails."""
    _check_op_blocks(op, block, i, n, source)
    _check_op_names_and_attrs(op, block, i, source)
    if scope is None:
        return
    for vars_ in (op.inputs, op.outputs):
        for slot in vars_:
            for arg in slot.arguments:
                if arg == EMPTY_VAR_NAME or scope.visible(arg, block):
                    continue
                raise ProgramFileError(
                    f"{where(source, block, i, op.type, arg)}: slot '{slot.parameter}' "
                    "names a variable that no visible block declares")


class _Scopes:
    """Which vars an op may name, answered in O(1) per lookup: a var is visible
    in block b if a block declaring it is b or an ancestor of b (or of b's
    forward block, for a grad block). Ancestry is tested with DFS entry/exit
    times over the parent tree, so validation stays linear however deep
    blocks nest. Built on first use: ops that name only their own block's
    vars never need it."""

    def __init__(self, desc: pb.ProgramDesc, declared: list[set[str]]):
        self._desc = desc
        self._declared = declared
        self._built = False

    def _build(self) -> None:
        desc, declared = self._desc, self._declared
        n = len(desc.blocks)
        children: list[list[int]] = [[] for _ in range(n)]
        for b in desc.blocks[1:]:
            children[b.parent_idx].append(b.idx)
        self.tin, self.tout = [0] * n, [0] * n
        clock, stack = 0, [(0, False)]
        while stack:
            node, done = stack.pop()
            if done:
                self.tout[node] = clock
                clock += 1
                continue
            self.tin[node] = clock
            clock += 1
            stack.append((node, True))
            stack.extend((c, False) for c in children[node])
        self.where: dict[str, list[int]] = {}
        for idx, names in enumerate(declared):
            for name in names:
                self.where.setdefault(name, []).append(idx)
        self.fwd = [b.forward_block_idx for b in desc.blocks]
        self._built = True

    def _under(self, anc: int, b: int) -> bool:
        return self.tin[anc] <= self.tin[b] and self.tout[b] <= self.tout[anc]

    def visible(self, name: str, b: int) -> bool:
        if not self._built:
            self._build()
        blocks = self.where.get(name)
        if not blocks:
            return False
        f = self.fwd[b]
        return any(self._under(d, b) or (f != -1 and self._under(d, f)) for d in blocks)


def _check_initialized(desc: pb.ProgramDesc, source: str | None) -> None:
    """Required fields present; an enum value the schema does not define leaves its field unset."""
    if desc.IsInitialized():
        return
    missing = desc.FindInitializationErrors()
    first = missing[0]
    loc = _locate(desc, first)
    attr = _attr_name(desc, first)
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    raise ProgramFileError(f"{where(source, *loc)}: {f'attr {attr!r}: ' if attr else ''}required field "
                           f"'{first.split('.')[-1]}' is missing or holds a value the schema does not "
                           f"define (at {first}){more}")


def _attr_name(desc: pb.ProgramDesc, path: str) -> str | None:
    import re
    m = re.match(r"blocks\[(\d+)\]\.ops\[(\d+)\]\.attrs\[(\d+)\]", path)
    if not m:
        return None
    name = desc.blocks[int(m.group(1))].ops[int(m.group(2))].attrs[int(m.group(3))].name
    return name if isinstance(name, str) and name else None


def _locate(desc: pb.ProgramDesc, path: str) -> tuple:
    """(block, op index, op type, var) for an initialization-error path like blocks[0].vars[3].type."""
    import re
    m = re.match(r"blocks\[(\d+)\](?:\.(vars|ops)\[(\d+)\])?", path)
    if not m:
        return ()
    b = int(m.group(1))
    if m.group(2) == "vars":
        v = desc.blocks[b].vars[int(m.group(3))]
        return (b, None, None, v.name if isinstance(v.name, str) and v.name else f"#{m.group(3)}")
    if m.group(2) == "ops":
        i = int(m.group(3))
        return (b, i, desc.blocks[b].ops[i].type or None)
    return (b,)


def _check_text(value, what: str, loc: tuple, source: str | None) -> None:
    if not isinstance(value, str):
        raise ProgramFileError(f"{where(source, *loc)}: {what} is not UTF-8 text: {value!r}")


def _check_op_names_and_attrs(op: pb.OpDesc, block: int, i: int, source: str | None) -> None:
    _check_text(op.type, "op type", (block, i), source)
    for vars_ in (op.inputs, op.outputs):
        for slot in vars_:
            _check_text(slot.parameter, "slot name", (block, i, op.type), source)
            for a in slot.arguments:
                _check_text(a, f"an argument of slot '{slot.parameter}'", (block, i, op.type), source)
    for a in op.attrs:
        _check_text(a.name, "attr name", (block, i, op.type), source)
        want = _FRAMEWORK_ATTR_TYPES.get(a.name)
        if want is not None and a.type != want:
            raise ProgramFileError(
                f"{where(source, block, i, op.type)}: attr '{a.name}' must be "
                f"{pb.AttrType.Name(want)}, not {pb.AttrType.Name(a.type)}")


def _check_blocks(desc: pb.ProgramDesc, source: str | None) -> None:
    n = len(desc.blocks)
    for i, b in enumerate(desc.blocks):
        if b.idx != i:
            raise ProgramFileError(f"{where(source, i)}: the block at position {i} says idx={b.idx}")
        if i == 0:
            if b.parent_idx != -1:
                raise ProgramFileError(f"{where(source, 0)}: block 0 must have parent_idx -1, "
                                       f"not {b.parent_idx}")
        elif not 0 <= b.parent_idx < n or b.parent_idx == i:
            raise ProgramFileError(f"{where(source, i)}: parent_idx {b.parent_idx} is not another "
                                   f"block (the program has {n} blocks)")
        if b.forward_block_idx != -1 and not 0 <= b.forward_block_idx < n:
            raise ProgramFileError(f"{where(source, i)}: forward_block_idx {b.forward_block_idx} "
                                   f"out of range (the program has {n} blocks)")
    # Every parent chain must reach block 0; memoised so the walk is linear.
    reaches_root = {0}
    for i in range(1, n):
        chain, j = [], i
        while j not in reaches_root:
            if j in chain:
                cycle = " -> ".join(str(k) for k in chain[chain.index(j):] + [j])
                raise ProgramFileError(f"{where(source, i)}: parent blocks form a cycle ({cycle})")
            chain.append(j)
            j = desc.blocks[j].parent_idx
        reaches_root.update(chain)
    depth = [0] * n
    for i in range(1, n):
        # parents come before children in Paddle's files; fall back to a walk otherwise
        p = desc.blocks[i].parent_idx
        depth[i] = depth[p] + 1 if p < i else _depth(desc, i)
        if depth[i] > MAX_NESTING:
            raise ProgramFileError(f"{where(source, i)}: blocks nest {depth[i]} deep; pybackward supports "
                                   f"at most {MAX_NESTING} levels")


def _depth(desc: pb.ProgramDesc, i: int) -> int:
    d = 0
    while i != 0:
        i = desc.blocks[i].parent_idx
        d += 1
    return d


def _check_var(v: pb.VarDesc, block: int, source: str | None) -> None:
    field = dtypes.TENSOR_VAR_TYPES.get(v.type.type)
    if field is None:
        return
    if not v.type.HasField(field):
        raise ProgramFileError(f"{where(source, block, var=v.name)}: a {dtypes.type_name(v.type.type)} "
                               "var without its tensor description")
    sub = getattr(v.type, field)
    t = sub if field == "selected_rows" else sub.tensor
    elements = 1
    for d in t.dims:
        if d < -1:
            raise ProgramFileError(f"{where(source, block, var=v.name)}: dimension {d} is negative "
                                   f"(dims {list(t.dims)}; only -1, for an unknown size, may be)")
        if d > MAX_DIM:
            raise ProgramFileError(f"{where(source, block, var=v.name)}: dimension {d} is absurd "
                                   f"(dims {list(t.dims)}; at most {MAX_DIM})")
        if d > 0:
            elements *= d
    if elements > MAX_ELEMENTS:
        raise ProgramFileError(f"{where(source, block, var=v.name)}: dims {list(t.dims)} hold more than "
                               f"2**62 elements")


def _check_op_blocks(op: pb.OpDesc, block: int, i: int, n: int, source: str | None) -> None:
    for a in op.attrs:
        if a.type == pb.AttrType.BLOCK:
            idxs = [a.block_idx]
        elif a.type == pb.AttrType.BLOCKS:
            idxs = list(a.blocks_idx)
        else:
            continue
        for k in idxs:
            if not 0 < k < n or k == block:
                raise ProgramFileError(
                    f"{where(source, block, i, op.type)}: attr '{a.name}' names block {k}, "
                    f"which is not a sub-block (the program has {n} blocks)")
