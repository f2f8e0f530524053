"""Long runs stay bounded (issue #36: "Nested `while` loops under the 10,000-step
default grow to gigabytes (10^8 step scopes kept for a forward-only program);
`--timeout` is checked only between ops").

* A `while` keeps its step scopes (and the copies of X each holds) only when
  a `while_grad` reads them: a forward-only run of two nested loops holds one
  step at a time, however many steps it takes.
* `timeout` stops a run inside a single long op too (a watchdog raises in the
  running thread), and in a nested loop under the default step limits, in
  bounded time and memory.
* A program with a backward section still keeps every step its while_grad
  reads, and gives Paddle's gradients.

The program is Paddle's (testdata/nested_control_flow/while_nested: h = scale(x);
3 times { 4 times { h = tanh(h @ w) } }), with its two loop limits rewritten.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

import pybackward
from conftest import TESTDATA
from pybackward.base.errors import ExecutionLimitError
from pybackward.interpreter import executor as ex
from pybackward.interpreter.executor import Executor, Scope
from pybackward.legacy.program import Program

CASE = TESTDATA / "nested_control_flow" / "while_nested"
OUTER_LIMIT, INNER_LIMIT = "fill_constant_3.tmp_0", "fill_constant_7.tmp_0"
OUTER_STEPS = "_generated_var_1"        # the outer while's StepScopes


def _nested(outer: int, inner: int, file: str = "forward.pb"):
    prog = pybackward.load(CASE / file)
    for b in prog.blocks:
        for op in b.ops:
            if op.type == "fill_constant" and op.output("Out")[0] in (OUTER_LIMIT, INNER_LIMIT):
                n = outer if op.output("Out")[0] == OUTER_LIMIT else inner
                op.set_attr("value", float(n))
                op.set_attr("str_value", str(n))
    return prog


def _params() -> Scope:
    scope = Scope()
    for k, v in np.load(CASE / "params.npz").items():
        scope.set(k, v)
    return scope


def _peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_forward_only_nested_while_keeps_no_step_scopes():
    """20 x 50 steps on a [1000, 8] batch: each kept step would hold ~100 KB
    (main kept all 1,000: ~100 MB); now one step lives at a time."""
    prog = _nested(20, 50)
    x = np.random.default_rng(0).standard_normal((1000, 8)).astype(np.float32)
    scope = _params()
    got = {}

    def run():
        got["loss"], got["steps"] = Executor().run(prog, feed={"x": x}, fetch_list=["mean_0.tmp_0", OUTER_STEPS],
                                                   scope=scope)
    peak = _peak_mb(run)
    assert got["steps"] == []
    assert peak < 16, f"{peak:.1f} MB"


def test_forward_only_nested_while_values():
    prog = _nested(4, 5)
    x = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    loss, steps = Executor().run(prog, feed={"x": x}, fetch_list=["mean_0.tmp_0", OUTER_STEPS], scope=_params())
    assert steps == []
    scale = prog.global_block().ops[0]
    h = x.astype(np.float64) * scale.attr("scale") + scale.attr("bias")
    w = np.load(CASE / "params.npz")["w"].astype(np.float64)
    for _ in range(4 * 5):
        h = np.tanh(h @ w)
    np.testing.assert_allclose(loss, h.mean(), rtol=1e-5)


def test_nested_while_under_the_default_step_limits_stops_at_its_timeout():
    """9,999 x 9,999 steps (10^8, under the 10,000-step default of each loop):
    the timeout ends it in about a second, in bounded memory."""
    prog = _nested(9999, 9999)
    x = np.random.default_rng(0).standard_normal((1000, 8)).astype(np.float32)
    scope = _params()
    t = time.monotonic()

    def run():
        with pytest.raises(ExecutionLimitError, match=r"block 1, op 3 \(while\).*time limit of 1 s"):
            Executor(timeout=1.0).run(prog, feed={"x": x}, fetch_list=["mean_0.tmp_0"], scope=scope)
    peak = _peak_mb(run)
    assert time.monotonic() - t < 5
    assert peak < 16, f"{peak:.1f} MB"


def _cummax_program(n: int) -> Program:
    prog = Program()
    b = prog.global_block()
    b.create_var("x", [1, n], "float32")
    b.create_var("o", [1, n], "float32")
    b.create_var("i", [1, n], "int64")
    b.append_op("cummax", {"x": ["x"]}, {"out": ["o"], "indices": ["i"]}, {"axis": 1, "dtype": 3})
    return prog


def test_timeout_interrupts_one_long_op():
    """cummax walks its axis in Python: 400,000 steps take ~10 s, one op.
    Checked only between ops, the run went to its end; now it stops inside
    the op, naming it."""
    x = np.random.default_rng(0).standard_normal((1, 400_000)).astype(np.float32)
    t = time.monotonic()
    with pytest.raises(ExecutionLimitError, match=r"block 0, op 0 \(cummax\): timed out in this op.*0.3 s"):
        Executor(timeout=0.3).run(_cummax_program(400_000), feed={"x": x}, fetch_list=["o"])
    assert time.monotonic() - t < 3


def test_a_run_is_never_interrupted_after_it_returns():
    """The watchdog is disarmed when the run ends: nothing is raised after
    `run` returns or raises, even for runs that end close to their limit
    (on a loaded machine some of these pass it inside the run: that is the
    limit working)."""
    prog = _cummax_program(2000)
    x = np.arange(2000, dtype=np.float32).reshape(1, 2000)
    exe = Executor(timeout=0.005)
    ended = 0
    for _ in range(100):
        try:
            out, = exe.run(prog, feed={"x": x}, fetch_list=["o"])
            np.testing.assert_array_equal(out, x)
            ended += 1
        except ExecutionLimitError:
            pass
    time.sleep(0.3)                     # a stray interrupt would land in here
    for _ in range(1000):
        sum(range(100))


def test_backward_program_keeps_the_steps_its_while_grad_reads():
    prog = pybackward.load(CASE / "backward.pb")
    feeds = dict(np.load(CASE / "feeds.npz"))
    want = dict(np.load(CASE / "grads.npz"))
    names = sorted(n for n in want if n.endswith("@GRAD"))
    got = Executor().run(prog, feed=feeds, fetch_list=names + [OUTER_STEPS], scope=_params())
    assert len(got[-1]) == 3                                   # the outer loop's 3 steps
    for n, g in zip(names, got):
        np.testing.assert_allclose(g, want[n], rtol=1e-5, atol=1e-6, err_msg=n)


def test_blas_threads_are_restored_after_a_run():
    before = ex.blas_threads()
    if before is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS: nothing to cap")
    seen = []
    prog = _cummax_program(4)
    exe = Executor(progress=lambda done, total, op: seen.append(ex.blas_threads()))
    exe.run(prog, feed={"x": np.zeros((1, 4), np.float32)}, fetch_list=["o"])
    assert seen == [1]
    assert ex.blas_threads() == before
