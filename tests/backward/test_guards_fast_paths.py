"""The backward guard's shortcuts and the snapshot `cli append` shares with the pass.

* `guards.existing_backward` looks for op_role first where it stood on the
  last op of the same type; with the program's bytes (`data`) it first
  counts op_role attrs on the wire, and reads the ops one by one only where
  the counts cannot tell. Both must say what `Operator.attr` says, op by
  op, on any program: random programs with roles at random places, ops
  naming op_role twice, roles that only look like forward ones inside a
  string, and no op_role at all.
* `steps.all_or_nothing` nested in another of the same program takes no
  copy: the outer one restores the program.
"""
from __future__ import annotations

import random

import pytest

import pybackward
from pybackward._proto import framework_pb2 as pb
from pybackward.backward import guards
from pybackward.backward.steps import all_or_nothing
from pybackward.base.errors import ArgumentError
from pybackward.base.errors import where

_ROLES = [0, 0, 0, 256, 256, 1, 257, 2, 3, 4096, 0x7F, 0x80, 0x81]
#: What a string attr may hold: bytes that look like a forward op_role attr on the wire.
_DECOY = guards._FORWARD_ROLE_ATTRS[0].decode("latin-1")


def _reference(prog) -> str | None:
    """`existing_backward` as its doc says, read op by op through `Operator.attr` (the first op_role)."""
    for b in prog.blocks:
        for i, op in enumerate(b.ops):
            role = op.attr("op_role", 0)
            if isinstance(role, int) and role & 1:
                return f"{where(None, b.idx, i, op.type)} has op_role {role} (backward)"
    for b in prog.blocks:
        for name in b.vars:
            if "@GRAD" in name:
                return f"{where(None, b.idx, var=name)} is a gradient"
    return None


def _random_program(rng: random.Random) -> bytes:
    """x -> scale/relu ops, each writing its own var; every op's attrs in a random order and
    number, op_role anywhere among them (or missing, or twice), roles mostly forward."""
    d = pb.ProgramDesc()
    b = d.blocks.add(idx=0, parent_idx=-1)
    n_ops = rng.randint(1, 12)
    names = ["x"] + [f"y{i}" for i in range(n_ops)]
    if rng.random() < 0.2:
        names.append("x@GRAD")
    for name in names:
        v = b.vars.add(name=name)
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    backward_at = rng.randrange(n_ops) if rng.random() < 0.5 else None
    for i in range(n_ops):
        op = b.ops.add(type=rng.choice(["scale", "relu"]))
        op.inputs.add(parameter="X", arguments=["x"])
        op.outputs.add(parameter="Out", arguments=[f"y{i}"])
        attrs = [("a%d" % k, None) for k in rng.sample(range(6), rng.randint(0, 5))]
        if rng.random() < 0.9:
            role = rng.choice(_ROLES[:5]) if i != backward_at else rng.choice([1, 257, 3, 0x81])
            attrs.insert(rng.randint(0, len(attrs)), ("op_role", role))
            if rng.random() < 0.15:                                   # named twice
                attrs.insert(rng.randint(0, len(attrs)), ("op_role", rng.choice(_ROLES)))
        for name, value in attrs:
            if value is None:
                if rng.random() < 0.3:
                    op.attrs.add(name=name, type=pb.AttrType.STRING, s=_DECOY + "op_role")
                else:
                    op.attrs.add(name=name, type=pb.AttrType.INT, i=rng.randint(0, 300))
            else:
                op.attrs.add(name=name, type=pb.AttrType.INT, i=value)
    return d.SerializeToString()


@pytest.mark.parametrize("seed", range(300))
def test_existing_backward_says_what_operator_attr_says(seed):
    prog = pybackward.loads(_random_program(random.Random(seed)))
    want = _reference(prog)
    assert guards.existing_backward(prog) == want
    assert guards.existing_backward(prog, prog.desc.SerializePartialToString()) == want
    prog.repeated_attr_ops = None                         # as a program built in memory
    assert guards.existing_backward(prog) == want
    assert guards.existing_backward(prog, prog.desc.SerializePartialToString()) == want


def _ops(*attr_lists) -> pybackward.Program:
    d = pb.ProgramDesc()
    b = d.blocks.add(idx=0, parent_idx=-1)
    for name in ["x"] + [f"y{i}" for i in range(len(attr_lists))]:
        v = b.vars.add(name=name)
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    for i, attrs in enumerate(attr_lists):
        op = b.ops.add(type="scale")
        op.inputs.add(parameter="X", arguments=["x"])
        op.outputs.add(parameter="Out", arguments=[f"y{i}"])
        for name, value in attrs:
            if isinstance(value, str):
                op.attrs.add(name=name, type=pb.AttrType.STRING, s=value)
            else:
                op.attrs.add(name=name, type=pb.AttrType.INT, i=value)
    return pybackward.loads(d.SerializeToString())


