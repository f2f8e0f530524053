"""Peak activation memory of PIR programs: `pybackward.memory` and `pybackward stats` on `.json`
(issue #33): liveness over SSA values, regions included, the numbers checked by hand on mlp_bwd
and against the arrays the PIR interpreter computes."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
import pybackward.memory as pm
from conftest import TESTDATA
from pybackward import pir
from pybackward.analysis import pir_liveness
from pybackward.base.errors import ArgumentError
from pybackward.interpreter.pir_executor import PirExecutor

PIR = TESTDATA / "pir"
VALUES = TESTDATA / "pir_values"
GOLDENS = sorted(p.stem for p in PIR.glob("*.json") if p.with_suffix(".txt").exists())
BWD = [g for g in GOLDENS if g.endswith("_bwd")]


def _cli():
    from pybackward_cli.main import cli
    return cli


def load(name: str) -> pir.Program:
    p = pybackward.load(PIR / f"{name}.json")
    assert isinstance(p, pir.Program)
    return p


# ------------------------------------------------------------------ mlp_bwd by hand
#: mlp_bwd.json at batch 2, float32 (ids as in the file: Paddle's .txt numbers them one lower).
#: op: 0-3 parameters, 4 data x [-1,4] (32 B), 5 data y [-1,1] (8 B), 6 matmul -> %7 [-1,8] (64 B),
#: 7 add -> %8, 8 relu -> %9, 9 matmul -> %10 [-1,1] (8 B), 10 add -> %11, 11 subtract -> %12,
#: 12 full -> %13 [] (4 B), 13 elementwise_pow -> %14, 14 full_int_array -> %15 [0] (0 B), 15 mean -> %16 [],
#: 16 full -> %17 [1], 17 full_like -> %18 (the seed), 18 mean_grad -> %19, 19 elementwise_pow_grad -> %20,
#: 20 subtract_grad -> %22, 21 add_grad -> %24, %25 (fc_3.b_0 grad), 22 matmul_grad -> %26 [-1,8], %27,
#: 23 relu_grad -> %28, 24 add_grad -> %29, %30, 25 matmul_grad -> null, %32.
#: Each value lives from its op to its last reader; x and y from op 0 (feeds), so:
#: ops 0-5: x + y = 40; 6: +%7 = 104; 7: +%8 = 168; 8: +%9 = 232; 9: -%8 +%10 = 176; 10: 184; 11: 192;
#: 12: +4 = 196; 13: 204; 14: +0 = 204; 15: 208; 16: 212; 17: 216; 18: -%16 -%17 +%19 = 216;
#: 19: -%14 -%15 -%18 +%20 = 212; 20: -%12 -%13 -%19 +%22 = 200; 21: -y -%11 -%20 +%24 = 184;
#: 22: -%10 -%22 +%26 = 232; 23: -%24 +%28 = 288 (the peak: x, %7, %9, %26, %28); 24: -%9 -%26 +%29 = 224;
#: 25: -%7 -%28 = 96.
MLP_BWD_TIMELINE = [40] * 6 + [104, 168, 232, 176, 184, 192, 196, 204, 204, 208, 212, 216, 216, 212, 200,
                               184, 232, 288, 224, 96]


def test_mlp_bwd_peak_by_hand():
    rep = pm.memory(load("mlp_bwd"), batch_size=2)
    assert rep.timeline == MLP_BWD_TIMELINE
    assert (rep.peak_bytes, rep.peak_op, rep.peak_op_type, rep.num_ops) == (288, 23, "pd_op.relu_grad", 26)
    assert sorted(rep.top) == sorted([("%26", "gradient", 64), ("%28", "gradient", 64), ("%7", "activation", 64),
                                      ("%9", "activation", 64), ("x", "input", 32)])
    # parameters 1 + 8 + 8 + 32 floats; their gradients the same, counted apart, not in the peak
    assert rep.parameter_bytes == 196 and rep.gradient_bytes == 196 and rep.total_bytes == 196 + 196 + 288
    life = rep.lives
    assert {n for n, v in life.items() if v.kind == "param_grad"} == {"%25", "%27", "%30", "%32"}
    assert (life["x"].start, life["x"].end, life["y"].end) == (0, 25, 20)
    assert (life["%9"].start, life["%9"].end, life["%8"].end) == (8, 23, 8)
    assert life["%18"].kind == "gradient" and life["%16"].kind == "activation"
    assert rep.unknown == []
    # the same at batch 1 halves every -1 dim: the peak is at the same op
    one = pm(load("mlp_bwd"), batch_size=1)
    assert one.peak_bytes == 144 and one.peak_op == 23


def test_keep_holds_a_value_to_the_end():
    rep = pm.memory(load("mlp_bwd"), batch_size=2, keep=["%16"])
    assert rep.lives["%16"].end == 25 and rep.peak_bytes == 288 + 4
    assert pm.memory(load("mlp_bwd"), batch_size=2, keep=["x"]).peak_bytes == 288


def test_the_model_sizes_are_the_interpreters_arrays():
    """Every counted value's bytes are those of the array the PIR interpreter computes for it."""
    prog = load("mlp_bwd")
    feeds, params = dict(np.load(VALUES / "mlp_bwd.feeds.npz")), dict(np.load(VALUES / "mlp_bwd.params.npz"))
    batch = feeds["x"].shape[0]
    life = pm.lives(prog, batch_size=batch)
    refs = [n for n, v in life.items() if v.kind != "parameter"]
    got = PirExecutor().run(prog, feeds, params, fetch=refs)
    assert len(refs) > 20
    for n in refs:
        assert life[n].nbytes == np.asarray(got[n]).nbytes, n


