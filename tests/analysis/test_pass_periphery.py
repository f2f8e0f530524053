"""The steps around the gradient pass's walk, and their shortcuts (issue #37, the 3,000-layer MLP).

`find_op_path`, `check_input_repeats`, `check_declared`, `non_float_params`,
`rename_existing_grads` and `params_and_grads` read every op or parameter of
a program; each has a fast path (a set operation in C, a cache per op type,
an early return when nothing can change) and the slow path it stands for.
These tests pin both: the op path against a reference walk (the one before
the shortcuts) on random programs, and each guard on the input that must
take its slow path (a refusal naming the right op and var).
"""
from __future__ import annotations

import random

import pytest

import pybackward
from pybackward.analysis import path as pathmod
from pybackward.analysis.path import find_op_path, unused_outputs
from pybackward.backward import guards
from pybackward.backward.steps import params_and_grads, rename_existing_grads
from pybackward.base.dtypes import VarType
from pybackward.base.errors import ProgramFileError, PyBackwardError
from pybackward.legacy.names import EMPTY_VAR_NAME


# --------------------------------------------------------------------------
# find_op_path against the walk it replaced
# --------------------------------------------------------------------------
def _reference_path(block, targets, no_grad, stop_edges, redefinitions):
    """`_op_path` as it was before its shortcuts (no inputs, no sub-blocks, not a loop body)."""
    ops = block.ops
    output_names = {t.name for t in targets}
    relevant = [True] * len(ops)
    ended: dict[str, int] = {}
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        outs = op.output_arg_names
        if redefinitions is not None and not ended.keys().isdisjoint(outs):
            pathmod._redefined(block, op, i, output_names, ended, redefinitions)
        if not output_names.isdisjoint(outs) and pathmod._has_grad(op, i):
            ins = [n for n in pathmod._edge_inputs(op, stop_edges) if n not in no_grad]
            if redefinitions is not None:
                defs = {n for n in op.output_arg_names
                        if n not in op.input_arg_names and pathmod._is_plain_tensor(block, n)}
                for n in ins:
                    if n in ended and n not in defs:
                        pathmod._refuse_mixed(block, n, ended[n], i)
                output_names.difference_update(defs)
                ended.update(dict.fromkeys(defs, i))
            output_names.update(ins)
        else:
            relevant[i] = False
    return [op for op, keep in zip(ops, relevant) if keep]


#: (type, input slots, output slot); shape and fill_constant have no gradient, no_such_op no rule.
_OPS = [("relu", ["X"], "Out"), ("elementwise_add", ["X", "Y"], "Out"), ("mul", ["X", "Y"], "Out"),
        ("assign", ["X"], "Out"), ("sum", ["X", "X"], "Out"), ("shape", ["Input"], "Out"),
        ("scale", ["X"], "Out")]


def _random_program(rng: random.Random) -> tuple[pybackward.Program, list[str]]:
    prog = pybackward.Program()
    b = prog.global_block()
    names = [f"v{i}" for i in range(rng.randint(3, 9))]
    for n in names:
        kind = VarType.DENSE_TENSOR_ARRAY if rng.random() < 0.1 else VarType.DENSE_TENSOR
        b.create_var(n, shape=[2, 2], type=kind, stop_gradient=rng.random() < 0.2)
    for _ in range(rng.randint(1, 25)):
        r = rng.random()
        op_type, in_slots, out_slot = ("no_such_op", ["X"], "Out") if r < 0.02 else rng.choice(_OPS)
        inputs: dict[str, list[str]] = {}
        for s in in_slots:
            inputs.setdefault(s, []).append(rng.choice(names))
        outs = [rng.choice(names) for _ in range(1 if rng.random() < 0.8 else 2)]
        b.append_op(op_type, inputs, {out_slot: outs})
    loss = next(iter(b.ops[-1].output_arg_names))
    no_grad = [n for n in names if rng.random() < 0.15]
    return prog, [loss, *no_grad]


