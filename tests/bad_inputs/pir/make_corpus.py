"""Generate the PIR bad-input corpus: the files in this directory and cases.json.

    python tests/bad_inputs/pir/make_corpus.py            # (re)write the corpus
    python tests/bad_inputs/pir/make_corpus.py --check    # exit 1 if it is stale

Every file is derived deterministically from the golden programs in
testdata/pir/ (or written from nothing), so the corpus is reproducible;
tests/pir/test_pir_bad_inputs.py checks that the committed files equal what
this script makes. Inputs too big to commit (a nesting bomb 100,000 regions
deep, a 300 MB file) are made at test time by `generated()`.

cases.json lists one case per entry:

* ``id`` - the test id; ``what`` - the problem, in words;
* ``file`` - the corpus file (or ``generated``: the name of a `generated()` entry);
* ``fragments`` - strings the one-line ProgramFileError message must contain
  (``{file}`` is the file's path): the file, the op index and name, the value id;
* ``load`` - keyword arguments for `pybackward.pir.load` (limits).
"""
from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
GOLDEN = ROOT / "testdata" / "pir"

FILES: dict[str, bytes] = {}
CASES: list[dict] = []


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def top_ops(obj: dict) -> list:
    return obj["program"]["regions"][0]["blocks"][0]["ops"]


def case(cid: str, what: str, data: bytes | None, fragments: list[str], name: str | None = None,
         load: dict | None = None, generated: str | None = None) -> None:
    entry: dict[str, Any] = {"id": cid, "what": what}
    if generated is not None:
        entry["generated"] = generated
    else:
        fname = name or f"{cid}.json"
        FILES[fname] = data  # type: ignore[assignment]
        entry["file"] = fname
    entry["fragments"] = ["{file}"] + fragments
    if load:
        entry["load"] = load
    CASES.append(entry)


def mutate(base: str, fn: Callable[[dict], None]) -> bytes:
    obj = copy.deepcopy(golden(base))
    fn(obj)
    return compact(obj)


def op_of(obj: dict, name: str, nth: int = 0) -> tuple[int, dict]:
    """(file-order index, op) of the nth top-level op called `name` (compressed, e.g. "1.add")."""
    k = 0
    for i, op in enumerate(top_ops(obj)):
        if op["#"] == name:
            if k == nth:
                return i, op
            k += 1
    raise KeyError(name)


