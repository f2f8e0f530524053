"""What the pass refuses before it starts: programs that are valid protobuf
but that it would turn into a wrong program or a runaway one.

* `check_loss`: the loss must be a real floating-point tensor (a complex
  loss has no gradient in the usual sense; a tensor array or another var
  type is not a value to differentiate).
* `check_input_repeats`: an op input slot listing one var more than
  `MAX_REPEATS_IN_SLOT` times. Each repeat costs the pass a grad op, a
  renamed grad var and a `sum` input (Paddle's convention, kept op for op),
  so a file of a few bytes per repeat grows into ~7 KB of memory per repeat:
  a 1.4 MB file listing one var 50 000 times took 380 MB and 29 s.
* `non_float_params`: parameters whose dtype cannot carry a gradient
  (integers, bool); the pass would give them an integer zero "gradient".
* `existing_backward`: whether a program already has a backward section.
  In one process Paddle appends a second one correctly (it counts its
  passes on the Program object: `grad/` prefixes, `@GRAD_N` renames); from a
  file that count is gone, so the CLI refuses such a file unless forced.

And one check after the pass, before anything is returned or written:

* `check_declared`: every var a new op names is declared where the loader
  looks (the block, its ancestors, its forward block's). A control-flow op
  whose slots do not match its sub-block (hostile input: Input and Cond
  swapped) gets grad ops that read gradients nothing declares; such a
  program is refused rather than written, as the loader would refuse it.
"""
from __future__ import annotations

from collections import Counter
from itertools import chain
from operator import attrgetter
from typing import Iterable

from ..base import attrs as _attrs
from ..base import dtypes
from ..base.errors import ArgumentError, ProgramFileError, where
from ..legacy.program import OP_ROLE_ATTR, OP_ROLE_BACKWARD, Block, Program, Variable
from ..legacy.names import EMPTY_VAR_NAME, GRAD_SUFFIX
from ..legacy.wire import length_delimited

_DENSE = dtypes.VarType.DENSE_TENSOR
_INT = _attrs.AttrType.INT
_INPUT_NAMES = attrgetter("input_arg_names")
_OUTPUT_NAMES = attrgetter("output_arg_names")

#: The most times one var may appear in one input slot of one op.
MAX_REPEATS_IN_SLOT = 1000

#: Real floating-point types: a loss must be one of them.
REAL_FLOAT_TYPES = dtypes.FLOAT_TYPES - {dtypes.VarType.COMPLEX64, dtypes.VarType.COMPLEX128}


def check_loss(loss: Variable) -> None:
    """Refuse a loss that is not a real floating-point dense tensor."""
    loc = where(loss.block.program.source, loss.block.idx, var=loss.name)
    if loss.type != dtypes.VarType.DENSE_TENSOR:
        raise ArgumentError(f"{loc}: the loss must be a floating-point tensor (DENSE_TENSOR), not a "
                            f"{dtypes.type_name(loss.type)}")
    dt = loss.data_type
    if dt in (dtypes.VarType.COMPLEX64, dtypes.VarType.COMPLEX128):
        raise ArgumentError(f"{loc}: the loss must be a real floating-point tensor, not "
                            f"{dtypes.type_name(dt)} (a complex loss has no gradient to descend)")
    if dt not in REAL_FLOAT_TYPES:
        raise ArgumentError(f"{loc}: the loss must be a floating-point tensor, not {dtypes.type_name(dt)}")