def _reference_unused(block, path, targets, no_grad):
    """`unused_outputs` as it was before its shortcuts."""
    needed = pathmod.output_names_for(block, targets)
    unused: set[str] = set()
    for op in reversed(path):
        ins = op.input_arg_names
        if op.sub_block is None:
            in_set = set(ins)
            for n in op.output_arg_names:
                if n in needed or n in in_set:
                    continue
                v = block.find_var_recursive(n)
                if not (v is not None and v.stop_gradient):
                    unused.add(n)
        needed.update([n for n in ins if n not in no_grad])
    return unused


def _outcome(fn):
    try:
        return "ok", fn()
    except PyBackwardError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("seed", range(8))
def test_find_op_path_is_the_walk_it_replaced(seed):
    """Same path, same recorded redefinitions, same refusals (a var read then written again,
    an op without a rule on the path), on random programs: in-place ops, ops writing two
    vars, ops without a gradient met many times (the per-type cache), no-grad vars (the
    unfiltered inputs shortcut), tensor arrays (whose writes end nothing)."""
    rng = random.Random(seed)
    checked = refused = unused_seen = 0
    for _ in range(150):
        original, (loss, *no_grad) = _random_program(rng)
        for stop_edges in (False, True):
            for redefine in (True, False):
                results = []
                for impl in ("new", "reference"):
                    prog = original.clone()
                    b = prog.global_block()
                    red = [] if redefine else None

                    def run():
                        if impl == "new":
                            p = find_op_path(b, [b.var(loss)], [], set(no_grad), {}, stop_edges=stop_edges,
                                             redefinitions=red, loops={})
                            unused = unused_outputs(b, p, [b.var(loss)], set(no_grad))
                        else:
                            p = _reference_path(b, [b.var(loss)], set(no_grad), stop_edges, red)
                            unused = _reference_unused(b, p, [b.var(loss)], set(no_grad))
                        return [next(i for i, o in enumerate(b.ops) if o is op) for op in p], red, unused
                    results.append(_outcome(run))
                assert results[0] == results[1], (seed, str(original))
                checked += 1
                unused_seen += results[0][0] == "ok" and bool(results[0][1][2])
                refused += results[0][0] != "ok"
    assert refused and refused < checked / 2     # both paths of the walk were taken
    assert unused_seen                           # and outputs nothing reads


# --------------------------------------------------------------------------
# the guards: the fast path skips, the slow path refuses exactly as before
# --------------------------------------------------------------------------
def _block_with(names, n_ops=3):
    prog = pybackward.Program()
    b = prog.global_block()
    for n in names:
        b.create_var(n, shape=[2])
    for _ in range(n_ops):
        b.append_op("relu", {"X": [names[0]]}, {"Out": [names[1]]})
    return prog, b


def test_check_declared_passes_names_declared_in_an_ancestor_and_the_empty_name():
    prog, b = _block_with(["x", "y"], 0)
    sub = prog.create_block(parent_idx=0)
    sub.create_var("z", shape=[2])
    sub.append_op("sum", {"X": ["x", "z", EMPTY_VAR_NAME]}, {"Out": ["z"]})
    guards.check_declared(prog, b, 0, [sub.idx])          # x is its parent's: no error


def test_check_declared_names_the_first_op_that_names_an_undeclared_var():
    prog, b = _block_with(["x", "y"], 4)
    b.append_op("relu", {"X": ["ghost"]}, {"Out": ["y"]})
    b.append_op("relu", {"X": ["x"]}, {"Out": ["ghost2"]})
    with pytest.raises(ProgramFileError, match=r"op 4 \(relu\), var 'ghost'.*slot 'X'"):
        guards.check_declared(prog, b, 2, [])
    del b.desc.ops[4]
    b.sync()
    with pytest.raises(ProgramFileError, match=r"op 4 \(relu\), var 'ghost2'.*slot 'Out'"):
        guards.check_declared(prog, b, 2, [])
    guards.check_declared(prog, b, 5, [])                 # ops before `start` are not the pass's


