"""The PIR model's API: finding values by name, the summary, building and editing
programs, the writer's float spelling, comparison, atomic saves."""
from __future__ import annotations

import json
import math

import pytest

from conftest import TESTDATA
from pybackward import pir
from pybackward.base.errors import OutputError, ProgramFileError, VarNotFoundError
from pybackward.pir.model import Operation, iter_write_order
from pybackward.pir.types import Attr, dense

PIR = TESTDATA / "pir"


def mlp() -> pir.Program:
    return pir.load(PIR / "mlp.json")


# --------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------
def test_value_by_id_and_name():
    prog = mlp()
    assert prog.value("%5") is prog.value(5) is prog.value("5") is prog.value("x")
    assert prog.value("x").defining_op.name == "pd_op.data"
    w = prog.value("fc_0.w_0")
    assert w.defining_op.name == "builtin.parameter" and w.type.dims == (4, 8) and w.id == 4
    assert [u.name for u, _ in w.uses] == ["pd_op.matmul"]


def test_value_not_found_names_close_ones():
    with pytest.raises(VarNotFoundError) as info:
        mlp().value("fc_0.w")
    msg = str(info.value)
    assert "mlp.json" in msg and "'fc_0.w'" in msg and "'fc_0.w_0'" in msg and "%1..%16" in msg
    assert "\n" not in msg
    with pytest.raises(VarNotFoundError, match="'%99'"):
        mlp().value("%99")


def test_block_arguments_and_fetch_names():
    wl = pir.load(PIR / "while.json")
    arg = wl.value(-1)
    assert arg.is_block_arg and arg.owner.parent_op.name == "pd_op.while"
    jit = pir.load(PIR / "jit.json")
    fetched = jit.value("fetch_name_0")
    assert fetched.defining_op.name == "pd_op.add"      # the value the fetch op reads


# --------------------------------------------------------------------------
# summary
# --------------------------------------------------------------------------
def test_summary_mlp():
    s = pir.summary(mlp())
    assert [f.name for f in s.feeds] == ["x", "y"] and s.feeds[0].shape == [-1, 4]
    assert [p.name for p in s.parameters] == ["fc_1.b_0", "fc_1.w_0", "fc_0.b_0", "fc_0.w_0"]
    assert s.trainable_parameters == 4
    assert [(v.name, v.op, v.shape) for v in s.losses] == [("%16", "pd_op.mean", [])]
    assert not s.has_backward and s.fetches == []
    assert s.op_types["builtin.parameter"] == 4 and s.ops == 16


def test_summary_backward_and_control_flow():
    s = pir.summary(pir.load(PIR / "mlp_bwd.json"))
    assert s.has_backward and s.backward_ops == 8
    assert [v.name for v in s.losses] == ["%16"]           # consumed only by the backward's seed
    s = pir.summary(pir.load(PIR / "cond_in_while_bwd.json"))
    assert s.has_backward and len(s.losses) == 1 and s.losses[0].op == "pd_op.mean"
    assert s.ops > s.top_level_ops


def test_summary_text_and_json():
    s = pir.summary(pir.load(PIR / "cnn_bwd.json"))
    text = s.to_text()
    assert text.splitlines()[0].endswith("cnn_bwd.json  (PIR, 43 ops, 43 at the top)")
    assert "parameters: 8 (251 elements, 1004 B; 6 trainable)" in text       # batch norm's mean, variance
    assert "backward: present (13 grad ops)" in text and "pd_op.conv2d_grad x1" in text
    doc = json.loads(json.dumps(s.to_json()))
    assert doc["ir"] == "pir" and doc["has_backward"] and doc["losses"][0]["op"] == "pd_op.mean"
    assert "op" not in doc["feeds"][0]
    old = pir.summary(pir.load(PIR / "v1_cnn.json")).to_text()
    assert "format version 1 read as 4" in old.splitlines()[0]


def test_summary_inference_files():
    s = pir.summary(pir.load(PIR / "cnn_infer.json"))
    assert s.fetches == ["fetch_name_0"] and s.losses == [] and not s.has_backward
    assert [f.name for f in s.feeds] == ["img"]


# --------------------------------------------------------------------------
# building and editing
# --------------------------------------------------------------------------
def build_small() -> pir.Program:
    prog = pir.Program()
    b = prog.block
    x = b.append(Operation("pd_op.data", [], [dense("float32", (-1, 3))],
                           {"name": Attr.str_("x"), "shape": Attr.int_array([-1, 3]),
                            "dtype": Attr.dtype("float32"), "place": Attr.place()},
                           {"stop_gradient": Attr.bools([True])})).results[0]
    w = b.append(Operation("builtin.parameter", [], [dense("float32", (3, 2))],
                           {"is_distributed": Attr.bools([False]), "is_parameter": Attr.bools([True]),
                            "need_clip": Attr.bools([True]), "parameter_name": Attr.str_("w")},
                           {"persistable": Attr.bools([True]), "stop_gradient": Attr.bools([False]),
                            "trainable": Attr.bools([True])})).results[0]
    b.append(Operation("pd_op.matmul", [x, w], [dense("float32", (-1, 2))],
                       {"transpose_x": Attr.bool_(False), "transpose_y": Attr.bool_(False)},
                       {"stop_gradient": Attr.bools([False])}))
    return prog


