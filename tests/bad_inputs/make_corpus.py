"""Generate the bad-input corpus: the files in this directory and cases.json.

    python tests/bad_inputs/make_corpus.py            # (re)write the corpus
    python tests/bad_inputs/make_corpus.py --check    # exit 1 if it is stale

Every file is derived deterministically from testdata/programs (or built
from nothing), so the corpus is reproducible; tests/test_bad_inputs.py checks
that the committed files equal what this script makes.

cases.json lists one case per entry:

* ``id``        - the test id; ``what`` - the problem, in words;
* ``files``     - corpus files the case needs (copied into a fresh directory);
* ``cmd``       - the `pybackward` arguments. ``{name}`` is the copied corpus
  file ``name``, ``{out}`` an output path that must not be created,
  ``{dir}`` the directory, ``{testdata}`` the repository's testdata/;
* ``exit``      - the expected exit code (a list: any of them);
* ``fragments`` - strings the single stderr line must contain (same
  placeholders), naming the file / block / op / var as applicable;
* ``timeout``   - seconds before the command counts as hung (and is killed);
* ``api``       - instead of ``cmd``: the name of a Python-API check in
  tests/test_bad_inputs.py (``API_CASES``);
* ``xfail``     - set when pybackward does not behave yet: the exact bug.
  The test is then a strict xfail, so it fails the day the bug is fixed.
"""
from __future__ import annotations

import gzip
import json
import random
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROGRAMS = ROOT / "testdata" / "programs"
sys.path.insert(0, str(ROOT))

from pybackward._proto import framework_pb2 as pb  # noqa: E402
from google.protobuf import text_format  # noqa: E402

FILES: dict[str, bytes] = {}
CASES: list[dict] = []

FIT_PB = "{testdata}/programs/fit_a_line"
FIT_RUN = ["--params", f"{FIT_PB}/params.npz", "--feeds", f"{FIT_PB}/feeds.npz"]


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def src(case: str, name: str = "forward.pb") -> bytes:
    return (PROGRAMS / case / name).read_bytes()


