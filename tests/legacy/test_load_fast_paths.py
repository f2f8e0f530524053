"""The loader's fast paths answer exactly as the reads they save.

* Validation reads each op's slots once and the op views keep them
  (`Operator.slot_records`); the argument names, the pass's forward-op
  view and every later read come from them. They must equal the desc's
  slots on every op of every model, and follow the views' edits.
* Validation checks an attr list it has seen pass before (same wire bytes)
  without reading its attrs one by one: ops after the first still get every
  slot check, still count as naming an attr twice, and a block whose attr
  lists do not repeat turns the shortcut off without missing an error.
* `guards.existing_backward` reads `op_role` from the end of the attrs; on
  an op that names it twice the first one still counts, as `Operator.attr`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import pybackward
from pybackward._proto import framework_pb2 as pb
from pybackward.backward.guards import existing_backward
from pybackward.base.errors import ProgramFileError

MODELS = Path(__file__).resolve().parent.parent.parent / "testdata" / "models"
FILES = sorted(p for p in MODELS.glob("*/*.pb"))


def _read(desc: pb.OpDesc):
    return ([(v.parameter, list(v.arguments)) for v in desc.inputs],
            [(v.parameter, list(v.arguments)) for v in desc.outputs])


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_slot_records_equal_the_descs(path):
    prog = pybackward.load(str(path))
    n = 0
    for b in prog.blocks:
        for op in b.ops:
            assert op._slots is not None, "validation handed over no slots"
            assert op.slot_records() == _read(op.desc)
            assert op.input_arg_names == tuple(a for _, args in _read(op.desc)[0] for a in args)
            assert op.output_arg_names == tuple(a for _, args in _read(op.desc)[1] for a in args)
            n += 1
    assert n > 0


def _program(n_ops: int = 3, distinct: bool = False, bad_at: int | None = None, twice: bool = False) -> bytes:
    """x -> n scale ops (attrs equal unless `distinct`), each writing its own var."""
    d = pb.ProgramDesc()
    b = d.blocks.add(idx=0, parent_idx=-1)
    for name in ["x"] + [f"y{i}" for i in range(n_ops)]:
        v = b.vars.add(name=name)
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
        v.type.dense_tensor.tensor.dims.extend([2, 3])
    for i in range(n_ops):
        op = b.ops.add(type="scale")
        op.inputs.add(parameter="X", arguments=["ghost" if i == bad_at else "x"])
        op.outputs.add(parameter="Out", arguments=[f"y{i}"])
        op.attrs.add(name="scale", type=pb.AttrType.FLOAT, f=float(i) if distinct else 2.0)
        if twice:
            op.attrs.add(name="scale", type=pb.AttrType.FLOAT, f=3.0)
        op.attrs.add(name="op_role", type=pb.AttrType.INT, i=0)
    return d.SerializeToString()


def test_slot_records_follow_the_views_edits():
    prog = pybackward.loads(_program())
    op = prog.global_block().ops[1]
    op.rename_input("x", "y0")
    assert op.slot_records() == ([("X", ["y0"])], [("Out", ["y1"])]) == _read(op.desc)
    assert op.input_arg_names == ("y0",)
    op.set_input("X", ["x", "y0"])
    assert op.slot_records()[0] == [("X", ["x", "y0"])] and op.input_arg_names == ("x", "y0")
    op.rename_output("y1", "y2")
    assert op.slot_records()[1] == [("Out", ["y2"])] and op.output_arg_names == ("y2",)


@pytest.mark.parametrize("bad_at", [1, 2])
def test_an_attr_list_seen_before_still_gets_its_slots_checked(bad_at):
    with pytest.raises(ProgramFileError, match=rf"op {bad_at} \(scale\).*'ghost'"):
        pybackward.loads(_program(bad_at=bad_at))


def test_every_op_naming_an_attr_twice_is_found_on_a_repeated_attr_list():
    prog = pybackward.loads(_program(n_ops=4, twice=True))
    assert prog.repeated_attr_ops == prog.global_block().ops       # not only the first of the equal lists
    pybackward.append_backward("y3", program=prog)
    for op in prog.global_block().ops[:4]:
        names = [a.name for a in op.desc.attrs]
        assert names.count("scale") == 1 and op.attr("scale") == 3.0


def test_attr_lists_that_do_not_repeat_are_all_checked():
    n = 200
    prog = pybackward.loads(_program(n_ops=n, distinct=True))
    assert [op.attr("scale") for op in prog.global_block().ops] == [float(i) for i in range(n)]
    with pytest.raises(ProgramFileError, match=rf"op {n - 1} \(scale\).*'ghost'"):
        pybackward.loads(_program(n_ops=n, distinct=True, bad_at=n - 1))
    d = pb.ProgramDesc.FromString(_program(n_ops=n, distinct=True))
    d.blocks[0].ops[n - 1].attrs[1].type = pb.AttrType.STRING       # op_role must be an INT
    with pytest.raises(ProgramFileError, match=rf"op {n - 1} \(scale\).*op_role"):
        pybackward.loads(d.SerializeToString())


def _roles(*roles: int) -> bytes:
    d = pb.ProgramDesc.FromString(_program(n_ops=1))
    op = d.blocks[0].ops[0]
    del op.attrs[1:]
    for r in roles:
        op.attrs.add(name="op_role", type=pb.AttrType.INT, i=r)
    return d.SerializeToString()


def test_existing_backward_reads_op_role_as_attr_does():
    assert existing_backward(pybackward.loads(_roles(0))) is None
    assert "op_role 1" in existing_backward(pybackward.loads(_roles(1)))
    # named twice: the first counts (read from the end, the second would)
    loaded = pybackward.loads(_roles(0, 1))
    assert loaded.repeated_attr_ops == loaded.global_block().ops
    assert existing_backward(loaded) is None
    assert "op_role 1" in existing_backward(pybackward.loads(_roles(1, 0)))
    loaded.repeated_attr_ops = None             # as for a program built in memory: every op read in order
    assert existing_backward(loaded) is None


CASES = sorted(d.name for d in MODELS.iterdir() if (d / "case.json").exists())


@pytest.mark.parametrize("name", CASES)
def test_slot_records_still_equal_the_descs_after_the_pass(name):
    """The pass reads the forward ops' slots from their records (makers given
    them as they are where they only copy from them) and never edits them."""
    import json
    import warnings
    spec = json.loads((MODELS / name / "case.json").read_text())["variants"]["default"]
    prog = pybackward.load(str(MODELS / name / "forward.pb"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pybackward.append_backward(spec["loss"], program=prog, parameter_list=spec["parameter_list"])
    for b in prog.blocks:
        for op in b.ops:
            assert op.slot_records() == _read(op.desc)


# -- session 11: the loader reads ops and vars from their bytes -------------
#
# * Required fields are proven per item (`validate._Required`) instead of by
#   one `IsInitialized`: a var's name / an op's type / a slot's name from
#   the bytes, the rest once per distinct rest (var) or attr bytes (op).
#   Each test below clears one required field in an item whose rest or attr
#   bytes equal an earlier, complete item's, and expects the message the
#   whole-program check writes (and that it is reported before any other
#   problem, as when it ran first).
# * Vars are checked once per distinct bytes after the name; ops' slots and
#   types are read from the block's serialisation (`_read_head`), or through
#   upb when not in the form read there.

from pybackward.legacy import validate as V


#: How the loader reads items: from the block's serialisation, from each
#: item's own (a block of more than WHOLE_BLOCK_MAX_ITEMS), through upb (a
#: runtime that does not write fields in number order).
MODES = ["block", "items", "upb"]


def _set_mode(monkeypatch, mode: str) -> None:
    monkeypatch.setattr(V, "FIELD_ORDER", mode != "upb")
    if mode == "items":
        monkeypatch.setattr(V, "WHOLE_BLOCK_MAX_ITEMS", 0)


def _model() -> pb.ProgramDesc:
    d = pb.ProgramDesc.FromString(_program(n_ops=3))
    b = d.blocks[0]
    for v in b.vars:
        v.attrs.add(name="va", type=pb.AttrType.INT, i=1)
    for op in b.ops:
        s = op.attrs.add(name="sc", type=pb.AttrType.SCALAR)
        s.scalar.type = pb.Scalar.Type.LONG
        s.scalar.i = 1
    p = d.op_version_map.pair.add(op_name="scale")
    p.op_version.version = 1
    return d


def _full_check_message(data: bytes) -> str:
    with pytest.raises(ProgramFileError) as e:
        V._check_initialized(pb.ProgramDesc.FromString(data), "<bytes>")
    return str(e.value)


def _clear(path: str):
    """A mutation of _model(): clear the field at `path` (attribute names and indexes)."""
    def mutate(d):
        obj = d
        *parts, last = path.split(".")
        for part in parts:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        obj.ClearField(last)
    return mutate


REQUIRED = {
    "var name": "blocks.0.vars.2.name",
    "var type": "blocks.0.vars.2.type",
    "var type's type": "blocks.0.vars.2.type.type",
    "tensor data_type": "blocks.0.vars.2.type.dense_tensor.tensor.data_type",
    "dense_tensor's tensor": "blocks.0.vars.2.type.dense_tensor.tensor",
    "var attr name": "blocks.0.vars.2.attrs.0.name",
    "var attr type": "blocks.0.vars.2.attrs.0.type",
    "op type": "blocks.0.ops.1.type",
    "input slot name": "blocks.0.ops.1.inputs.0.parameter",
    "output slot name": "blocks.0.ops.1.outputs.0.parameter",
    "attr name": "blocks.0.ops.1.attrs.0.name",
    "attr type": "blocks.0.ops.1.attrs.1.type",
    "scalar type": "blocks.0.ops.1.attrs.2.scalar.type",
    "block idx": "blocks.0.idx",
    "block parent_idx": "blocks.0.parent_idx",
    "op_version_map op_name": "op_version_map.pair.0.op_name",
    "op_version_map version": "op_version_map.pair.0.op_version.version",
}


def test_the_model_loads():
    prog = pybackward.loads(_model().SerializeToString())
    assert [op.attr("scale") for op in prog.global_block().ops] == [2.0] * 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what", sorted(REQUIRED))
def test_a_missing_required_field_is_found_on_a_repeated_item(what, mode, monkeypatch):
    _set_mode(monkeypatch, mode)
    d = _model()
    _clear(REQUIRED[what])(d)
    data = d.SerializePartialToString()
    want = _full_check_message(data)
    assert "required field" in want
    with pytest.raises(ProgramFileError) as e:
        pybackward.loads(data)
    assert str(e.value) == want
    # reported first, before a problem in an earlier item or block
    d.blocks[0].vars.add().CopyFrom(d.blocks[0].vars[0])              # declared twice
    d.blocks[0].ops[0].inputs[0].arguments[0] = "ghost"               # undeclared
    data = d.SerializePartialToString()
    with pytest.raises(ProgramFileError) as e:
        pybackward.loads(data)
    assert str(e.value) == _full_check_message(data)


def test_items_equal_but_for_their_names_share_one_check():
    d = _model()
    b = d.blocks[0]
    # the rest of vars[2] equals vars[1]'s: both load, by their own names
    assert b.vars[1].SerializeToString()[2 + len("y0"):] == b.vars[2].SerializeToString()[2 + len("y1"):]
    prog = pybackward.loads(d.SerializeToString())
    assert list(prog.global_block().vars) == ["x", "y0", "y1", "y2"]


@pytest.mark.parametrize("mode", MODES)
def test_a_var_differing_in_its_type_only_is_checked(mode, monkeypatch):
    _set_mode(monkeypatch, mode)
    d = _model()
    d.blocks[0].vars[2].type.dense_tensor.tensor.dims[1] = -5
    with pytest.raises(ProgramFileError, match=r"var y1.*dimension -5 is negative|y1.*dimension -5"):
        pybackward.loads(d.SerializeToString())
    d = _model()
    d.blocks[0].vars[2].type.type = pb.VarType.SELECTED_ROWS     # no selected_rows description
    with pytest.raises(ProgramFileError, match=r"y1.*without its tensor description"):
        pybackward.loads(d.SerializeToString())


def _records(desc: pb.OpDesc):
    return ([(v.parameter, list(v.arguments)) for v in desc.inputs],
            [(v.parameter, list(v.arguments)) for v in desc.outputs])


def _odd_program() -> pb.ProgramDesc:
    """Ops and vars whose bytes take the reader's other branches: names of
    128+ bytes, a slot of 128+ bytes, an empty slot, an op with no slots,
    unknown fields in a slot and in an op, a var name of 200 bytes."""
    d = pb.ProgramDesc.FromString(_program(n_ops=3))
    b = d.blocks[0]
    long = "v" * 200
    many = [f"m{i:03d}" for i in range(60)]
    for name in [long] + many:
        v = b.vars.add(name=name)
        v.CopyFrom(b.vars[0])
        v.name = name
    op = b.ops.add(type="sum")
    op.inputs.add(parameter="X", arguments=many)
    op.outputs.add(parameter="Out", arguments=[long])
    op = b.ops.add(type="t" * 150)
    op.inputs.add(parameter="P" * 130, arguments=["x"])
    op.inputs.add(parameter="Empty")
    b.ops.add(type="fill_nothing")
    op = b.ops.add(type="scale")
    op.inputs.add(parameter="X", arguments=["x"])
    op.outputs.add(parameter="Out", arguments=["y0"])
    data = bytearray(d.SerializeToString())
    d = pb.ProgramDesc.FromString(bytes(data))
    last = d.blocks[0].ops[-1]
    # an unknown field (number 9) in the last op's input slot, and one in the op
    slot = pb.OpDesc.Var.FromString(last.inputs[0].SerializeToString() + b"\x4a\x01z")
    last.inputs[0].CopyFrom(slot)
    last.MergeFromString(b"\x7a\x01q")     # field 15, LEN
    return d


@pytest.mark.parametrize("mode", MODES)
def test_records_of_odd_ops_equal_the_descs(mode, monkeypatch):
    _set_mode(monkeypatch, mode)
    d = _odd_program()
    found = V.validate(pb.ProgramDesc.FromString(d.SerializeToString()), check_vars=False)
    prog = pybackward.loads(d.SerializeToString(), check_vars=False)
    b = prog.global_block()
    assert list(b.vars) == [v.name for v in d.blocks[0].vars]
    assert all(b.vars[v.name].desc.name == v.name for v in d.blocks[0].vars)
    for i, op in enumerate(b.ops):
        assert op.slot_records() == _records(op.desc)
        assert op._slots is not None
        assert found.types[0][i] in (None, op.type)
    ops = b.ops
    # read from the bytes: all but the op with an unknown field in a slot
    assert [t is not None for t in found.types[0]] == [mode != "upb"] * (len(ops) - 1) + [False]
    assert pybackward.dumps(prog) == d.SerializeToString()


@pytest.mark.parametrize("bad", [b"\xff", b"\xed\xa0\x80", b"\xc0\xaf"], ids=["ff", "surrogate", "overlong"])
@pytest.mark.parametrize("where_, what", [("arg", "an argument of slot 'Out'"), ("slot", "slot name"),
                                          ("type", "op type"), ("var", "a var name")])
def test_names_that_are_not_utf8_are_refused_as_upb_reads_them(bad, where_, what):
    """Strings are decoded strictly, as upb does (upb gives bytes for the
    others): each such name still gets the detailed check's message."""
    d = pb.ProgramDesc.FromString(_program(n_ops=2))
    b = d.blocks[0]
    b.vars[2].name = b.ops[1].outputs[0].arguments[0] = "yyy1"
    data = d.SerializeToString()
    marker = {"arg": b"yyy1", "slot": b"Out", "type": b"scale", "var": b"yyy1"}[where_]
    # op 1's string (its last occurrence; the type field's), or the var's name (the first)
    i = (data.index(marker) if where_ == "var" else data.rindex(b"\x1a\x05scale") + 2 if where_ == "type"
         else data.rindex(marker))
    data = data[:i] + bad + marker[len(bad):] + data[i + len(marker):]
    with pytest.raises(ProgramFileError, match=f"{what} is not UTF-8 text"):
        pybackward.loads(data)


