"""Semantic differences between two programs, and golden files built on them.

`diff_programs(a, b)` compares block by block (blocks are matched by index):

* ops are aligned with an LCS alignment (`difflib.SequenceMatcher`, junk
  heuristics off; above `LCS_PAIRS` pairs, a patience-style alignment in
  O(n log n), `opcodes`) over full op signatures: type, slots and the compared
  attrs. A run of ops that do not match is aligned again on op type alone, so
  an op that kept its type but changed a slot or an attr is reported as
  *changed* (with what changed), and everything else as *removed* / *added*;
* vars are matched by name: added, removed, or changed (var type, dtype,
  shape, lod level, flags). The order of vars carries no meaning and is not
  compared; neither is the order of slots or of attrs;
* attrs that say nothing about the computation (`DEFAULT_IGNORED_ATTRS`)
  are left out unless asked for.

`ProgramDiff.to_text()` prints it in the style of a unified diff (`-`/`+`
lines in `pybackward show`'s format, `?` lines saying what changed, `@@`
headers naming the block and the op indices); `to_json()` gives the same as
data. `check_golden` / `write_golden` compare a program with a golden file
and rewrite it (binary, plus a `.pbtxt` beside it).
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Union

import click

from ..base import attrs as _a
from ..base import dtypes
from ..legacy import text as _text
from ..base.errors import ArgumentError
from ..base.names import printable
from ..legacy.io import is_text_path, load, save
from ..legacy.program import Block, Operator, Program, Variable

#: Attrs a diff leaves out by default: where an op was made, not what it does.
DEFAULT_IGNORED_ATTRS = frozenset({"op_callstack", "op_namescope", "op_device"})

PathLike = Union[str, os.PathLike]


@dataclass
class Change:
    """One difference inside an op, a var or a block header."""
    what: str          # "input", "output", "attr", "attr type", "shape", "dtype", "parent_idx", ...
    name: str | None   # the slot, attr or flag name (None for what has no name)
    a: Any             # the value in A (None: absent)
    b: Any

    def text(self) -> str:
        def show(v, present):
            return _short(repr(v)) if present else "(absent)"
        label = f"{self.what} {self.name}" if self.name else self.what
        if self.what in ("input", "output"):
            return f"{label}: {_slot_text(self.a)} -> {_slot_text(self.b)}"
        if self.what == "attr":
            return f"{label}: {show(self.a, self.a is not None)} -> {show(self.b, self.b is not None)}"
        return f"{label}: {_short(_plain(self.a))} -> {_short(_plain(self.b))}"

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "name": self.name, "a": _text.jsonable(self.a), "b": _text.jsonable(self.b)}


def _short(s: str, limit: int = 160) -> str:
    """A long value cut in the middle, for `?` lines (JSON keeps it whole)."""
    return s if len(s) <= limit else f"{s[:limit // 2 - 3]} ... {s[-(limit // 2 - 2):]}"


def _slot_text(v) -> str:
    return "(absent)" if v is None else "[" + ", ".join(v) + "]"


def _plain(v) -> str:
    if v is None:
        return "(absent)"
    return str(list(v)) if isinstance(v, tuple) else str(v)


@dataclass
class OpEntry:
    """One step of the op alignment: equal, removed, added or changed."""
    kind: str                       # "equal" | "removed" | "added" | "changed"
    a_index: int | None
    b_index: int | None
    a_op: Operator | None
    b_op: Operator | None
    changes: list[Change] = field(default_factory=list)


@dataclass
class VarEntry:
    kind: str                       # "removed" | "added" | "changed"
    name: str
    a: Variable | None
    b: Variable | None
    changes: list[Change] = field(default_factory=list)


@dataclass
class BlockDiff:
    idx: int
    status: str                     # "equal" | "changed" | "added" | "removed"
    a: Block | None
    b: Block | None
    header: list[Change] = field(default_factory=list)
    ops: list[OpEntry] = field(default_factory=list)
    vars: list[VarEntry] = field(default_factory=list)

    @property
    def op_changes(self) -> list[OpEntry]:
        return [e for e in self.ops if e.kind != "equal"]


@dataclass
class ProgramDiff:
    a_label: str
    b_label: str
    ignored_attrs: frozenset[str]
    program: list[Change]
    blocks: list[BlockDiff]

    @property
    def equal(self) -> bool:
        return not self.program and all(b.status == "equal" for b in self.blocks)

    def summary(self) -> dict[str, int]:
        s = {k: 0 for k in ("blocks_added", "blocks_removed", "blocks_changed", "ops_added", "ops_removed",
                            "ops_changed", "vars_added", "vars_removed", "vars_changed")}
        for b in self.blocks:
            if b.status != "equal":
                s[f"blocks_{b.status}"] += 1
            for e in b.ops:
                if e.kind != "equal":
                    s[f"ops_{e.kind}"] += 1
            for v in b.vars:
                s[f"vars_{v.kind}"] += 1
        return s

    def summary_line(self) -> str:
        if self.equal:
            return "programs are equal"
        parts = []
        for k, n in self.summary().items():
            if n and k != "blocks_changed":
                what, how = k.split("_")
                parts.append(f"{n} {what[:-1] if n == 1 else what} {how}")
        if self.program:
            parts.append("program header changed")
        return "programs differ: " + ", ".join(parts or ["block headers changed"])

    def to_text(self, color: bool = False, context: int = 2) -> str:
        return "\n".join(_render(self, color, context))

    def to_json(self) -> dict[str, Any]:
        return {"equal": self.equal, "a": self.a_label, "b": self.b_label,
                "ignored_attrs": sorted(self.ignored_attrs), "summary": self.summary(),
                "program": [c.to_json() for c in self.program],
                "blocks": [_block_json(b, self.ignored_attrs) for b in self.blocks if b.status != "equal"]}


# -- comparing ---------------------------------------------------------------
def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def _attrs(op: Operator, ignore: frozenset[str]) -> dict[str, tuple[int, Any]]:
    return {a.name: (a.type, _a.decode(a)) for a in op.desc.attrs if a.name not in ignore}


def _slots(vars_) -> dict[str, tuple[str, ...]]:
    return {v.parameter: tuple(v.arguments) for v in vars_}


def op_signature(op: Operator, ignore: frozenset[str] = DEFAULT_IGNORED_ATTRS) -> tuple:
    """What two ops must share to be equal: type, slots and compared attrs (order-free)."""
    attrs = _attrs(op, ignore)
    return (op.type, tuple(sorted(_slots(op.desc.inputs).items())),
            tuple(sorted(_slots(op.desc.outputs).items())),
            tuple(sorted((k, t, _hashable(v)) for k, (t, v) in attrs.items())))


def op_changes(a: Operator, b: Operator, ignore: frozenset[str] = DEFAULT_IGNORED_ATTRS) -> list[Change]:
    """What differs between two ops (type, slots, attrs), slots and attrs in B's order."""
    out: list[Change] = []
    if a.type != b.type:
        out.append(Change("type", None, a.type, b.type))
    for what, sa, sb in (("input", _slots(a.desc.inputs), _slots(b.desc.inputs)),
                         ("output", _slots(a.desc.outputs), _slots(b.desc.outputs))):
        for k in _union(sa, sb):
            if sa.get(k) != sb.get(k):
                out.append(Change(what, k, sa.get(k), sb.get(k)))
    aa, ab = _attrs(a, ignore), _attrs(b, ignore)
    type_name = {v: k for k, v in _a.AttrType.items()}
    for k in _union(aa, ab):
        x, y = aa.get(k), ab.get(k)
        if x is None or y is None or _hashable(x[1]) != _hashable(y[1]):
            out.append(Change("attr", k, None if x is None else x[1], None if y is None else y[1]))
        elif x[0] != y[0]:
            out.append(Change("attr type", k, type_name.get(x[0], x[0]), type_name.get(y[0], y[0])))
    return out