def test_built_program_writes_like_paddle():
    prog = build_small()
    data = pir.dumps(prog)
    obj = json.loads(data)
    ops = obj["program"]["regions"][0]["blocks"][0]["ops"]
    assert [op["#"] for op in ops] == ["1.data", "p", "1.matmul"]
    assert ops[1]["A"] == [0, 1, 1, "w"] and ops[1]["OA"] == [1, 0, 1]
    assert ops[2]["I"] == [{"%": 1}, {"%": 2}] and ops[2]["O"][0]["%"] == 3
    assert list(obj) == ["base_code", "program"] and data.startswith(b'{"base_code":{"magic":"pir","trainable"')
    back = pir.loads(data)
    assert pir.equal(back, prog) and pir.dumps(back) == data
    assert pir.to_text(back).splitlines()[3].startswith('    (%2) = "pd_op.matmul" (%0, %1) {stop_gradient:[false]')


def test_edit_operands_and_remove():
    prog = build_small()
    x, w = prog.value("x"), prog.value("w")
    mm = prog.ops[2]
    mm.set_operand(1, x)
    assert not w.uses and x.uses == [(mm, 0), (mm, 1)]
    with pytest.raises(ValueError, match="still used"):
        prog.block.remove(prog.ops[0])
    prog.block.remove(prog.ops[1])                 # the parameter, now unused
    assert "w" not in prog.names()                 # the name index follows edits
    data = pir.dumps(prog)
    assert pir.loads(data).num_ops() == 2


def test_writer_refuses_a_value_from_elsewhere():
    prog, other = build_small(), build_small()
    prog.ops[2].set_operand(0, other.value("x"))      # a value of another program
    with pytest.raises(ProgramFileError, match=r"op 2 \(pd_op.matmul\): operand 0 is a value no op"):
        pir.dumps(prog)


def test_value_ids_follow_write_order():
    prog = pir.load(PIR / "cond_in_while.json")
    events = [k for k, _ in iter_write_order(prog)]
    assert events[0] == "block" and events[-1] == "end" and events.count("block") == events.count("end")
    before = [v.id for op in prog.walk() for v in op.results]
    pir.dumps(prog)
    assert [v.id for op in prog.walk() for v in op.results] == before == sorted(before)


# --------------------------------------------------------------------------
# floats
# --------------------------------------------------------------------------
def _one_full(value: Attr) -> pir.Program:
    prog = pir.Program()
    prog.block.append(Operation("pd_op.full", [], [dense("float32", (1,))],
                                {"shape": Attr.int_array([1]), "value": value, "dtype": Attr.dtype("float32"),
                                 "place": Attr.place(1)}))
    return prog


@pytest.mark.parametrize("value, text", [
    (Attr.f64(1e15), b'"D":1e+15'),                          # nlohmann's exponent switch, not repr's
    (Attr.f64(-1234567890123456.8), b'"D":-1.2345678901234568e+15'),
    (Attr.f64(1e16), b'"D":1e+16'),
    (Attr.f64(0.1), b'"D":0.1'),
    (Attr.f32(0.1), b'"D":0.10000000149011612'),              # held as float32, as Paddle holds it
    (Attr.f64(math.inf), b'"VD":"INF"'),
    (Attr.f64(-math.inf), b'"VD":"-INF"'),
    (Attr.f64(math.nan), b'"VD":"NAN"'),                      # the spelling Paddle can read back
])
def test_float_spelling(value, text):
    data = pir.dumps(_one_full(value))
    assert text in data
    back = pir.loads(data).ops[0].attrs["value"]
    assert back.tag == value.tag and (back.value == value.value or (math.isnan(back.value)
                                                                    and math.isnan(value.value)))


def test_float_text_is_kept():
    """A float whose digits Paddle chose differently from Python keeps its text."""
    data = pir.dumps(_one_full(Attr.f64(0.5))).replace(b'"D":0.5', b'"D":1.2345678901234567e+15')
    prog = pir.loads(data)
    assert pir.dumps(prog) == data
    assert prog.ops[0].attr("value") == 1.2345678901234567e+15


def test_non_finite_without_vd_is_refused():
    with pytest.raises(ProgramFileError, match="VD"):
        pir.dumps(_one_full(Attr("0.a_f64", math.inf)))


# --------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------
def test_equal_ignores_attribute_order_and_numbering():
    a = mlp()
    b = mlp()
    mm = b.ops[6]
    mm.attrs = dict(reversed(list(mm.attrs.items())))
    assert pir.dumps(a) != pir.dumps(b) and pir.equal(a, b) and pir.diff(a, b) == []


def test_diff_names_the_change():
    a, b = mlp(), mlp()
    b.ops[6].attrs["transpose_y"] = Attr.bool_(True)
    lines = pir.diff(a, b, ("mlp.json", "edited"))
    assert lines[0] == "--- mlp.json" and lines[1] == "+++ edited"
    changed = [ln for ln in lines if ln.startswith(("-  ", "+  "))]
    assert len(changed) == 2 and all("pd_op.matmul" in ln for ln in changed)
    assert "transpose_y=bool:false" in changed[0] and "transpose_y=bool:true" in changed[1]
    assert not pir.equal(a, b)


# --------------------------------------------------------------------------
# saving
# --------------------------------------------------------------------------
def test_save_is_atomic_and_readable(tmp_path):
    prog = mlp()
    out = tmp_path / "copy.json"
    pir.save(prog, out)
    assert out.read_bytes() == (PIR / "mlp.json").read_bytes()
    pir.save(prog, out, readable=True)
    assert out.read_bytes().startswith(b'{\n    "base_code": {\n        "magic": "pir",')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.json"]
    with pytest.raises(OutputError):
        pir.save(prog, tmp_path / "missing" / "x.json")