def check_input_repeats(program: Program, limit: int | None = None) -> None:
    """Refuse an op that lists one var more than `limit` times in one input slot."""
    limit = MAX_REPEATS_IN_SLOT if limit is None else limit
    for b in program.blocks:
        # No op of the block lists more than `limit` inputs in all (one pass in C over the
        # views' cached names): no slot can repeat a var that often.
        if max(map(len, map(_INPUT_NAMES, b.ops)), default=0) <= limit:
            continue
        for i, view in enumerate(b.ops):
            if len(view.input_arg_names) <= limit:    # (no slot can hold more; the views cache the names)
                continue
            op = view.desc
            for slot in op.inputs:
                args = slot.arguments
                if len(args) <= limit:
                    continue
                name, n = Counter(args).most_common(1)[0]
                if n > limit:
                    raise ArgumentError(
                        f"{where(program.source, b.idx, i, op.type, name)}: listed {n} times in input "
                        f"'{slot.parameter}'; the pass refuses more than {limit} repeats of one var in "
                        "one slot (each repeat costs a grad op, a renamed gradient and a sum input)")


def non_float_params(program: Program, names: list[str]) -> list[Variable]:
    """The parameters among `names` whose dtype cannot carry a gradient."""
    out = []
    own = program.blocks[0].vars if program.blocks else {}
    floats = dtypes.FLOAT_TYPES
    for n in names:
        v = own.get(n)
        if v is None:
            v = _find(program, n)
            if v is None:
                continue
        # `v.data_type`, read directly for a dense tensor (nearly every parameter; 2x faster)
        vt = v.desc.type
        dt = vt.dense_tensor.tensor.data_type if vt.type == _DENSE else v.data_type
        if dt is not None and dt not in floats:
            out.append(v)
    return out


def _find(program: Program, name: str) -> Variable | None:
    for b in program.blocks:
        v = b.vars.get(name)
        if v is not None:
            return v
    return None


def existing_backward(program: Program, data: bytes | None = None) -> str | None:
    """Where the program already has a backward section, in words (None if
    it has none): the first op whose op_role has the backward bit, else the
    first var named like a gradient. `data`: the bytes of `program.desc`
    now (`SerializePartialToString`), if the caller has them: where they
    show no backward role the ops need not be read one by one."""
    if data is not None and _forward_roles_only(data):
        return _gradient_var(program)
    # op_role stands near the end of an op's attrs (they are sorted): read
    # from the end, which finds the same attr on every op that names it once
    # (a loaded program knows the ops that name an attr twice; for those,
    # and for programs built in memory, the first one counts, as in `attr`).
    known = program.repeated_attr_ops
    twice = None if known is None else {id(op.desc) for op in known}
    at_end: dict[str, int] = {}
    for b in program.blocks:
        for i, op in enumerate(b.ops):
            d = op.desc
            if twice is None or (twice and id(d) in twice):
                role = op.attr(OP_ROLE_ATTR, 0)
            else:
                role = _only_attr(d, OP_ROLE_ATTR, 0, at_end)
            if isinstance(role, int) and role & OP_ROLE_BACKWARD:
                return f"{where(None, b.idx, i, op.type)} has op_role {role} (backward)"
    return _gradient_var(program)


def _gradient_var(program: Program) -> str | None:
    for b in program.blocks:
        for name in b.vars:
            if GRAD_SUFFIX in name:
                return f"{where(None, b.idx, var=name)} is a gradient"
    return None


#: An op_role attr's name on the wire (Attr.name = 1).
_ROLE_NAME = length_delimited(0x0A, OP_ROLE_ATTR.encode())
#: Whole op_role attrs with a role a forward program holds, as protobuf writes
#: them in an OpDesc (attrs = 4, length-delimited: name; type = 2: INT;
#: i = 3): 0 (forward) and 256 (loss). Neither has the backward bit.
_FORWARD_ROLE_ATTRS = tuple(length_delimited(0x22, _ROLE_NAME + b"\x10\x00\x18" + role)
                            for role in (b"\x00", b"\x80\x02"))