# ------------------------------------------------------------------ every golden
@pytest.mark.parametrize("name", GOLDENS)
def test_every_golden_has_a_report(name):
    prog = load(name)
    rep = pm.memory(prog, batch_size=3, top=4)
    ops = prog.block.ops
    assert rep.num_ops == len(ops) == len(rep.timeline)
    assert rep.peak_bytes == max(rep.timeline, default=0)
    assert 0 <= rep.peak_op < max(len(ops), 1)
    assert len(rep.top) <= 4
    index = {op: i for i, op in enumerate(ops)}
    for op in ops:           # a value lives at least to the top-level op whose regions read it
        for inner in op.walk():
            for v in inner.operands:
                if v is not None and v.defining_op in index:
                    life = rep.lives.get(pir_liveness.value_name(v))
                    if life is not None and life.kind != "parameter":
                        assert life.end >= index[op], (name, pir_liveness.value_name(v), inner.name)
    if name.endswith("_bwd"):
        n_params = len({op.attr("parameter_name") for op in prog.parameters()})
        assert rep.gradient_bytes > 0 or n_params == 0
        assert any(v.kind == "gradient" for v in rep.lives.values())


def test_a_value_read_inside_a_region_lives_to_the_op_that_owns_it():
    """cond.json: values the `if` branches read by implicit capture stay live to the `if`,
    though no top-level op reads them after the op that makes them."""
    prog = load("cond")
    rep = pm.memory(prog, batch_size=2)
    ops = prog.block.ops
    at = next(i for i, op in enumerate(ops) if op.name == "pd_op.if")
    captured = {v for inner in ops[at].walk() if inner is not ops[at] for v in inner.operands
                if v is not None and v.defining_op in ops}
    assert captured
    for v in captured:
        life = rep.lives[pir_liveness.value_name(v)]
        assert life.end >= at


def test_shared_storage_counts_once():
    """An in-place op's result is the operand it writes (cnn_infer's batch_norm_ writes its
    running mean and variance, parameters, as its results 1 and 2); a builtin.combine vector is its items."""
    prog = load("cnn_infer")
    life = pm.lives(prog, batch_size=2)
    bns = [op for op in prog.block.ops if op.name == "pd_op.batch_norm_"]
    assert bns
    for op in bns:
        assert f"%{op.results[0].id}" in life                   # y: a new value
        assert f"%{op.results[1].id}" not in life and f"%{op.results[2].id}" not in life
        assert life[pir_liveness.value_name(op.operands[1])].kind == "parameter"
    zoo = load("zoo")
    zlife = pm.lives(zoo)
    combined = [op for op in zoo.block.ops if op.name == "builtin.combine"]
    assert combined
    for op in combined:
        assert f"%{op.results[0].id}" not in zlife
        user = max((u for u, _ in op.results[0].uses), key=zoo.block.ops.index)
        for v in op.operands:                                   # an item lives while the vector is read
            item = zlife.get(pir_liveness.value_name(v))
            assert item is None or item.end >= zoo.block.ops.index(user)


