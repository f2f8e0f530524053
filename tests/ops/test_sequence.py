"""The sequence (LoD) families (ops/sequence/sequence_ops.py, seq_conv.py, rnn_legacy.py):
float32-only Paddle kernels against Paddle's values, output LoDs, and LoD
through the interpreter (feeds, sharing, fetch) and the CLI."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from test_kernels_vs_paddle import KDIR, _compare, _family

FAMILIES = ("sequence", "seq_conv", "rnn_legacy")


def _float32_only_cases():
    """Cases Paddle runs in float32 but refuses in float64 (float32-only kernels)."""
    for family in FAMILIES:
        if not (KDIR / f"{family}.paddle.json").exists():
            continue
        cases, _, report, _ = _family(family)
        for name in cases:
            runs = report.get(name, {})
            if "error" in runs.get("float64", {}) and "fetched" in runs.get("float32", {}):
                yield pytest.param(family, name, id=name)


@pytest.mark.parametrize("family,name", list(_float32_only_cases()))
def test_float32_only_ops_equal_paddle_in_float32(family, name):
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"].astype(np.float32)
                  if arrays[f"{name}|in|{slot}|{i}"].dtype.kind == "f" else arrays[f"{name}|in|{slot}|{i}"]
                  for i in range(n)] for slot, n in case["inputs"].items()}
    cots = {slot: [arrays[f"{name}|cot|{slot}|{i}"].astype(np.float32) if use else None
                   for i, use in enumerate(flags)] for slot, flags in case["loss"].items()}
    out_lods: dict = {}
    outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], cots,
                                         lod=case.get("lod"), out_lods=out_lods)
    run = report[name]["float32"]
    for key in run["fetched"]:
        kind, slot, i = key.split("|")
        if kind == "out" and slot in registry.get(case["op"]).intermediate_outputs:
            continue
        got = (outs if kind == "out" else grads)[slot][int(i)]
        _compare(f"{name} [float32] {key}", got, paddle[f"{name}|float32|{key}"], "float32", None)
        if kind == "out":
            assert out_lods[slot][int(i)] == run.get("lods", {}).get(key), f"{name} {key}: LoD"


def _paddle_runs(family):
    if not (KDIR / f"{family}.paddle.json").exists():
        return
    cases, _, report, _ = _family(family)
    for name in cases:
        for dtype, run in report.get(name, {}).items():
            if "fetched" in run:
                yield pytest.param(family, name, dtype, id=f"{name}-{dtype}")


#: fusion_lstm writes Hidden and Cell only: its scratch buffers (XX, Batched*, CheckedCell) are left unset
@pytest.mark.parametrize("family,name,dtype", [p for p in _paddle_runs("rnn_legacy")
                                               if not p.values[1].startswith("fusion_lstm")])
def test_lstm_gru_intermediates_are_paddles_batch_layout(family, name, dtype):
    """BatchGate, BatchCellPreAct, BatchResetHiddenPrev, BatchHidden, fusion_gru's
    XX / BatchedInput / BatchedOut / ReorderedH0 (skipped by test_kernels_vs_paddle
    as internal): every one Paddle writes is Paddle's value and LoD, row for row."""
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"].astype(dtype) for i in range(n)]
           for slot, n in case["inputs"].items()}
    out_lods: dict = {}
    outs, _ = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], {}, lod=case.get("lod"),
                                     out_lods=out_lods)
    run = report[name][dtype]
    inter = registry.get(case["op"]).intermediate_outputs
    checked = 0
    for key in run["fetched"]:
        kind, slot, i = key.split("|")
        if kind == "out" and slot in inter:
            want = paddle[f"{name}|{dtype}|{key}"]
            other = paddle.get(f"{name}|float64|{key}") if dtype == "float32" else None
            _compare(f"{name} [{dtype}] {key}", outs[slot][int(i)], want, dtype, other)
            assert out_lods[slot][int(i)] == run.get("lods", {}).get(key), f"{name} {key}: LoD"
            checked += 1
    assert checked, "no intermediate output compared"


# --------------------------------------------------------------------------
# A whole LoD model (testdata/sequence: fc -> lstm / gru / sequence_conv ->
# sequence_softmax / sequence_pool), run by Paddle 3.3.1 and by pybackward
# --------------------------------------------------------------------------
import json  # noqa: E402

import pybackward  # noqa: E402
from conftest import TESTDATA  # noqa: E402
from pybackward.interpreter.executor import Executor, Scope  # noqa: E402

SEQ = TESTDATA / "sequence"