def build() -> tuple[dict[str, bytes], list[dict]]:
    FILES.clear()
    CASES.clear()
    mlp = golden("mlp")
    i_add, add = op_of(mlp, "1.add")          # op 7 (pd_op.add) in mlp.json
    i_mm, _ = op_of(mlp, "1.matmul")
    add_id = add["O"][0]["%"]

    # ---------------------------------------------------------------- not JSON / not PIR
    text = (GOLDEN / "mlp.json").read_bytes()
    case("empty", "an empty file", b"", ["empty file"])
    case("whitespace", "only whitespace", b" \n\t\n", ["empty file"])
    case("malformed_json", "a missing comma between two keys",
         b'{"base_code":{"magic":"pir" "version":4},"program":{}}', ["not valid JSON", "line 1"])
    case("truncated", "mlp.json cut in the middle", text[: len(text) // 2], ["truncated JSON"])
    case("not_utf8", "a Latin-1 byte in a string", text.replace(b'"x"', b'"\xe9"', 1), ["not UTF-8", "offset"])
    case("lone_surrogate", "a data name with a lone UTF-16 surrogate escape",
         text.replace(b'"x"', b'"\\ud800"', 1), ["lone UTF-16 surrogate"])
    case("top_array", "a JSON array at the top", b"[1, 2, 3]", ["JSON array", "not a PIR program"])
    case("top_string", "a JSON string at the top", b'"pir"', ["JSON string", "not a PIR program"])
    case("legacy_pb", "a legacy ProgramDesc (protobuf) handed to the PIR reader",
         (ROOT / "testdata" / "programs" / "fit_a_line" / "forward.pb").read_bytes()
         if (ROOT / "testdata" / "programs" / "fit_a_line" / "forward.pb").exists() else b"\n\x10\x0a\x0e\x08\x00",
         ["not a PIR program", "legacy ProgramDesc"], name="legacy_pb.pdmodel")
    case("bad_magic", "base_code.magic is 'pil'", mutate("mlp", lambda o: o["base_code"].update(magic="pil")),
         ["magic", "'pil'", "not a PIR program"])
    case("no_base_code", "no base_code at all", mutate("mlp", lambda o: o.pop("base_code")), ["base_code"])
    case("version_5", "format version 5, newer than Paddle 3.3.1's",
         mutate("mlp", lambda o: o["base_code"].update(version=5)), ["version 5", "newer"])
    case("version_0", "format version 0 (develop builds)",
         mutate("mlp", lambda o: o["base_code"].update(version=0)), ["version 0", "develop"])
    case("version_string", "the version is a string",
         mutate("mlp", lambda o: o["base_code"].update(version="4")), ["version", "'4'"])
    case("trainable_string", "trainable is a string",
         mutate("mlp", lambda o: o["base_code"].update(trainable="yes")), ["trainable", "'yes'"])
    case("two_blocks", "the program's region has two blocks",
         mutate("mlp", lambda o: o["program"]["regions"][0]["blocks"].append(
             {"#": "block_9", "args": [], "ops": []})), ["exactly one block"])
    case("nan_literal", "a NaN literal where Paddle writes \"VD\": \"NaN\"",
         text.replace(b'"D":2.0', b'"D":NaN', 1), ["NaN", "VD"])
    case("infinity_literal", "a -Infinity literal", text.replace(b'"D":2.0', b'"D":-Infinity', 1),
         ["-Infinity", "VD"])

    # ---------------------------------------------------------------- ops
    def set_name(name: str) -> Callable[[dict], None]:
        return lambda o: top_ops(o)[i_mm].update({"#": name})

    case("unknown_dialect_id", "an op named '7.matmul' (dialect ids are 0-4)", mutate("mlp", set_name("7.matmul")),
         [f"op {i_mm}", "unknown dialect id '7'"])
    case("unknown_dialect_name", "an op written under a dialect name Paddle cannot read ('onednn_op.matmul')",
         mutate("mlp", set_name("onednn_op.matmul")), [f"op {i_mm}", "unknown dialect id 'onednn_op'"])
    case("unknown_op", "pd_op.matmul_v9: Paddle loads it as a nameless op; pybackward refuses",
         mutate("mlp", set_name("1.matmul_v9")), [f"op {i_mm} (pd_op.matmul_v9)", "unknown op"])
    case("custom_op", "a custom_op op (dialect 3): not registered without its library",
         mutate("mlp", set_name("3.my_relu")), [f"op {i_mm} (custom_op.my_relu)", "unknown op"])
    case("dangling_operand", "pd_op.add reads value %999, which nothing defines",
         mutate("mlp", lambda o: top_ops(o)[i_add]["I"].__setitem__(0, {"%": 999})),
         [f"op {i_add} (pd_op.add)", "%999", "no op or block argument before it defines"])
    case("use_before_def", "pd_op.matmul reads the result of the add after it",
         mutate("mlp", lambda o: top_ops(o)[i_mm]["I"].__setitem__(0, {"%": add_id})),
         [f"op {i_mm} (pd_op.matmul)", f"%{add_id}"])
    case("doubly_defined", "pd_op.add's result reuses the id of matmul's",
         mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0].update({"%": top_ops(o)[i_mm]["O"][0]["%"]})),
         [f"op {i_add} (pd_op.add)", f"%{mlp['program']['regions'][0]['blocks'][0]['ops'][i_mm]['O'][0]['%']}",
          "defined twice", f"op {i_mm} (pd_op.matmul)"])
    case("result_id_zero", "a result with id 0 (the null value's id)",
         mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0].update({"%": 0})),
         [f"op {i_add} (pd_op.add)", "result 0", "positive integer"])
    case("operand_not_object", "an operand written as a bare number",
         mutate("mlp", lambda o: top_ops(o)[i_add]["I"].__setitem__(1, 4)),
         [f"op {i_add} (pd_op.add)", "operand 1"])
    case("missing_operands", "an op without 'I'", mutate("mlp", lambda o: top_ops(o)[i_add].pop("I")),
         [f"op {i_add} (pd_op.add)", "missing key 'I'"])
    case("unknown_op_key", "an op with a key Paddle never writes",
         mutate("mlp", lambda o: top_ops(o)[i_add].update({"X": 1})), [f"op {i_add} (pd_op.add)", "'X'"])
    case("op_not_object", "an op that is a string",
         mutate("mlp", lambda o: top_ops(o).__setitem__(i_add, "pd_op.add")), [f"op {i_add}", "JSON object"])

    # ---------------------------------------------------------------- types and attributes
    case("wrong_type_tag", "a result type tagged 0.t_tensor",
         mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0]["TT"].update({"#": "0.t_tensor"})),
         [f"op {i_add} (pd_op.add)", "unknown type tag '0.t_tensor'"])
    case("type_unknown_dialect", "a type tagged 9.t_f32",
         mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0]["TT"].update({"#": "9.t_f32"})),
         [f"op {i_add} (pd_op.add)", "unknown dialect id"])
    case("dtensor_short_D", "a dense tensor type with 4 fields in 'D' (no offset)",
         mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0]["TT"]["D"].pop()),
         [f"op {i_add} (pd_op.add)", "[dtype, dims, layout, lod, offset]"])
    case("dims_not_ints", "dims holding a string",
         mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0]["TT"]["D"].__setitem__(1, [-1, "8"])),
         [f"op {i_add} (pd_op.add)", "dims"])
    case("bad_layout", "layout NCWH", mutate("mlp", lambda o: top_ops(o)[i_add]["O"][0]["TT"]["D"].__setitem__(
        2, "NCWH")), [f"op {i_add} (pd_op.add)", "layout 'NCWH'"])
    case("wrong_attr_tag", "an attribute tagged 0.a_f33",
         mutate("mlp", lambda o: top_ops(o)[i_mm]["A"][0]["AT"].update({"#": "0.a_f33"})),
         [f"op {i_mm} (pd_op.matmul)", "transpose_x", "unknown attribute tag '0.a_f33'"])
    case("attr_wrong_D", "a bool attribute holding a number",
         mutate("mlp", lambda o: top_ops(o)[i_mm]["A"][0]["AT"].update({"D": 1})),
         [f"op {i_mm} (pd_op.matmul)", "transpose_x", "true or false"])
    case("i32_out_of_range", "an a_i32 attribute of 2**40 (Paddle silently keeps 0)",
         mutate("mlp", lambda o: top_ops(o)[i_mm]["A"].append({"AT": {"#": "0.a_i32", "D": 1 << 40}, "N": "n"})),
         [f"op {i_mm} (pd_op.matmul)", "'n'", "int32"])
    case("attr_twice", "the same attribute twice",
         mutate("mlp", lambda o: top_ops(o)[i_mm]["A"].append(top_ops(o)[i_mm]["A"][0])),
         [f"op {i_mm} (pd_op.matmul)", "'transpose_x' is given twice"])
    case("vd_on_int", "\"VD\" on an integer attribute",
         mutate("mlp", lambda o: top_ops(o)[i_mm]["A"][0].update({"AT": {"#": "0.a_i32", "VD": "INF"}})),
         [f"op {i_mm} (pd_op.matmul)", "'VD'"])
    case("vd_lowercase", "\"VD\": \"inf\" (Paddle spells INF)",
         mutate("mlp", _full_value({"#": "0.a_f64", "VD": "inf"})),
         ["(pd_op.full)", "'VD'", "'inf'"])
    case("bad_place", "a place of allocation type 6, which Paddle does not know",
         mutate("mlp", _full_attr("place", {"#": "1.a_place", "D": [6, 0, ""]})), ["(pd_op.full)", "place"])
    case("bad_dtype", "a dtype attribute 'float128'",
         mutate("mlp", _full_attr("dtype", {"#": "1.a_dtype", "D": "float128"})), ["(pd_op.full)", "dtype"])
    case("attr_array_bomb", "attribute arrays nested 40 deep", mutate("mlp", _deep_array(40)),
         [f"op {i_mm} (pd_op.matmul)", "nested more than 32"])
    case("param_bad_flags", "a compressed parameter op with is_parameter 2",
         mutate("mlp", lambda o: top_ops(o)[0]["A"].__setitem__(1, 2)), ["op 0 (builtin.parameter)", "0/1"])
    case("param_O_list", "a compressed parameter op whose 'O' is a list (other ops' form)",
         mutate("mlp", lambda o: top_ops(o)[0].update({"O": [top_ops(o)[0]["O"]]})),
         ["op 0 (builtin.parameter)", "'O'"])

    # ---------------------------------------------------------------- regions and block arguments
    cond = golden("cond")
    i_if, _ = op_of(cond, "1.if")
    case("top_block_args", "block arguments on the program's top block",
         mutate("mlp", lambda o: o["program"]["regions"][0]["blocks"][0]["args"].append(
             {"#": -1, "TT": {"#": "0.t_f32"}})), ["top block has block arguments"])
    case("if_block_args", "block arguments in a pd_op.if branch",
         mutate("cond", lambda o: top_ops(o)[i_if]["regions"][0]["blocks"][0]["args"].append(
             {"#": -1, "TT": {"#": "0.t_f32"}})), [f"op {i_if} (pd_op.if)", "block arguments"])
    case("if_one_region", "pd_op.if with one region", mutate("cond", lambda o: top_ops(o)[i_if]["regions"].pop()),
         [f"op {i_if} (pd_op.if)", "two regions"])
    case("escaped_value", "a top-level op reads a value defined inside pd_op.if's branch",
         mutate("cond", _escape(i_if)), ["cannot see", "defined by op"])
    wl = golden("while")
    i_wh, _ = op_of(wl, "1.while")
    case("while_arg_count", "a while body with one block argument too few",
         mutate("while", lambda o: top_ops(o)[i_wh]["regions"][0]["blocks"][0]["args"].pop()),
         [f"op {i_wh} (pd_op.while)", "body arguments"])
    case("block_arg_positive", "a block argument with a positive id",
         mutate("while", lambda o: top_ops(o)[i_wh]["regions"][0]["blocks"][0]["args"][0].update({"#": 5})),
         [f"op {i_wh} (pd_op.while)", "negative integer"])

    # ---------------------------------------------------------------- limits (made at test time)
    case("nesting_bomb", "pd_op.if nested 100,000 deep: past the JSON parser's limit, no RecursionError",
         None, ["nested deeper"], generated="nesting_bomb")
    case("nesting_150", "pd_op.if nested 150 deep: past max_depth (100)", None,
         ["op 101 (pd_op.if)", "nested more than 100"], generated="nesting_150")
    case("huge_file", "a 300 MB file (sparse): refused before it is read", None,
         ["bytes is past the limit"], generated="huge_file")
    case("size_limit", "mlp.json read with max_bytes=1000", text, ["past the limit of 1000"],
         name="size_limit.json", load={"max_bytes": 1000})
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return dict(FILES), list(CASES)


