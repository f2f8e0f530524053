"""The PIR interpreter on Paddle's backward programs of the real models (issue #37 item 5).

Eval-mode dropout: dropout_grad runs without the mask a test-mode dropout never writes.

BLAS threads: a PIR run caps NumPy's OpenBLAS at one thread, as the legacy Executor does
(its spinning workers made googlenet's PIR step 2.4x slower on 2 cores).

The tensor-array glue for a `While` body's gradient:
Paddle 3.3.1's PIR backward of `seq2seq_while` (a legacy-style `While` block over a tensor
array, rebuilt in PIR mode) uses three ops the interpreter had no kernel for, so its step
could not be timed against Paddle's: `pd_op.assign_out_` (a loop var assigned in place),
`pd_op.tensor_to_array` (array_to_tensor's gradient) and `pd_op.create_array_like` (the
zero gradient of an array). The whole step must now give Paddle's recorded values; each op
is also checked on its own against what Paddle's kernel does.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from pybackward import pir
from pybackward.interpreter.pir_executor import PirExecutor
from pybackward.interpreter.pir_glue import GLUE, GLUE_INPLACE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backward" / "pir"))
from pir_cases import cases  # noqa: E402


@pytest.mark.parametrize("name", ["seq2seq_while", "alexnet_eval", "vgg11_bn_eval"])
def test_the_step_gives_paddles_values(name):
    """Paddle's own backward program, run by the interpreter fetching what the benchmark fetches
    (the loss and every gradient, in the manifest's order): each equals Paddle's Executor's
    (float32: rtol 1e-4). seq2seq_while needs the array glue below; the
    eval models a dropout_grad whose mask their test-mode dropout leaves unwritten (the kernel
    takes it missing, `allow_missing_inputs`, as in the legacy Executor)."""
    case = cases(names=[name])[0]
    prog = case.backward()
    want = case.values()
    assert len(want) >= 10
    fetch = case.entry["fetched"]
    got = PirExecutor(paddle_seed=2024).run(prog, case.feeds(), case.params(), fetch=fetch)
    assert sorted(got) == sorted(want)
    for k, v in want.items():     # rtol 1e-4: vgg11's fc grads differ from Paddle's in 3 of 640 at 5e-5
        np.testing.assert_allclose(got[k], v, rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("name", ["pd_op.assign_out_", "pd_op.tensor_to_array", "pd_op.create_array_like"])
def test_the_ops_are_in_the_seq2seq_while_backward(name):
    """The step test above exercises each of them (Paddle's program has them)."""
    prog = cases(names=["seq2seq_while"])[0].backward()
    names = set()

    def walk(block):
        for op in block.ops:
            names.add(op.name)
            for region in op.regions:
                for b in region.blocks:
                    walk(b)

    walk(prog.block)
    assert name in names


def test_assign_out_copies_x_into_out_in_place():
    x, out = np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((2, 3), np.float32)
    (got,) = GLUE["pd_op.assign_out_"]([x, out], {})
    np.testing.assert_array_equal(got, x)
    assert got is not x                            # a copy: a later in-place op on x leaves it alone
    assert GLUE_INPLACE["pd_op.assign_out_"] == ((1, 0),)   # `out` (operand 1) holds the result from then on


def test_tensor_to_array_unstacks_along_axis():
    """use_stack: array_to_tensor stacked the items on `axis`; the gradient takes them apart."""
    items = [np.zeros((2, 12), np.float32)] * 4
    g = np.random.RandomState(0).rand(2, 4, 12).astype(np.float32)
    (arr,) = GLUE["pd_op.tensor_to_array"]([items, g], {"axis": 1, "use_stack": True})
    assert len(arr) == 4
    for i, a in enumerate(arr):
        np.testing.assert_array_equal(a, g[:, i, :])
    (neg,) = GLUE["pd_op.tensor_to_array"]([items, g], {"axis": -2, "use_stack": True})
    for a, b in zip(arr, neg):
        np.testing.assert_array_equal(a, b)


def test_tensor_to_array_splits_a_concatenation_by_item_sizes():
    """Without use_stack the items were concatenated: the cuts follow each item's size on axis."""
    items = [np.zeros((2, 1)), np.zeros((2, 3)), np.zeros((2, 2))]
    g = np.arange(12, dtype=np.float64).reshape(2, 6)
    (arr,) = GLUE["pd_op.tensor_to_array"]([items, g], {"axis": 1, "use_stack": False})
    assert [a.shape for a in arr] == [(2, 1), (2, 3), (2, 2)]
    np.testing.assert_array_equal(np.concatenate(arr, axis=1), g)


def test_tensor_to_array_refuses_a_length_mismatch():
    from pybackward.base.errors import ExecutionError
    with pytest.raises(ExecutionError, match="tensor_to_array"):
        GLUE["pd_op.tensor_to_array"]([[np.zeros(2)] * 3, np.zeros((2, 4))], {"axis": 1, "use_stack": True})


def test_create_array_like_fills_each_item():
    items = [np.ones((2, 3), np.float32), np.ones((4,), np.float64)]
    (arr,) = GLUE["pd_op.create_array_like"]([items], {"val": 0.5})
    assert [(a.shape, a.dtype) for a in arr] == [((2, 3), np.float32), ((4,), np.float64)]
    assert all(np.all(a == 0.5) for a in arr)
    assert GLUE["pd_op.create_array_like"]([[]], {"val": 0.0}) == [[]]


def test_a_pir_run_caps_openblas_threads_and_restores_them():
    from pybackward.interpreter.executor import blas_threads
    if blas_threads() is None:
        pytest.skip("NumPy has no OpenBLAS here")
    case = cases(names=["lenet"])[0]
    before = blas_threads()
    seen = []
    PirExecutor(progress=lambda done, total, name: seen.append(blas_threads())).run(
        case.backward(), case.feeds(), case.params(), fetch=list(case.values()))
    assert seen and set(seen) == {1}
    assert blas_threads() == before
    seen.clear()
    PirExecutor(blas_threads=None, progress=lambda done, total, name: seen.append(blas_threads())).run(
        case.backward(), case.feeds(), case.params(), fetch=list(case.values()))
    assert set(seen) == {before}


def test_blas_threads_is_checked():
    from pybackward.base.errors import ArgumentError
    with pytest.raises((ArgumentError, TypeError)):
        PirExecutor(blas_threads=0)
