"""The legacy pass's conditional_block rules that test_cond.py's
TestCondBackward replays needed (issue #35 item 5; the whole programs are
replayed op for op in test_backward_replay.py):

* FilterNoGradInput: Paddle's conditional_block grad maker gives `@EMPTY@`
  for an input of a bool / integer dtype (or one the forward op's block
  cannot find), whatever the no-grad set says. In a nested branch the int64
  `label` is declared only in the global block, so the branch block's
  no-grad set does not hold it: pybackward gave it a gradient (and a `sum`).
* A branch that reads and reassigns a var no gradient can reach (batch_norm's
  running mean, read by nothing after the branch): Paddle's program is
  right (the gradient is zero either way) and is no longer refused. Where a
  gradient can arrive, the refusal stays.
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import pybackward
from conftest import TESTDATA
from pybackward.base.errors import PaddleDeviationWarning, ProgramFileError
from pybackward.interpreter.executor import Executor, Scope

ROOT = TESTDATA / "backward_replay"
EMPTY = "@EMPTY@"


def _before(scenario: str):
    return pybackward.load(ROOT / scenario / "call0_before.pb")


def _loss(prog) -> str:
    """The var the scenario differentiates (select_input's output)."""
    return [op for op in prog.global_block().ops if op.type == "select_input"][-1].output("Out")[0]


def _append(prog, loss: str | None = None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pybackward.append_backward(prog.global_block().var(loss or _loss(prog)))
    return [str(w.message) for w in caught if issubclass(w.category, PaddleDeviationWarning)]


def _label_grads(prog) -> list[str]:
    """What each conditional_block_grad names as label's gradient."""
    out = []
    for b in prog.blocks:
        for op in b.ops:
            if op.type == "conditional_block_grad" and "label" in op.input("Input"):
                out.append(op.output("Input@GRAD")[op.input("Input").index("label")])
    return out


def _declared(prog, name: str) -> bool:
    return any(b.has_var(name) for b in prog.blocks)


# --------------------------------------------------------------------------
# FilterNoGradInput
# --------------------------------------------------------------------------
def test_an_int64_input_of_a_nested_branch_gets_no_gradient():
    prog = _before("cond_nested_backward")
    assert not any(b.has_var("label") for b in prog.blocks[1:])      # declared in block 0 only
    _append(prog)
    grads = _label_grads(prog)
    assert len(grads) == 6 and set(grads) == {EMPTY}          # 2 outer and 4 inner branches
    assert not _declared(prog, "label@GRAD")
    assert not any(n.startswith("label@GRAD") for b in prog.blocks for n in b.vars)
    assert not any(op.type == "sum" and any(a.startswith("label@GRAD") for a in op.input("X"))
                   for b in prog.blocks for op in b.ops)


def test_an_int64_input_that_may_have_a_gradient_still_gets_none():
    """stop_gradient off on the int64 label: it is not in the no-grad set,
    but its dtype has no gradient (FilterNoGradInput)."""
    prog = _before("cond_backward")
    prog.global_block().var("label").stop_gradient = False
    _append(prog)
    assert _label_grads(prog) == [EMPTY, EMPTY]
    assert not _declared(prog, "label@GRAD")


def test_a_float_input_of_a_nested_branch_keeps_its_gradient():
    prog = _before("cond_half_nested_at_true")
    _append(prog)
    named = [op.output("Input@GRAD")[op.input("Input").index("image")]
             for b in prog.blocks for op in b.ops
             if op.type == "conditional_block_grad" and "image" in op.input("Input")]
    assert len(named) == 4 and EMPTY not in named and all(n.startswith("image@GRAD") for n in named)


# --------------------------------------------------------------------------
# a branch reading and reassigning a var no gradient can reach
# --------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["cond_backward", "cond_half_nested_at_true", "cond_nested_backward"])
def test_a_running_mean_reassigned_in_a_branch_and_read_by_nothing_after_is_paddles(scenario):
    """batch_norm's running mean is in the branch's Input and Out; its grad
    names `w_1@GRAD`, which nothing can write: Paddle's program, no warning
    (this was refused: "the branch reads and reassigns the var")."""
    prog = _before(scenario)
    assert _append(prog) == []
    assert pybackward.dumps(prog) == (ROOT / scenario / "call0_after.pb").read_bytes()


def _read_after(prog, var: str) -> str:
    """loss2 = loss + mean(var), appended to the global block: a gradient of
    `var` after the branch."""
    block = prog.global_block()
    loss = _loss(prog)
    m = block.create_var("mean_of_running_mean", shape=(), dtype="float32")
    total = block.create_var("loss_and_running_mean", shape=(), dtype="float32")
    block.append_op("reduce_mean", {"X": [var]}, {"Out": [m]}, {"dim": [0], "keep_dim": False, "reduce_all": True})
    block.append_op("elementwise_add", {"X": [loss], "Y": [m]}, {"Out": [total]}, {"axis": -1})
    return total.name


@pytest.mark.parametrize("scenario,where", [
    ("cond_backward", r"block 0, op 6 \(conditional_block\), var 'batch_norm_0.w_1'"),
    ("cond_half_nested_at_true", r"block 1, op 6 \(conditional_block\), var 'batch_norm_0.w_1'"),
])
def test_a_running_mean_read_after_the_branch_is_still_refused(scenario, where):
    """A gradient of the running mean arrives from after the branch: the
    branch's grad ops do not differentiate its read (batch_norm_grad has no
    Mean@GRAD), so a taken branch would pass the gradient of the value it
    replaced: refused, as before (in a nested branch too: the read comes
    after the outer cond)."""
    prog = _before(scenario)
    loss = _read_after(prog, "batch_norm_0.w_1")
    with pytest.raises(ProgramFileError, match=where + ": the branch reads and reassigns the var"):
        _append(prog, loss)


def test_the_target_itself_is_not_taken_for_a_var_no_gradient_reaches():
    """The running mean as the target (its gradient is seeded, though
    nothing reads it after the branch): refused, not left as Paddle's."""
    prog = _before("cond_backward")
    prog.global_block().var("batch_norm_0.w_1").stop_gradient = False
    with pytest.raises(ProgramFileError, match="the branch reads and reassigns the var"):
        _append(prog, "batch_norm_0.w_1")


def test_one_image_through_the_batch_norm_branch_gives_paddles_values():
    """TestCondBackward's second feed (i = 1) takes the batch_norm branch with
    one image: Paddle's batch_norm is then the identity, and image@GRAD is
    Paddle's (it was zeros, and the loss ln 10, before the kernel fix)."""
    prog = _before("cond_backward")
    _append(prog)
    case = json.loads((ROOT / "cond_backward" / "case.json").read_text())
    run = case["runs"][0]
    feed = {n: np.asarray(v["value"], v["dtype"]) for n, v in run["feed"].items()}
    scope = Scope()
    for n, v in np.load(ROOT / "cond_backward" / "params.npz").items():
        scope.set(n, v)
    grad, loss = Executor().run(prog, feed=feed, fetch_list=["image@GRAD", _loss(prog)], scope=scope)
    np.testing.assert_allclose(grad, run["paddle_values"][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, run["paddle_values"][1], rtol=1e-5)
    assert abs(float(np.ravel(loss)[0]) - np.log(10)) > 1
