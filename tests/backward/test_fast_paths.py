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


# --------------------------------------------------------------------------
# Grad op templates (`grad_ops._Template`, session 10)
# --------------------------------------------------------------------------
def _templated_program():
    """Ops that pair up to share all but one part of a template's key: the
    spec (relu / sigmoid), the attr bytes (op_device), a slot's arity
    (concat of 2 / 3), the slots' file order (X, Y / Y, X), which inputs'
    gradients are no-grad (given per op below), the outputs' arity (unstack
    into 2 / 3; the inputs' arity is in the no-grad mask too), names holding
    `@GRAD` and a name read twice."""
    prog = pybackward.Program()
    b = prog.global_block()
    for n in ("a", "b", "c", "d", "e", "f", "w", "v", "x@GRAD", "y@GRAD", "x", "y"):
        b.create_var(n, [2, 2], "float32")
    plain = {"op_role": 0, "op_device": ""}

    def op(t, ins, outs, attrs=plain, order=None, slot="Out"):
        names = [b.create_var(n, [2, 2], "float32").name for n in outs.split(",")]
        o = b.append_op(t, ins, {slot: names}, dict(attrs))
        if order:          # the input slots in another file order
            d = o.desc
            kept = {v.parameter: list(v.arguments) for v in d.inputs}
            del d.inputs[:]
            for slot in order:
                d.inputs.add(parameter=slot, arguments=kept[slot])
            b.sync()
        return o

    return prog, [
        (op("relu", {"X": ["a"]}, "r1"), set()),
        (op("sigmoid", {"X": ["b"]}, "s1"), set()),                       # another spec
        (op("relu", {"X": ["c"]}, "r2", {"op_role": 0, "op_device": "gpu:1"}), set()),   # other attr bytes
        (op("relu", {"X": ["d"]}, "r3"), set()),                          # a hit on the first
        (op("mul", {"X": ["a"], "Y": ["w"]}, "m1", {**plain, "x_num_col_dims": 1, "y_num_col_dims": 1}), set()),
        (op("mul", {"X": ["b"], "Y": ["v"]}, "m2", {**plain, "x_num_col_dims": 1, "y_num_col_dims": 1}),
         {"b@GRAD"}),                                                     # another no-grad mask
        (op("mul", {"X": ["c"], "Y": ["w"]}, "m3", {**plain, "x_num_col_dims": 1, "y_num_col_dims": 1},
            order=("Y", "X")), set()),                                    # slots in another order
        (op("concat", {"X": ["a", "b"]}, "c1", {**plain, "axis": 0}), set()),
        (op("concat", {"X": ["c", "d", "e"]}, "c2", {**plain, "axis": 0}), {"d@GRAD"}),   # arity, @EMPTY@
        (op("concat", {"X": ["f", "a", "b"]}, "c3", {**plain, "axis": 0}), {"a@GRAD"}),   # a hit on c2
        (op("elementwise_add", {"X": ["f"], "Y": ["a"]}, "g0", {**plain, "axis": -1}), {"a@GRAD"}),
        # (the map reads x@GRAD, X's own name, as x's gradient: not by position)
        (op("elementwise_add", {"X": ["x@GRAD"], "Y": ["x"]}, "g1", {**plain, "axis": -1}), {"x@GRAD"}),
        (op("elementwise_add", {"X": ["y"], "Y": ["y@GRAD"]}, "g2", {**plain, "axis": -1}), set()),
        (op("elementwise_add", {"X": ["e"], "Y": ["e"]}, "g3", {**plain, "axis": -1}), set()),   # one name twice
        (op("elementwise_add", {"X": ["f"], "Y": ["a"]}, "g4", {**plain, "axis": -1}), set()),
        (op("unstack", {"X": ["a"]}, "u1,u2", {**plain, "axis": 0, "num": 2}, slot="Y"), set()),
        (op("unstack", {"X": ["b"]}, "u3,u4,u5", {**plain, "axis": 0, "num": 2}, slot="Y"), set()),  # outputs' arity
    ]


def _made(op, no_grad):
    from pybackward.backward import grad_ops
    grads, mapped = grad_ops.make_op_grads_mapped(op, no_grad)
    if mapped is None:
        mapped = grad_ops.grad_to_var(op, grads)
    return ([(g.type, list(g.inputs.items()), list(g.outputs.items()), list(g.attrs.items()), g.fresh, g.grad_to_var, g.base_attrs is op.desc.attrs
              or list(g.base_attrs) == list(op.desc.attrs), g.__dict__.get("base_key", (0, None))[1])
             for g in grads], list(mapped.items()))