def _forward_roles_only(data: bytes) -> bool:
    """Whether no op in a program desc's bytes has an op_role with the
    backward bit, by three counts in C: every op_role name in them stands in
    one of `_FORWARD_ROLE_ATTRS`. Exact: protobuf writes an Attr's name
    first (fields in number order, unknown ones last), so the bytes before
    an attr's name are its length (one byte: the byte before it, 0x22, is
    no varint continuation) - the attr ends where the pattern does: named
    op_role, an INT, holding 0 or 256. The patterns cannot overlap (one
    0x22 each), each holds one name, so equal counts put every name in
    one. A name anywhere else (another role, a string that holds it) only
    makes the counts differ: False, and the ops are read one by one."""
    return data.count(_ROLE_NAME) == sum(map(data.count, _FORWARD_ROLE_ATTRS))


def _only_attr(desc, name: str, default, at_end: dict[str, int]):
    """The decoded value of the attr called `name` on an op that names every
    attr once (`default` if none). Looked for first where it stood on the
    last op of the same type (`at_end`: type -> index from the end, filled
    here): ops of one type mostly list the same attrs, and on an op that
    names every attr once an attr found anywhere is the one (so a guess that
    misses only costs the scan from the end, which the other ops take)."""
    attrs = desc.attrs
    k = at_end.get(desc.type)
    a = attrs[k] if k is not None and -k <= len(attrs) else None
    if a is None or a.name != name:
        for k in range(-1, -len(attrs) - 1, -1):
            a = attrs[k]
            if a.name == name:
                at_end[desc.type] = k
                break
        else:
            return default
    return a.i if a.type == _INT else _attrs.decode(a)     # (`decode`, inlined for an INT)


def refuse_existing_backward(program: Program, advice: str = "pass --force to append anyway",
                             data: bytes | None = None) -> None:
    """Raise ArgumentError if the program already has a backward section
    (`data`: as `existing_backward`'s)."""
    found = existing_backward(program, data)
    if found is not None:
        raise ArgumentError(f"{program.source or '<program>'}: already has a backward section ({found}); "
                            "a second one appended to a program read from a file gets wrongly declared "
                            f"gradients ({advice})")


def check_declared(program: Program, block: Block, start: int, grad_blocks: Iterable[int]) -> None:
    """Refuse the pass's result if an op it wrote (`block.ops[start:]`, and
    every op of `grad_blocks`) names a var no visible block declares - the
    loader's rule (validate.py): declared in the op's block or an ancestor,
    or in its forward block or an ancestor of that."""
    blocks = program.blocks

    def visible(b: Block, name: str) -> bool:
        for first in (b, blocks[b.forward_block_idx] if b.forward_block_idx != -1 else None):
            cur = first
            while cur is not None:
                if name in cur.vars:
                    return True
                cur = cur.parent
        return False

    for b, ops in [(block, block.ops[start:])] + [(blocks[i], blocks[i].ops) for i in sorted(grad_blocks)]:
        own = b.vars
        # Every name the ops write or read, in one set built in C; only when one of them is
        # not the block's own (nor the empty name) are the ops looked at one by one, in order.
        names = set(chain.from_iterable(map(_INPUT_NAMES, ops)))
        names.update(chain.from_iterable(map(_OUTPUT_NAMES, ops)))
        missing = names.difference(own)
        missing.discard(EMPTY_VAR_NAME)
        if all(visible(b, n) for n in missing):
            continue
        declared = own.__contains__
        for op in ops:
            for outputs, args in ((False, op.input_arg_names), (True, op.output_arg_names)):
                if all(map(declared, args)):      # (the common case, in one call)
                    continue
                for name in args:
                    if name in own or name == EMPTY_VAR_NAME or visible(b, name):
                        continue
                    slots = op.desc.outputs if outputs else op.desc.inputs
                    slot = next((s.parameter for s in slots if name in s.arguments), "?")
                    i = next(k for k, o in enumerate(b.ops) if o is op)
                    raise ProgramFileError(
                        f"{where(program.source, b.idx, i, op.type, name)}: the gradient pass would write "
                        f"this op with slot '{slot}' naming a variable no visible block declares (the "
                        "input's control-flow ops do not match their sub-blocks?); nothing was written")
