"""Write the model as Paddle 3.3.1 writes a PIR program: the same JSON, byte for byte.

Paddle's writer (nlohmann::json) sorts object keys, writes compact JSON with
no spaces or, for `readable=True`, indents by 4 with ": " after keys; it
writes non-ASCII text as UTF-8 and floats as `floats.nl_format` says. Values
are numbered in write order (an op's results, then its regions: results
1, 2, ..., block arguments -1, -2, ...), regions and blocks are named
`region_N` / `block_N` in the same order, and `builtin.parameter` is written
in its compressed form ("#": "p", attributes by position).

Differences from Paddle's writer, on purpose: a block's keyword arguments are
written as keyword arguments (Paddle writes the positional ones under
"kwargs", a bug), and `cf.stack_create` ops are always written (Paddle drops
them unless `FLAGS_save_cf_stack_op` is set, and aborts if they are used).
"""
from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
from typing import Any, Callable

from ..base._gc import paused_gc
from ..base.errors import ProgramFileError
from .floats import float_text
from .model import Block, Operation, Program, iter_write_order
from .decode import DIALECT_ID_OF
from .types import Attr
from .versions import CURRENT

DIST_ATTRS = ("op_dist_attr", "op_role")
QUANT_ATTRS = ("struct_name",)
_PARAM_FLAGS = ("is_distributed", "is_parameter", "need_clip")
_PARAM_RESULT_FLAGS = ("persistable", "stop_gradient", "trainable")
_MARK = re.compile(r'"\\u0000F(\d+)"')


