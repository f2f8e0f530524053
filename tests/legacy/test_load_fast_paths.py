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