def desc(case: str, name: str = "forward.pb") -> pb.ProgramDesc:
    d = pb.ProgramDesc()
    d.ParseFromString(src(case, name))
    return d


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_len(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_int(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def with_block0_extra(case: str, extra_block_fields: bytes) -> bytes:
    """The program with raw fields appended to block 0 (protobuf merges them:
    a repeated field gets one more element). For values the generated API
    refuses to set, such as enum numbers the schema does not define."""
    d = desc(case)
    b0 = d.blocks[0].SerializePartialToString() + extra_block_fields
    rest = pb.ProgramDesc()
    rest.CopyFrom(d)
    del rest.blocks[0]
    return field_len(1, b0) + rest.SerializePartialToString()


def raw_var(name: str, var_type: int, data_type: int | None, dims=()) -> bytes:
    """A VarDesc written by hand (VarType.type and TensorDesc.data_type as given)."""
    vt = field_int(1, var_type)
    if data_type is not None:
        td = field_int(1, data_type) + b"".join(field_int(2, d) for d in dims)
        vt += field_len(3, field_len(1, td))
    return field_len(1, name.encode()) + field_len(2, vt)


def edited(case: str, edit, name: str = "forward.pb") -> bytes:
    d = desc(case, name)
    edit(d)
    return d.SerializePartialToString()


def find_var(block: pb.BlockDesc, name: str) -> pb.VarDesc:
    for v in block.vars:
        if v.name == name:
            return v
    raise KeyError(name)


def find_op(block: pb.BlockDesc, op_type: str) -> tuple[int, pb.OpDesc]:
    for i, op in enumerate(block.ops):
        if op.type == op_type:
            return i, op
    raise KeyError(op_type)


def set_slot(op: pb.OpDesc, slot: str, args, outputs: bool = False) -> None:
    for v in (op.outputs if outputs else op.inputs):
        if v.parameter == slot:
            del v.arguments[:]
            v.arguments.extend(args)
            return
    raise KeyError(slot)


def attr(op: pb.OpDesc, name: str) -> pb.OpDesc.Attr:
    for a in op.attrs:
        if a.name == name:
            return a
    raise KeyError(name)


def add(id: str, what: str, files: dict[str, bytes] | list[str], cmd: list[str] | None,
        fragments: list[str], exit=2, xfail: str | None = None, api: str | None = None,
        timeout: int = 120) -> None:
    if isinstance(files, dict):
        for k, v in files.items():
            assert FILES.get(k, v) == v, f"two different files named {k}"
            FILES[k] = v
        names = list(files)
    else:
        names = list(files)
    CASES.append({"id": id, "what": what, "files": names, "cmd": cmd, "api": api,
                  "exit": exit, "fragments": fragments, "timeout": timeout, "xfail": xfail})


def show(f: str) -> list[str]:
    return ["show", "{" + f + "}"]


def append(f: str, loss: str = "mean_0.tmp_0", *extra: str) -> list[str]:
    return ["append", "--loss", loss, *extra, "{" + f + "}", "{out}"]


# --------------------------------------------------------------------------
# The loader: bytes that are not a program
# --------------------------------------------------------------------------
def loader_cases() -> None:
    fit = src("fit_a_line")
    rnd = random.Random(7)
    add("empty", "an empty file", {"empty.pb": b""}, show("empty.pb"), ["{empty.pb}", "empty file"])
    add("random_300", "300 random bytes", {"random_300.pb": bytes(rnd.randrange(256) for _ in range(300))},
        show("random_300.pb"), ["{random_300.pb}", "ProgramDesc"])
    add("random_16k", "16 KiB of random bytes, through append",
        {"random_16k.pb": bytes(rnd.randrange(256) for _ in range(16384))},
        append("random_16k.pb"), ["{random_16k.pb}", "ProgramDesc"])
    for cut, cmd in ((1, show), (5, append), (len(fit) // 3, show), (2 * len(fit) // 3, append),
                     (len(fit) - 1, show)):
        f = f"fit_truncated_{cut}.pb"
        add(f"truncated_at_{cut}", f"fit_a_line/forward.pb cut after {cut} of {len(fit)} bytes",
            {f: fit[:cut]}, cmd(f), ["{" + f + "}", "truncated or corrupt"])
    # Cut exactly between blocks: a well-formed ProgramDesc that lost block 1.
    cond = desc("cond_block")
    only0 = pb.ProgramDesc()
    only0.blocks.add().CopyFrom(cond.blocks[0])
    i, _ = find_op(cond.blocks[0], "conditional_block")
    add("truncated_between_blocks", "cond_block cut after block 0: sub_block names a block that is gone",
        {"cond_block0_only.pb": only0.SerializeToString()}, show("cond_block0_only.pb"),
        ["{cond_block0_only.pb}", f"block 0, op {i} (conditional_block)", "names block 1"])
    add("gzip", "a gzip-compressed program", {"fit.pb.gz": gzip.compress(fit, mtime=0)},
        show("fit.pb.gz"), ["{fit.pb.gz}", "gzip"])
    v = pb.VarDesc(name="x")
    v.type.type = pb.VarType.DENSE_TENSOR
    v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    v.type.dense_tensor.tensor.dims.extend([2, 3])
    add("foreign_vardesc", "a valid protobuf of another message (a VarDesc)",
        {"a_vardesc.pb": v.SerializeToString()}, show("a_vardesc.pb"), ["{a_vardesc.pb}", "ProgramDesc"])
    opv = pb.OpVersionMap()
    opv.pair.add(op_name="elementwise_add").op_version.version = 1
    add("foreign_opversionmap", "a valid protobuf of another message (an OpVersionMap)",
        {"an_opversionmap.pb": opv.SerializeToString()}, append("an_opversionmap.pb"),
        ["{an_opversionmap.pb}", "block 0"])
    proto = pb.OpProto(type="relu", comment="c")
    add("text_foreign", "protobuf text format of another message",
        {"an_opproto.pbtxt": text_format.MessageToString(proto).encode()}, show("an_opproto.pbtxt"),
        ["{an_opproto.pbtxt}", "not a ProgramDesc in text format"])
    add("text_not_utf8", "a .pbtxt that is not UTF-8", {"latin1.pbtxt": b"blocks { idx: 0 } # caf\xe9\n"},
        show("latin1.pbtxt"), ["{latin1.pbtxt}", "not UTF-8"])
    fit_txt = (PROGRAMS / "fit_a_line" / "forward.pbtxt").read_bytes()
    add("text_truncated", "fit_a_line/forward.pbtxt cut in half",
        {"fit_half.pbtxt": fit_txt[: len(fit_txt) // 2]}, show("fit_half.pbtxt"),
        ["{fit_half.pbtxt}", "not a ProgramDesc in text format"])
    add("huge_length", "a block whose declared length is 2 GiB - 1 (the file is 22 bytes)",
        {"huge_length.pb": b"\x0a" + varint(2**31 - 1) + bytes(16)}, show("huge_length.pb"),
        ["{huge_length.pb}", "truncated or corrupt"])
    b0 = desc("fit_a_line").blocks[0].SerializeToString()
    add("huge_nested_length", "a var inside block 0 declaring 2^62 bytes",
        {"huge_nested_length.pb": field_len(1, b0 + b"\x1a" + varint(2**62) + b"\x0a\x01x")},
        append("huge_nested_length.pb"), ["{huge_nested_length.pb}", "truncated or corrupt"])
    add("varint_overflow", "an 11-byte varint", {"varint_overflow.pb": b"\x08" + b"\xff" * 10 + b"\x01"},
        show("varint_overflow.pb"), ["{varint_overflow.pb}", "truncated or corrupt"])
    add("deep_groups", "20000 nested protobuf groups (recursion in the parser)",
        {"deep_groups.pb": b"\x0b" * 20_000}, show("deep_groups.pb"), ["{deep_groups.pb}", "ProgramDesc"])


# --------------------------------------------------------------------------
# Well-formed protobuf, broken program
# --------------------------------------------------------------------------
def nested_conditional_blocks(depth: int, cycle: bool = False) -> bytes:
    """`depth` conditional_blocks, each in the sub-block of the one before
    (block k's parent is block k-1); the innermost scales x into o. With
    `cycle`, the innermost block also runs block 1 again (a sub_block cycle)."""
    d = pb.ProgramDesc()
    blocks = [d.blocks.add(idx=0, parent_idx=-1)]
    for k in range(1, depth + 1):
        blocks.append(d.blocks.add(idx=k, parent_idx=k - 1))

    def var(b, name, shape=(), dtype=pb.VarType.FP32, vtype=pb.VarType.DENSE_TENSOR, stop=False):
        v = b.vars.add(name=name)
        v.type.type = vtype
        if vtype == pb.VarType.DENSE_TENSOR:
            v.type.dense_tensor.tensor.data_type = dtype
            v.type.dense_tensor.tensor.dims.extend(shape)
        v.stop_gradient = stop

    def cond_op(b, k, target):
        op = b.ops.add(type="conditional_block")
        op.inputs.add(parameter="Cond", arguments=["c"])
        op.inputs.add(parameter="Input", arguments=["x"])
        op.outputs.add(parameter="Out", arguments=["o"])
        op.outputs.add(parameter="Scope", arguments=[f"scope{k}"])
        op.attrs.add(name="is_scalar_condition", type=pb.AttrType.BOOLEAN, b=True)
        op.attrs.add(name="sub_block", type=pb.AttrType.BLOCK, block_idx=target)

    b0 = blocks[0]
    var(b0, "c", (1,), pb.VarType.BOOL, stop=True)
    var(b0, "loss")
    var(b0, "o", (2, 3))
    var(b0, "x", (2, 3))
    fill = b0.ops.add(type="fill_constant")
    fill.outputs.add(parameter="Out", arguments=["c"])
    fill.attrs.add(name="dtype", type=pb.AttrType.INT, i=pb.VarType.BOOL)
    fill.attrs.add(name="shape", type=pb.AttrType.LONGS, longs=[1])
    fill.attrs.add(name="value", type=pb.AttrType.FLOAT, f=1.0)
    for k in range(depth):
        var(blocks[k], f"scope{k}", vtype=pb.VarType.STEP_SCOPES)
        cond_op(blocks[k], k, k + 1)
    inner = blocks[depth]
    scale = inner.ops.add(type="scale")
    scale.inputs.add(parameter="X", arguments=["x"])
    scale.outputs.add(parameter="Out", arguments=["o"])
    scale.attrs.add(name="scale", type=pb.AttrType.FLOAT, f=2.0)
    if cycle:
        var(inner, f"scope{depth}", vtype=pb.VarType.STEP_SCOPES)
        cond_op(inner, depth, 1)
    mean = b0.ops.add(type="reduce_mean")
    mean.inputs.add(parameter="X", arguments=["o"])
    mean.outputs.add(parameter="Out", arguments=["loss"])
    mean.attrs.add(name="reduce_all", type=pb.AttrType.BOOLEAN, b=True)
    return d.SerializeToString()


def structure_cases() -> None:
    deep = nested_conditional_blocks(600)
    x_npy = _npy_bytes((2, 3))
    recursion = ("pybackward recurses once per nesting level of sub-blocks and does not catch "
                 "RecursionError: 600 nested conditional_blocks (a valid program) end in a Python "
                 "traceback (exit 1). Where: {where}. Expected: success, or a one-line "
                 "PyBackwardError such as 'sub-blocks nested 600 deep; the limit is N' (exit 2)")
    add("deep_subblocks_append", "600 nested conditional_blocks (Python recursion), through append",
        {"nested_600.pb": deep}, append("nested_600.pb", "loss"), ["{nested_600.pb}", "block"], exit=[0, 2])
    add("deep_subblocks_run", "600 nested conditional_blocks (Python recursion), through run",
        {"nested_600.pb": deep, "x_2x3.npy": x_npy},
        ["run", "{nested_600.pb}", "--fetch", "loss", "--feed", "x={x_2x3.npy}"],
        ["{nested_600.pb}", "block"], exit=[0, 2])
    add("subblock_cycle", "sub_block attrs that form a cycle (1 -> 2 -> 3 -> 1)",
        {"subblock_cycle.pb": nested_conditional_blocks(3, cycle=True)}, append("subblock_cycle.pb", "loss"),
        ["{subblock_cycle.pb}", "block 3", "conditional_block", "names block 1, whose parent is block 0"])

    def parent_cycle(d):
        for k, parent in ((1, 3), (2, 1), (3, 2)):
            d.blocks.add(idx=k, parent_idx=parent)
    add("parent_cycle", "parent blocks 1 -> 3 -> 2 -> 1", {"parent_cycle.pb": edited("fit_a_line", parent_cycle)},
        show("parent_cycle.pb"), ["{parent_cycle.pb}", "block 1", "parent blocks form a cycle"])
    add("parent_self", "a block that is its own parent",
        {"parent_self.pb": edited("fit_a_line", lambda d: d.blocks.add(idx=1, parent_idx=1))},
        append("parent_self.pb"), ["{parent_self.pb}", "block 1", "parent_idx 1 is not another block"])
    add("block_idx_mismatch", "block 1 of cond_block says idx=5",
        {"block_idx_5.pb": edited("cond_block", lambda d: setattr(d.blocks[1], "idx", 5))},
        show("block_idx_5.pb"), ["{block_idx_5.pb}", "block 1", "says idx=5"])
    add("block0_parent", "block 0 with parent_idx 0",
        {"block0_parent.pb": edited("fit_a_line", lambda d: setattr(d.blocks[0], "parent_idx", 0))},
        show("block0_parent.pb"), ["{block0_parent.pb}", "block 0 must have parent_idx -1"])
    add("forward_block_out_of_range", "forward_block_idx 9 in a 2-block program",
        {"forward_block_9.pb": edited("cond_block", lambda d: setattr(d.blocks[1], "forward_block_idx", 9))},
        show("forward_block_9.pb"), ["{forward_block_9.pb}", "block 1", "forward_block_idx 9 out of range"])

    cond = desc("cond_block")
    ci, _ = find_op(cond.blocks[0], "conditional_block")
    for target in (7, -1, 0):
        def point(d, target=target):
            attr(d.blocks[0].ops[ci], "sub_block").block_idx = target
        f = f"sub_block_{target}.pb".replace("-", "minus")
        add(f"sub_block_{target}".replace("-", "minus"), f"conditional_block's sub_block set to {target}",
            {f: edited("cond_block", point)}, show(f) if target != 0 else append(f),
            ["{" + f + "}", f"block 0, op {ci} (conditional_block)", f"attr 'sub_block' names block {target}"])
    nested = desc("nested_cond")
    ni, _ = find_op(nested.blocks[0], "conditional_block")

    def to_grandchild(d):
        attr(d.blocks[0].ops[ni], "sub_block").block_idx = 2
    add("sub_block_not_a_child", "block 0's conditional_block pointed at block 2 (a child of block 1)",
        {"sub_block_grandchild.pb": edited("nested_cond", to_grandchild)},
        append("sub_block_grandchild.pb", "elementwise_add_0.tmp_0"),
        ["{sub_block_grandchild.pb}", f"op {ni} (conditional_block)", "names block 2, whose parent is block 1"])

    def where_with_sub_block(d):
        d.blocks[0].ops[ci].type = "where"       # keeps its sub_block attr
    add("sub_block_on_plain_op", "conditional_block renamed to `where`, which runs no sub-block, "
        "keeping its sub_block attr", {"where_with_sub_block.pb": edited("cond_block", where_with_sub_block)},
        append("where_with_sub_block.pb", "mean_1.tmp_0"),
        ["{where_with_sub_block.pb}", f"op {ci} (where)", "attr 'sub_block' names a block"])

    def swap_cond_slots(d):
        op = d.blocks[0].ops[find_op(d.blocks[0], "conditional_block")[0]]
        cond, inp = op.inputs[0], op.inputs[1]
        cond.parameter, inp.parameter = inp.parameter, cond.parameter
    # append takes it as Paddle's pass does (FilterNoGradInput gives the bool
    # var now in Input no gradient), so the refusal is run's, before any op.
    add("cond_slots_swapped", "nested_cond's first conditional_block with its Cond and Input slots swapped: "
        "it loads, but Cond holds float vars; run refuses the op",
        {"cond_slots_swapped.pb": edited("nested_cond", swap_cond_slots), "x_2x8.npy": _npy_bytes((2, 8)),
         "w_8x8.npy": _npy_bytes((8, 8))},
        ["run", "{cond_slots_swapped.pb}", "--fetch", "mean_3.tmp_0", "--feed", "x={x_2x8.npy}",
         "--feed", "w={w_8x8.npy}", "--feed", "w2={w_8x8.npy}", "--feed", "w3={w_8x8.npy}"],
        ["{cond_slots_swapped.pb}", "op 5 (conditional_block)", "Cond"])

    def ghost_in_sub(d):
        set_slot(d.blocks[1].ops[0], "X", ["ghost"])
    add("undeclared_input_sub_block", "an op in block 1 reads a var no block declares",
        {"ghost_input.pb": edited("cond_block", ghost_in_sub)}, show("ghost_input.pb"),
        ["{ghost_input.pb}", "block 1, op 0 (matmul_v2)", "var 'ghost'", "no visible block declares"])

    def ghost_out(d):
        set_slot(d.blocks[0].ops[3], "Out", ["ghost_out"], outputs=True)
    add("undeclared_output", "an op writes a var no block declares",
        {"ghost_output.pb": edited("fit_a_line", ghost_out)}, append("ghost_output.pb"),
        ["{ghost_output.pb}", "block 0, op 3 (square)", "var 'ghost_out'"])

    def sibling_var(d):
        set_slot(d.blocks[3].ops[0], "X", ["matmul_v2_2.tmp_0"])   # declared in block 2 only
    add("sibling_var", "block 3 reads a var declared only in its sibling block 2",
        {"sibling_var.pb": edited("nested_cond", sibling_var)}, show("sibling_var.pb"),
        ["{sibling_var.pb}", "block 3, op 0 (sigmoid)", "var 'matmul_v2_2.tmp_0'", "no visible block declares"])

    def dup(d):
        d.blocks[0].vars.add().CopyFrom(find_var(d.blocks[0], "x"))
    add("duplicate_var", "var x declared twice in block 0", {"duplicate_var.pb": edited("fit_a_line", dup)},
        show("duplicate_var.pb"), ["{duplicate_var.pb}", "block 0", "var 'x'", "declared twice"])

    def no_tensor_desc(d):
        find_var(d.blocks[0], "fc_0.tmp_0").type.ClearField("dense_tensor")
    add("tensor_without_desc", "a DENSE_TENSOR var without its tensor description",
        {"no_tensor_desc.pb": edited("fit_a_line", no_tensor_desc)}, show("no_tensor_desc.pb"),
        ["{no_tensor_desc.pb}", "var 'fc_0.tmp_0'", "without its tensor description"])

    def neg_dim(d):
        find_var(d.blocks[0], "fc_0.w_0").type.dense_tensor.tensor.dims[0] = -7
    add("negative_dim", "a parameter with dims [-7, 1]", {"negative_dim.pb": edited("fit_a_line", neg_dim)},
        append("negative_dim.pb"), ["{negative_dim.pb}", "var 'fc_0.w_0'", "dimension -7 is negative"])

    required = ("pybackward/legacy/io.py loads() never checks required fields: upb's ParseFromString accepts a "
                "message whose required fields are missing, and proto2 puts an enum number the schema "
                "does not define into the unknown fields, leaving the required field unset. {detail} "
                "Expected: ProgramFileError naming block/var (or op/attr) - e.g. check "
                "desc.FindInitializationErrors() after parsing (exit 2); today `show` prints it and exits 0")
    add("unknown_dtype", "a var whose TensorDesc.data_type is 999 (no such VarType)",
        {"dtype_999.pb": with_block0_extra("fit_a_line", field_len(3, raw_var("weird", pb.VarType.DENSE_TENSOR,
                                                                               999, (2, 3))))},
        show("dtype_999.pb"), ["{dtype_999.pb}", "var 'weird'"])
    add("unknown_var_type", "a var whose VarType.type is 999",
        {"vartype_999.pb": with_block0_extra("fit_a_line", field_len(3, raw_var("weird", 999, None)))},
        show("vartype_999.pb"), ["{vartype_999.pb}", "var 'weird'"])
    add("var_without_type", "a VarDesc without its required `type`",
        {"var_no_type.pb": with_block0_extra("fit_a_line", field_len(3, field_len(1, b"weird")))},
        show("var_no_type.pb"), ["{var_no_type.pb}", "var 'weird'"])

    fitd = desc("fit_a_line")
    b0 = fitd.blocks[0]
    ops = [o.SerializePartialToString() for o in b0.ops]
    ops[0] += field_len(4, field_len(1, b"weird") + field_int(2, 99) + field_int(3, 5))
    head = pb.BlockDesc()
    head.CopyFrom(b0)
    del head.ops[:]
    add("unknown_attr_type", "op 0 has an attr whose AttrType is 99",
        {"attr_type_99.pb": field_len(1, head.SerializePartialToString() + b"".join(field_len(4, o) for o in ops))},
        show("attr_type_99.pb"), ["{attr_type_99.pb}", "op 0 (mul)", "weird"])

    def no_op_type(d):
        d.blocks[0].ops[2].ClearField("type")
    add("op_without_type", "an OpDesc without its required `type`",
        {"op_no_type.pb": edited("fit_a_line", no_op_type)}, show("op_no_type.pb"),
        ["{op_no_type.pb}", "block 0, op 2"])

    def no_attr_type(d):
        attr(d.blocks[0].ops[4], "op_device").ClearField("type")
    add("attr_without_type", "the loss op's op_device attr without its required `type`",
        {"attr_no_type.pb": edited("fit_a_line", no_attr_type)}, append("attr_no_type.pb"),
        ["{attr_no_type.pb}", "op 4 (reduce_mean)", "op_device"])

    def sub_block_string(d):
        attr(d.blocks[0].ops[ci], "sub_block").type = pb.AttrType.STRING   # block_idx stays 1
    add("sub_block_attr_not_block", "conditional_block's sub_block attr typed STRING (block_idx still 1)",
        {"sub_block_string.pb": edited("cond_block", sub_block_string)}, append("sub_block_string.pb", "mean_1.tmp_0"),
        ["{sub_block_string.pb}", f"op {ci} (conditional_block)", "sub_block"])

    def op_role_var_bool(d):
        a = attr(d.blocks[0].ops[0], "op_role_var")
        a.type = pb.AttrType.BOOLEAN
        a.b = True
    add("attr_of_wrong_type", "op 0 (mul)'s op_role_var attr typed BOOLEAN instead of STRINGS",
        {"op_role_var_bool.pb": edited("fit_a_line", op_role_var_bool)}, append("op_role_var_bool.pb"),
        ["{op_role_var_bool.pb}", "op 0 (mul)", "op_role_var"])

    fit_bytes = src("fit_a_line")
    assert fit_bytes.count(b"x_num_col_dims") == 1
    add("non_utf8_attr_name", "an attr name that is not UTF-8 (x_num_col_dim\\xff)",
        {"attr_name_not_utf8.pb": fit_bytes.replace(b"x_num_col_dims", b"x_num_col_dim\xff")},
        append("attr_name_not_utf8.pb"), ["{attr_name_not_utf8.pb}", "op 0 (mul)", "UTF-8"])

    def absurd(d):
        t = find_var(d.blocks[0], "fc_0.tmp_0").type.dense_tensor.tensor
        t.dims[:] = [2**62, 2**62]
    add("absurd_dims", "a var with dims [2^62, 2^62] (the element count overflows int64)",
        {"absurd_dims.pb": edited("fit_a_line", absurd)}, show("absurd_dims.pb"),
        ["{absurd_dims.pb}", "var 'fc_0.tmp_0'"])


def _npy_bytes(shape, dtype="float32", fill=1.0) -> bytes:
    import io as _io
    import numpy as np
    buf = _io.BytesIO()
    np.save(buf, np.full(shape, fill, dtype=dtype))
    return buf.getvalue()


# --------------------------------------------------------------------------
# The pass: bad arguments and programs it cannot differentiate
# --------------------------------------------------------------------------
def pass_cases() -> None:
    fit = {"fit.pb": src("fit_a_line")}

    def int_loss(d):
        find_var(d.blocks[0], "mean_0.tmp_0").type.dense_tensor.tensor.data_type = pb.VarType.INT32
    add("int_loss", "a loss declared INT32", {"mlp_int_loss.pb": edited("mlp_softmax_ce", int_loss)},
        append("mlp_int_loss.pb"), ["{mlp_int_loss.pb}", "var 'mean_0.tmp_0'",
                                    "must be a floating-point tensor, not INT32"])
    add("loss_from_no_op", "a loss that no op produces (a feed)", {"mlp.pb": src("mlp_softmax_ce")},
        append("mlp.pb", "x"), ["{mlp.pb}", "var 'x'", "produced by no op"])
    add("loss_unknown", "a loss name the program does not declare", fit, append("fit.pb", "mean_9.tmp_0"),
        ["{fit.pb}", "'mean_9.tmp_0'", "no such variable"])
    add("no_grad_unknown", "a --no-grad name that does not exist", fit,
        append("fit.pb", "mean_0.tmp_0", "--no-grad", "fc_0.w_9"), ["'fc_0.w_9'", "no such variable"])
    add("parameter_unknown", "a --parameter name that does not exist", fit,
        append("fit.pb", "mean_0.tmp_0", "--parameter", "fc_9.w_0"), ["'fc_9.w_0'", "no such variable"])
    add("target_grad_wrong_shape", "gradients: a target gradient whose shape is not the target's", fit,
        ["gradients", "--target", "fc_0.tmp_1", "--input", "fc_0.w_0", "--target-grad", "fc_0.w_0",
         "{fit.pb}", "{out}"],
        ["shapes of target and grad are different", "fc_0.tmp_1", "fc_0.w_0"])
    add("target_grad_count", "gradients: two targets, one target gradient", fit,
        ["gradients", "--target", "fc_0.tmp_1", "--target", "mean_0.tmp_0", "--input", "fc_0.w_0",
         "--target-grad", "fc_0.tmp_0", "{fit.pb}", "{out}"], ["same number of target_gradients"])

    def frob(d):
        d.blocks[0].ops[3].type = "frobnicate"
    add("unknown_op_append", "an op type pybackward does not know, on the gradient path",
        {"frobnicate.pb": edited("fit_a_line", frob)}, append("frobnicate.pb"),
        ["{frobnicate.pb}", "block 0, op 3 (frobnicate)", "no gradient rule"])
    add("in_place_and_out", "append --in-place with an OUT as well", fit,
        ["append", "--loss", "mean_0.tmp_0", "--in-place", "{fit.pb}", "{out}"], ["not both"])
    add("out_dir_missing", "append to a path in a directory that does not exist", fit,
        ["append", "--loss", "mean_0.tmp_0", "{fit.pb}", "{dir}/no/such/dir/out.pb"],
        ["{dir}/no/such/dir/out.pb"])
    add("callback_raises", "append_backward(callbacks=[bad]): bad raises ValueError", {}, None,
        ["callback", "bad_callback", "ValueError"], api="callback_raises")
    add("callback_raises_pybackward_error", "a callback that raises a PyBackwardError itself", {}, None,
        ["callback", "bad_pybackward_callback"], api="callback_raises_pybackward_error")
    add("callback_interrupt", "a callback that raises KeyboardInterrupt: it propagates, program unchanged",
        {}, None, [], api="callback_interrupt")
    add("target_gradients_wrong_shape_api", "gradients(target_gradients=[wrong shape]) via the API", {}, None,
        ["shapes of target and grad are different"], api="target_gradients_wrong_shape")


# --------------------------------------------------------------------------
# The interpreter: programs that cannot run
# --------------------------------------------------------------------------
def run_cases() -> None:
    bwd = desc("fit_a_line", "backward.pb")
    mi, _ = find_op(bwd.blocks[0], "mul_grad")
    ai, _ = find_op(bwd.blocks[0], "elementwise_add_grad")

    def mul_grad_mismatch(d):
        set_slot(d.blocks[0].ops[mi], "Out@GRAD", ["x"])      # [-1, 13] where [-1, 1] is due
    add("grad_op_shape_mismatch", "run: mul_grad's Out@GRAD has the shape of x, not of Out",
        {"mul_grad_mismatch.pb": edited("fit_a_line", mul_grad_mismatch, "backward.pb")},
        ["run", "{mul_grad_mismatch.pb}", "--fetch", "fc_0.w_0@GRAD", *FIT_RUN],
        ["{mul_grad_mismatch.pb}", f"block 0, op {mi} (mul_grad)"])

    def add_grad_mismatch(d):
        set_slot(d.blocks[0].ops[ai], "Y", ["fc_0.w_0"])        # [13, 1] where [1] is due
    add("grad_op_broadcast_mismatch", "run: elementwise_add_grad's Y cannot broadcast against X",
        {"add_grad_mismatch.pb": edited("fit_a_line", add_grad_mismatch, "backward.pb")},
        ["run", "{add_grad_mismatch.pb}", "--fetch", "fc_0.b_0@GRAD", *FIT_RUN],
        ["{add_grad_mismatch.pb}", f"block 0, op {ai} (elementwise_add_grad)"])

    missing = ("pybackward/interpreter/executor.py Executor._run_block turns only ValueError, IndexError, "
               "TypeError, FloatingPointError and KeyError from a kernel into ExecutionError; {detail} "
               "Expected: ExecutionError naming block/op (exit 2) - check the op's required inputs "
               "before calling the kernel, or catch AttributeError (and MemoryError) too")
    nc = desc("nested_cond", "backward.pb")
    ri = next(i for i, o in enumerate(nc.blocks[0].ops) if o.type == "reduce_mean_grad"
              and list(o.inputs[1].arguments) == ["o"])

    def empty_x(d):
        set_slot(d.blocks[0].ops[ri], "X", ["@EMPTY@"])
    add("grad_op_input_empty", "run: reduce_mean_grad whose X is @EMPTY@",
        {"reduce_mean_grad_empty_x.pb": edited("nested_cond", empty_x, "backward.pb")},
        ["run", "{reduce_mean_grad_empty_x.pb}", "--fetch", "mean_2.tmp_0",
         "--params", "{testdata}/programs/nested_cond/params.npz",
         "--feeds", "{testdata}/programs/nested_cond/feeds.npz"],
        ["{reduce_mean_grad_empty_x.pb}", f"block 0, op {ri} (reduce_mean_grad)"])

    def no_y(d):
        op = d.blocks[0].ops[0]
        del op.inputs[[v.parameter for v in op.inputs].index("Y")]
    add("op_missing_input_slot", "run: a mul op without its Y slot",
        {"mul_without_y.pb": edited("fit_a_line", no_y)},
        ["run", "{mul_without_y.pb}", "--fetch", "mean_0.tmp_0", *FIT_RUN],
        ["{mul_without_y.pb}", "block 0, op 0 (mul)"])

    wa = desc("while_array", "backward.pb")
    wi, _ = find_op(wa.blocks[0], "while_grad")

    def bad_scopes(d):
        set_slot(d.blocks[0].ops[wi], "StepScopes", ["mean_0.tmp_0@GRAD"])
    add("kernel_error_ragged_inputs", "run: while_grad given a tensor for StepScopes; its inputs "
        "include a tensor array of arrays of different shapes",
        {"while_grad_bad_scopes.pb": edited("while_array", bad_scopes, "backward.pb")},
        ["run", "{while_grad_bad_scopes.pb}", "--fetch", "w@GRAD",
         "--params", "{testdata}/programs/while_array/params.npz",
         "--feeds", "{testdata}/programs/while_array/feeds.npz"],
        ["{while_grad_bad_scopes.pb}", f"block 0, op {wi} (while_grad)"])

    def huge_fill(d):
        op = d.blocks[0].ops.add(type="fill_constant")
        op.outputs.add(parameter="Out", arguments=["big"])
        op.attrs.add(name="dtype", type=pb.AttrType.INT, i=pb.VarType.FP32)
        op.attrs.add(name="shape", type=pb.AttrType.LONGS, longs=[100000, 100000, 1000])
        op.attrs.add(name="value", type=pb.AttrType.FLOAT, f=1.0)
        v = d.blocks[0].vars.add(name="big")
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
        v.type.dense_tensor.tensor.dims.extend([100000, 100000, 1000])
    add("absurd_fill_constant", "run: fill_constant of shape [1e5, 1e5, 1e3] (36 TiB)",
        {"fill_36tib.pb": edited("fit_a_line", huge_fill)},
        ["run", "{fill_36tib.pb}", "--fetch", "big", *FIT_RUN],
        ["{fill_36tib.pb}", "block 0, op 5 (fill_constant)"])

    def x_bf16(d):
        find_var(d.blocks[0], "x").type.dense_tensor.tensor.data_type = pb.VarType.BF16
    add("feed_dtype_without_numpy", "run: a feed declared BF16 (NumPy has no bfloat16)",
        {"x_bf16.pb": edited("fit_a_line", x_bf16)},
        ["run", "{x_bf16.pb}", "--fetch", "mean_0.tmp_0", *FIT_RUN], ["{x_bf16.pb}", "var 'x'", "BF16"])

    def step0(d):
        _, inc = find_op(d.blocks[1], "increment")
        attr(inc, "step").f = 0.0
    add("while_never_ends", "run: a while whose counter steps by 0 (it never ends)",
        {"while_step_0.pb": edited("while_loop", step0)},
        ["run", "{while_step_0.pb}", "--fetch", "mean_0.tmp_0",
         "--params", "{testdata}/programs/while_loop/params.npz",
         "--feeds", "{testdata}/programs/while_loop/feeds.npz"],
        ["{while_step_0.pb}", "block 0, op 4 (while)", "stopped at step"], timeout=6)

    def frob(d):
        d.blocks[0].ops[3].type = "frobnicate"
    add("unknown_op_run", "run: an op type with no kernel", {"frobnicate.pb": edited("fit_a_line", frob)},
        ["run", "{frobnicate.pb}", "--fetch", "mean_0.tmp_0", *FIT_RUN],
        ["{frobnicate.pb}", "block 0, op 3 (frobnicate)", "no kernel"])

    def scale_str(d):
        op = d.blocks[0].ops[3]
        op.type = "scale"
        op.attrs.add(name="scale", type=pb.AttrType.STRING, s="big")
    add("attr_wrong_type", "run: scale whose `scale` attr is a STRING",
        {"scale_attr_string.pb": edited("fit_a_line", scale_str)},
        ["run", "{scale_attr_string.pb}", "--fetch", "mean_0.tmp_0", *FIT_RUN],
        ["{scale_attr_string.pb}", "block 0, op 3 (scale)"])

    def dim7(d):
        op = d.blocks[0].ops[4]
        attr(op, "reduce_all").b = False
        attr(op, "dim").ints[:] = [7]
    add("reduce_dim_out_of_range", "run: reduce_mean over dim 7 of a 2-D tensor",
        {"reduce_dim_7.pb": edited("fit_a_line", dim7)},
        ["run", "{reduce_dim_7.pb}", "--fetch", "mean_0.tmp_0", *FIT_RUN],
        ["{reduce_dim_7.pb}", "block 0, op 4 (reduce_mean)"])
    fit = {"fit.pb": src("fit_a_line")}
    add("feed_wrong_shape", "run: a feed whose shape is not the declared one",
        {**fit, "x_2x5.npy": _npy_bytes((2, 5))},
        ["run", "{fit.pb}", "--fetch", "mean_0.tmp_0", "--feed", "x={x_2x5.npy}"],
        ["{fit.pb}", "var 'x'", "feed has shape [2, 5]"])

    def y_complex(d):
        find_var(d.blocks[0], "y").type.dense_tensor.tensor.data_type = pb.VarType.COMPLEX64
    add("complex_into_real_var", "run: a complex64 feed, whose elementwise_sub writes complex values into a var "
        "declared float32 (their imaginary parts were dropped with only NumPy's ComplexWarning)",
        {"y_complex.pb": edited("fit_a_line", y_complex), "y_complex.npy": _npy_bytes((4, 1), "complex64", 1 + 1j),
         "x_4x13.npy": _npy_bytes((4, 13))},
        ["run", "{y_complex.pb}", "--fetch", "mean_0.tmp_0", "--params", f"{FIT_PB}/params.npz",
         "--feed", "x={x_4x13.npy}", "--feed", "y={y_complex.npy}"],
        ["{y_complex.pb}", "block 0, op 2 (elementwise_sub)", "var 'square_error_cost_0.tmp_0'",
         "imaginary parts would be lost"])
    add("fetch_unknown", "run: fetch a var nothing computes", fit,
        ["run", "{fit.pb}", "--fetch", "nope", *FIT_RUN], ["{fit.pb}", "var 'nope'", "cannot fetch"])
    corrupt = b"PK\x03\x04" + bytes(60)
    add("corrupt_npz", "run --params with a corrupt .npz", {**fit, "corrupt.npz": corrupt},
        ["run", "{fit.pb}", "--fetch", "mean_0.tmp_0", "--params", "{corrupt.npz}"], ["{corrupt.npz}"])
    add("append_run_corrupt_npz", "append --run with a corrupt params .npz: OUT must not be written",
        {**fit, "corrupt.npz": corrupt},
        ["append", "--loss", "mean_0.tmp_0", "--run", "--params", "{corrupt.npz}", "{fit.pb}", "{out}"],
        ["{corrupt.npz}"])


# --------------------------------------------------------------------------
# Issue #20: hostile inputs found by probing
# --------------------------------------------------------------------------
def hostile_cases() -> None:
    fit = {"fit.pb": src("fit_a_line")}
    while_run = ["--fetch", "mean_0.tmp_0", "--params", "{testdata}/programs/while_loop/params.npz",
                 "--feeds", "{testdata}/programs/while_loop/feeds.npz"]
    add("while_max_steps", "run --max-steps 20 on a while that never ends", ["while_step_0.pb"],
        ["run", "{while_step_0.pb}", *while_run, "--max-steps", "20"],
        ["{while_step_0.pb}", "block 0, op 4 (while)", "stopped at step 20"], timeout=30)
    add("while_timeout", "run --timeout 0.2 on a while that never ends (and a step limit it never reaches)",
        ["while_step_0.pb"], ["run", "{while_step_0.pb}", *while_run, "--max-steps", "1000000000",
                              "--timeout", "0.2"],
        ["{while_step_0.pb}", "block 0, op 4 (while)", "timed out at step"], timeout=30)

    def complex_loss(d):
        find_var(d.blocks[0], "mean_0.tmp_0").type.dense_tensor.tensor.data_type = pb.VarType.COMPLEX64
    add("complex_loss", "a loss declared COMPLEX64", {"complex_loss.pb": edited("fit_a_line", complex_loss)},
        append("complex_loss.pb"), ["{complex_loss.pb}", "var 'mean_0.tmp_0'",
                                    "must be a real floating-point tensor, not COMPLEX64"])

    def array_loss(d):
        v = find_var(d.blocks[0], "mean_0.tmp_0")
        v.type.type = pb.VarType.DENSE_TENSOR_ARRAY
        v.type.tensor_array.tensor.CopyFrom(v.type.dense_tensor.tensor)
        v.type.ClearField("dense_tensor")
    add("array_loss", "a loss declared a tensor array (LOD_TENSOR_ARRAY)",
        {"array_loss.pb": edited("fit_a_line", array_loss)}, append("array_loss.pb"),
        ["{array_loss.pb}", "var 'mean_0.tmp_0'", "not a DENSE_TENSOR_ARRAY"])

    def int_bias(d):
        find_var(d.blocks[0], "fc_0.b_0").type.dense_tensor.tensor.data_type = pb.VarType.INT32
    add("int_parameter_listed", "--parameter names a parameter declared INT32",
        {"int_bias.pb": edited("fit_a_line", int_bias)},
        append("int_bias.pb", "mean_0.tmp_0", "--parameter", "fc_0.b_0"),
        ["{int_bias.pb}", "var 'fc_0.b_0'", "INT32", "cannot have gradients"])

    def repeated(d):
        op = d.blocks[0].ops[3]                 # square(X=s0) -> sum(X=[s0] * 1001)
        op.type = "sum"
        set_slot(op, "X", ["square_error_cost_0.tmp_0"] * 1001)
    add("var_repeated_in_slot", "sum whose input X lists one var 1001 times (each repeat costs a grad op)",
        {"repeated_1001.pb": edited("fit_a_line", repeated)}, append("repeated_1001.pb"),
        ["{repeated_1001.pb}", "block 0, op 3 (sum)", "var 'square_error_cost_0.tmp_0'", "1001 times"])
    add("append_twice", "append on a program that already has its backward section",
        {"fit_backward.pb": src("fit_a_line", "backward.pb")}, append("fit_backward.pb"),
        ["{fit_backward.pb}", "already has a backward section", "--force"])
    add("gradients_twice", "gradients on a program that already has a backward section",
        ["fit_backward.pb"], ["gradients", "--target", "mean_0.tmp_0", "--input", "fc_0.w_0",
                              "{fit_backward.pb}", "{out}"],
        ["{fit_backward.pb}", "already has a backward section"])
    add("out_trailing_slash", "append IN newdir/ (a directory that does not exist, named with '/')", fit,
        ["append", "--loss", "mean_0.tmp_0", "{fit.pb}", "{dir}/newdir/"], ["{dir}/newdir/", "names a directory"])
    add("out_is_a_directory", "append IN DIR (an existing directory)", fit,
        ["append", "--loss", "mean_0.tmp_0", "{fit.pb}", "{dir}"], ["{dir}", "is a directory"])
    add("check_eps_zero", "check --eps 0 (a zero finite-difference step)", fit,
        ["check", "{fit.pb}", "--loss", "mean_0.tmp_0", "--eps", "0"], ["--eps", "x>0"])
    add("check_eps_nan", "check --eps nan", fit,
        ["check", "{fit.pb}", "--loss", "mean_0.tmp_0", "--eps", "nan"], ["--eps", "not a finite number"])


# --------------------------------------------------------------------------
# Issue #36: hostile files - pickles, tensor files, .npz, rules files, lost data
# --------------------------------------------------------------------------
def pk_text(s: str) -> bytes:
    """A str, as pickle's BINUNICODE."""
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def pk_array(code: str, shape, raw: bytes, dims: bytes | None = None) -> bytes:
    """Pickle opcodes that make a numpy array the way numpy pickles one (protocol 3,
    numpy 1.x's module name, which numpy 2 reads too), written by hand so the
    corpus does not change with numpy's version. `dims`: the shape's opcodes as given."""
    if dims is None:
        dims = b"".join(b"J" + struct.pack("<i", d) for d in shape)
    return (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R"
            b"(K\x01(" + dims + b"tcnumpy\ndtype\n" + pk_text(code) + b"\x89\x88\x87R"
            b"(K\x03" + pk_text("<") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
            b"\x89B" + struct.pack("<I", len(raw)) + raw + b"tb")


def pk_dict(items: list[tuple[bytes, bytes]], put: bytes = b"") -> bytes:
    """A protocol-3 pickle of a dict: key and value opcodes given; `put` right after the dict."""
    return b"\x80\x03}" + put + b"(" + b"".join(k + v for k, v in items) + b"u."


def fit_params() -> dict:
    import numpy as np
    with np.load(PROGRAMS / "fit_a_line" / "params.npz") as z:
        return {k: z[k] for k in sorted(z.files)}


def fit_params_pickle(put: bytes = b"", extra: list[tuple[bytes, bytes]] = ()) -> bytes:
    items = [(pk_text(k), pk_array("f4", a.shape, a.astype("<f4").tobytes())) for k, a in fit_params().items()]
    return pk_dict(items + list(extra), put)


def tensor_record(dims, data: bytes = b"", data_type: int = pb.VarType.FP32) -> bytes:
    """One tensor in Paddle's format with the dims given (no check of them)."""
    desc = pb.VarType.TensorDesc(data_type=data_type, dims=dims).SerializeToString()
    return struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + data


def zip_archive(members: list[tuple[str, bytes, int]], directory: list[tuple[str, int]] | None = None,
                method: int = 0, declared: int | None = None) -> bytes:
    """A zip written by hand: `members` (name, data, size as stored) one after another;
    `directory` lists (name, index of the member whose bytes it points at), by default
    each member once. `method` 0 stores, 8 says deflated; `declared` overrides the size."""
    local, offsets = b"", []
    for name, data, size in members:
        offsets.append(len(local))
        n = name.encode()
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, zlib.crc32(data) if not method
                             else 0, len(data), declared or size, len(n), 0) + n + data
    central = b""
    listing = directory if directory is not None else [(m[0], i) for i, m in enumerate(members)]
    for name, i in listing:
        _, data, size = members[i]
        n = name.encode()
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21,
                               zlib.crc32(data) if not method else 0, len(data), declared or size, len(n),
                               0, 0, 0, 0, 0, offsets[i]) + n
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(listing), len(listing), len(central), len(local), 0)
    return local + central + end


def files_cases() -> None:
    import numpy as np
    fit = {"fit.pb": src("fit_a_line")}
    run_fit = ["run", "{fit.pb}", "--fetch", "mean_0.tmp_0", "--feeds", f"{FIT_PB}/feeds.npz", "--params"]
    out_npz = "{dir}/out.npz"

    # -- pickles: memory, depth, time and messages bounded by the file -----
    add("pickle_memo_id_2_27", "a .pdparams whose first memo id is 2^27 (Python's unpickler takes 2 GiB "
        "for it): the right values, in memory the file's size bounds",
        {**fit, "memo_2_27.pdparams": fit_params_pickle(put=b"r" + struct.pack("<I", 2**27))},
        [*run_fit, "{memo_2_27.pdparams}"], [], exit=0)
    nested = b"\x80\x03}" + b")" + b"\x85" * 5000 + pk_text("v") + b"s."
    add("pickle_nested_key", "a .pdparams whose dict key is a tuple nested 5000 deep (a million deep "
        "crashed Python's unpickler, hashing it)", {"nested_key.pdparams": nested},
        ["convert", "{nested_key.pdparams}", out_npz], ["{nested_key.pdparams}", "nested more than 100 deep"])
    dag = b"\x80\x03cnumpy\ndtype\nN\x85q\x000"
    for i in range(40):
        dag += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1]) + b"0"
    dag += b"h\x28\x85R."
    add("pickle_dag_in_a_message", "a 300-byte .pdparams passing a DAG of 2^40 leaves to numpy.dtype (its "
        "refusal printed it: 80 s, then the machine's memory)", {"dag.pdparams": dag},
        ["convert", "{dag.pdparams}", out_npz], ["{dag.pdparams}", "numpy.dtype(a tuple of 2 items)"], timeout=30)
    dims = b"".join(b"\x8a\x08" + struct.pack("<q", 2**62) for _ in range(300))
    add("pickle_300_dims", "a .pdparams array of 300 dims of 2^62 (the size was multiplied out, and its "
        "message failed at 4300 digits)",
        {"dims_300.pdparams": pk_dict([(pk_text("w"), pk_array("f4", (), b"", dims))])},
        ["convert", "{dims_300.pdparams}", out_npz], ["{dims_300.pdparams}", "300 dims"])
    m61 = 2**61 - 1
    keys = b"".join(b"\x8a\x0a" + (i * m61).to_bytes(10, "little", signed=True) + b"N" for i in range(1, 1502))
    add("pickle_colliding_keys", "a .pdparams with a dict of 1501 int keys whose hashes all collide "
        "(quadratic inserts)", {**fit, "collide.pdparams": fit_params_pickle(
            extra=[(pk_text("LR_Scheduler"), b"}(" + keys + b"u")])},
        [*run_fit, "{collide.pdparams}"], ["{collide.pdparams}", "more than 1000 dict keys"])
    build = b"\x80\x03}" + pk_text("a") + b"cnumpy\ndtype\nN}" + pk_text("__defaults__") + pk_text("x") + \
        b"\x85s\x86bs."
    add("pickle_build_on_the_reader", "a .pdparams whose BUILD sets __defaults__ of the function the "
        "reader gave for numpy.dtype", {"build.pdparams": build},
        ["convert", "{build.pdparams}", out_npz], ["{build.pdparams}", "refused", "BUILD"])
    w = fit_params()["fc_0.w_0"]
    two = pk_dict([(pk_text("a"), pk_array("f4", w.shape, w.tobytes())),
                   (pk_text("b"), pk_array("f4", w.shape, (w * 2).tobytes())),
                   (pk_text("StructuredToParameterName@@"),
                    b"}(" + pk_text("a") + pk_text("fc_0.w_0") + pk_text("b") + pk_text("fc_0.w_0") + b"u")])
    add("pickle_structured_names_collide", "a dygraph .pdparams whose StructuredToParameterName@@ maps two "
        "arrays to one name (one was dropped silently)", {"structured.pdparams": two},
        ["convert", "{structured.pdparams}", out_npz],
        ["{structured.pdparams}", "StructuredToParameterName@@", "'a' and 'b'", "'fc_0.w_0'"])
    big = pk_dict([(pk_text("w"), pk_array("f4", (2,), bytes(8))),
                   (pk_text("w@@.0"), pk_array("f4", (1,), bytes(4))),
                   (pk_text("w@@.1"), pk_array("f4", (1,), bytes(4))),
                   (pk_text("UnpackBigParamInfor@@"), b"}(" + pk_text("w") + b"}(" + pk_text("OriginShape")
                    + b"K\x02\x85" + pk_text("slices") + b"(" + pk_text("w@@.0") + pk_text("w@@.1") + b"lu" + b"u")])
    add("pickle_big_param_slices_collide", "a .pdparams whose UnpackBigParamInfor@@ joins slices into a name "
        "the file also holds (one was dropped silently)", {"big_slices.pdparams": big},
        ["convert", "{big_slices.pdparams}", out_npz], ["{big_slices.pdparams}", "UnpackBigParamInfor@@", "'w'"])

    # -- Paddle tensor files: dims checked before they are multiplied ------
    for case, dims_, data, frag in (
            ("tensor_65_dims", [1] * 65, bytes(4), "65 dims"),
            ("tensor_300_dims_of_2_62", [2**62] * 300, b"", "300 dims"),
            ("tensor_dims_2_62_2_62_0", [2**62, 2**62, 0], b"", "more than 2^63 bytes")):
        f = case.replace("tensor_", "w_")
        add(case, f"a per-var tensor file whose dims are {dims_[:3]}... ({len(dims_)} dims): a traceback",
            {f: tensor_record(dims_, data)}, ["convert", "{dir}/", out_npz], ["{" + f + "}", frag])

    # -- .npz: names, duplicates and sizes checked before decompressing ----
    one = _npy_bytes((256,))
    add("npz_member_listed_200_times", "a .npz whose zip directory lists one member 200 times (2000 times "
        "256 MB ran past 60 s)", {**fit, "listed_twice.npz": zip_archive([("w.npy", one, len(one))],
                                                                   [("w.npy", 0)] * 200)},
        [*run_fit, "{listed_twice.npz}"], ["{listed_twice.npz}", "array 'w' is in the archive twice"])
    add("npz_members_share_bytes", "a .npz whose two names point at the same bytes",
        {**fit, "shared.npz": zip_archive([("w.npy", one, len(one))], [("a.npy", 0), ("b.npy", 0)])},
        [*run_fit, "{shared.npz}"], ["{shared.npz}", "share bytes of the file"])
    add("npz_member_not_an_array", "a .npz with a member that is not NAME.npy (a deflate bomb there was "
        "decompressed before its name was looked at)",
        {**fit, "junk.npz": zip_archive([("a.npy", one, len(one)), ("junk.txt", b"x" * 64, 64)])},
        [*run_fit, "{junk.npz}"], ["{junk.npz}", "'junk.txt' is not an array"])
    add("npz_member_declares_1_gib", "a .npz member said to be deflated, 1 GiB from 16 bytes",
        {**fit, "ratio.npz": zip_archive([("w.npy", bytes(16), 2**30)], method=8)},
        [*run_fit, "{ratio.npz}"], ["{ratio.npz}", "declares 1073741824 bytes from 16 compressed"])
    import io as _io
    buf = _io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)})
    header = buf.getvalue()
    add("npz_header_declares_4_tib", "a .npz whose .npy header declares 2^40 floats for 0 bytes",
        {**fit, "huge_header.npz": zip_archive([("w.npy", header, len(header))])},
        [*run_fit, "{huge_header.npz}"], ["{huge_header.npz}", "array 'w'", "header declares 4398046511104 bytes"])

    # -- --ops rules files -------------------------------------------------
    add("rules_json_not_text", "a JSON rules file whose backward_op is a number (a traceback)",
        {**fit, "rules_number.json": json.dumps([{"backward_op": 5, "forward": "f (Tensor X) -> Tensor(Out)",
                                                  "args": "(Tensor Out@GRAD)", "output": "Tensor(X@GRAD)"}]).encode()},
        ["append", "--ops", "{rules_number.json}", "--loss", "mean_0.tmp_0", "{fit.pb}", "{out}"],
        ["{rules_number.json}", "entry 1", "'backward_op' is a number"])
    add("rules_json_nested_3000", "a JSON rules file nested 3000 deep (a RecursionError traceback)",
        {**fit, "rules_deep.json": b"[" * 3000 + b"]" * 3000},
        ["append", "--ops", "{rules_deep.json}", "--loss", "mean_0.tmp_0", "{fit.pb}", "{out}"],
        ["{rules_deep.json}", "nested too deep"])

    # -- lost data: directory writes all or nothing --------------------------
    add("convert_to_dir_fails_on_third", "convert new.npz DIR/ whose third array cannot be written: the "
        "first two replaced DIR's files", {"new.npz": _npz({"a": np.ones(2, np.float32), "b": np.ones(2, np.float32),
                                                          "c": np.array(["x"])})},
        ["convert", "{new.npz}", "{dir}/"], ["'c' is not a numeric array"])
    for case, key, why in (("dir_name_hidden", ".hidden", "starting with '.'"),
                           ("dir_name_model_pb", "model.pb", "*.pb"),
                           ("dir_name_model_file", "__model__", "named __model__")):
        f = case + ".npz"
        add(f"convert_{case}", f"convert to DIR/ of an array named {key!r}, which reading DIR/ skips",
            {f: _npz({"w": np.ones(1, np.float32), key: np.ones(1, np.float32)})},
            ["convert", "{" + f + "}", "{dir}/d/"], [repr(key), "reading the directory skips", why])
    add("convert_dir_name_is_a_directory", "convert to DIR/ of arrays 'a' and 'a/b' (one the other's directory)",
        {"a_and_ab.npz": _npz({"a": np.ones(1, np.float32), "a/b": np.ones(1, np.float32)})},
        ["convert", "{a_and_ab.npz}", "{dir}/d/"], ["'a' and 'a/b'", "directory"])