class _Floats:
    """Floats the JSON encoder would spell differently from Paddle: written as markers, swapped after."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        #: id() of an Attr -> its JSON object, for this one write: the pass shares Attr objects
        #: between ops (5 uses each in a deep MLP's backward), and none changes while it is written.
        self.attr_json: dict[int, dict] = {}

    def __call__(self, x: Any) -> Any:
        if isinstance(x, float):
            text = float_text(x)
            if text is not None:
                self.texts.append(text)
                return f"\x00F{len(self.texts) - 1}"
        return x

    def substitute(self, s: str) -> str:
        if not self.texts:
            return s
        return _MARK.sub(lambda m: self.texts[int(m.group(1))], s)


def program_json(program: Program, floats: _Floats | None = None) -> dict:
    """The program as the JSON object Paddle writes. Values are numbered in write order
    as it goes (results 1, 2, ...; block arguments -1, -2, ...) and the numbers are
    stored in `value.id`; an operand must be a value numbered before it."""
    return {"regions": _regions(program, floats or _Floats(), _op_json)}


def _regions(program: Program, floats: _Floats, make_op: Callable[[Operation, _Floats], Any]) -> list[dict]:
    """The top-level regions as JSON objects (`program_json`), each op made by `make_op`:
    its JSON object, or its text (`_OpText`, for `dumps`)."""
    next_id, next_arg = 1, -1
    numbered: set[int] = set()          # id() of every value numbered so far
    region_id = block_id = 0
    node_json: dict[int, dict] = {}     # id() of a region / op -> its JSON object
    open_blocks: list[dict] = []
    top_regions: list[dict] = []
    index = 0
    for kind, x in iter_write_order(program):
        if kind == "op":
            op: Operation = x
            if op.regions and any(not r.blocks for r in op.regions):
                raise ProgramFileError(f"op {index} ({op.name}): a region without blocks cannot be written")
            # (the test in C first; the loop only to name the operand)
            if not numbered.issuperset([id(v) for v in op.operands if v is not None]):
                for k, v in enumerate(op.operands):
                    if v is not None and id(v) not in numbered:
                        raise ProgramFileError(f"op {index} ({op.name}): operand {k} is a value no op or block "
                                               "argument before it in the program defines")
            for v in op.results:
                v.id, next_id = next_id, next_id + 1
                numbered.add(id(v))
            oj = make_op(op, floats)
            open_blocks[-1]["ops"].append(oj)
            if op.regions:
                node_json[id(op)] = oj
            index += 1
        elif kind == "block":
            block: Block = x
            region = block.region
            if region is not None and region.blocks and region.blocks[0] is block:
                rj = {"#": f"region_{region_id}", "blocks": []}
                region_id += 1
                if region.op is None:
                    top_regions.append(rj)
                else:
                    node = node_json[id(region.op)]
                    if isinstance(node, _OpText):
                        node.regions.append(rj)
                    else:
                        node.setdefault("regions", []).append(rj)
                node_json[id(region)] = rj
            for v in block.args + block.kwargs:
                v.id, next_arg = next_arg, next_arg - 1
                numbered.add(id(v))
            bj: dict[str, Any] = {"#": f"block_{block_id}", "args": [{"#": v.id, "TT": v.type.to_json()}
                                                                       for v in block.args]}
            block_id += 1
            if block.kwargs:
                bj["kwargs"] = [{"#": v.id, "TT": v.type.to_json(), "key": v.key} for v in block.kwargs]
            bj["ops"] = []
            node_json[id(region)]["blocks"].append(bj)
            open_blocks.append(bj)
        else:
            open_blocks.pop()
    program.names_changed()
    return top_regions


def _op_json(op: Operation, floats: _Floats) -> dict:
    if op.name == "builtin.parameter":
        return _parameter_json(op, floats)
    try:
        did = DIALECT_ID_OF[op.dialect]
    except KeyError:
        raise ProgramFileError(f"op {op.name!r}: its dialect has no id in a PIR file (0 builtin, 1 pd_op, 2 cf, "
                               "3 custom_op, 4 pd_dist)") from None
    oj: dict[str, Any] = {"#": f"{did}.{op.type}",
                          "A": [{"AT": _attr_json(a, floats), "N": n} for n, a in op.attrs.items()],
                          "I": [{"%": v.id if v is not None else 0} for v in op.operands],
                          "O": [{"%": v.id, "TT": v.type.to_json()} for v in op.results]}
    if op.write_result_attrs:
        oj["OA"] = [{"AT": _attr_json(a, floats), "N": n} for n, a in op.result_attrs.items()]
    return oj


def _flag(attrs: dict[str, Attr], name: str) -> int:
    a = attrs.get(name)
    if a is None or a.tag != "0.a_array" or len(a.value) != 1 or a.value[0].tag != "0.a_bool":
        raise ProgramFileError(f"builtin.parameter: {name!r} must be an array of one bool")
    return int(a.value[0].value)


#: Every attribute a compressed parameter op may carry.
_PARAM_KNOWN = frozenset(_PARAM_FLAGS) | {"parameter_name"} | frozenset(DIST_ATTRS) | frozenset(QUANT_ATTRS)


def _parameter_name(op: Operation) -> Attr:
    """The checks of a compressed parameter op; its `parameter_name`."""
    extra = [n for n in op.attrs if n not in _PARAM_KNOWN]
    if extra:
        raise ProgramFileError(f"builtin.parameter: attribute {extra[0]!r} has no place in the compressed "
                               "parameter op Paddle writes")
    name = op.attrs.get("parameter_name")
    if name is None or name.tag != "0.a_str" or len(op.results) != 1 or op.operands:
        raise ProgramFileError("builtin.parameter needs a string 'parameter_name', no operands and one result")
    return name


def _parameter_json(op: Operation, floats: _Floats) -> dict:
    flag = _flag
    name = _parameter_name(op)
    v = op.results[0]
    oj: dict[str, Any] = {"#": "p", "A": [flag(op.attrs, n) for n in _PARAM_FLAGS] + [name.value],
                          "DA": [{"AT": _attr_json(a, floats), "N": n} for n, a in op.attrs.items()
                                 if n in DIST_ATTRS],
                          "O": {"%": v.id, "TT": v.type.to_json()}}
    if op.write_result_attrs:
        oj["OA"] = [flag(op.result_attrs, n) for n in _PARAM_RESULT_FLAGS]
    oj["QA"] = [{"AT": _attr_json(a, floats), "N": n} for n, a in op.attrs.items() if n in QUANT_ATTRS]
    return oj


def _attr_json(a: Attr, floats: _Floats) -> dict:
    memo = floats.attr_json
    j = memo.get(id(a))
    if j is None:
        j = memo[id(a)] = _make_attr_json(a, floats)
    return j


def _make_attr_json(a: Attr, floats: _Floats) -> dict:
    tag, v = a.tag, a.value
    if a.vd is not None:
        return {"#": tag, "VD": a.vd}
    if tag == "0.a_array":
        return {"#": tag, "D": [_attr_json(x, floats) for x in v]}
    if tag == "0.a_type":
        return {"#": tag, "D": v.to_json()}
    if tag in ("0.a_f32", "0.a_f64"):
        return {"#": tag, "D": floats(v)}
    if isinstance(v, tuple):
        return {"#": tag, "D": [floats(x) for x in v]}
    return {"#": tag, "D": v}


# -- the compact file, as text ------------------------------------------------
# `dumps` writes the compact file without building a JSON object per op: an op's text is
# joined from the texts of its attributes (each Attr encoded once per write, as
# `_attr_json` makes its object once) and of its values' types (interned: a handful per
# program), so the bytes are json.dumps' of `program_json` (tests/pir: every file written
# both ways) at ~1/3 of its cost. `readable=True` keeps the object and json.dumps' indent.

#: json.dumps' compact encoder, made once (json.dumps with arguments makes one per call).
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class _NonFinite(ValueError):
    """A float json cannot write (NaN, inf) outside an attribute's "VD"."""


