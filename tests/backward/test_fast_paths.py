"""The gradient pass's fast paths write exactly what its general paths write.

* `emit` without callbacks puts the grad ops in as wire bytes, one parse per
  block (`emit._emit_bytes`); with callbacks it builds them one `OpDesc` at
  a time. Every model of testdata/models is differentiated both ways and the
  programs compared byte for byte.
* `steps.tag_op_role_var` (op_role_var on each gradient's last writer, with
  the attr's place found once per distinct attr list) against
  `prepend_to_list_attr`, in every case: no such attr, an empty one, one
  holding values, one of another type - and on many ops sharing an attr
  list, where the cache answers.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import pybackward
from pybackward._proto import framework_pb2 as pb
from pybackward.backward.emit import emit
from pybackward.backward.steps import tag_op_role_var
from pybackward.legacy.program import prepend_to_list_attr
from pybackward.ops.registry import fresh_op

MODELS = Path(__file__).resolve().parent.parent.parent / "testdata" / "models"
NAMES = sorted(d.name for d in MODELS.iterdir() if (d / "case.json").exists())


def _append(name: str, callbacks):
    case = json.loads((MODELS / name / "case.json").read_text())
    spec = case["variants"]["default"]
    prog = pybackward.loads((MODELS / name / "forward.pb").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pybackward.append_backward(spec["loss"], program=prog, parameter_list=spec["parameter_list"],
                                   callbacks=callbacks)
    return pybackward.dumps(prog), (MODELS / name / spec["file"]).read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_bytes_emission_equals_op_by_op(name):
    calls = []
    fast, gold = _append(name, None)
    slow, _ = _append(name, [lambda block, context: calls.append(1)])
    assert calls, "the callback path was not taken"
    assert fast == slow
    assert fast == gold


def _grad_ops():
    long = "v" * 200                 # a name, a slot and an op longer than 127 bytes
    return [
        fresh_op("sum", {"X": ["a@GRAD@RENAME@block0@0", "a@GRAD@RENAME@block0@1", long]}, {"Out": ["a@GRAD"]}),
        fresh_op("elementwise_add_grad", {"Y": ["y"], "X": ["x"], "Out@GRAD": ["o@GRAD"]},
                 {"Y@GRAD": ["y@GRAD"], "X@GRAD": ["x@GRAD"]}, {"axis": -1}),
        fresh_op("fill_any_like", {"X": [long]}, {"Out": [long + "@GRAD"]}, {"value": 0.0, "dtype": -1}),
        fresh_op("conditional_block_grad", {"Cond": ["c"], "Input": ["i"]}, {"Input@GRAD": ["i@GRAD"]},
                 {"sub_block": (0, pb.AttrType.BLOCK)}),
        fresh_op("scale", {}, {}),
    ]


def test_bytes_emission_of_unsorted_slots_and_long_names():
    """Slots in any order, names and ops past 127 bytes, a sub_block attr:
    the bytes path writes what `fill_op_desc` writes op by op, and its views
    cache the same argument lists and sub-block."""
    progs = [pybackward.Program(), pybackward.Program()]
    emit(progs[0].global_block(), _grad_ops(), {}, None)
    emit(progs[1].global_block(), _grad_ops(), {}, [lambda block, context: None])
    fast, slow = (p.global_block() for p in progs)
    assert pybackward.dumps(progs[0]) == pybackward.dumps(progs[1])
    assert len(fast.ops) == len(slow.ops) == len(fast.desc.ops) == 5
    for a, b in zip(fast.ops, slow.ops):
        assert a.input_arg_names == b.input_arg_names
        assert a.output_arg_names == b.output_arg_names
        assert a.sub_block == b.sub_block
        assert a.desc is not b.desc and a.desc == b.desc
    assert fast.ops[1].input_names == ["Out@GRAD", "X", "Y"]
    assert fast.ops[3].sub_block == 0 and fast.ops[0].sub_block is None


def _desc(attrs: list[tuple[str, int, object]]) -> pb.OpDesc:
    d = pb.OpDesc(type="mul_grad")
    d.inputs.add(parameter="X", arguments=["x"])
    d.outputs.add(parameter="X@GRAD", arguments=["x@GRAD"])
    for name, t, value in attrs:
        a = d.attrs.add(name=name, type=t)
        if t == pb.AttrType.STRINGS:
            a.strings.extend(value)
        elif t == pb.AttrType.STRING:
            a.s = value
        elif t == pb.AttrType.INT:
            a.i = value
    return d


S, STR, I = pb.AttrType.STRINGS, pb.AttrType.STRING, pb.AttrType.INT
CASES = {
    "absent, middle": [("op_device", STR, ""), ("op_role", I, 1), ("use_mkldnn", I, 0), ("x_num_col_dims", I, 1)],
    "absent, last": [("a", I, 1), ("op_role", I, 1)],
    "absent, first": [("z", I, 1)],
    "absent, no attrs": [],
    "absent, extras first": [("use_mkldnn", I, 0), ("op_role", I, 1), ("axis", I, -1), ("x", I, 1)],
    "empty": [("op_device", STR, ""), ("op_role", I, 1), ("op_role_var", S, []), ("use_mkldnn", I, 0)],
    "with values": [("op_role", I, 1), ("op_role_var", S, ["w", "w@GRAD"]), ("x", I, 1)],
    "another type": [("op_role", I, 1), ("op_role_var", STR, "ab"), ("x", I, 1)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tag_op_role_var_equals_prepend(case):
    places: dict = {}
    for i in range(3):      # the first op fills the cache, the others read it
        want, got = _desc(CASES[case]), _desc(CASES[case])
        prepend_to_list_attr(want, "op_role_var", [f"p{i}", f"p{i}@GRAD"], S)
        tag_op_role_var(got, f"p{i}", f"p{i}@GRAD", places)
        assert got.SerializeToString() == want.SerializeToString()
        tag_op_role_var(got, "q", "q@GRAD", places)      # a second param's grad written by the same op
        prepend_to_list_attr(want, "op_role_var", ["q", "q@GRAD"], S)
        assert got.SerializeToString() == want.SerializeToString()


def test_tag_op_role_var_on_ops_emitted_as_bytes():
    """`emit` hands over the attr bytes it wrote (`attrs_out`), and
    `tag_op_role_var` uses them instead of reading the op back: once per op,
    as a tag changes them (a second param's grad written by the same op),
    and never for another desc that happens to reuse the key."""
    progs = [pybackward.Program(), pybackward.Program()]
    written: dict = {}
    emit(progs[0].global_block(), _grad_ops(), {}, None, written)
    emit(progs[1].global_block(), _grad_ops(), {}, None)
    got, want = (p.global_block().desc.ops for p in progs)
    assert set(written) == {id(d) for d in got}
    assert all(written[id(d)][0] is d for d in got)
    first_tail = written[id(got[0])][1]
    places: dict = {}
    for k, (g, w) in enumerate(zip(got, want)):
        for param in ("p", "q"):
            tag_op_role_var(g, f"{param}{k}", f"{param}{k}@GRAD", places, written)
            prepend_to_list_attr(w, "op_role_var", [f"{param}{k}", f"{param}{k}@GRAD"], S)
            assert g.SerializeToString() == w.SerializeToString()
    assert not written
    other = pb.OpDesc.FromString(want[1].SerializeToString())
    stale = {id(other): (want[1], first_tail)}    # an entry for another desc under this id: not used
    tag_op_role_var(other, "r", "r@GRAD", places, stale)
    prepend_to_list_attr(want[1], "op_role_var", ["r", "r@GRAD"], S)
    assert other.SerializeToString() == want[1].SerializeToString()


def test_a_grad_spec_is_built_from_its_own_plan():
    """`registry.make_grad_ops` splits a GradSpec's entries once (`_PLANS`,
    keyed by id); a plan left by another spec under the same id is not used."""
    from pybackward.ops import registry
    fwd = registry.FwdOp("f", {"X": ["x"], "Y": ["y"]}, {"Out": ["o"]}, [], {"y@GRAD"})
    a = registry.GradSpec("a_grad", ("X", "Out@GRAD"), ("X@GRAD", "Y@GRAD"))
    b = registry.GradSpec("b_grad", ("In=Y", "G=Out@GRAD"), ("DX=X@GRAD",), keep_empty=True)
    want = registry.make_grad_ops(b, fwd)[0]
    assert (want.inputs, want.outputs) == ({"In": ["y"], "G": ["o@GRAD"]}, {"DX": ["x@GRAD"]})
    registry._PLANS[id(b)] = registry._plan(a)      # as if `a` had died and `b` taken its id
    got = registry.make_grad_ops(b, fwd)[0]
    assert (got.type, got.inputs, got.outputs) == ("b_grad", want.inputs, want.outputs)
    got = registry.make_grad_ops(a, fwd)[0]
    assert (got.inputs, got.outputs) == ({"X": ["x"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"], "Y@GRAD": []})
