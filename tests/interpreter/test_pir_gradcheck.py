"""The backward sections of the PIR goldens against finite differences in float64.

`pir_gradcheck.check_gradients` runs a float64 copy of each program and
compares every `NAME@GRAD` the backward section computes with central
differences of its loss (with the feeds and parameters Paddle's values were
recorded with, testdata/pir_values). Two goldens cannot agree, and the tests
say why: `pylayer_bwd`'s backward is the user's own function (dy * 2, not the
derivative of exp), and `cond_in_while_bwd` is Paddle 3.3.1's backward of a
cond inside a while loop, which yields zeros for the loop variable's
gradient (the interpreter reproduces Paddle's zeros: test_pir_executor).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import TESTDATA
from pybackward import pir
from pybackward.base.errors import ArgumentError
from pybackward.interpreter.gradcheck import rows_to_table
from pybackward.interpreter.pir_executor import run
from pybackward.interpreter.pir_gradcheck import check_gradients, to_float64

VALUES = TESTDATA / "pir_values"
RUNS = json.loads((VALUES / "manifest.json").read_text())["runs"]
#: Backward sections that are not the derivative, and why.
NOT_THE_DERIVATIVE = {
    "pylayer_bwd": "static_pylayer's backward is the user's function (dy * 2), not exp's derivative",
    "cond_in_while_bwd": "Paddle 3.3.1's backward of a cond inside a while yields zeros for the loop variable",
}


def _load(run_name: str):
    spec = RUNS[run_name]
    prog = pir.load(TESTDATA / spec["program"])
    feeds = dict(np.load(VALUES / f"{run_name}.feeds.npz"))
    params = dict(np.load(VALUES / f"{run_name}.params.npz"))
    return spec, prog, feeds, params


BWD_RUNS = sorted(r for r in RUNS if "_bwd" in r)


@pytest.mark.parametrize("run_name", [r for r in BWD_RUNS if RUNS[r]["case"] not in NOT_THE_DERIVATIVE])
def test_backward_section_agrees_with_finite_differences(run_name):
    spec, prog, feeds, params = _load(run_name)
    rows = check_gradients(prog, feeds, params, paddle_seed=spec["paddle_seed"])
    assert rows and all(r.ok for r in rows), "\n" + rows_to_table(rows)
    n_params = sum(1 for op in prog.ops if op.name == "builtin.parameter" and op.results[0].stop_gradient is False)
    assert len(rows) >= n_params


@pytest.mark.parametrize("run_name", [r for r in BWD_RUNS if RUNS[r]["case"] in NOT_THE_DERIVATIVE])
def test_backward_sections_that_are_not_the_derivative(run_name):
    spec, prog, feeds, params = _load(run_name)
    rows = check_gradients(prog, feeds, params)
    assert not any(r.ok for r in rows), "\n" + rows_to_table(rows)
    grads = run(prog, feeds, params, fetch=sorted(f"{r.var}@GRAD" for r in rows))
    if spec["case"] == "pylayer_bwd":       # d mean / dy = 1/4, times the user's 2
        np.testing.assert_array_equal(grads["x@GRAD"], np.full(4, 0.5, np.float32))
    else:
        assert all(not np.any(g) for g in grads.values())


def test_to_float64_widens_types_and_dtype_attributes():
    prog = pir.load(TESTDATA / "pir" / "cnn_bwd.json")
    wide = to_float64(prog)
    kinds = {v.type.dtype for op in wide.walk() for v in op.results if hasattr(v.type, "dtype")}
    assert "float32" not in kinds and {"float64", "int64", "uint8"} <= kinds
    assert all(op.attr("dtype") != "float32" for op in wide.walk() if "dtype" in op.attrs)
    assert any(op.attr("dtype") == "float32" for op in prog.walk() if "dtype" in op.attrs)   # the original is kept
    spec, _, feeds, params = _load("cnn_bwd")
    out = run(wide, feeds, params, paddle_seed=spec["paddle_seed"])
    assert all(v.dtype == np.float64 for v in out.values())
    ref = run(prog, feeds, params, paddle_seed=spec["paddle_seed"])
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_check_gradients_arguments():
    spec, prog, feeds, params = _load("mlp_bwd")
    rows = check_gradients(prog, feeds, params, wrt=["fc_2.w_0"], max_elements=4, directions=3)
    assert [(r.var, r.mode, r.checked, r.ok) for r in rows] == [("fc_2.w_0", "directions", 3, True)]
    with pytest.raises(ArgumentError, match="computes no gradient for 'x'"):
        check_gradients(prog, feeds, params, wrt=["x"])
    fwd = pir.load(TESTDATA / "pir" / "mlp.json")
    with pytest.raises(ArgumentError, match="has no backward section"):
        check_gradients(fwd, feeds, {})
