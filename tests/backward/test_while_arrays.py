"""Nested `while` loops over tensor arrays (issue #35 item 5:
test_while_loop_op's TestApiWhileLoop_NestedWithBackwardAndLoDTensorArray).

The outer body reads `mem[i]`, writes `mem[i + 1]` (`write_to_array`), then a
nested while reads `mem[j]` and writes `mem[j + 1]`; the loss reads `mem[j]`
after the loops. The "reassigns the loop var and reads the new value" rule
took the outer `write_to_array` for a reassignment of `mem` and refused the
program; a slot write keeps the other slots (and Paddle's while copies no
array into its step scope), so Paddle's program is right and pybackward now
writes it byte for byte. Gradients checked against central finite
differences in float64.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import pybackward
from conftest import TESTDATA
from pybackward.base.errors import PaddleDeviationWarning
from pybackward.interpreter.executor import Executor, Scope
from pybackward.interpreter.gradcheck import to_float64
from pybackward.legacy.names import GRAD_SUFFIX

CASE = TESTDATA / "backward_replay" / "while_loop_nested_lodtensor_array"
LOSS = "mean_0.tmp_0"


def _feed() -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) for k, v in np.load(CASE / "feeds.npz").items()}


def _run(prog, feed: dict, fetch: list[str]) -> dict[str, np.ndarray]:
    return dict(zip(fetch, Executor().run(prog, feed=feed, fetch_list=fetch, scope=Scope())))


def _fd(fwd, feed: dict, name: str, eps: float = 1e-6) -> np.ndarray:
    num = np.zeros_like(feed[name])
    for i in range(num.size):
        vals = []
        for sign in (1, -1):
            x = feed[name].copy()
            x.reshape(-1)[i] += sign * eps
            vals.append(float(np.sum(_run(fwd, dict(feed, **{name: x}), [LOSS])[LOSS])))
        num.reshape(-1)[i] = (vals[0] - vals[1]) / (2 * eps)
    return num


def _check_fd(fwd, prog, wrt: list[str]) -> dict[str, np.ndarray]:
    feed = _feed()
    got = _run(prog, feed, [n + GRAD_SUFFIX for n in wrt])
    for n in wrt:
        np.testing.assert_allclose(got[n + GRAD_SUFFIX], _fd(fwd, feed, n), rtol=1e-7, atol=1e-9, err_msg=n)
    return got


def test_a_slot_write_is_not_a_loop_var_reassignment():
    """The outer body's `write_to_array(... ) -> mem` followed by the nested
    while reading `mem` went to the stale-loop-var rule and was refused ("its
    input 'fill_constant_5.tmp_0' is also reassigned in the body"). Now: no
    refusal, no deviation, Paddle's program byte for byte, and x@GRAD (the
    only input differentiated) agrees with finite differences in float64."""
    prog = pybackward.load(CASE / "call0_before.pb")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.append_backward(LOSS, program=prog)
    assert pybackward.dumps(prog) == (CASE / "call0_after.pb").read_bytes()
    fwd = to_float64(pybackward.load(CASE / "call0_before.pb"))
    prog = fwd.clone()
    pybackward.append_backward(LOSS, program=prog)
    got = _check_fd(fwd, prog, ["x"])
    np.testing.assert_allclose(got["x@GRAD"], 0.3)


def _nested_reads_slot_zero(fwd):
    """The case with `mem[0] = x` and the nested while reading `mem[0]` (a
    `fill_constant` 0 index) instead of `mem[j]`: the outer read and the
    nested reads meet in slot 0. loss = mean(2x + d2)."""
    block = fwd.global_block()
    (zero_at,) = [k for k, op in enumerate(block.ops) if op.output("Out") == ["fill_constant_5.tmp_0"]]
    desc = type(block.ops[zero_at].desc)()
    desc.CopyFrom(block.ops[zero_at].desc)
    desc.outputs[0].arguments[:] = ["zero_index"]
    block.create_var_like("zero_index", block.var("fill_constant_5.tmp_0"))
    block.insert_op_desc(0, desc)
    # (its own index: the program's first writes share one that `increment`
    # changes afterwards, so their grads read slot 2 - Paddle's too)
    (init,) = [op for op in block.ops if op.type == "write_to_array" and op.output("Out") == ["array_write_0.out"]]
    init.set_input("X", ["x"])
    init.set_input("I", ["zero_index"])
    inner = fwd.block(2)
    (read,) = [op for op in inner.ops if op.type == "read_from_array" and op.input("X") == ["array_write_0.out"]]
    read.set_input("I", ["zero_index"])
    fwd.sync()
    return fwd


def test_nested_reads_of_the_in_loop_slot_are_added():
    """Where the nested while reads the slot the outer body read (slot 0),
    the nested while_grad's in-place update of mem@GRAD and the outer read's
    grad (a write_to_array into slot 0) must add: the read's grad writes an
    array of its own and a `sum` adds it (warning `tensor array read again`).
    x@GRAD is 0.2 (0.1 through the body's `x`, 0.1 through mem[0]); had the
    slot write overwritten the nested gradient it would be 0.1."""
    fwd = _nested_reads_slot_zero(to_float64(pybackward.load(CASE / "call0_before.pb")))
    prog = fwd.clone()
    with pytest.warns(PaddleDeviationWarning, match=r"tensor array read again: block 1's while body reads a "
                                                     r"slot of 'array_write_0.out' \(op 1\)"):
        pybackward.append_backward(LOSS, program=prog)
    got = _check_fd(fwd, prog, ["x"])
    np.testing.assert_allclose(got["x@GRAD"], 0.2, rtol=1e-12)


def test_a_dense_loop_var_reassigned_in_a_nested_while_program_is_still_refused():
    """The rule keeps refusing a dense loop var reassigned and read again whose
    reassigning op reads another var the body reassigns (the refusal the
    array case used to hit): `x` reassigned from `elementwise_add_1.tmp_0`
    in the outer body, after `fill_constant_5.tmp_0` is incremented, and
    read by the nested while."""
    prog = pybackward.load(CASE / "call0_before.pb")
    body = prog.block(1)
    (k,) = [k for k, op in enumerate(body.ops) if op.type == "write_to_array"]
    op = body.ops[k]
    desc = type(op.desc)()
    desc.type = "elementwise_add"
    for slot, args in (("X", ["elementwise_add_1.tmp_0"]), ("Y", ["fill_constant_5.tmp_0"])):
        v = desc.inputs.add()
        v.parameter, v.arguments[:] = slot, args
    v = desc.outputs.add()
    v.parameter, v.arguments[:] = "Out", ["x"]
    body.insert_op_desc(k + 1, desc)
    prog.sync()
    with pytest.raises(pybackward.ProgramFileError, match="reassigns the loop var and reads the new value"):
        pybackward.append_backward(LOSS, program=prog)


def test_a_later_read_that_may_reach_the_in_loop_slot_keeps_the_fix():
    """The proof that the read after the loop (`mem[j]`) is another slot than
    the outer body's `mem[i]` (i < 1, j starts at 1 and only grows) is what
    keeps Paddle's program; with j starting at 0 it no longer holds and the
    in-loop read's gradient is added (warning `tensor array read again`)."""
    prog = pybackward.load(CASE / "call0_before.pb")
    (init,) = [op for op in prog.global_block().ops if op.output("Out") == ["fill_constant_9.tmp_0"]]
    init.set_attr("value", 0.0)
    init.set_attr("str_value", "0")
    with pytest.warns(PaddleDeviationWarning, match=r"tensor array read again: .*block 1's while body reads a "
                                                     r"slot of 'array_write_0.out' \(op 1\)"):
        pybackward.append_backward(LOSS, program=prog)