def _encode(obj: Any) -> str:
    try:
        return _COMPACT.encode(obj)
    except ValueError as e:
        raise _NonFinite(str(e)) from None


class _OpText:
    """An op's compact JSON text up to its regions (`head`, without the closing brace), and its
    regions' JSON objects, added as `_regions` meets them."""

    __slots__ = ("head", "regions")

    def __init__(self, head: str) -> None:
        self.head = head
        self.regions: list[dict] = []


class _TextMemo:
    """Per write: the text of each Attr (with its name, as an "A" entry) and of each type, by id()
    (the objects are the program's, alive and unchanged while it is written)."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[int, str], str] = {}
        self.types: dict[int, str] = {}


def _op_text(op: Operation, floats: _Floats) -> _OpText:
    """`_op_json(op)` as compact text (`json.dumps` of it, without the closing brace)."""
    memo: _TextMemo | None = getattr(floats, "text_memo", None)
    if memo is None:
        memo = floats.text_memo = _TextMemo()        # type: ignore[attr-defined]
    if op.name == "builtin.parameter":
        return _parameter_text(op, floats, memo)
    try:
        did = DIALECT_ID_OF[op.dialect]
    except KeyError:
        raise ProgramFileError(f"op {op.name!r}: its dialect has no id in a PIR file (0 builtin, 1 pd_op, 2 cf, "
                               "3 custom_op, 4 pd_dist)") from None
    results = []
    types = memo.types
    for v in op.results:
        tt = types.get(id(v.type))
        if tt is None:
            tt = types[id(v.type)] = _encode(v.type.to_json())
        results.append(f'{{"%":{v.id!r},"TT":{tt}}}')
    head = (f'{{"#":{encode_basestring(f"{did}.{op.type}")},"A":[{_pairs(op.attrs.items(), floats, memo)}],"I":['
            + ",".join([f'{{"%":{v.id!r}}}' if v is not None else '{"%":0}' for v in op.operands])
            + f'],"O":[{",".join(results)}]')
    if op.write_result_attrs:
        head += f',"OA":[{_pairs(op.result_attrs.items(), floats, memo)}]'
    return _OpText(head)


def _pairs(items: Any, floats: _Floats, memo: _TextMemo) -> str:
    """The entries {"AT": attr, "N": name} of an "A" / "OA" / "DA" / "QA" list, as text."""
    pairs = memo.pairs
    out = []
    for n, a in items:
        key = (id(a), n)
        t = pairs.get(key)
        if t is None:
            t = pairs[key] = f'{{"AT":{_encode(_attr_json(a, floats))},"N":{_encode(n)}}}'
        out.append(t)
    return ",".join(out)


def _parameter_text(op: Operation, floats: _Floats, memo: _TextMemo) -> _OpText:
    """`_parameter_json(op)` as compact text, without the closing brace."""
    flag = _flag
    name = _parameter_name(op)
    v = op.results[0]
    tt = memo.types.get(id(v.type))
    if tt is None:
        tt = memo.types[id(v.type)] = _encode(v.type.to_json())
    attrs = op.attrs
    head = (f'{{"#":"p","A":[{",".join([repr(flag(attrs, n)) for n in _PARAM_FLAGS])},{_encode(name.value)}],'
            f'"DA":[{_pairs([(n, a) for n, a in attrs.items() if n in DIST_ATTRS], floats, memo)}],'
            f'"O":{{"%":{v.id!r},"TT":{tt}}}')
    if op.write_result_attrs:
        head += f',"OA":[{",".join([repr(flag(op.result_attrs, n)) for n in _PARAM_RESULT_FLAGS])}]'
    return _OpText(head + f',"QA":[{_pairs([(n, a) for n, a in attrs.items() if n in QUANT_ATTRS], floats, memo)}]')


def _region_text(rj: dict) -> str:
    return f'{{"#":"{rj["#"]}","blocks":[{",".join([_block_text(b) for b in rj["blocks"]])}]}}'


def _block_text(bj: dict) -> str:
    kwargs = f',"kwargs":{_encode(bj["kwargs"])}' if "kwargs" in bj else ""
    return (f'{{"#":"{bj["#"]}","args":{_encode(bj["args"])}{kwargs},"ops":['
            + ",".join([_op_node_text(o) for o in bj["ops"]]) + "]}")


def _op_node_text(o: _OpText) -> str:
    if not o.regions:
        return o.head + "}"
    return f'{o.head},"regions":[{",".join([_region_text(r) for r in o.regions])}]}}'


def dumps_program(program: Program, readable: bool = False) -> bytes:
    """The file Paddle would write for `program` (compact, or indented by 4)."""
    with paused_gc():       # a dict per op and attribute, no cycles: skip the collector's passes
        return _dumps(program, readable)


def dumps_via_json(program: Program) -> bytes:
    """The compact file as `json.dumps(program_json(program))` makes it: the bytes `dumps_program`
    writes (faster, from texts), kept as the reference the tests compare it with."""
    with paused_gc():
        return _dumps(program, False, via_json=True)


def _dumps(program: Program, readable: bool, via_json: bool = False) -> bytes:
    floats = _Floats()
    base: dict[str, Any] = {"magic": "pir"}
    if program.trainable is not None:
        base["trainable"] = program.trainable
    base["version"] = CURRENT
    try:
        if readable or via_json:
            obj = {"base_code": base, "program": program_json(program, floats)}
            try:
                if readable:
                    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=4)
                else:
                    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            except ValueError as e:
                raise _NonFinite(str(e)) from None
        else:
            text = (f'{{"base_code":{_COMPACT.encode(base)},"program":{{"regions":['
                    + ",".join([_region_text(r) for r in _regions(program, floats, _op_text)]) + "]}}")
    except _NonFinite as e:
        raise ProgramFileError(f"cannot write the program: {e} (non-finite floats go in an attribute's "
                               "'VD', made by Attr.f32/Attr.f64)") from None
    try:
        return floats.substitute(text).encode("utf-8")
    except UnicodeEncodeError:
        raise ProgramFileError("cannot write the program: a string holds a lone UTF-16 surrogate") from None