def _union(a: dict, b: dict) -> list:
    return list(b) + [k for k in a if k not in b]


def _var_fields(v: Variable) -> dict[str, Any]:
    d: dict[str, Any] = {"type": dtypes.type_name(v.type).lower()}
    if v.data_type is not None:
        d["dtype"] = dtypes.type_name(v.data_type).lower()
        d["shape"] = tuple(v.shape)
    for f in _text.VAR_FLAGS:
        d[f] = bool(getattr(v.desc, f))
    return d


def var_changes(a: Variable, b: Variable) -> list[Change]:
    fa, fb = _var_fields(a), _var_fields(b)
    out = [Change(k, None, fa.get(k), fb.get(k)) for k in _union(fa, fb) if fa.get(k) != fb.get(k)]
    if not out and a.desc != b.desc:  # lod levels, var attrs, reader descs: shown raw
        from google.protobuf import text_format
        out.append(Change("desc", None, text_format.MessageToString(a.desc, as_one_line=True),
                          text_format.MessageToString(b.desc, as_one_line=True)))
    return out


#: Below this many pairs (len(a) * len(b)) sequences are aligned by difflib's LCS as before;
#: above, by `_anchored_matches` (n log n), since difflib is quadratic when items repeat
#: (ops that share a signature: 16 000 ops took 28 s).
LCS_PAIRS = 250_000
#: The work `_anchored_matches` may do, per item of the two sequences.
WORK_PER_ITEM = 64


