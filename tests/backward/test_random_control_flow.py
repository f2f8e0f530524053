"""Random programs with loops, branches, in-place ops and aliased outputs,
checked against finite differences in float64 (issue #35).

tests/randprog.py with `control_flow=True, inplace=True`: `while` loops
nested up to three deep, if/else branches in their bodies (reading the loop
var, or a value computed before the branch), accumulators beside the nested
loops, in-place ops in block 0 and on loop vars, and ops naming a var twice
among their outputs. Each program's gradients (pybackward's default program,
run by the interpreter) must equal central finite differences - or the pass
refuses the program in one line naming its rule, which only an aliased
output may cause.

Bounded for CI: PYBACKWARD_RANDOM_CF_PROGRAMS programs (default 60).
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import pybackward
from conftest import paddle_execute_many
from pybackward.base.errors import PaddleDeviationWarning, ProgramFileError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from randprog import check_program, random_program  # noqa: E402

N = int(os.environ.get("PYBACKWARD_RANDOM_CF_PROGRAMS", 60))
SEEDS = list(range(N))


def _program(seed: int):
    return random_program(seed, max_ops=10, control_flow=True, inplace=True)


def _depth(prog) -> int:
    """How deep `while` ops nest."""
    def depth(b: int) -> int:
        return max([(op.type == "while") + depth(op.sub_block) for op in prog.block(b).ops
                    if op.sub_block is not None] or [0])
    return depth(0)


def test_the_generator_makes_what_it_should():
    """Across the seeds: nested loops (two and three deep), branches in loops,
    branches reading the loop var, in-place ops and aliased outputs."""
    seen = set()
    for seed in SEEDS:
        rp = _program(seed)
        d = _depth(rp.program)
        seen.add(f"depth {min(d, 3)}")
        for b in rp.program.blocks[1:]:
            for op in b.ops:
                if op.type == "conditional_block":
                    seen.add("branch in loop")
                    if set(op.input("Input")) & set(op.output("Out")):
                        seen.add("branch reads the loop var")
        for o in rp.ops:
            if set(a for v in o.inputs.values() for a in v) & set(a for v in o.outputs.values() for a in v) \
                    and o.type not in ("increment", "while", "conditional_block"):
                seen.add("in place")
        if rp.expect_refusal:
            seen.add("aliased")
    assert {"depth 1", "depth 2", "depth 3", "branch in loop", "branch reads the loop var", "in place",
            "aliased"} <= seen, seen


@pytest.mark.parametrize("seed", SEEDS)
def test_gradients_equal_finite_differences_or_the_program_is_refused(seed):
    rp = _program(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PaddleDeviationWarning)
            rows = check_program(rp)
    except ProgramFileError as e:
        assert rp.expect_refusal and "(rule: " in str(e) and "\n" not in str(e), str(e)
        return
    bad = [f"{r.var}: analytic {None if r.analytic is None else r.analytic.ravel()[:6]} "
           f"numeric {r.numeric.ravel()[:6]}" for r in rows if not r.ok]
    assert not bad, f"{rp.describe()}\n" + "\n".join(bad)


@pytest.mark.paddle
def test_paddles_executor_agrees_on_pybackwards_programs(tmp_path):
    """Paddle's Executor runs pybackward's default programs for a sample of
    the seeds and gets the finite-difference values too (float32)."""
    jobs, numeric = [], {}
    for seed in SEEDS[:20]:
        rp = _program(seed)
        if rp.expect_refusal:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PaddleDeviationWarning)
            rows = check_program(rp)
            prog = rp.program.clone()
            pairs = pybackward.append_backward(rp.loss, program=prog)
        grads = {p.name: g.name for p, g in pairs if g is not None}
        numeric[seed] = {grads[r.var]: r.numeric for r in rows if r.var in grads}
        (tmp_path / f"{seed}.pb").write_bytes(pybackward.dumps(prog))
        np.savez(tmp_path / f"{seed}_p.npz", **rp.params)
        np.savez(tmp_path / f"{seed}_f.npz", **rp.feeds)
        jobs.append({"program": str(tmp_path / f"{seed}.pb"), "params": str(tmp_path / f"{seed}_p.npz"),
                     "feeds": str(tmp_path / f"{seed}_f.npz"), "fetch": sorted(numeric[seed]),
                     "out": str(tmp_path / f"{seed}.npz"), "seed": seed})
    assert len(jobs) >= 10
    for job in paddle_execute_many(jobs, tmp_path):
        assert "error" not in job, job
        got = dict(np.load(job["out"]))
        for name, num in numeric[job["seed"]].items():
            np.testing.assert_allclose(got[name], num, rtol=2e-3, atol=2e-4, err_msg=f"seed {job['seed']} {name}")