def test_a_forward_op_writing_a_gradient_name_is_refused_in_any_block():
    from pybackward.backward.deviations import refuse_forward_vars_in_grad_namespace as refuse
    prog, b = _block_with(["x", "y", "v@GR", "ADx"], 2)
    b.append_op("split", {"X": ["x"]}, {"Out": ["v@GR", "ADx"]})       # "@GRAD" only across two names
    refuse(prog)
    sub = prog.create_block(parent_idx=0)
    sub.create_var("x@GRAD", shape=[2])
    sub.append_op("relu", {"X": ["x"]}, {"Out": ["x@GRAD"]})
    with pytest.raises(ProgramFileError, match=r"block 1, op 0 \(relu\), var 'x@GRAD'"):
        refuse(prog)


def test_check_input_repeats_skips_a_block_only_when_no_op_lists_that_many_inputs():
    prog, b = _block_with(["x", "y"], 2)
    b.append_op("sum", {"X": ["x"] * 3, "Y": ["y"] * 3}, {"Out": ["y"]})
    guards.check_input_repeats(prog, limit=3)             # 6 inputs, 3 of each: within
    with pytest.raises(pybackward.ArgumentError, match="op 2 \\(sum\\), var 'x'.*listed 3 times in input 'X'"):
        guards.check_input_repeats(prog, limit=2)
    sub = prog.create_block(parent_idx=0)
    sub.append_op("sum", {"X": ["y"] * 4}, {"Out": ["y"]})
    with pytest.raises(pybackward.ArgumentError, match="block 1, op 0 \\(sum\\), var 'y'.*listed 4 times"):
        guards.check_input_repeats(prog, limit=3)


def test_non_float_params_reads_every_kind_of_var_and_every_block():
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("w", shape=[2], dtype="float32", is_parameter=True)
    b.create_var("step", shape=[1], dtype="int64", is_parameter=True)
    b.create_var("rows", shape=[2], dtype="int32", type=VarType.SELECTED_ROWS, is_parameter=True)
    b.create_var("table", shape=[2], dtype="float16", type=VarType.SELECTED_ROWS, is_parameter=True)
    b.create_var("reader", type=VarType.READER, is_parameter=True)
    sub = prog.create_block(parent_idx=0)
    sub.create_var("flag", shape=[1], dtype="bool", is_parameter=True)
    names = ["w", "step", "rows", "table", "reader", "flag", "nowhere"]
    assert [v.name for v in guards.non_float_params(prog, names)] == ["step", "rows", "flag"]


# --------------------------------------------------------------------------
# rename_existing_grads and params_and_grads
# --------------------------------------------------------------------------
def test_rename_existing_grads_renames_clashes_and_target_grads_and_nothing_else():
    prog, b = _block_with(["x", "y", "y@GRAD", "g"], 1)
    start = len(b.ops)
    b.append_op("relu_grad", {"Out@GRAD": ["y@GRAD"]}, {"X@GRAD": ["x@GRAD"]})
    b.append_op("scale", {"X": ["x@GRAD"]}, {"Out": ["y@GRAD"]})       # y@GRAD is declared: a clash
    before = prog.to_bytes()
    rename_existing_grads(prog, b, start, {}, {}, ["y@GRAD"])           # skipped: nothing to do
    assert prog.to_bytes() == before
    grad_to_var = {"y@GRAD": "y"}
    rename_existing_grads(prog, b, start, grad_to_var, {"x@GRAD": "g"}, [])
    assert [op.input_arg_names for op in b.ops[start:]] == [("y@GRAD",), ("g",)]
    assert [op.output_arg_names for op in b.ops[start:]] == [("x@GRAD",), ("y@GRAD_0",)]
    assert grad_to_var == {"y@GRAD_0": "y"}