def test_stacks_and_arrays_are_unknown_not_counted():
    rep = pm.memory(load("cond_bwd"))
    assert rep.unknown and all(rep.lives[n].nbytes is None for n in rep.unknown)


def test_measure_and_choose_checkpoints_refuse_pir_clearly():
    prog = load("mlp")
    with pytest.raises(ArgumentError, match="PIR program; measure"):
        pm.measure(prog, fetch=["%16"])
    with pytest.raises(ArgumentError, match=r"PIR program; choose_checkpoints.*checkpoints=\[...\] or \"auto\""):
        pm.choose_checkpoints(prog, "%16")


def test_bad_batch_size():
    with pytest.raises(ArgumentError, match="batch_size"):
        pm.memory(load("mlp"), batch_size=0)


# ------------------------------------------------------------------ the CLI
@pytest.mark.parametrize("name", GOLDENS)
def test_stats_takes_every_golden(name):
    path = str(PIR / f"{name}.json")
    r = CliRunner().invoke(_cli(), ["stats", path, "--batch", "3", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got == pm.memory(load(name), batch_size=3).to_dict()


def test_stats_on_mlp_bwd_says_the_peak():
    r = CliRunner().invoke(_cli(), ["stats", str(PIR / "mlp_bwd.json"), "--batch", "2", "--keep", "%16"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("peak activation memory: 292 B (292 bytes, batch 2) at op 23 (pd_op.relu_grad) of 26")
    assert "parameters: 196 B; parameter gradients: 196 B" in r.output


def test_stats_loss_appends_the_pir_backward_section_as_paddle_does():
    """`stats mlp.json --loss %16`: the backward section pybackward's PIR pass appends has the
    peak of the one Paddle appended (mlp_bwd.json, the loss kept as --loss keeps it)."""
    r = CliRunner().invoke(_cli(), ["stats", str(PIR / "mlp.json"), "--batch", "2", "--loss", "%16", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    paddle = pm.memory(load("mlp_bwd"), batch_size=2, keep=["%16"])
    assert got["plain"]["peak_bytes"] == paddle.peak_bytes == 292
    assert got["plain"]["gradient_bytes"] == paddle.gradient_bytes == 196
    assert got["plain"]["timeline"] == paddle.timeline
    assert "recompute" not in got


def test_stats_loss_with_checkpoints_lowers_the_peak():
    r = CliRunner().invoke(_cli(), ["stats", str(PIR / "mlp.json"), "--batch", "2", "--loss", "%16",
                                    "--checkpoints", "auto", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["checkpoints"] and got["recompute"]["peak_bytes"] < got["plain"]["peak_bytes"]
    assert got["recompute"]["num_ops"] > got["plain"]["num_ops"]        # the recomputed forward ops
    r = CliRunner().invoke(_cli(), ["stats", str(PIR / "mlp.json"), "--batch", "2", "--loss", "%16",
                                    "--checkpoints", got["checkpoints"][0]])
    assert r.exit_code == 0, r.output
    assert f"with checkpoints {got['checkpoints'][0]}:" in r.output and "peak activation memory 292 B -> " in r.output


@pytest.mark.parametrize("path,args,words", [
    ("mlp_bwd", ["--loss", "%16"], "already has a backward section: drop --loss"),
    ("mlp", ["--loss", "%16", "--checkpoints", "auto", "--memory-budget", "1KiB"],
     "--memory-budget (the checkpoint search under a budget) takes legacy programs only"),
    ("mlp", ["--checkpoints", "auto"], "need --loss"),
    ("mlp", ["--loss", "nope"], "no value 'nope'"),
    ("mlp", ["--keep", "nope"], "no value 'nope'"),
    ("mlp", ["--saved"], "is a PIR program"),
])
def test_stats_refusals_are_one_line(path, args, words):
    r = CliRunner().invoke(_cli(), ["stats", str(PIR / f"{path}.json"), *args])
    assert r.exit_code == 2, r.output
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.slow
def test_a_stats_refusal_is_one_line_on_stderr_of_the_real_command():
    r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "stats", str(PIR / "mlp_bwd.json"),
                        "--loss", "%16"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "already has a backward section" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