def _full_value(at: dict) -> Callable[[dict], None]:
    return _full_attr("value", at)


def _full_attr(name: str, at: dict) -> Callable[[dict], None]:
    def fn(o: dict) -> None:
        _, op = op_of(o, "1.full")
        for a in op["A"]:
            if a["N"] == name:
                a["AT"] = at
    return fn


def _deep_array(depth: int) -> Callable[[dict], None]:
    def fn(o: dict) -> None:
        at: dict = {"#": "0.a_bool", "D": True}
        for _ in range(depth):
            at = {"#": "0.a_array", "D": [at]}
        _, op = op_of(o, "1.matmul")
        op["A"].append({"AT": at, "N": "deep"})
    return fn


def _escape(i_if: int) -> Callable[[dict], None]:
    def fn(o: dict) -> None:
        ops = top_ops(o)
        inner = ops[i_if]["regions"][0]["blocks"][0]["ops"][0]["O"][0]["%"]
        for op in ops[i_if + 1:]:
            if op.get("I"):
                op["I"][0] = {"%": inner}
                return
    return fn


def nested_ifs(depth: int) -> bytes:
    """A program of `depth` pd_op.if ops, each the first op of the previous one's true branch."""
    data = {"#": "1.data", "A": [{"AT": {"#": "0.a_str", "D": "c"}, "N": "name"}], "I": [],
            "O": [{"%": 1, "TT": {"#": "0.t_dtensor", "D": [{"#": "0.t_bool"}, [], "NCHW", [], 0]}}]}
    text = ['{"base_code":{"magic":"pir","trainable":true,"version":4},"program":{"regions":[{"#":"region_0",'
            '"blocks":[{"#":"block_0","args":[],"ops":[', json.dumps(data, separators=(",", ":")), ","]
    for k in range(depth):
        text.append(f'{{"#":"1.if","A":[],"I":[{{"%":1}}],"O":[],"regions":[{{"#":"r{k}a","blocks":[{{"#":"b{k}a",'
                    '"args":[],"ops":[')
    text.append('{"#":"2.yield","A":[],"I":[],"O":[]}')
    for k in range(depth, 0, -1):
        text.append(f']}}]}},{{"#":"r{k}b","blocks":[{{"#":"b{k}b","args":[],"ops":[{{"#":"2.yield","A":[],"I":[],'
                    f'"O":[]}}]}}]}}]}}')
        if k > 1:
            text.append(',{"#":"2.yield","A":[],"I":[],"O":[]}')
    text.append("]}]}]}}")
    return "".join(text).encode()