def outputs_cases() -> None:
    """Issue #36, second half: outputs that are inputs (one refusal, `cli/common.py`
    `refuse_outputs_over_inputs`), and names with control characters in error lines."""
    fit = {"fit.pb": src("fit_a_line")}
    params = (PROGRAMS / "fit_a_line" / "params.npz").read_bytes()
    add("out_is_the_input", "append IN IN: OUT is IN, without --in-place (it replaced the input)", fit,
        ["append", "--loss", "mean_0.tmp_0", "{fit.pb}", "{fit.pb}"],
        ["{fit.pb}: would overwrite the input {fit.pb}", "--in-place"])
    add("gradients_out_is_the_input", "gradients IN IN (it replaced the input)", fit,
        ["gradients", "--target", "mean_0.tmp_0", "--input", "fc_0.w_0", "{fit.pb}", "{fit.pb}"],
        ["{fit.pb}: would overwrite the input {fit.pb}"])
    add("out_is_the_golden", "append IN OUT --expect OUT: OUT was written, then compared with itself and "
        "passed", fit, ["append", "--loss", "mean_0.tmp_0", "{fit.pb}", "{out}", "--expect", "{out}"],
        ["{out}: is also the input {out}"])
    add("update_golden_is_the_input", "append --in-place IN --expect IN --update: the golden update "
        "replaced IN", fit,
        ["append", "--loss", "mean_0.tmp_0", "--in-place", "{fit.pb}", "--expect", "{fit.pb}", "--update"],
        ["{fit.pb}: would overwrite the input {fit.pb}", "--update"])
    add("run_out_is_the_params", "run --params P.npz --out P.npz: the fetched values replaced the parameters",
        {**fit, "params.npz": params},
        ["run", "{fit.pb}", "--fetch", "mean_0.tmp_0", "--params", "{params.npz}", "--feeds",
         f"{FIT_PB}/feeds.npz", "--out", "{params.npz}"],
        ["{params.npz}: would overwrite the input {params.npz}", "--out"])
    add("run_out_is_params_beside", "run PROG --out params.npz, params.npz beside PROG read without being "
        "named: replaced by the fetched values", {**fit, "params.npz": params},
        ["run", "{fit.pb}", "--fetch", "mean_0.tmp_0", "--feeds", f"{FIT_PB}/feeds.npz", "--out",
         "{params.npz}"], ["{params.npz}: would overwrite the input {params.npz}"])
    add("dot_o_is_the_input", "dot P.dot -o P.dot, a binary program named .dot: the picture replaced it",
        {"prog.dot": src("fit_a_line")}, ["dot", "{prog.dot}", "-o", "{prog.dot}"],
        ["{prog.dot}: would overwrite the input {prog.dot}", "-o"])
    add("error_line_escapes_control_characters", "a name with ESC [2K (erase the line) and CR in an error "
        "line: printed raw, it erased the line on a terminal", fit,
        ["append", "--loss", "x\x1b[2K\rwrote out.pb", "{fit.pb}", "{out}"], ["x\\x1b[2K"])


def _npz(arrays: dict) -> bytes:
    """A .npz written by hand (stored members, fixed dates), so it does not change with zipfile."""
    import io as _io
    import numpy as np
    members = []
    for k, v in arrays.items():
        buf = _io.BytesIO()
        np.save(buf, v)
        members.append((f"{k}.npy", buf.getvalue(), len(buf.getvalue())))
    return zip_archive(members)


def build() -> tuple[dict[str, bytes], list[dict]]:
    FILES.clear()
    CASES.clear()
    loader_cases()
    structure_cases()
    pass_cases()
    run_cases()
    hostile_cases()
    files_cases()
    outputs_cases()
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return dict(FILES), list(CASES)


def manifest_bytes(cases: list[dict]) -> bytes:
    return (json.dumps({"cases": cases}, indent=1, sort_keys=False) + "\n").encode()


def main(argv: list[str]) -> int:
    files, cases = build()
    wanted = dict(files)
    wanted["cases.json"] = manifest_bytes(cases)
    keep = set(wanted) | {"make_corpus.py", "README.md", "__pycache__", "pir"}
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
    sys.exit(main(sys.argv[1:]))
