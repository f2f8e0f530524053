"""Read a PIR JSON program into the model, checking it as it goes.

Paddle's own reader checks almost nothing: it accepts unknown op names (the
op gets an empty name), files newer than it, dangling value ids (they become
null operands) and NaN literals. This reader refuses each with one line that
names the file, the op (its index in file order and its name) and the value
id involved, so a bad file never becomes a wrong program.

It walks the file with an explicit stack (no recursion), so nesting depth is
limited only by `max_depth`; a file past Python's JSON parser's own nesting
limit is refused too. Values follow MLIR's scoping: an op sees the values
defined before it in its block and in the blocks around it, never a value
defined inside another op's region, nor its own results.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn

from ..base._gc import paused_gc
from ..base.errors import ProgramFileError
from . import versions
from .decode import DIALECT_IDS, Decoder, json_kind
from .floats import parse_float
from .model import Block, Operation, Program, Region, Value
from .types import Attr

#: A program file over this many bytes is refused before it is read (JSON costs ~10x in memory).
MAX_PIR_BYTES = 256 << 20
#: Ops nested in regions deeper than this are refused (real programs nest a few levels).
MAX_DEPTH = 100

OP_KEYS = frozenset({"#", "I", "O", "A", "OA", "regions"})
PARAM_KEYS = frozenset({"#", "A", "O", "OA", "DA", "QA"})
BLOCK_KEYS = frozenset({"#", "args", "kwargs", "ops"})
DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "pir_op_names.json"
_SURROGATE = re.compile(r"\\u[dD][89abAB]")
_FLAG = {0: Attr.bools([False]), 1: Attr.bools([True])}   # a compressed parameter op's flags
_NEEDED = frozenset({"I", "O", "A"})


def _flags(*xs: Any) -> bool:
    """Each is the int 0 or 1 (not a bool): a compressed parameter op's flags."""
    return all(type(x) is int and (x == 0 or x == 1) for x in xs)


@lru_cache(maxsize=1)
def known_ops() -> frozenset[str]:
    """Every op name Paddle 3.3.1 registers (data/pir_op_names.json, tools/dump_pir_op_names.py)."""
    data = json.loads(DATA_PATH.read_text())
    return frozenset(f"{d}.{n}" for d, names in data["ops"].items() for n in names)


class _Constant(Exception):
    pass


def _no_constant(name: str) -> NoReturn:
    raise _Constant(name)


