"""Tensor arrays beyond read/write: `sum` over arrays (issue #22 regression:
a while loop reading one slot twice accumulates the array's gradient with a
`sum` over tensor arrays, which failed with NumPy's "setting an array element
with a sequence"), and tensor_array_to_tensor.

The programs and values under testdata/arrays/ come from a live Paddle 3.3.1
(testdata/arrays/gen_arrays.py).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.gradcheck import check_gradients
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck

ARRAYS = Path(__file__).resolve().parents[2] / "testdata" / "arrays"


def _ref(case: str) -> dict:
    return dict(np.load(ARRAYS / case / "ref.npz"))


def _run_twice(prog, ref, fetch):
    scope = Scope()
    scope.set("w", ref["w"])
    return Executor().run(prog, feed={"x": ref["x"]}, fetch_list=fetch, scope=scope)


@pytest.mark.parametrize("which", ["paddle", "ours"])
def test_while_grad_sums_tensor_arrays_as_paddle(which):
    ref = _ref("while_read_twice")
    loss = str(ref["loss_name"])
    if which == "paddle":
        prog = pybackward.load(ARRAYS / "while_read_twice" / "backward.pb")
    else:
        prog = pybackward.load(ARRAYS / "while_read_twice" / "forward.pb")
        pybackward.append_backward(prog.global_block().var(loss))
    assert any(op.type == "sum" for b in prog.blocks for op in b.ops)
    got = _run_twice(prog, ref, [loss, "x@GRAD", "w@GRAD"])
    for name, g in zip(("loss", "x@GRAD", "w@GRAD"), got):
        np.testing.assert_allclose(g, ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_while_read_twice_gradients_match_finite_differences():
    ref = _ref("while_read_twice")
    prog = pybackward.load(ARRAYS / "while_read_twice" / "forward.pb")
    rows = check_gradients(prog, str(ref["loss_name"]), feed={"x": ref["x"]}, params={"w": ref["w"]},
                           wrt=["w", "x"])
    assert rows and all(r.ok for r in rows), rows


def test_sum_of_ragged_arrays_as_paddle():
    """Slot-wise sum: a slot written by one input only is that input's tensor."""
    ref = _ref("sum_ragged")
    prog = pybackward.load(ARRAYS / "sum_ragged" / "program.pb")
    fetch = [str(f) for f in ref["fetch"]]
    got = Executor().run(prog, feed={"x": ref["x"], "y": ref["y"]}, fetch_list=fetch)
    for g, want in zip(got, (ref["length"], ref["r0"], ref["r1"], ref["r2"])):
        assert g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=1e-6)


def test_sum_kernel_on_arrays_keeps_unwritten_slots_unwritten():
    a, b = np.ones((2, 3)), np.full((2, 3), 2.0)
    out = opcheck.run_kernel("sum", {"X": [[a, None], [None, None, b], []]}, {}, {"Out": ["s"]})["Out"][0]
    assert len(out) == 3 and out[1] is None
    np.testing.assert_array_equal(out[0], a)
    np.testing.assert_array_equal(out[2], b)
    out = opcheck.run_kernel("sum", {"X": [[a], [b]]}, {}, {"Out": ["s"]})["Out"][0]
    np.testing.assert_array_equal(out[0], a + b)
    assert out[0] is not a


def test_sum_kernel_rejects_arrays_mixed_with_tensors():
    with pytest.raises(ExecutionError, match="mixes tensor arrays and tensors"):
        opcheck.run_kernel("sum", {"X": [[np.ones(2)], np.ones(2)]}, {}, {"Out": ["s"]})


@pytest.mark.parametrize("case", ["to_tensor_1_concat", "to_tensor_0_stack", "to_tensor_2_stack"])
@pytest.mark.parametrize("which", ["paddle", "ours-paddle-exact",
                                   "ours"])
def test_tensor_array_to_tensor_as_paddle(case, which):
    ref = _ref(case)
    xs = sorted(k for k in ref if k.startswith("x") and "@" not in k)
    if which == "paddle":
        prog = pybackward.load(ARRAYS / case / "backward.pb")
    else:
        prog = pybackward.load(ARRAYS / case / "forward.pb")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pybackward.append_backward(prog.global_block().var(str(ref["loss_name"])),
                                       paddle_exact=which == "ours-paddle-exact")
    feed = {k: ref[k] for k in xs + ["c"]}
    got = Executor().run(prog, feed=feed, fetch_list=[str(ref["out_name"])] + [f"{x}@GRAD" for x in xs])
    np.testing.assert_allclose(got[0], ref["out"], rtol=1e-6)
    for x, g in zip(xs, got[1:]):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, ref[f"{x}@GRAD"], rtol=1e-6, err_msg=x)


def test_tensor_array_to_tensor_out_index_and_errors():
    a, b = np.ones((2, 3)), np.ones((2, 1))
    res = opcheck.run_kernel("tensor_array_to_tensor", {"X": [[a, b]]}, {"axis": 1},
                             {"Out": ["o"], "OutIndex": ["i"]})
    assert res["OutIndex"][0].tolist() == [3, 1] and res["OutIndex"][0].dtype == np.int32
    with pytest.raises(ExecutionError, match="axis=-1 is not supported"):
        opcheck.run_kernel("tensor_array_to_tensor", {"X": [[a, b]]}, {"axis": -1},
                           {"Out": ["o"], "OutIndex": ["i"]})
    with pytest.raises(ExecutionError, match="slot 1 of the tensor array was never written"):
        opcheck.run_kernel("tensor_array_to_tensor", {"X": [[a, None]]}, {"axis": 1},
                           {"Out": ["o"], "OutIndex": ["i"]})