def test_an_op_with_slots_but_no_type_is_read_through_upb(monkeypatch):
    d = pb.ProgramDesc.FromString(_program(n_ops=2))
    d.blocks[0].ops[1].ClearField("type")
    data = d.SerializePartialToString()
    with pytest.raises(ProgramFileError) as e:
        pybackward.loads(data)
    assert str(e.value) == _full_check_message(data) and "'type'" in str(e.value)


def test_fields_are_written_in_number_order():
    """What the byte reader relies on, asked of this runtime (if this fails,
    loading still works, through upb: FIELD_ORDER is False)."""
    assert V.FIELD_ORDER


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_views_built_from_validation_equal_synced_views(path):
    prog = pybackward.load(str(path))
    data = pybackward.dumps(prog)
    found = V.validate(pb.ProgramDesc.FromString(data))
    for b, types in zip(prog.blocks, found.types):
        assert list(b.vars) == [v.name for v in b.desc.vars]
        assert [v.desc for v in b.vars.values()] == list(b.desc.vars)
        assert [op.desc for op in b.ops] == list(b.desc.ops)
        for op, t in zip(b.ops, types):
            assert t is None or t == op.type
            # the sub-block the view answers is the attr's (None: the loader said there is none)
            a = op._find_attr("sub_block")
            assert op.sub_block == (None if a is None else a.block_idx)
        fresh = pybackward.Program(prog.desc).blocks[b.idx]
        assert list(fresh.vars) == list(b.vars)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_three_readings_agree_on_every_model(path, monkeypatch):
    data = path.read_bytes()
    seen = {}
    for mode in MODES:
        with monkeypatch.context() as m:
            _set_mode(m, mode)
            f = V.validate(pb.ProgramDesc.FromString(data))
        seen[mode] = (f.slots, f.var_names, f.repeated_attrs, f.block_attrs)
        assert f.block_bytes == []          # not kept past validation
    assert seen["block"] == seen["items"] == seen["upb"]
    desc = pb.ProgramDesc.FromString(data)
    assert seen["block"][0] == [[_records(op) for op in b.ops] for b in desc.blocks]
