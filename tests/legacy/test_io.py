"""Loading, validation and saving."""
from __future__ import annotations

import os

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, all_golden_files
from pybackward.legacy import io
from pybackward._proto import framework_pb2 as pb
from pybackward.base.errors import ProgramFileError

GOLDEN = all_golden_files()


def test_there_are_golden_programs():
    assert len({p.parent.name for p in GOLDEN}) >= 12


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_paddle_file_round_trips_byte_identically(path, tmp_path):
    data = path.read_bytes()
    prog = pybackward.load(path)
    assert pybackward.dumps(prog) == data
    out = tmp_path / "out.pb"
    pybackward.save(prog, out)
    assert out.read_bytes() == data


@pytest.mark.parametrize("path", GOLDEN[:6], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_text_format_round_trip(path, tmp_path):
    prog = pybackward.load(path)
    txt = tmp_path / "p.pbtxt"
    pybackward.save(prog, txt)
    again = pybackward.load(txt)
    assert pybackward.dumps(again) == path.read_bytes()
    # The committed .pbtxt beside each golden file is the same program.
    committed = path.with_suffix(".pbtxt")
    if committed.exists():
        assert pybackward.dumps(pybackward.load(committed)) == path.read_bytes()


def test_program_views():
    prog = pybackward.load(PROGRAMS / "doc_append_backward" / "forward.pb")
    b = prog.global_block()
    w = prog.var("my_fc.w_0")
    assert w.shape == (256 * 13, 1) and w.dtype == np.float32
    assert w.persistable and w.is_parameter and not w.stop_gradient
    x = b.var("x")
    assert x.dtype == np.int64 and x.stop_gradient and x.shape == (-1, 13)
    assert [p.name for p in b.all_parameters()] == ["embedding_0.w_0", "my_fc.b_0", "my_fc.w_0"]
    mul = next(op for op in b.ops if op.type == "mul")
    assert mul.input("X") == ["embedding_0.tmp_0"] and mul.output("Out") == ["my_fc.tmp_0"]
    assert mul.attr("x_num_col_dims") == 1 and mul.attr("op_role") == 0
    assert mul.attr_type("x_num_col_dims") == pb.AttrType.INT
    assert "X" in mul.input_names


def test_builders_and_ancestor_lookup():
    prog = pybackward.Program()
    b0 = prog.global_block()
    x = b0.create_var("x", [2, 3], "float32", stop_gradient=True)
    sub = prog.create_block(0)
    y = sub.create_var("y", [2, 3], "float64")
    assert sub.var("x") is x and not b0.has_var("y") and sub.has_var_recursive("x")
    sub.append_op("relu", {"X": [x]}, {"Out": [y]}, {"op_role": 0, "alpha": 0.5, "axes": [1, 2],
                                                       "name": "r", "flag": True})
    op = sub.ops[0]
    assert op.attr("alpha") == 0.5 and op.attr("axes") == [1, 2] and op.attr("flag") is True
    sub.insert_op(0, "scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0})
    assert [o.type for o in sub.ops] == ["scale", "relu"]
    with pytest.raises(pybackward.VarNotFoundError, match="no such variable"):
        sub.var("nope")
    again = pybackward.loads(pybackward.dumps(prog))
    assert again.block(1).var("y").dtype == np.float64


def test_long_and_float64_attrs_keep_their_type():
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("x", [1])
    op = b.append_op("fill_constant", {}, {"Out": ["x"]}, {"big": 2**40, "shape": [1, 2**40]})
    assert op.attr_type("big") == pb.AttrType.LONG and op.attr_type("shape") == pb.AttrType.LONGS
    op.set_attr("big", 3)
    assert op.attr_type("big") == pb.AttrType.LONG and op.attr("big") == 3


def test_save_is_atomic_when_serialisation_fails(tmp_path, monkeypatch):
    target = tmp_path / "out.pb"
    target.write_bytes(b"old")
    prog = pybackward.load(GOLDEN[0])

    def boom(f, data):
        raise OSError("disk full")
    real_fdopen = os.fdopen

    class Exploding:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, data):
            self.f.write(data[:10])
            raise OSError("disk full")

    monkeypatch.setattr(io.os, "fdopen", lambda fd, mode: Exploding(real_fdopen(fd, mode)))
    with pytest.raises(pybackward.OutputError, match="out.pb: cannot write: disk full"):
        pybackward.save(prog, target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.pb"]  # no temp file left


def _program(**kw) -> pb.ProgramDesc:
    d = pb.ProgramDesc()
    b = d.blocks.add(idx=0, parent_idx=-1)
    v = b.vars.add(name="x")
    v.type.type = pb.VarType.DENSE_TENSOR
    v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    v.type.dense_tensor.tensor.dims.extend([2])
    return d


def _bad(desc: pb.ProgramDesc, match: str):
    with pytest.raises(ProgramFileError, match=match):
        pybackward.loads(desc.SerializeToString(), source="bad.pb")


def test_validation_errors_name_block_op_and_var():
    d = _program()
    d.blocks.add(idx=1, parent_idx=2)
    d.blocks.add(idx=2, parent_idx=1)
    _bad(d, r"bad.pb: block 1: parent blocks form a cycle \(1 -> 2 -> 1\)")

    d = _program()
    d.blocks[0].parent_idx = 0
    _bad(d, "block 0 must have parent_idx -1")

    d = _program()
    d.blocks.add(idx=5, parent_idx=0)
    _bad(d, "block 1: the block at position 1 says idx=5")

    d = _program()
    op = d.blocks[0].ops.add(type="conditional_block")
    a = op.attrs.add(name="sub_block", type=pb.AttrType.BLOCK, block_idx=7)
    _bad(d, r"block 0, op 0 \(conditional_block\): attr 'sub_block' names block 7")

    d = _program()
    d.blocks[0].ops.add(type="relu").inputs.add(parameter="X", arguments=["ghost"])
    _bad(d, r"block 0, op 0 \(relu\), var 'ghost': slot 'X' names a variable that no visible block declares")

    d = _program()
    d.blocks[0].vars.add().CopyFrom(d.blocks[0].vars[0])
    _bad(d, "var 'x': variable declared twice")

    d = _program()
    d.blocks[0].vars[0].type.dense_tensor.tensor.dims[0] = -5
    _bad(d, "var 'x': dimension -5 is negative")
    assert a  # silence


def test_check_vars_false_accepts_undeclared_args():
    d = _program()
    d.blocks[0].ops.add(type="relu").inputs.add(parameter="X", arguments=["ghost"])
    prog = pybackward.loads(d.SerializeToString(), check_vars=False)
    assert prog.global_block().ops[0].input("X") == ["ghost"]


def _program_with_a_repeated_attr() -> bytes:
    """x -> scale (attr `scale` written twice: 2.0, then 3.0) -> mean."""
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("x", [2, 3], "float32")
    b.create_var("y", [2, 3], "float32")
    b.create_var("loss", [], "float32")
    op = b.append_op("scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0, "bias": 0.0, "op_role": 0})
    op.desc.attrs.add().CopyFrom(op.desc.attrs[0])
    op.desc.attrs[-1].f = 3.0
    b.append_op("mean", {"X": ["y"]}, {"Out": ["loss"]}, {"op_role": 0})
    return pybackward.dumps(prog)


def test_the_pass_keeps_one_attr_per_name_as_paddles_parse_does():
    """validate() finds the forward ops that name an attr twice; the pass then
    keeps each name once, where it first stands, with its last value - on a
    loaded program, on a clone of it, and again after a failed pass restored it."""
    data = _program_with_a_repeated_attr()
    prog = pybackward.loads(data)
    scale = prog.global_block().ops[0]
    assert prog.repeated_attr_ops == [scale]
    assert [a.name for a in scale.desc.attrs].count("scale") == 2
    assert pybackward.dumps(prog) == data           # loading keeps the file's bytes

    def names_once(p):
        op = p.global_block().ops[0]
        names = [a.name for a in op.desc.attrs]
        return len(names) == len(set(names)) and op.attr("scale") == 3.0 and names.index("scale") == 0

    twin = prog.clone()
    assert twin.repeated_attr_ops is None           # a clone's descs are new: every op is looked at
    pybackward.append_backward("loss", program=twin)
    assert names_once(twin)

    with pytest.raises(pybackward.PyBackwardError):
        pybackward.append_backward("loss", program=prog, parameter_list=["no_such_param"])
    with pytest.raises(pybackward.PyBackwardError):
        pybackward.append_backward("loss", program=prog, callbacks=[_fail])
    assert [a.name for a in prog.global_block().ops[0].desc.attrs].count("scale") == 2   # restored
    pybackward.append_backward("loss", program=prog)
    assert names_once(prog)


def _fail(block, context):
    raise pybackward.PyBackwardError("a callback fails")


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_piecewise_serialisation_is_byte_identical(path, tmp_path):
    """A large program is saved piece by piece (one per op and var, so the
    output is never held twice over): the pieces join into `dumps`'s bytes,
    and `save` writes exactly them."""
    prog = pybackward.load(path)
    pieces = io.serialised_pieces(prog, min_items=0)
    assert pieces is not None and len(pieces) > 1
    assert b"".join(pieces) == pybackward.dumps(prog)
    assert io.serialised_pieces(prog) is None          # below PIECEWISE_MIN_ITEMS: one piece, as before


def test_piecewise_save_is_used_for_large_programs_and_checks_like_dumps(tmp_path, monkeypatch):
    prog = pybackward.load(PROGRAMS / "cond_in_while" / "forward.pb")
    monkeypatch.setattr(io, "PIECEWISE_MIN_ITEMS", 1)
    writes = []
    from pybackward.base import files
    real = files._write
    monkeypatch.setattr(files, "_write", lambda f, data: (writes.append(data), real(f, data)))
    pybackward.save(prog, tmp_path / "out.pb")
    assert isinstance(writes[0], list) and (tmp_path / "out.pb").read_bytes() == pybackward.dumps(prog)
    # unknown fields on a block: not split (the plain path keeps them)
    odd = pybackward.loads(pybackward.dumps(prog) + b"")
    odd.desc.blocks[1].MergeFromString(b"\xa0\x06\x01")           # field 100, varint 1
    assert io.serialised_pieces(odd) is None
    # a required field missing: the error dumps gives
    prog.global_block().ops[0].desc.ClearField("type")
    with pytest.raises(ProgramFileError, match="cannot serialise"):
        pybackward.save(prog, tmp_path / "bad.pb")
    assert not (tmp_path / "bad.pb").exists()
