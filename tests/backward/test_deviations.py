"""Right where Paddle is wrong: by default the gradients agree with finite
differences; `paddle_exact=True` gives Paddle's program (docs/deviations.md)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import pybackward
from pybackward import static
from pybackward.base.errors import PaddleDeviationWarning
from pybackward.interpreter.gradcheck import to_float64
from pybackward.interpreter.executor import Executor, Scope


def _nested_targets_program():
    """y1 = fc(x); y2 = fc(y1): gradients([y1, y2], [x], [None, tg2])."""
    main, start = static.Program(), static.Program()
    with static.program_guard(main, start):
        x = static.data("x", [2, 3], "float32")
        x.stop_gradient = False
        static.data("tg2", [2, 4], "float32")
        y1 = static.nn.fc(x, 3)
        y2 = static.nn.fc(y1, 4)
    return to_float64(pybackward.loads(pybackward.dumps(main))), y1.name, y2.name


def _values(rng):
    return {"x": rng.standard_normal((2, 3)), "tg2": rng.standard_normal((2, 4)),
            "fc_0.w_0": rng.standard_normal((3, 3)), "fc_0.b_0": rng.standard_normal(3),
            "fc_1.w_0": rng.standard_normal((3, 4)), "fc_1.b_0": rng.standard_normal(4)}


def _run(prog, vals, fetch):
    scope = Scope()
    for k, v in vals.items():
        if k not in ("x", "tg2"):
            scope.set(k, v)
    return Executor().run(prog, feed={"x": vals["x"], "tg2": vals["tg2"]}, fetch_list=fetch, scope=scope)


def test_nested_targets_get_every_term_by_default():
    prog, y1, y2 = _nested_targets_program()
    fwd = prog.clone()
    with pytest.warns(PaddleDeviationWarning, match=f"nested targets.*'{y1}'"):
        (gx,) = pybackward.gradients([y1, y2], ["x"], [None, "tg2"], program=prog)
    vals = _values(np.random.default_rng(0))
    got = _run(prog, vals, [gx.name])[0]

    def objective(x):
        y1v, y2v = _run(fwd, dict(vals, x=x), [y1, y2])
        return float(np.sum(y1v) + np.sum(y2v * vals["tg2"]))
    num = np.zeros_like(vals["x"])
    for i in range(num.size):
        e = np.zeros_like(num)
        e.flat[i] = 1e-6
        num.flat[i] = (objective(vals["x"] + e) - objective(vals["x"] - e)) / 2e-6
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-8)


def test_nested_targets_paddle_exact_keeps_paddles_program():
    prog, y1, y2 = _nested_targets_program()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.gradients([y1, y2], ["x"], [None, "tg2"], program=prog, paddle_exact=True)
    ops = [op for op in prog.global_block().ops if op.attr("op_role", 0) & 1]
    assert [op.type for op in ops] == ["fill_any_like", "elementwise_add_grad", "mul_grad",
                                       "elementwise_add_grad", "mul_grad"]
    # Paddle's bug: the mul_grad of y2 overwrites the seed of y1@GRAD
    assert ops[0].output("Out") == [y1 + "@GRAD"] and ops[2].output("X@GRAD") == [y1 + "@GRAD"]


def test_no_deviation_where_paddle_is_right():
    prog, y1, y2 = _nested_targets_program()
    exact = prog.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.gradients([y2], ["x"], ["tg2"], program=prog)
    pybackward.gradients([y2], ["x"], ["tg2"], program=exact, paddle_exact=True)
    assert pybackward.dumps(prog) == pybackward.dumps(exact)


def test_cli_warns_in_one_line_and_lists_deviations_in_json(tmp_path):
    import json
    import subprocess
    import sys
    prog, y1, y2 = _nested_targets_program()
    src = tmp_path / "nested.pb"
    pybackward.save(prog, src)
    base = [sys.executable, "-m", "pybackward_cli.main", "gradients", "--target", y1, "--target", y2,
            "--input", "x", "--target-grad", "-", "--target-grad", "tg2"]
    r = subprocess.run(base + ["--json", str(src), str(tmp_path / "o.pb")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    warn = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warn) == 1 and "nested targets" in warn[0] and y1 in warn[0]
    assert json.loads(r.stdout)["deviations"] == [warn[0][len("warning: "):]]
    r = subprocess.run(base + ["--paddle-exact", "--json", str(src), str(tmp_path / "p.pb")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stderr and "deviations" not in json.loads(r.stdout)


def _fit_a_line():
    from conftest import PROGRAMS
    return pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb"), PROGRAMS / "fit_a_line"


def test_a_forward_var_in_the_grad_namespace_is_refused():
    """A forward op writing `mean_0.tmp_0@GRAD`: Paddle adds the loss seed into it (4x gradients)."""
    prog, _ = _fit_a_line()
    block = prog.global_block()
    block.create_var("mean_0.tmp_0@GRAD", shape=[], dtype="float32")
    block.append_op("scale", {"X": ["mean_0.tmp_0"]}, {"Out": ["mean_0.tmp_0@GRAD"]}, {"scale": 3.0})
    before = pybackward.dumps(prog)
    with pytest.raises(pybackward.ProgramFileError, match=r"op 5 \(scale\), var 'mean_0.tmp_0@GRAD'.*@GRAD namespace"):
        pybackward.append_backward("mean_0.tmp_0", program=prog)
    assert pybackward.dumps(prog) == before
    pybackward.append_backward("mean_0.tmp_0", program=prog, paddle_exact=True)  # Paddle's program


def test_a_var_written_twice_differentiates_only_the_value_that_is_read():
    """The loss computed twice into one name: Paddle's gradients come out 2x."""
    prog, here = _fit_a_line()
    block = prog.global_block()
    mean = block.ops[-1]
    block.append_op_desc(mean.desc)   # the same reduce_mean again, into the same var
    exact = prog.clone()
    with pytest.warns(PaddleDeviationWarning, match="var written twice.*'mean_0.tmp_0' from op 4"):
        pairs = pybackward.append_backward("mean_0.tmp_0", program=prog)
    pybackward.append_backward("mean_0.tmp_0", program=exact, paddle_exact=True)
    feeds, params = dict(np.load(here / "feeds.npz")), dict(np.load(here / "params.npz"))
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    names = [g.name for _, g in pairs]
    got = Executor().run(prog, feed=feeds, fetch_list=names, scope=scope)
    ref = Executor().run(pybackward.load(here / "backward.pb"), feed=feeds, fetch_list=names, scope=scope)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)       # right: as if the loss were computed once
    bad = Executor().run(exact, feed=feeds, fetch_list=names, scope=scope)
    np.testing.assert_allclose(bad[0], 2 * ref[0], rtol=1e-5)   # Paddle's: twice


