"""`check_gradients` on programs that draw random numbers, and a name given
both as a parameter and as a feed (issue #35 item 6).

Finite differences compare the loss at x + eps and x - eps: on a program
with unseeded dropout (Paddle's default for training programs) each run of
the interpreter used to draw a new mask, so every gradient FAILed with
errors of ~1e4. Every run now starts its draws from the check's seed. A
parameter also given as a feed was replaced by the feed in every run, so
finite differences saw 0 (relative error 1e13): refused, naming the var.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, TESTDATA
from pybackward.base.errors import ArgumentError
from pybackward.interpreter.executor import Executor, Scope

CASE = PROGRAMS / "recompute_dropout_unseeded"
LOSS = "mean_0.tmp_0"


def _inputs() -> tuple[dict, dict]:
    return dict(np.load(CASE / "params.npz")), dict(np.load(CASE / "feeds.npz"))


def test_the_program_draws_a_new_mask_each_run():
    """The premise: an unseeded dropout, whose loss changes from run to run."""
    prog = pybackward.load(CASE / "forward.pb")
    drops = [op for op in prog.global_block().ops if op.type == "dropout"]
    assert drops and not any(op.attr("fix_seed") for op in drops)
    params, feed = _inputs()
    exe, scope = Executor(seed=0), Scope()
    for k, v in params.items():
        scope.set(k, v)
    a, = exe.run(prog, feed=feed, fetch_list=[LOSS], scope=scope)
    b, = exe.run(prog, feed=feed, fetch_list=[LOSS], scope=scope)
    assert a != b
    exe.reseed(0)
    c, = exe.run(prog, feed=feed, fetch_list=[LOSS], scope=scope)
    assert c == a                    # reseeded: the first run's mask again


def test_check_gradients_on_unseeded_dropout():
    params, feed = _inputs()
    rows = pybackward.check_gradients(pybackward.load(CASE / "forward.pb"), LOSS, feed=feed, params=params)
    assert len(rows) == 6
    assert all(r.ok for r in rows), [(r.var, r.max_abs_err) for r in rows]
    assert max(r.max_abs_err for r in rows) < 1e-8


@pytest.mark.parametrize("seed", [0, 7])
def test_check_gradients_on_unseeded_dropout_with_directions(seed):
    """Large tensors, checked along random directions, see the same mask too."""
    params, feed = _inputs()
    rows = pybackward.check_gradients(pybackward.load(CASE / "forward.pb"), LOSS, feed=feed, params=params,
                                      max_elements=8, seed=seed)
    assert any(r.mode == "directions" for r in rows)
    assert all(r.ok for r in rows), [(r.var, r.max_abs_err) for r in rows]


def test_a_name_given_as_parameter_and_feed_is_refused():
    params, feed = _inputs()
    feed = dict(feed, **{"fc_1.w_0": params["fc_1.w_0"]})
    with pytest.raises(ArgumentError, match=r"^'fc_1.w_0' given both as a parameter and as a feed: .*once"):
        pybackward.check_gradients(pybackward.load(CASE / "forward.pb"), LOSS, feed=feed, params=params)


def test_cli_check_refuses_a_name_given_both_ways(tmp_path):
    """The CLI gets the refusal from the library: one line, exit 2."""
    params, _ = _inputs()
    np.save(tmp_path / "w.npy", params["fc_1.w_0"])
    r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "check", "-q", "--loss", LOSS,
                        "--params", str(CASE / "params.npz"), "--feeds", str(CASE / "feeds.npz"),
                        "--feed", f"fc_1.w_0={tmp_path / 'w.npy'}", str(CASE / "forward.pb")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'fc_1.w_0' given both as a parameter and as a feed" in lines[0], r.stderr


def test_to_float64_moves_a_constants_fp32_values_to_fp64_values():
    """`to_float64` widens assign_value's dtype; its data (kept per dtype, `fp32_values`) moves to
    `fp64_values`, the list a float64 assign_value reads (Paddle's kernel and ours): before, the
    widened op had no values and the float64 copy of a converted transformer decoder failed."""
    from pybackward import pir
    from pybackward.convert.to_legacy import to_legacy
    from pybackward.interpreter.gradcheck import to_float64
    prog = to_legacy(pir.load(TESTDATA / "pir_backward" / "transformer_decoder.json"))
    ops = [op for b in prog.blocks for op in b.ops if op.type == "assign_value" and op.attr("fp32_values")]
    assert ops, "the premise: float32 constants stored in fp32_values"
    wide = to_float64(prog)
    for op in (o for b in wide.blocks for o in b.ops if o.type == "assign_value"):
        if op.attr("dtype") == 6:                                   # FP64
            assert not op.attr("fp32_values") and op.attr("fp64_values")
    name = ops[0].output("Out")[0]
    want = np.asarray(ops[0].attr("fp32_values"), dtype=np.float32).astype(np.float64)
    (got,) = Executor().run(_only(wide, ops[0]), fetch_list=[name], scope=Scope())
    assert got.dtype == np.float64 and np.array_equal(got.ravel(), want)


def _only(prog, op):
    """A copy of `prog` keeping, of block 0's ops, only the one like `op` (its constant)."""
    p = prog.clone()
    ops = p.desc.blocks[0].ops
    keep = [o for o in ops if o.type == op.type and list(o.outputs[0].arguments) == op.output("Out")]
    del ops[:]
    ops.extend(keep)
    p.sync()
    return p
