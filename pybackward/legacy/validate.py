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
from .wire import attrs_tail

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

    __slots__ = ("repeated_attrs", "block_attrs", "slots")

    def __init__(self) -> None:
        self.repeated_attrs: list[tuple[int, int]] = []
        self.block_attrs: list[tuple[int, int, tuple[str, ...]]] = []
        self.slots: list[list[tuple[list, list] | None]] = []


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
    _check_initialized(desc, source)
    _check_blocks(desc, source)
    blocks = list(desc.blocks)
    declared = [_check_vars(b, source) for b in blocks]
    scope = _Scopes(desc, declared) if check_vars else None
    sound: dict[str, int] = {}  # attr name -> an AttrType it was found sound with
    found = Findings()
    for b in blocks:
        _check_ops(b, n, declared[b.idx], scope, sound, source, found)
    return found


def _check_vars(b: pb.BlockDesc, source: str | None) -> set[str]:
    """The names a block declares, after checking its vars."""
    names: set[str] = set()
    add = names.add
    tensor_fields = dtypes.TENSOR_VAR_TYPES
    sound_dims: set[tuple[int, ...]] = set()  # shapes repeat: check each distinct one once
    for v in b.vars:
        name = v.name
        if type(name) is not str or name in names:
            _check_text(name, "a var name", (b.idx,), source)
            raise ProgramFileError(f"{where(source, b.idx, var=name)}: variable declared twice")
        add(name)
        t = v.type
        field = tensor_fields.get(t.type)
        if field is None:
            continue
        if not t.HasField(field):
            _check_var(v, b.idx, source)
        sub = getattr(t, field)
        dims = tuple((sub if field == "selected_rows" else sub.tensor).dims)
        if dims not in sound_dims:
            if dims and not _dims_sound(dims):
                _check_var(v, b.idx, source)
            sound_dims.add(dims)
    return names


def _dims_sound(dims) -> bool:
    """A quick yes for dims that `_check_var` accepts (False: look closer)."""
    lo, hi = min(dims), max(dims)
    if lo < -1 or hi > MAX_DIM:
        return False
    # every element count is below hi ** len(dims) < 2 ** (bits(hi) * len(dims))
    return hi.bit_length() * len(dims) <= 62


def _check_ops(b: pb.BlockDesc, n: int, own: set[str], scope: "_Scopes | None",
               sound: dict[str, int], source: str | None, found: Findings) -> None:
    idx = b.idx
    own_has_all = own.issuperset
    sound_type = sound.get
    block_named: list[str] = []   # the BLOCK / BLOCKS attrs `_attr_sound` passes
    # Attr lists repeat (every layer's `mul`): one whose wire bytes passed
    # before, and named no block, passes again without its attrs being read
    # one by one through upb (True: it names an attr twice). A block whose
    # attr lists rarely repeat (a call stack per op) stops serialising ops
    # for this after the first few dozen.
    sound_tails: dict[bytes, bool] | None = {}
    hits = 0
    tail = b""
    records: list[tuple[list, list] | None] = []
    found.slots.append(records)
    for i, op in enumerate(b.ops):
        ok = type(op.type) is str
        if ok:
            repeated = None
            if sound_tails is not None:
                tail = attrs_tail(op.SerializePartialToString())
                repeated = sound_tails.get(tail)
                if repeated is None and len(sound_tails) > 32 and len(sound_tails) > 2 * hits:
                    sound_tails = None
            if repeated is not None:
                hits += 1
                if repeated:
                    found.repeated_attrs.append((idx, i))
            else:
                attrs = op.attrs
                names = set()
                add = names.add
                for a in attrs:
                    name = a.name
                    if sound_type(name) != a.type and not _attr_sound(a, idx, n, sound, block_named):
                        ok = False
                        break
                    add(name)
                else:
                    twice = len(names) != len(attrs)
                    if twice:
                        found.repeated_attrs.append((idx, i))
                    if block_named:
                        found.block_attrs.append((idx, i, tuple(block_named)))
                    elif sound_tails is not None:
                        sound_tails[tail] = twice
                block_named.clear()
        if ok:
            ins = _slot_records(op.inputs, own, own_has_all, scope, idx)
            outs = None if ins is None else _slot_records(op.outputs, own, own_has_all, scope, idx)
            if outs is not None:
                records.append((ins, outs))
                continue
        # the detailed checks, in their order, say what is wrong
        _check_op(op, idx, i, n, scope, source)
        records.append(None)


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