def test_a_guess_from_the_op_before_that_misses_still_finds_the_role():
    # op_role last, then second to last, then absent with a shorter list, then where the first stood
    prog = _ops([("a", 0), ("op_role", 0)], [("op_role", 0), ("z", 1)], [("a", 0)],
                [("a", 0), ("b", 0), ("op_role", 1)])
    assert guards.existing_backward(prog) == "block 0, op 3 (scale) has op_role 1 (backward)"
    prog = _ops([("a", 0), ("op_role", 0)], [("op_role", 0), ("z", 1)], [("op_role", 257), ("z", 0)])
    assert guards.existing_backward(prog) == "block 0, op 2 (scale) has op_role 257 (backward)"


def test_the_wire_counts_leave_no_backward_role_out():
    # a string holding a forward role's bytes and the name, beside a real backward role:
    # the counts differ, so the ops are read (a count of forward attrs alone would pass it)
    decoy = _DECOY + "op_role"
    prog = _ops([("op_role", 0), ("s", decoy)], [("op_role", 256)], [("op_role", 1)])
    data = prog.desc.SerializePartialToString()
    assert data.count(guards._FORWARD_ROLE_ATTRS[0]) == 2      # (the decoy matches the pattern)
    assert not guards._forward_roles_only(data)
    assert guards.existing_backward(prog, data) == "block 0, op 2 (scale) has op_role 1 (backward)"
    # forward roles only: decided from the counts, the gradient vars still looked at
    prog = _ops([("op_role", 0)], [("op_role", 256)])
    data = prog.desc.SerializePartialToString()
    assert guards._forward_roles_only(data) and guards.existing_backward(prog, data) is None
    prog.global_block().create_var(name="x@GRAD", dtype="float32", shape=[1])
    assert guards.existing_backward(prog, prog.desc.SerializePartialToString()) == \
        "block 0, var 'x@GRAD' is a gradient"


def test_refuse_existing_backward_with_the_bytes_names_the_op():
    prog = _ops([("op_role", 0)], [("op_role", 0x101)])
    with pytest.raises(ArgumentError, match=r"already has a backward section \(block 0, op 1 \(scale\) "
                                            r"has op_role 257 \(backward\)\)"):
        guards.refuse_existing_backward(prog, data=prog.desc.SerializePartialToString())


def _scale_program() -> pybackward.Program:
    return _ops([("op_role", 0)], [("op_role", 0)])


def test_a_nested_all_or_nothing_leaves_the_restore_to_the_outer_one():
    prog = _scale_program()
    before = prog.desc.SerializePartialToString()
    with pytest.raises(RuntimeError):
        with all_or_nothing(prog, before):
            with all_or_nothing(prog):
                prog.global_block().ops[0].set_attr("op_role", 1)
                prog.appending_grad_times += 1
                raise RuntimeError("failed")
    assert prog.desc.SerializePartialToString() == before and prog.appending_grad_times == 0
    assert prog.global_block().ops[0].attr("op_role") == 0
    # closed: the next one takes its own copy again
    with pytest.raises(RuntimeError):
        with all_or_nothing(prog):
            prog.global_block().ops[1].set_attr("op_role", 1)
            raise RuntimeError("failed")
    assert prog.desc.SerializePartialToString() == before


def test_all_or_nothing_restores_the_bytes_it_is_given():
    prog = _scale_program()
    given = prog.desc.SerializePartialToString()
    prog.global_block().ops[0].set_attr("op_role", 256)     # (a caller's bytes from before this edit)
    with pytest.raises(RuntimeError):
        with all_or_nothing(prog, given):
            raise RuntimeError("failed")
    assert prog.desc.SerializePartialToString() == given


def test_a_nested_all_or_nothing_takes_no_copy_of_its_own():
    # the contract: an exception caught between the two leaves the program as the body left it
    prog = _scale_program()
    with all_or_nothing(prog):
        with pytest.raises(RuntimeError):
            with all_or_nothing(prog):
                prog.global_block().ops[0].set_attr("op_role", 256)
                raise RuntimeError("failed")
        assert prog.global_block().ops[0].attr("op_role") == 256