def generated(name: str, directory: Path) -> Path:
    """Make a generated case's input file in `directory`; returns its path."""
    path = directory / f"{name}.json"
    if name == "nesting_bomb":
        path.write_bytes(nested_ifs(100_000))
    elif name == "nesting_150":
        path.write_bytes(nested_ifs(150))
    elif name == "huge_file":
        with open(path, "wb") as f:
            f.write(b'{"base_code":{"magic":"pir","version":4},"program":')
            f.truncate(300 * 1000 * 1000)
    else:
        raise KeyError(name)
    return path


def manifest_bytes(cases: list[dict]) -> bytes:
    return (json.dumps({"cases": cases}, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def main(argv: list[str]) -> int:
    files, cases = build()
    wanted = dict(files)
    wanted["cases.json"] = manifest_bytes(cases)
    keep = set(wanted) | {"make_corpus.py", "README.md", "__pycache__"}
    if "--check" in argv:
        stale = [n for n, b in wanted.items() if not (HERE / n).exists() or (HERE / n).read_bytes() != b]
        extra = [p.name for p in HERE.iterdir() if p.name not in keep]
        if stale or extra:
            print(f"corpus is stale: differs {stale}, not generated {extra}", file=sys.stderr)
            return 1
        print(f"corpus up to date: {len(cases)} cases, {len(files)} files")
        return 0
    for p in HERE.iterdir():
        if p.name not in keep and p.is_file():
            p.unlink()
    for name, data in wanted.items():
        (HERE / name).write_bytes(data)
    print(f"wrote {len(cases)} cases, {len(files)} files to {HERE}")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main(sys.argv[1:]))