def opcodes(a: list, b: list) -> list[tuple[str, int, int, int, int]]:
    """`difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()` for small inputs;
    for large ones the same kind of opcodes from an alignment in O(n log n) time:
    common prefix and suffix, then items that occur once on each side as anchors (their
    longest increasing run, as patience diff takes it), recursively between anchors, and
    where no item is unique, the rarest item's occurrences in order. A region whose
    items have nothing in common is a replace; regions small enough go to difflib."""
    if len(a) * len(b) <= LCS_PAIRS:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    matches = _anchored_matches(a, b)
    out: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for x, y, n in matches + [(len(a), len(b), 0)]:
        if i < x and j < y:
            out.append(("replace", i, x, j, y))
        elif i < x:
            out.append(("delete", i, x, j, j))
        elif j < y:
            out.append(("insert", i, i, j, y))
        if n:
            out.append(("equal", x, x + n, y, y + n))
        i, j = x + n, y + n
    return out


def _anchored_matches(a: list, b: list) -> list[tuple[int, int, int]]:
    """Matching blocks (i, j, n), in order and merged (see `opcodes`)."""
    pairs: list[tuple[int, int]] = []
    regions = [(0, len(a), 0, len(b))]
    # A bound on the work whatever the input: past it, the regions left are replaces
    # (a coarser diff, never a slow one).
    budget = WORK_PER_ITEM * (len(a) + len(b)) + 4 * LCS_PAIRS
    while regions:                        # an explicit stack: no recursion limit
        i1, i2, j1, j2 = regions.pop()
        budget -= (i2 - i1) + (j2 - j1)
        if budget < 0:
            break
        while i1 < i2 and j1 < j2 and a[i1] == b[j1]:
            pairs.append((i1, j1))
            i1, j1 = i1 + 1, j1 + 1
        while i1 < i2 and j1 < j2 and a[i2 - 1] == b[j2 - 1]:
            i2, j2 = i2 - 1, j2 - 1
            pairs.append((i2, j2))
        if i1 == i2 or j1 == j2:
            continue
        if (i2 - i1) * (j2 - j1) <= LCS_PAIRS and (i2 - i1) * (j2 - j1) <= budget:
            budget -= (i2 - i1) * (j2 - j1)
            sm = difflib.SequenceMatcher(None, a[i1:i2], b[j1:j2], autojunk=False)
            for x, y, n in sm.get_matching_blocks():
                pairs.extend((i1 + x + k, j1 + y + k) for k in range(n))
            continue
        anchors = _anchors(a, b, i1, i2, j1, j2)
        if not anchors:
            continue                      # nothing in common: a replace
        pairs.extend(anchors)
        # The gaps between anchors, pushed so that each is done on its own.
        prev_i, prev_j = i1, j1
        for x, y in anchors:
            if prev_i < x or prev_j < y:
                regions.append((prev_i, x, prev_j, y))
            prev_i, prev_j = x + 1, y + 1
        if prev_i < i2 or prev_j < j2:
            regions.append((prev_i, i2, prev_j, j2))
    pairs.sort()
    blocks: list[tuple[int, int, int]] = []
    for x, y in pairs:
        if blocks and blocks[-1][0] + blocks[-1][2] == x and blocks[-1][1] + blocks[-1][2] == y:
            blocks[-1] = (blocks[-1][0], blocks[-1][1], blocks[-1][2] + 1)
        else:
            blocks.append((x, y, 1))
    return blocks