def decode_json(data: bytes, source: str | None) -> Any:
    """Parse the bytes as JSON (UTF-8, no NaN/Infinity literals), one-line errors."""
    loc = source or "<bytes>"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProgramFileError(f"{loc}: not UTF-8 text (bad byte at offset {e.start}); a PIR program is JSON") \
            from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        obj = json.loads(text, parse_constant=_no_constant, parse_float=parse_float)
    except _Constant as e:
        raise ProgramFileError(f"{loc}: {e.args[0]} is not a JSON number (Paddle writes a non-finite float "
                               f"as \"VD\": \"INF\" / \"-INF\" / \"NAN\")") from None
    except json.JSONDecodeError as e:
        ends = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        what = "truncated JSON (it ends in the middle)" if ends else "not valid JSON"
        raise ProgramFileError(f"{loc}: {what}: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise ProgramFileError(f"{loc}: JSON nested deeper than the reader's parser allows") from None
    if _SURROGATE.search(text):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ProgramFileError(f"{loc}: a string holds a lone UTF-16 surrogate (\\ud800-\\udfff) that "
                                   "no UTF-8 text can hold") from None
    return obj


def read_program(data: bytes, source: str | None = None, *, max_bytes: int = MAX_PIR_BYTES,
                 max_depth: int = MAX_DEPTH, allow_unknown_ops: bool = False) -> Program:
    """Parse, check and (for format versions 1-3) upgrade a PIR program."""
    loc = source or "<bytes>"
    if len(data) > max_bytes:
        raise ProgramFileError(f"{loc}: {len(data)} bytes is past the limit of {max_bytes} for a PIR program")
    head = data[:64].lstrip(b" \t\r\n")
    if not head:
        raise ProgramFileError(f"{loc}: empty file, not a PIR program")
    if head[:1] not in b'{["-0123456789tfn' and not head.startswith(b"\xef\xbb\xbf"):
        raise ProgramFileError(f"{loc}: not a PIR program: it is not JSON text (a legacy ProgramDesc is "
                               "protobuf: read it with pybackward.load)")
    with paused_gc():      # many small objects, few cycles: generational passes would only cost time
        obj = decode_json(data, source)
        version, trainable = check_header(obj, loc)
        if version < versions.CURRENT:
            versions.upgrade(obj["program"], version, loc)
        prog = _Builder(loc, max_depth, allow_unknown_ops).build(obj["program"])
    prog.trainable, prog.file_version, prog.source = trainable, version, source
    return prog


def check_header(obj: Any, loc: str) -> tuple[int, bool | None]:
    """Check the top level and `base_code`; returns (format version, trainable)."""
    if not isinstance(obj, dict):
        raise ProgramFileError(f"{loc}: the top level is a JSON {json_kind(obj)}, not an object: not a PIR program")
    extra = set(obj) - {"base_code", "program"}
    if extra:
        raise ProgramFileError(f"{loc}: unknown top-level key {sorted(extra)[0]!r} (a PIR program has "
                               "'base_code' and 'program')")
    base = obj.get("base_code")
    if not isinstance(base, dict):
        raise ProgramFileError(f"{loc}: no 'base_code' object: not a PIR program")
    if base.get("magic") != "pir":
        raise ProgramFileError(f"{loc}: base_code.magic is {base.get('magic')!r}, not 'pir': not a PIR program")
    extra = set(base) - {"magic", "version", "trainable"}
    if extra:
        raise ProgramFileError(f"{loc}: unknown key {sorted(extra)[0]!r} in base_code")
    version = base.get("version")
    if type(version) is not int:
        raise ProgramFileError(f"{loc}: base_code.version is {version!r}, not a format version number")
    versions.check_version(version, loc)
    trainable = base.get("trainable")
    if trainable is not None and type(trainable) is not bool:
        raise ProgramFileError(f"{loc}: base_code.trainable is {trainable!r}, not true or false")
    if "program" not in obj:
        raise ProgramFileError(f"{loc}: no 'program' object")
    return version, trainable


class _Builder(Decoder):
    """One read: the value scopes and the op structure (types and attributes: `Decoder`)."""

    def __init__(self, loc: str, max_depth: int, allow_unknown_ops: bool) -> None:
        super().__init__(loc)
        self.max_depth, self.allow_unknown = max_depth, allow_unknown_ops
        self.known = known_ops()
        self.defined: dict[int, tuple[Value, int, str]] = {}   # id -> (value, op index, op name)
        self.names: dict[str, str] = {}                          # "1.matmul" -> "pd_op.matmul", checked
        self.visible: dict[int, Value] = {0: None}  # type: ignore[dict-item]

    # ------------------------------------------------------------------ structure
    def build(self, pj: Any) -> Program:
        if not isinstance(pj, dict) or set(pj) != {"regions"}:
            self.fail("'program' must be an object with just 'regions'")
        regions = pj["regions"]
        if not isinstance(regions, list) or len(regions) != 1:
            self.fail(f"'program.regions' must hold exactly one region, not "
                      f"{len(regions) if isinstance(regions, list) else json_kind(regions)}")
        blocks = self.region_blocks(regions[0], "the program's region")
        if len(blocks) != 1:
            self.fail(f"the program's region must hold exactly one block, not {len(blocks)}")
        prog = Program()
        top = prog.block
        bj = self.block_json(blocks[0])
        if bj["args"] or bj.get("kwargs"):
            self.fail("the top block has block arguments: only a while body has them")
        self.walk(top, bj["ops"])
        return prog

    def region_blocks(self, rj: Any, what: str) -> list:
        if not isinstance(rj, dict) or set(rj) != {"#", "blocks"}:
            self.fail(f"{what} must be an object with '#' and 'blocks'")
        if not isinstance(rj["#"], str) or not isinstance(rj["blocks"], list):
            self.fail(f"{what}: '#' must be a string and 'blocks' an array")
        return rj["blocks"]

    def block_json(self, bj: Any) -> dict:
        if not isinstance(bj, dict) or not {"#", "args", "ops"} <= bj.keys() or not bj.keys() <= BLOCK_KEYS:
            self.fail("a block must be an object with '#', 'args' and 'ops' (and maybe 'kwargs')")
        if not isinstance(bj["#"], str) or not isinstance(bj["args"], list) or not isinstance(bj["ops"], list) \
                or not isinstance(bj.get("kwargs", []), list):
            self.fail("a block's '#' must be a string and its 'args', 'kwargs' and 'ops' arrays")
        return bj

    def walk(self, top: Block, top_ops: list) -> None:
        """Build every op, nested ones included, with an explicit stack of open blocks.

        A frame is [block, ops json, next index, op whose regions are being read,
        ids defined in the block, nesting depth]. An op's results become visible
        after its regions.
        """
        stack: list[list[Any]] = [[top, top_ops, 0, None, [], 0]]
        counter = 0
        while stack:
            frame = stack[-1]
            block, ops_json, i, pending, local, depth = frame
            if pending is not None:
                self.define_results(pending[0], pending[1], pending[2], local)
                frame[3] = None
            if i == len(ops_json):
                for vid in local:
                    del self.visible[vid]
                stack.pop()
                continue
            frame[2] = i + 1
            self.op_index, self.op_name = counter, None
            op, nested = self.op(ops_json[i], counter)
            counter += 1
            op.block = block
            block.ops.append(op)
            if not nested:
                self.define_results(op, counter - 1, op.name, local)
                continue
            if depth >= self.max_depth:
                self.fail(f"regions nested more than {self.max_depth} deep (max_depth)")
            frame[3] = (op, counter - 1, op.name)
            for b, bj in reversed(nested):
                inner: list[int] = []
                self.block_args(b, bj, inner)
                stack.append([b, bj["ops"], 0, None, inner, depth + 1])

    def define_results(self, op: Operation, index: int, name: str, local: list) -> None:
        for v in op.results:
            vid = v.id
            if vid in self.defined:
                _, first, first_name = self.defined[vid]
                self.op_index, self.op_name = index, name
                self.fail(f"value %{vid} is defined twice (first by op {first} ({first_name}))")
            self.defined[vid] = (v, index, name)
            self.visible[vid] = v
            local.append(vid)

    def block_args(self, block: Block, bj: dict, local: list) -> None:
        for key, target in (("args", block.args), ("kwargs", block.kwargs)):
            for aj in bj.get(key, ()):
                keys = {"#", "TT", "key"} if key == "kwargs" else {"#", "TT"}
                if not isinstance(aj, dict) or set(aj) != keys:
                    self.fail(f"a block argument must be an object with {' and '.join(sorted(keys))}")
                vid = aj["#"]
                if type(vid) is not int or vid >= 0:
                    self.fail(f"block argument id {vid!r} must be a negative integer")
                if vid in self.defined:
                    self.fail(f"value %{vid} is defined twice (block arguments)")
                v = Value(self.type(aj["TT"]), block, len(target), vid)
                if key == "kwargs":
                    if not isinstance(aj["key"], str):
                        self.fail("a keyword block argument's 'key' must be a string")
                    v.key = aj["key"]
                target.append(v)
                self.defined[vid] = (v, self.op_index or 0, "block argument")
                self.visible[vid] = v
                local.append(vid)

    # ------------------------------------------------------------------ ops
    def op(self, oj: Any, index: int) -> tuple[Operation, list]:
        if type(oj) is not dict:
            self.fail(f"an op must be a JSON object, not {json_kind(oj)}")
        tag = oj.get("#")
        if tag == "p":
            self.op_name = "builtin.parameter"
            return self.parameter_op(oj), []
        name = self.names.get(tag) if type(tag) is str else None
        if name is None:
            name = self.names[tag] = self.op_full_name(tag)
        self.op_name = name
        keys = oj.keys()
        if not keys <= OP_KEYS or not keys >= _NEEDED:
            bad = sorted(keys - OP_KEYS) or sorted(_NEEDED - keys)
            self.fail(f"{'unknown key' if keys - OP_KEYS else 'missing key'} {bad[0]!r} in the op")
        op = Operation.bare(name)
        operands = oj["I"]
        if type(operands) is not list:
            self.fail("'I' (operands) must be an array")
        visible = self.visible
        ops_in = op.operands
        for k, ij in enumerate(operands):
            try:
                vid = ij["%"]
                v = visible[vid]
            except (KeyError, TypeError):
                self.bad_operand(ij, k)
            if type(vid) is not int or len(ij) != 1:
                self.bad_operand(ij, k)
            ops_in.append(v)
            if v is not None:
                v.uses.append((op, k))
        results = oj["O"]
        if type(results) is not list:
            self.fail("'O' (results) must be an array")
        res = op.results
        for k, rj in enumerate(results):
            if type(rj) is not dict or len(rj) != 2 or "%" not in rj or "TT" not in rj:
                self.fail(f"result {k} must be an object with '%' and 'TT'")
            vid = rj["%"]
            if type(vid) is not int or vid <= 0:
                self.fail(f"result {k} has id {vid!r}: a result's id is a positive integer")
            res.append(Value(self.type(rj["TT"]), op, k, vid))
        op.attrs = self.attr_map(oj["A"], "A")
        if "OA" in oj:
            op.result_attrs = self.attr_map(oj["OA"], "OA")
        else:
            op.write_result_attrs = False
        nested: list = []
        if "regions" in oj:
            nested = self.regions(op, oj["regions"])
        else:
            self.check_regions(op, [])
        return op, nested

    def op_full_name(self, tag: Any) -> str:
        """`pd_op.matmul` for "1.matmul", after checking the dialect id and that Paddle knows the op."""
        if type(tag) is not str:
            self.fail(f"an op's '#' must be its name, not {tag!r}")
        did, dot, short = tag.partition(".")
        dialect = DIALECT_IDS.get(did)
        if dialect is None or not dot:
            self.fail(f"op name {tag!r}: unknown dialect id {did!r} (a PIR file names ops '<id>.<op>' with ids "
                      "0 builtin, 1 pd_op, 2 cf, 3 custom_op, 4 pd_dist)")
        name = f"{dialect}.{short}"
        self.op_name = name
        if name not in self.known and not self.allow_unknown:
            self.fail(f"unknown op {name!r}: Paddle 3.3.1 registers no such op")
        return name

    def bad_operand(self, ij: Any, k: int) -> NoReturn:
        vid = ij.get("%") if isinstance(ij, dict) else None
        if type(vid) is not int or not isinstance(ij, dict) or len(ij) != 1:
            self.fail(f"operand {k} must be an object {{\"%\": <value id>}}, not {json.dumps(ij)[:60]}")
        if vid in self.defined:
            _, at, at_name = self.defined[vid]
            self.fail(f"operand {k} is value %{vid}, defined by op {at} ({at_name}) in a region this op "
                      "cannot see")
        self.fail(f"operand {k} is value %{vid}, which no op or block argument before it defines")

    def regions(self, op: Operation, rjs: Any) -> list:
        if type(rjs) is not list:
            self.fail("'regions' must be an array")
        nested = []
        for rj in rjs:
            region = Region(op)
            op.regions.append(region)
            for bj in self.region_blocks(rj, f"region {len(op.regions) - 1}"):
                bj = self.block_json(bj)
                nested.append((region.add_block(), bj))
        self.check_regions(op, [bj for _, bj in nested])
        return nested

    def check_regions(self, op: Operation, blocks: list[dict]) -> None:
        """The region shapes Paddle's control-flow ops need."""
        name, n = op.name, len(op.regions)
        shape = [len(r.blocks) for r in op.regions]
        if name == "pd_op.if":
            if shape != [1, 1]:
                self.fail(f"pd_op.if needs two regions of one block each, not {shape}")
        elif name in ("pd_op.while", "pd_op.pylayer"):
            if shape != [1]:
                self.fail(f"{name} needs one region of one block, not {shape}")
        elif n:
            if 0 in shape:
                self.fail("a region without blocks")
        for bj in blocks:
            nargs = len(bj["args"]) + len(bj.get("kwargs", ()))
            if name == "pd_op.while":
                if nargs != len(op.results) or len(op.operands) != len(op.results) + 1:
                    self.fail(f"pd_op.while has {len(op.operands)} operands, {len(op.results)} results and "
                              f"{nargs} body arguments: it needs n+1, n and n (condition, loop variables)")
            elif nargs:
                self.fail(f"a block of {name} has block arguments: only a while body has them")

    def parameter_op(self, oj: dict) -> Operation:
        """The compressed `builtin.parameter` ("#": "p"): attributes by position."""
        if not oj.keys() <= PARAM_KEYS or not {"A", "O"} <= oj.keys():
            bad = sorted(oj.keys() - PARAM_KEYS) or sorted({"A", "O"} - oj.keys())
            self.fail(f"parameter op ('p'): {'unknown' if oj.keys() - PARAM_KEYS else 'missing'} key {bad[0]!r}")
        a = oj["A"]
        if type(a) is not list or len(a) != 4 or type(a[3]) is not str or not _flags(a[0], a[1], a[2]):
            self.fail(f"parameter op ('p'): 'A' must be [is_distributed, is_parameter, need_clip, name] with "
                      f"three 0/1 flags, not {json.dumps(a)[:80]}")
        rj = oj["O"]
        if type(rj) is not dict or len(rj) != 2 or "%" not in rj or "TT" not in rj:
            self.fail("parameter op ('p'): 'O' must be one object with '%' and 'TT'")
        vid = rj["%"]
        if type(vid) is not int or vid <= 0:
            self.fail(f"parameter op ('p') has result id {vid!r}: a result's id is a positive integer")
        op = Operation.bare("builtin.parameter")
        op.results.append(Value(self.type(rj["TT"]), op, 0, vid))
        op.attrs = {"is_distributed": _FLAG[a[0]], "is_parameter": _FLAG[a[1]], "need_clip": _FLAG[a[2]],
                    "parameter_name": Attr("0.a_str", a[3])}
        for key in ("DA", "QA"):
            if oj.get(key):
                for name, attr in self.attr_map(oj[key], key).items():
                    op.attrs[name] = attr
            elif key in oj and oj[key] != []:
                self.fail(f"parameter op ('p'): '{key}' must be an array of attributes")
        if "OA" in oj:
            oa = oj["OA"]
            if type(oa) is not list or len(oa) != 3 or not _flags(*oa):
                self.fail(f"parameter op ('p'): 'OA' must be [persistable, stop_gradient, trainable] as 0/1, "
                          f"not {json.dumps(oa)[:60]}")
            op.result_attrs = {"persistable": _FLAG[oa[0]], "stop_gradient": _FLAG[oa[1]], "trainable": _FLAG[oa[2]]}
        else:
            op.write_result_attrs = False
        return op