def _seq_model():
    spec = json.loads((SEQ / "case.json").read_text())
    ref = dict(np.load(SEQ / "ref.npz"))
    feed = {k[5:]: v for k, v in ref.items() if k.startswith("feed:")}
    params = {k[6:]: v for k, v in ref.items() if k.startswith("param:")}
    fetched = {k[6:]: v for k, v in ref.items() if k.startswith("fetch:")}
    return spec, feed, params, fetched


@pytest.mark.parametrize("feed_form", ["npz", "tuple"])
def test_lod_model_values_gradients_and_lods_match_paddle(feed_form):
    spec, feed, params, want = _seq_model()
    prog = pybackward.load(SEQ / "forward.pb")
    pybackward.append_backward(prog.global_block().var(spec["loss"]))
    if feed_form == "tuple":
        feed = {"x": (feed["x"], [feed.pop("x@LOD0").tolist()]), "wsum": feed["wsum"]}
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    exe = Executor()
    got = exe.run(prog, feed=feed, fetch_list=spec["fetch"], scope=scope)
    for name, g in zip(spec["fetch"], got):
        assert g.dtype == want[name].dtype and g.shape == want[name].shape, name
        np.testing.assert_allclose(g, want[name], rtol=2e-4, atol=2e-5, err_msg=name)
        lod = spec["lods"][name]
        if name == "fc_2.b_0@GRAD":  # Paddle's elementwise_add_grad gives the [1] bias grad X's LoD
            assert lod and exe.lod(name) is None
            continue
        assert (exe.lod(name) or []) == lod, name


def test_lod_model_runs_from_the_cli_with_an_npz_lod(tmp_path):
    from click.testing import CliRunner
    from pybackward_cli.main import cli
    spec, feed, params, want = _seq_model()
    np.savez(tmp_path / "feeds.npz", **feed)
    np.savez(tmp_path / "params.npz", **params)
    r = CliRunner().invoke(cli, ["run", str(SEQ / "forward.pb"), "--params", str(tmp_path / "params.npz"),
                                 "--feeds", str(tmp_path / "feeds.npz"), "--fetch", spec["loss"],
                                 "--out", str(tmp_path / "out.npz")])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")[spec["loss"]], want[spec["loss"]], rtol=2e-5)


def test_lod_model_gradients_pass_the_cli_check(tmp_path):
    """`pybackward check` (float64 finite differences) with the LoD given in the .npz."""
    from click.testing import CliRunner
    from pybackward_cli.main import cli
    spec, feed, params, _ = _seq_model()
    np.savez(tmp_path / "feeds.npz", **feed)
    np.savez(tmp_path / "params.npz", **params)
    r = CliRunner().invoke(cli, ["check", str(SEQ / "forward.pb"), "--loss", spec["loss"], "--params",
                                 str(tmp_path / "params.npz"), "--feeds", str(tmp_path / "feeds.npz"),
                                 "--wrt", "lstm_w", "--wrt", "gru_b", "--wrt", "sequence_conv_0.w_0"])
    assert r.exit_code == 0, r.output
    assert r.output.count(" ok") == 3, r.output


def test_bad_lods_are_clear_errors():
    spec, feed, params, _ = _seq_model()
    prog = pybackward.load(SEQ / "forward.pb")
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    for bad, msg in (([0, 3, 9], "bad LoD"), ([1, 8], "bad LoD"), ([0, 5, 3, 8], "bad LoD")):
        with pytest.raises(pybackward.ExecutionError, match=msg):
            Executor().run(prog, feed={"x": feed["x"], "x@LOD0": np.array(bad), "wsum": feed["wsum"]},
                           fetch_list=[spec["loss"]], scope=scope)
    with pytest.raises(pybackward.ExecutionError, match=r"LoD levels \[1\] fed; expected x@LOD0"):
        Executor().run(prog, feed={"x": feed["x"], "x@LOD1": np.array([0, 8]), "wsum": feed["wsum"]},
                       fetch_list=[spec["loss"]], scope=scope)
    with pytest.raises(pybackward.ExecutionError, match="has no LoD"):
        Executor().run(prog, feed={"x": feed["x"], "wsum": feed["wsum"]}, fetch_list=[spec["loss"]], scope=scope)


def test_programs_without_lod_carry_no_lod():
    spec, feed, params, _ = _seq_model()
    prog = pybackward.load(SEQ / "forward.pb")
    exe = Executor()
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    exe.run(prog, feed=feed, fetch_list=[spec["loss"]], scope=scope)
    assert exe.lod("x") == [[0, 3, 4, 8]] and exe.lod(spec["loss"]) is None