def test_a_value_read_then_overwritten_on_the_path_is_refused():
    prog, _ = _fit_a_line()
    block = prog.global_block()
    # square_error_cost_0.tmp_1 is read by reduce_mean (op 4); write it again and read the new value
    block.append_op("scale", {"X": ["fc_0.tmp_1"]}, {"Out": ["square_error_cost_0.tmp_1"]}, {"scale": 2.0})
    block.create_var("loss2", shape=[], dtype="float32")
    block.append_op("reduce_mean", {"X": ["square_error_cost_0.tmp_1"]}, {"Out": ["loss2"]},
                    {"reduce_all": True, "dim": [], "keep_dim": False})
    block.create_var("total", shape=[], dtype="float32")
    block.append_op("elementwise_add", {"X": ["mean_0.tmp_0"], "Y": ["loss2"]}, {"Out": ["total"]}, {"axis": -1})
    with pytest.raises(pybackward.ProgramFileError, match="writes the var again after op 4 .*read its earlier value"):
        pybackward.append_backward("total", program=prog)


def test_a_sub_block_that_retypes_an_outer_float_var_is_refused():
    """Paddle: append exits 0 and the parameter's gradient is all zeros."""
    import json
    from conftest import PROGRAMS
    prog = pybackward.load(PROGRAMS / "cond_block" / "forward.pb")
    sub, root = prog.blocks[1], prog.global_block()
    used = next(n for op in sub.ops for n in op.input_arg_names
                if not sub.has_var(n) and root.has_var(n) and root.var(n).data_type == 5)
    sub.create_var(used, shape=[1], dtype="int64")
    loss = json.loads((PROGRAMS / "cond_block" / "case.json").read_text())["loss"]
    with pytest.raises(pybackward.ProgramFileError, match=f"block 1, var '{used}': re-declares block 0's"):
        pybackward.append_backward(loss, program=prog)


def test_cli_append_refuses_or_keeps_paddles_program(tmp_path):
    import subprocess
    import sys
    prog, _ = _fit_a_line()
    block = prog.global_block()
    block.append_op_desc(block.ops[-1].desc)
    src = tmp_path / "twice.pb"
    pybackward.save(prog, src)
    cmd = [sys.executable, "-m", "pybackward_cli.main", "append", "--loss", "mean_0.tmp_0", str(src)]
    r = subprocess.run(cmd + [str(tmp_path / "a.pb")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr.count("warning: var written twice") == 1, r.stderr
    r = subprocess.run(cmd + ["--paddle-exact", str(tmp_path / "b.pb")], capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stderr
    assert (tmp_path / "a.pb").read_bytes() != (tmp_path / "b.pb").read_bytes()


def test_writes_to_two_slots_of_a_tensor_array_are_not_a_var_written_twice():
    """write_to_array updates one slot in place: two writes into one array
    (slots 0 and 1) are both differentiated, with no deviation (as Paddle)."""
    from pathlib import Path
    here = Path(__file__).resolve().parents[2] / "testdata" / "arrays" / "to_tensor_1_concat"
    ref = dict(np.load(here / "ref.npz"))
    prog = pybackward.load(here / "forward.pb")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.append_backward(str(ref["loss_name"]), program=prog)
    got = Executor().run(prog, feed={k: ref[k] for k in ("x0", "x1", "c")}, fetch_list=["x0@GRAD", "x1@GRAD"])
    for name, g in zip(("x0@GRAD", "x1@GRAD"), got):
        np.testing.assert_allclose(g, ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