def _anchors(a: list, b: list, i1: int, i2: int, j1: int, j2: int) -> list[tuple[int, int]]:
    """Pairs (i, j), increasing in both, that split the region: the items occurring once on
    each side (their longest increasing run), else the occurrences, in order, of the item
    rarest on both sides. Linear in the region, plus n log n for the run."""
    count_a: dict = {}
    for x in range(i1, i2):
        count_a[a[x]] = count_a.get(a[x], 0) + 1
    count_b: dict = {}
    first_b: dict = {}
    for y in range(j1, j2):
        k = b[y]
        if k in count_a:
            count_b[k] = count_b.get(k, 0) + 1
            first_b.setdefault(k, y)
    if not count_b:
        return []
    unique = [(x, first_b[a[x]]) for x in range(i1, i2) if count_a[a[x]] == 1 and count_b.get(a[x]) == 1]
    if unique:
        return _longest_increasing(unique)
    rare = min(count_b, key=lambda k: (max(count_a[k], count_b[k]), count_a[k] + count_b[k]))
    xs = [x for x in range(i1, i2) if a[x] == rare]
    ys = [y for y in range(j1, j2) if b[y] == rare]
    # The first half paired from the start and the rest from the end: occurrences one side
    # has more of are left unpaired in the middle, so one insertion shifts nothing around it.
    c = min(len(xs), len(ys))
    h = c // 2
    return list(zip(xs[:h], ys[:h])) + list(zip(xs[len(xs) - (c - h):], ys[len(ys) - (c - h):]))


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of `pairs` (sorted by i) whose j increase (patience sorting)."""
    import bisect
    tails: list[int] = []                 # tails[k]: the smallest j ending a run of k + 1
    tail_at: list[int] = []               # ... and the index in `pairs` of that pair
    back: list[int] = [-1] * len(pairs)
    for n, (_, y) in enumerate(pairs):
        k = bisect.bisect_left(tails, y)
        if k == len(tails):
            tails.append(y)
            tail_at.append(n)
        else:
            tails[k] = y
            tail_at[k] = n
        back[n] = tail_at[k - 1] if k else -1
    run: list[tuple[int, int]] = []
    n = tail_at[-1] if tail_at else -1
    while n != -1:
        run.append(pairs[n])
        n = back[n]
    return run[::-1]


def align_ops(a_ops: list[Operator], b_ops: list[Operator],
              ignore: frozenset[str] = DEFAULT_IGNORED_ATTRS) -> list[OpEntry]:
    """LCS alignment on signatures, then on op types inside each unmatched run."""
    ids: dict[tuple, int] = {}
    sa = [ids.setdefault(op_signature(op, ignore), len(ids)) for op in a_ops]
    sb = [ids.setdefault(op_signature(op, ignore), len(ids)) for op in b_ops]
    out: list[OpEntry] = []
    for tag, i1, i2, j1, j2 in opcodes(sa, sb):
        if tag == "equal":
            out.extend(OpEntry("equal", i, j, a_ops[i], b_ops[j]) for i, j in zip(range(i1, i2), range(j1, j2)))
        elif tag == "delete":
            out.extend(OpEntry("removed", i, None, a_ops[i], None) for i in range(i1, i2))
        elif tag == "insert":
            out.extend(OpEntry("added", None, j, None, b_ops[j]) for j in range(j1, j2))
        else:
            out.extend(_align_run(a_ops, b_ops, i1, i2, j1, j2, ignore))
    return out


def _align_run(a_ops, b_ops, i1, i2, j1, j2, ignore) -> list[OpEntry]:
    ta = [op.type for op in a_ops[i1:i2]]
    tb = [op.type for op in b_ops[j1:j2]]
    out: list[OpEntry] = []
    for tag, x1, x2, y1, y2 in opcodes(ta, tb):
        if tag == "equal":
            for i, j in zip(range(i1 + x1, i1 + x2), range(j1 + y1, j1 + y2)):
                out.append(OpEntry("changed", i, j, a_ops[i], b_ops[j], op_changes(a_ops[i], b_ops[j], ignore)))
            continue
        out.extend(OpEntry("removed", i, None, a_ops[i], None) for i in range(i1 + x1, i1 + x2))
        out.extend(OpEntry("added", None, j, None, b_ops[j]) for j in range(j1 + y1, j1 + y2))
    return out


def diff_vars(a: Block, b: Block) -> list[VarEntry]:
    """Vars added, removed and changed, in an order merged from both blocks."""
    na, nb = list(a.vars), list(b.vars)
    order: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes(na, nb):
        order.extend(na[i1:i2])
        if tag != "equal":
            order.extend(nb[j1:j2])
    out: list[VarEntry] = []
    done: set[str] = set()
    for n in order:
        if n in done:
            continue
        done.add(n)
        va, vb = a.vars.get(n), b.vars.get(n)
        if vb is None:
            out.append(VarEntry("removed", n, va, None))
        elif va is None:
            out.append(VarEntry("added", n, None, vb))
        else:
            ch = var_changes(va, vb)
            if ch:
                out.append(VarEntry("changed", n, va, vb, ch))
    return out


def diff_blocks(a: Block | None, b: Block | None, idx: int,
                ignore: frozenset[str] = DEFAULT_IGNORED_ATTRS) -> BlockDiff:
    if a is None or b is None:
        status = "added" if a is None else "removed"
        ops = [OpEntry(status, i if b is None else None, i if a is None else None,
                       op if b is None else None, op if a is None else None)
               for i, op in enumerate((a or b).ops)]
        vars_ = [VarEntry(status, n, v if b is None else None, v if a is None else None)
                 for n, v in (a or b).vars.items()]
        return BlockDiff(idx, status, a, b, [], ops, vars_)
    header = [Change(f, None, getattr(a, f), getattr(b, f)) for f in ("parent_idx", "forward_block_idx")
              if getattr(a, f) != getattr(b, f)]
    ops = align_ops(a.ops, b.ops, ignore)
    vars_ = diff_vars(a, b)
    changed = header or vars_ or any(e.kind != "equal" for e in ops)
    return BlockDiff(idx, "changed" if changed else "equal", a, b, header, ops, vars_)


def diff_programs(a: Program, b: Program, ignore_attrs: Iterable[str] | None = None,
                  a_label: str | None = None, b_label: str | None = None) -> ProgramDiff:
    """Compare two programs; `ignore_attrs` defaults to DEFAULT_IGNORED_ATTRS (pass () for none)."""
    if not isinstance(a, Program) or not isinstance(b, Program):
        raise ArgumentError("diff_programs() takes two Programs")
    ignore = DEFAULT_IGNORED_ATTRS if ignore_attrs is None else frozenset(ignore_attrs)
    header = []
    if a.desc.version.version != b.desc.version.version:
        header.append(Change("version", None, a.desc.version.version, b.desc.version.version))
    if _op_versions(a) != _op_versions(b):
        header.append(Change("op_version_map", None, _op_versions(a), _op_versions(b)))
    blocks = [diff_blocks(a.blocks[i] if i < len(a.blocks) else None,
                          b.blocks[i] if i < len(b.blocks) else None, i, ignore)
              for i in range(max(len(a.blocks), len(b.blocks)))]
    return ProgramDiff(a_label or a.source or "a", b_label or b.source or "b", ignore, header, blocks)


def _op_versions(p: Program) -> dict[str, int]:
    return {pair.op_name: pair.op_version.version for pair in p.desc.op_version_map.pair}


# -- printing ----------------------------------------------------------------
_STYLES = {"-": {"fg": "red"}, "+": {"fg": "green"}, "?": {"fg": "yellow"}, "@": {"fg": "cyan"},
           "h": {"bold": True}}


def _render(d: ProgramDiff, color: bool, context: int):
    def line(kind: str, body: str) -> str:
        body = printable(body)       # one line each: a name's control characters (\n too) escaped
        s = body if kind == "h" or kind == "@" else f"{kind} {body}"
        return click.style(s, **_STYLES[kind]) if color and kind in _STYLES else s

    if d.equal:
        return
    yield line("h", f"--- {d.a_label}")
    yield line("h", f"+++ {d.b_label}")
    # Lines hide what the diff ignores and what `show` hides, but never an attr that changed.
    ign = d.ignored_attrs | _text.NOISE_ATTRS
    if d.program:
        yield line("@", "@@ program @@")
        for c in d.program:
            yield line("?", c.text())
    for b in d.blocks:
        if b.status == "equal":
            continue
        if b.status in ("added", "removed"):
            blk = b.b if b.status == "added" else b.a
            sign = "+" if b.status == "added" else "-"
            yield line("@", f"@@ block {b.idx} {b.status}: {_text.block_header(blk)} @@")
            for v in blk.vars.values():
                yield line(sign, _text.var_to_text(v))
            for i, op in enumerate(blk.ops):
                yield line(sign, _text.op_line(op, i, ignore=ign))
            continue
        if b.header:
            yield line("@", f"@@ block {b.idx} @@")
            for c in b.header:
                yield line("?", c.text())
        for hunk in _hunks(b.ops, context):
            yield line("@", _hunk_header(b.idx, hunk))
            for e in hunk:
                if e.kind == "equal":
                    yield line(" ", _text.op_line(e.b_op, e.b_index, ignore=ign))
                    continue
                hide = ign - {c.name for c in e.changes}
                if e.a_op is not None:
                    yield line("-", _text.op_line(e.a_op, e.a_index, ignore=hide))
                if e.b_op is not None:
                    yield line("+", _text.op_line(e.b_op, e.b_index, ignore=hide))
                for c in e.changes:
                    yield line("?", "      " + c.text())
        if b.vars:
            yield line("@", f"@@ block {b.idx} vars @@")
            for v in b.vars:
                if v.a is not None:
                    yield line("-", _text.var_to_text(v.a))
                if v.b is not None:
                    yield line("+", _text.var_to_text(v.b))
                for c in v.changes:
                    yield line("?", "    " + c.text())
    yield d.summary_line()


def _hunks(entries: list[OpEntry], context: int) -> list[list[OpEntry]]:
    """Changed entries with up to `context` equal ones around them; close groups merge."""
    changed = [k for k, e in enumerate(entries) if e.kind != "equal"]
    hunks: list[list[OpEntry]] = []
    start = end = None
    for k in changed:
        lo, hi = max(0, k - context), min(len(entries), k + context + 1)
        if end is not None and lo <= end:
            end = hi
        else:
            if start is not None:
                hunks.append(entries[start:end])
            start, end = lo, hi
    if start is not None:
        hunks.append(entries[start:end])
    return hunks


def _hunk_header(idx: int, hunk: list[OpEntry]) -> str:
    ai = [e.a_index for e in hunk if e.a_index is not None]
    bi = [e.b_index for e in hunk if e.b_index is not None]
    a = f"-{ai[0]},{len(ai)}" if ai else "-0,0"
    b = f"+{bi[0]},{len(bi)}" if bi else "+0,0"
    return f"@@ block {idx} ops {a} {b} @@"


def _block_json(b: BlockDiff, ignore: frozenset[str]) -> dict[str, Any]:
    ops = []
    for e in b.ops:
        if e.kind == "equal":
            continue
        d: dict[str, Any] = {"change": e.kind, "a_index": e.a_index, "b_index": e.b_index,
                             "type": (e.b_op or e.a_op).type}
        if e.kind == "changed":
            d["changes"] = [c.to_json() for c in e.changes]
        else:
            op, i = (e.b_op, e.b_index) if e.kind == "added" else (e.a_op, e.a_index)
            d["op"] = _text.op_to_dict(op, i, all_attrs=False, ignore=ignore)
        ops.append(d)
    vars_ = []
    for v in b.vars:
        d = {"change": v.kind, "name": v.name}
        if v.kind == "changed":
            d["changes"] = [c.to_json() for c in v.changes]
        else:
            d["var"] = _text.var_to_dict(v.b if v.kind == "added" else v.a)
        vars_.append(d)
    return {"block": b.idx, "status": b.status, "header": [c.to_json() for c in b.header],
            "ops": ops, "vars": vars_}


# -- golden files --------------------------------------------------------------
def golden_paths(path: PathLike) -> tuple[Path, Path]:
    """(binary, text) paths of a golden: `g.pb` and `g.pbtxt` beside it."""
    p = Path(path)
    if is_text_path(p):
        return p.with_suffix(".pb"), p
    return p, p.with_suffix(".pbtxt")


def write_golden(program: Program, path: PathLike) -> tuple[Path, Path]:
    """Write the golden's binary and `.pbtxt` (each atomically; the text first,
    so an interrupted update leaves the old binary)."""
    binary, text = golden_paths(path)
    if binary.parent and not binary.parent.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
    save(program, text, text=True)
    save(program, binary, text=False)
    return binary, text


@dataclass
class GoldenResult:
    path: Path
    exists: bool
    diff: ProgramDiff | None        # None when the golden did not exist
    updated: bool

    @property
    def equal(self) -> bool:
        return self.exists and self.diff is not None and self.diff.equal

    def to_json(self) -> dict[str, Any]:
        return {"golden": str(self.path), "exists": self.exists, "equal": self.equal, "updated": self.updated,
                "diff": self.diff.to_json() if self.diff is not None else None}


def check_golden(program: Program, path: PathLike, update: bool = False,
                 ignore_attrs: Iterable[str] | None = None, label: str | None = None) -> GoldenResult:
    """Compare `program` with the golden at `path` (golden as A, program as B);
    with `update`, rewrite the golden when it differs or is missing (and write
    a missing `.pbtxt`). A golden that exists but cannot be read raises
    ProgramFileError."""
    p = Path(path)
    binary, text = golden_paths(p)
    if not p.exists():
        if update:
            write_golden(program, p)
        return GoldenResult(p, False, None, update)
    d = diff_programs(load(p), program, ignore_attrs, a_label=str(p), b_label=label or program.source or "<program>")
    stale = not d.equal or not text.exists() or not binary.exists()
    if update and stale:
        write_golden(program, p)
    return GoldenResult(p, True, d, update and stale)
