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
from typing import Any

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
    floats = floats or _Floats()
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
            if any(not r.blocks for r in op.regions):
                raise ProgramFileError(f"op {index} ({op.name}): a region without blocks cannot be written")
            for k, v in enumerate(op.operands):
                if v is not None and id(v) not in numbered:
                    raise ProgramFileError(f"op {index} ({op.name}): operand {k} is a value no op or block "
                                           "argument before it in the program defines")
            for v in op.results:
                v.id, next_id = next_id, next_id + 1
                numbered.add(id(v))
            oj = _op_json(op, floats)
            open_blocks[-1]["ops"].append(oj)
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
                    node_json[id(region.op)].setdefault("regions", []).append(rj)
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
    return {"regions": top_regions}


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


def _parameter_json(op: Operation, floats: _Floats) -> dict:
    flag = _flag
    extra = [n for n in op.attrs if n not in _PARAM_KNOWN]
    if extra:
        raise ProgramFileError(f"builtin.parameter: attribute {extra[0]!r} has no place in the compressed "
                               "parameter op Paddle writes")
    name = op.attrs.get("parameter_name")
    if name is None or name.tag != "0.a_str" or len(op.results) != 1 or op.operands:
        raise ProgramFileError("builtin.parameter needs a string 'parameter_name', no operands and one result")
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


def dumps_program(program: Program, readable: bool = False) -> bytes:
    """The file Paddle would write for `program` (compact, or indented by 4)."""
    with paused_gc():       # a dict per op and attribute, no cycles: skip the collector's passes
        return _dumps(program, readable)


def _dumps(program: Program, readable: bool) -> bytes:
    floats = _Floats()
    base: dict[str, Any] = {"magic": "pir"}
    if program.trainable is not None:
        base["trainable"] = program.trainable
    base["version"] = CURRENT
    obj = {"base_code": base, "program": program_json(program, floats)}
    try:
        if readable:
            text = json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=4)
        else:
            text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as e:
        raise ProgramFileError(f"cannot write the program: {e} (non-finite floats go in an attribute's "
                               "'VD', made by Attr.f32/Attr.f64)") from None
    try:
        return floats.substitute(text).encode("utf-8")
    except UnicodeEncodeError:
        raise ProgramFileError("cannot write the program: a string holds a lone UTF-16 surrogate") from None
