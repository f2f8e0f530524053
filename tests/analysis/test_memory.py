"""The memory report (static liveness), its check against the interpreter, and
automatic checkpoints (pybackward.memory, `pybackward stats`)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
import pybackward.memory as pm
from conftest import PROGRAMS, case_json
from pybackward.interpreter.gradcheck import to_float64
from pybackward.interpreter.executor import Executor, Scope
from pybackward.legacy.program import Program


def mlp(layers: int, width: int) -> Program:
    """x[-1, width] -> layers x (mul, elementwise_add, relu) -> reduce_mean, built directly."""
    p = Program()
    b = p.global_block()
    b.create_var("x", [-1, width], "float32", stop_gradient=True, need_check_feed=True)
    h = "x"
    for i in range(layers):
        w, bias = f"fc_{i}.w_0", f"fc_{i}.b_0"
        b.create_var(w, [width, width], "float32", persistable=True, is_parameter=True)
        b.create_var(bias, [width], "float32", persistable=True, is_parameter=True)
        t0, t1, t2 = (f"fc_{i}.tmp_{k}" for k in range(3))
        for t in (t0, t1, t2):
            b.create_var(t, [-1, width], "float32")
        b.append_op("mul", {"X": [h], "Y": [w]}, {"Out": [t0]}, {"x_num_col_dims": 1, "y_num_col_dims": 1})
        b.append_op("elementwise_add", {"X": [t0], "Y": [bias]}, {"Out": [t1]}, {"axis": 1})
        b.append_op("relu", {"X": [t1]}, {"Out": [t2]})
        h = t2
    b.create_var("mean_0.tmp_0", [], "float32")
    b.append_op("reduce_mean", {"X": [h]}, {"Out": ["mean_0.tmp_0"]},
                {"dim": [], "keep_dim": False, "reduce_all": True})
    p.loaded_var_counts = [len(b.vars)]
    return p


def mlp_values(layers: int, width: int, batch: int, seed: int = 0):
    rs = np.random.RandomState(seed)
    params = {}
    for i in range(layers):
        params[f"fc_{i}.w_0"] = rs.standard_normal((width, width)) * np.sqrt(2.0 / width)
        params[f"fc_{i}.b_0"] = rs.standard_normal(width) * 0.1
    return {"x": rs.standard_normal((batch, width))}, params


def _golden(case: str):
    d = PROGRAMS / case
    cj = case_json(case)
    fetch = [cj["loss"]] + [g for _, g in cj["variants"]["default"]["returned"] if g]
    return (pybackward.load(d / "backward.pb"), dict(np.load(d / "feeds.npz")),
            dict(np.load(d / "params.npz")), fetch)


# --------------------------------------------------------------------------
# The model against the interpreter
# --------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["mlp_softmax_ce", "cnn_bn_pool"])
def test_static_estimate_agrees_with_the_interpreter_within_10_percent(case):
    prog, feeds, params, fetch = _golden(case)
    est = pm.memory(prog, batch_size=4, keep=fetch)
    got = pm.measure(prog, feeds, params, fetch=fetch, batch_size=4)
    assert est.peak_bytes > 0
    assert abs(got.peak_bytes - est.peak_bytes) <= 0.10 * est.peak_bytes
    assert got.peak_op == est.peak_op
    assert len(got.timeline) == len(est.timeline) == len(prog.global_block().ops)
    for a, b in zip(got.timeline, est.timeline):
        assert abs(a - b) <= 0.10 * max(b, 1)
    # The values are the interpreter's as usual (dropping dead values changes nothing).
    exe = Executor()
    exe.track_memory = True
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    plain = exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)
    for n, v in zip(fetch, plain):
        np.testing.assert_array_equal(got.values[n], v)
    # The interpreter's own peak keeps every value of the run: the sum of all.
    assert exe.peak_bytes > got.peak_all_bytes >= got.peak_bytes


def test_report_of_the_mlp_golden_program():
    prog, _, params, fetch = _golden("mlp_softmax_ce")
    rep = pm.memory(prog, batch_size=4, keep=fetch)
    assert rep.parameter_bytes == sum(v.nbytes for v in params.values())
    assert rep.gradient_bytes == rep.parameter_bytes          # one gradient per parameter
    assert rep.peak_op_type == prog.global_block().ops[rep.peak_op].type
    assert rep.top and rep.top == sorted(rep.top, key=lambda t: (-t[2], t[0]))
    assert all(k in pm.ACTIVATION_KINDS for _, k, _ in rep.top)
    assert rep.lives["x"].kind == pm.INPUT and rep.lives["x"].start == 0
    assert rep.lives["fc_0.w_0@GRAD"].kind == pm.PARAM_GRAD
    assert rep.lives["fc_0.w_0"].kind == pm.PARAMETER
    assert rep.total_bytes == rep.parameter_bytes + rep.gradient_bytes + rep.peak_bytes
    d = json.loads(rep.to_json())
    assert d["peak_bytes"] == rep.peak_bytes and d["peak_op"] == rep.peak_op
    text = str(rep)
    assert "peak activation memory" in text and rep.peak_op_type in text
    # Activations scale with the batch; parameters do not.
    rep8 = pm.memory(prog, batch_size=8, keep=fetch)
    assert rep8.parameter_bytes == rep.parameter_bytes
    assert rep.peak_bytes < rep8.peak_bytes <= 2 * rep.peak_bytes


def test_liveness_rules():
    prog = mlp(2, 4)
    pybackward.append_backward("mean_0.tmp_0", program=prog)
    life = pm.lives(prog, batch_size=3)
    ops = prog.global_block().ops
    t = life["fc_0.tmp_2"]                # written by op 2, last read by a grad op
    assert t.start == 2 and ops[t.end].type.endswith("_grad") and t.nbytes == 3 * 4 * 4
    assert life["mean_0.tmp_0"].start == life["mean_0.tmp_0"].end      # read by nothing
    assert pm.lives(prog, 3, keep=["mean_0.tmp_0"])["mean_0.tmp_0"].end == len(ops) - 1
    assert life["fc_0.b_0@GRAD"].kind == pm.PARAM_GRAD
    with pytest.raises(pybackward.ArgumentError):
        pm.memory(prog, batch_size=0)


def test_module_is_callable():
    prog = mlp(1, 4)
    assert pm(prog, batch_size=2).peak_bytes == pm.memory(prog, batch_size=2).peak_bytes


def test_unknown_sizes_are_listed():
    prog = pybackward.load(PROGRAMS / "while_array" / "forward.pb")
    rep = pm.memory(prog, batch_size=2)
    assert rep.unknown                       # the tensor arrays
    assert "size unknown" in str(rep)


# --------------------------------------------------------------------------
# Automatic checkpoints
# --------------------------------------------------------------------------
def test_cut_vars_of_a_chain_and_of_a_transformer():
    names, cum, total, n, needs = pm.cut_vars(mlp(3, 4), "mean_0.tmp_0")
    assert names == [f"fc_{i}.tmp_{k}" for i in range(3) for k in range(3)]
    assert cum == sorted(cum) and total == cum[-1] + 4 and n == 10       # + the loss
    names, _, _, _, needs = pm.cut_vars(pybackward.load(PROGRAMS / "recompute_transformer" / "forward.pb"),
                                        "mean_0.tmp_0")
    assert "elementwise_add_0.tmp_0" in names and needs["elementwise_add_0.tmp_0"] == []
    assert needs["fc_1.tmp_2"] == ["elementwise_add_0.tmp_0"]      # beside the residual stream
    assert "stack_0.tmp_0" in names and needs["stack_0.tmp_0"] == ["layer_norm_0.tmp_2"]
    assert "split_0.tmp_0" not in names                            # two halves live at once


def test_64_layer_mlp_auto_checkpoints_cut_the_peak_to_under_30_percent():
    layers, width, batch = 64, 32, 16
    fwd = mlp(layers, width)
    choice = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=batch)
    assert choice.fits and choice.checkpoints
    assert choice.peak_after <= 0.30 * choice.peak_before
    assert choice.recomputed_ops <= choice.forward_ops             # at most one more forward pass
    assert 4 <= len(choice.checkpoints) <= 16                      # about sqrt(64 layers x 3)
    text = str(choice)
    assert "->" in text and choice.checkpoints[0] in text
    assert len(fwd.global_block().ops) == 3 * layers + 1           # the program is untouched

    feeds, params = mlp_values(layers, width, batch)
    runs = {}
    for name, ck in (("plain", None), ("auto", choice.checkpoints)):
        prog = to_float64(fwd)
        out = pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints=ck)
        pairs = out[0] if ck else out
        fetch = ["mean_0.tmp_0"] + [g.name for _, g in pairs]
        est = pm.memory(prog, batch_size=batch, keep=fetch)
        got = pm.measure(prog, feeds, params, fetch=fetch, batch_size=batch)
        assert abs(got.peak_bytes - est.peak_bytes) <= 0.10 * est.peak_bytes
        runs[name] = (est, got)
    (est0, got0), (est1, got1) = runs["plain"], runs["auto"]
    assert est1.peak_bytes <= 0.30 * est0.peak_bytes
    assert got1.peak_bytes <= 0.30 * got0.peak_bytes               # the interpreter confirms it
    # float64 peaks are twice the float32 estimate the choice made.
    assert est0.peak_bytes == 2 * choice.peak_before and est1.peak_bytes == 2 * choice.peak_after
    for n, v in got0.values.items():
        np.testing.assert_array_equal(got1.values[n], v, err_msg=n)   # gradients unchanged


def test_a_budget_buys_the_fewest_recomputed_ops():
    fwd = mlp(24, 16)
    best = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=8)
    roomy = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=8, budget=best.peak_before)
    assert roomy.checkpoints == [] and roomy.recomputed_ops == 0 and roomy.fits
    mid_budget = (best.peak_before + best.peak_after) // 2
    mid = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=8, budget=mid_budget)
    assert mid.fits and mid.peak_after <= mid_budget
    assert 0 < mid.recomputed_ops < best.recomputed_ops
    tight = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=8, budget=best.peak_after // 4)
    assert not tight.fits and tight.peak_after == best.peak_after
    assert "does not fit" in str(tight)
    with pytest.raises(pybackward.ArgumentError):
        pm.choose_checkpoints(fwd, "mean_0.tmp_0", budget=-1)


def test_transformer_auto_checkpoints_lower_the_peak():
    fwd = pybackward.load(PROGRAMS / "recompute_transformer" / "forward.pb")
    choice = pm.choose_checkpoints(fwd, "mean_0.tmp_0", batch_size=32)
    assert choice.peak_after < 0.6 * choice.peak_before
    prog = pybackward.load(PROGRAMS / "recompute_transformer" / "forward.pb")
    _, names = pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints=choice.checkpoints)
    assert pm.memory(prog, batch_size=32, keep=["mean_0.tmp_0"]).peak_bytes == choice.peak_after
    assert names == choice.checkpoints


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def _cli():
    from pybackward_cli.main import cli
    return cli


def test_stats_command_text_and_json():
    path = str(PROGRAMS / "cnn_bn_pool" / "backward.pb")
    r = CliRunner().invoke(_cli(), ["stats", path, "--batch", "4"])
    assert r.exit_code == 0, r.output
    assert "peak activation memory" in r.output and "parameters" in r.output
    r = CliRunner().invoke(_cli(), ["stats", path, "--batch", "4", "--json"])
    d = json.loads(r.output)
    assert d["peak_bytes"] == pm.memory(pybackward.load(path), batch_size=4).peak_bytes


def test_stats_with_loss_compares_checkpoints():
    path = str(PROGRAMS / "recompute_mlp" / "forward.pb")
    r = CliRunner().invoke(_cli(), ["stats", path, "--batch", "8", "--loss", "mean_0.tmp_0",
                                    "--checkpoints", "fc_1.tmp_2,fc_3.tmp_2", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["checkpoints"] == ["fc_1.tmp_2", "fc_3.tmp_2"]
    assert d["recompute"]["peak_bytes"] < d["plain"]["peak_bytes"]
    r = CliRunner().invoke(_cli(), ["stats", path, "--loss", "mean_0.tmp_0", "--checkpoints", "auto",
                                    "--batch", "8"])
    assert r.exit_code == 0, r.output
    assert "with checkpoints" in r.output and r.output.count("recomputes") == 1   # the choice said once
    r = CliRunner().invoke(_cli(), ["stats", str(PROGRAMS / "recompute_mlp" / "backward.pb"),
                                    "--loss", "mean_0.tmp_0"])
    assert r.exit_code == 2 and "already has a backward section" in r.output


def test_resolve_checkpoints_for_append():
    from pybackward_cli.cmd_memory import parse_bytes, resolve_checkpoints
    prog = pybackward.load(PROGRAMS / "recompute_mlp" / "forward.pb")
    said = []
    assert resolve_checkpoints(prog, "mean_0.tmp_0", None) is None
    assert resolve_checkpoints(prog, "mean_0.tmp_0", "fc_1.tmp_2, fc_3.tmp_2") == ["fc_1.tmp_2", "fc_3.tmp_2"]
    names = resolve_checkpoints(prog, "mean_0.tmp_0", "auto", batch=8, echo=said.append)
    assert names and "estimated peak activation memory" in said[0]
    assert resolve_checkpoints(prog, "mean_0.tmp_0", "auto", "1GiB", echo=said.append) is None
    with pytest.raises(pybackward.ArgumentError):
        resolve_checkpoints(prog, "mean_0.tmp_0", None, "1MB")
    with pytest.raises(pybackward.VarNotFoundError):
        resolve_checkpoints(prog, "mean_0.tmp_0", "nope")
    assert parse_bytes("4096") == 4096 and parse_bytes("64KiB") == 65536 and parse_bytes("1.5MB") == 1500000
    with pytest.raises(pybackward.ArgumentError):
        parse_bytes("lots")


def test_append_with_checkpoints_helper_for_the_append_command():
    from pybackward_cli.cmd_memory import append_with_checkpoints
    case = PROGRAMS / "recompute_mlp"
    spec = case_json("recompute_mlp")["variants"]["default"]
    prog = pybackward.load(case / "forward.pb")
    pairs, names = append_with_checkpoints(prog, "mean_0.tmp_0", ",".join(spec["checkpoints"]))
    assert names == spec["checkpoint_names"]
    assert pybackward.dumps(prog) == (case / "backward.pb").read_bytes()
    prog = pybackward.load(case / "forward.pb")
    pairs, names = append_with_checkpoints(prog, "mean_0.tmp_0", None, aggregation="sum")
    assert names is None and pybackward.dumps(prog) == (case / "backward_plain.pb").read_bytes()
    said = []
    prog = pybackward.load(case / "forward.pb")
    pairs, names = append_with_checkpoints(prog, "mean_0.tmp_0", "auto", "40KiB", batch=64,
                                           echo=said.append, no_grad_set={"fc_2.w_0"})
    assert names and "budget 40.0 KiB: fits" in said[0]
    assert "fc_2.w_0" not in [p.name for p, _ in pairs]


def test_saved_residuals_are_the_forward_values_the_backward_reads():
    import json
    import subprocess
    import sys
    from pybackward.analysis.residuals import saved_residuals
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "backward.pb")
    rows = {r.name: r for r in saved_residuals(prog, batch_size=4)}
    # mul_grad reads x, elementwise_add_grad fc_0.tmp_0, sub_grad fc_0.tmp_1 and y, square_grad ..tmp_0,
    # reduce_mean_grad ..tmp_1; parameters are not residuals.
    assert set(rows) == {"x", "y", "fc_0.tmp_0", "fc_0.tmp_1", "square_error_cost_0.tmp_0",
                         "square_error_cost_0.tmp_1"}
    assert rows["x"].bytes == 4 * 13 * 4 and any("mul_grad" in r for r in rows["x"].readers)
    r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "stats", "--saved", "--json", "--batch", "4",
                        str(PROGRAMS / "fit_a_line" / "backward.pb")], capture_output=True, text=True)
    assert r.returncode == 0 and {row["name"] for row in json.loads(r.stdout)} == set(rows)