def test_grad_op_templates_equal_the_makers():
    """Each op's grad ops and grad-to-var map from a warm template cache
    equal what the spec's maker makes with the cache empty - for ops that
    would collide if any part of the key were missing - and repeated keys
    do hit the cache."""
    from pybackward.backward import grad_ops
    prog, ops = _templated_program()
    cold = []
    for op, no_grad in ops:
        grad_ops._TEMPLATES.clear()
        cold.append(_made(op, no_grad))
    grad_ops._TEMPLATES.clear()
    warm = [_made(op, no_grad) for op, no_grad in ops]
    for (op, _), c, w in zip(ops, cold, warm):
        assert w == c, op
    # relu x2 (r3 hits r1), sigmoid, mul x3, concat x2 (c3 hits c2), and of
    # the elementwise_adds g0 and g4: g1/g2 name @GRAD (never templated), g3
    # names one var twice (not recorded from); unstack x2
    assert len(grad_ops._TEMPLATES) == 12
    assert cold[5][0][0][2] == [("X@GRAD", []), ("Y@GRAD", ["v@GRAD"])]
    assert cold[8][0][0][2] == [("X@GRAD", ["c@GRAD", "@EMPTY@", "e@GRAD"])]
    assert warm[9][0][0][2] == [("X@GRAD", ["f@GRAD", "@EMPTY@", "b@GRAD"])]
    assert ("x@GRAD", "x") in warm[11][1]
    assert dict(cold[2][0][0][3])["op_device"] == "gpu:1" and dict(cold[3][0][0][3])["op_device"] == ""


def test_grad_op_templates_in_the_pass():
    """The whole pass over those ops, warm against cold: the same bytes, and
    the ops given out are fresh objects (the pass edits them in place)."""
    from pybackward.backward import grad_ops

    def run():
        prog, ops = _templated_program()
        b = prog.global_block()
        loss = b.create_var("loss", [], "float32")
        b.append_op("sum", {"X": [n for o, _ in ops for n in o.output_arg_names]}, {"Out": ["loss"]},
                    {"op_role": 0, "op_device": ""})
        pybackward.append_backward(loss, parameter_list=[], no_grad_set={"v"})
        return pybackward.dumps(prog)
    grad_ops._TEMPLATES.clear()
    first = run()
    assert grad_ops._TEMPLATES
    assert run() == first
    prog, ops = _templated_program()
    op, no_grad = ops[0]
    a, _ = grad_ops.make_op_grads_mapped(op, no_grad)
    b, _ = grad_ops.make_op_grads_mapped(op, no_grad)
    assert a[0] is not b[0] and a[0].inputs is not b[0].inputs and a[0].attrs is not b[0].attrs
    assert a[0].inputs["Out"] is not b[0].inputs["Out"]


def test_no_templates_for_an_opdef_with_its_own_maker():
    """An OpDef subclass overriding `make_grad` (here: a maker that reads a
    name) is never templated, though its grad is a GradSpec."""
    from pybackward.backward import grad_ops
    from pybackward.ops import registry

    class Named(registry.OpDef):
        def make_grad(self, fwd):
            ops = super().make_grad(fwd)
            if fwd.inputs["X"][0].startswith("odd"):
                ops[0].attrs["odd"] = True
            return ops
    relu = registry.find("relu")
    prog = pybackward.Program()
    b = prog.global_block()
    for n in ("a", "odd", "r1", "r2"):
        b.create_var(n, [2], "float32")
    ops = [b.append_op("relu", {"X": [x]}, {"Out": [o]}, {"op_role": 0}) for x, o in (("a", "r1"), ("odd", "r2"))]
    saved = registry._REGISTRY.get("relu")
    registry._REGISTRY["relu"] = Named(type="relu", inputs=("X",), outputs=("Out",), grad=relu.grad)
    try:
        grad_ops._TEMPLATES.clear()
        made = [grad_ops.make_op_grads(op, set())[0] for op in ops]
    finally:
        if saved is None:
            del registry._REGISTRY["relu"]
        else:
            registry._REGISTRY["relu"] = saved
    assert "odd" not in made[0].attrs and made[1].attrs["odd"] is True
    assert not grad_ops._TEMPLATES