def test_params_and_grads_tags_the_last_writer_of_each_grad_in_order():
    prog, b = _block_with(["x", "w", "v", "w@GRAD", "v@GRAD", "loss"], 0)
    for n in ("w", "v"):
        b.var(n).desc.is_parameter = True
    b.append_op("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["loss"]})
    b.append_op("mul_grad", {"X": ["x"]}, {"Y@GRAD": ["w@GRAD"]})
    b.append_op("scale", {"X": ["w@GRAD"]}, {"Out": ["w@GRAD"]})
    b.append_op("mul_grad", {"X": ["x"]}, {"Y@GRAD": ["v@GRAD"], "X@GRAD": ["w@GRAD"]})
    pairs = params_and_grads(prog, b.var("loss"), ["v", "w", "x"],
                             {"w": ("w@GRAD", b), "v": ("v@GRAD", b), "x": ("x@GRAD", b)})
    assert [(p.name, g and g.name) for p, g in pairs] == [("v", "v@GRAD"), ("w", "w@GRAD"), ("x", None)]
    assert [op.attr("op_role_var", None) for op in b.ops] == [None, None, None,
                                                               ["w", "w@GRAD", "v", "v@GRAD"]]
    with pytest.raises(pybackward.VarNotFoundError):
        params_and_grads(prog, b.var("loss"), ["nope"], {"nope": ("w@GRAD", b)})


@pytest.mark.parametrize("param, grad", [("w", "w@GRAD"), ("p" * 127, "g" * 127), ("p" * 128, "w@GRAD"),
                                         ("w", "g" * 300), ("", "")])
@pytest.mark.parametrize("before", [None, [], ["a", "a@GRAD"]])
def test_tag_op_role_var_writes_what_prepend_to_list_attr_writes(param, grad, before):
    """The tag built from bytes (its common case: no earlier tag, names under 128 bytes, and
    the general join) gives the bytes of the plain protobuf edit, on every kind of op."""
    from pybackward.backward.steps import tag_op_role_var
    from pybackward.legacy.program import OP_ROLE_VAR_ATTR, make_op_desc, prepend_to_list_attr
    from pybackward._proto import framework_pb2 as pb
    attrs = {"axis": 1, "zzz": "last"}
    if before is not None:
        attrs[OP_ROLE_VAR_ATTR] = before
    ours, plain = (make_op_desc("scale", {"X": ["x"]}, {"Out": ["y"]}, attrs) for _ in range(2))
    tag_op_role_var(ours, param, grad, {})
    prepend_to_list_attr(plain, OP_ROLE_VAR_ATTR, [param, grad], pb.AttrType.STRINGS)
    assert ours.SerializeToString() == plain.SerializeToString()


@pytest.mark.parametrize("outs", [["a"], ["a", "a"], ["a", "y"]])
def test_find_op_path_ends_a_parent_blocks_var_written_in_a_sub_block(outs):
    """The writes that end a value are looked up in the block's own vars first, then (as
    `find_var_recursive` does) in its ancestors: a var only the parent declares is ended too."""
    prog = pybackward.Program()
    root = prog.global_block()
    root.create_var("a", shape=[2])
    sub = prog.create_block(parent_idx=0)
    for n in ("x", "y", "loss"):
        sub.create_var(n, shape=[2])
    sub.append_op("scale", {"X": ["x"]}, {"Out": list(outs)})          # op 0: overwritten unread
    sub.append_op("scale", {"X": ["x"]}, {"Out": ["a"]})               # op 1
    sub.append_op("scale", {"X": ["a"]}, {"Out": ["loss"]})            # op 2
    redefined: list = []
    path = find_op_path(sub, [sub.var("loss")], [], set(), {}, redefinitions=redefined)
    reference: list = []
    assert path == _reference_path(sub, [sub.var("loss")], set(), False, reference)
    assert [sub.ops.index(op) for op in path] == [1, 2]
    assert redefined == reference and set(redefined) == {("a", 0, 1)}


@pytest.mark.parametrize("before", [None, [], (), ["a", "a@GRAD"], "text"])
@pytest.mark.parametrize("names", [("w", "w@GRAD"), ("p" * 128, "w@GRAD"), ("w", "g" * 200)])
def test_params_and_grads_with_emitted_attrs_writes_what_prepend_to_list_attr_writes(before, names):
    """`params_and_grads` tags an op whose attr bytes `emit` handed over (its inlined common
    case: no op_role_var or an empty STRINGS one, short names) as the plain protobuf edit does; an
    op tagged twice sees its first tag; a stale entry (another desc) is not trusted."""
    from pybackward._proto import framework_pb2 as pb
    from pybackward.backward.grad_ops import attrs_tail
    from pybackward.legacy.program import OP_ROLE_VAR_ATTR, prepend_to_list_attr
    w, wg = names
    results = []
    for ours in (True, False):
        prog, b = _block_with(["x", "v", "loss", w, wg, "v@GRAD"], 0)
        for n in (w, "v"):
            b.var(n).desc.is_parameter = True
        attrs = {"axis": 1, "zzz": "last"}
        if before is not None:
            attrs[OP_ROLE_VAR_ATTR] = before
        b.append_op("mul", {"X": ["x"], "Y": [w]}, {"Out": ["loss"]}, attrs)
        b.append_op("mul_grad", {"X": ["x"]}, {"Y@GRAD": [wg]}, {k: v for k, v in attrs.items() if k != "axis"})
        b.append_op("mul_grad", {"X": ["x"]}, {"Y@GRAD": ["v@GRAD"], "X@GRAD": ["x"]}, attrs)
        b.append_op("mul_grad", {"X": ["x"]}, {"Y@GRAD": ["v@GRAD"]}, attrs)
        if before == ():
            # () stands for an empty STRINGS attr, as Paddle's grad ops carry (an empty list
            # is written as INTS)
            for op in b.ops:
                for a in op.desc.attrs:
                    if a.name == OP_ROLE_VAR_ATTR:
                        a.type = pb.AttrType.STRINGS
        if ours:
            emitted = {id(op.desc): (op.desc, attrs_tail(op.desc.SerializePartialToString())) for op in b.ops}
            # op 3's entry is stale (another desc's: op 1's, whose attrs differ and are tagged
            # first): op 3's own bytes must be read from the op
            emitted[id(b.ops[3].desc)] = emitted[id(b.ops[1].desc)]
            params_and_grads(prog, b.var("loss"), [w, "v"], {w: (wg, b), "v": ("v@GRAD", b)}, emitted)
        else:
            for op, (p, g) in ((b.ops[1], (w, wg)), (b.ops[3], ("v", "v@GRAD"))):
                prepend_to_list_attr(op.desc, OP_ROLE_VAR_ATTR, [p, g], pb.AttrType.STRINGS)
        results.append([op.desc.SerializeToString() for op in b.ops])
    assert results[0] == results[1]


def test_params_and_grads_tags_an_emitted_op_twice_in_order():
    """One op the last writer of two gradients, its attr bytes handed over by `emit`: the
    second tag goes in front of the first (the handed-over bytes hold for the first only)."""
    from pybackward.backward.grad_ops import attrs_tail
    prog, b = _block_with(["x", "w", "v", "w@GRAD", "v@GRAD", "loss"], 0)
    for n in ("w", "v"):
        b.var(n).desc.is_parameter = True
    b.append_op("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["loss"]})
    b.append_op("mul_grad", {"X": ["x"]}, {"Y@GRAD": ["v@GRAD"], "X@GRAD": ["w@GRAD"]}, {"axis": 1})
    emitted = {id(op.desc): (op.desc, attrs_tail(op.desc.SerializePartialToString())) for op in b.ops}
    params_and_grads(prog, b.var("loss"), ["v", "w"], {"w": ("w@GRAD", b), "v": ("v@GRAD", b)}, emitted)
    assert b.ops[1].attr("op_role_var") == ["w", "w@GRAD", "v", "v@GRAD"]
    assert [a.name for a in b.ops[1].desc.attrs] == sorted(a.name for a in b.ops[1].desc.attrs)
