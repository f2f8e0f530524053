"""`append` and `gradients` on PIR programs (.json) through the command line (issue #32):
the output is Paddle's PIR backward, the pairs name gradients by `%N`, `run --fetch
NAME@GRAD` finds them, and bad input is one line with exit 2 and no output."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from pybackward.pir.canonical import equal
from pybackward_cli.main import cli

from conftest import TESTDATA

PIR = TESTDATA / "pir"
VALUES = TESTDATA / "pir_values"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.stderr
    return lines[0]


def test_append_writes_the_pass_output_and_names_the_gradients(tmp_path):
    out = tmp_path / "out.json"
    r = invoke("append", PIR / "mlp.json", out, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["loss"] == "%16" and len(doc["params_grads"]) == 4
    prog = pybackward.load(out)
    want = pybackward.load(PIR / "mlp.json")
    pybackward.append_backward(want.ops[-1].results[0])
    assert equal(prog, pybackward.loads(pybackward.dumps(want)))
    grads = dict(doc["params_grads"])
    run = invoke("run", out, "--params", VALUES / "mlp.params.npz", "--feeds", VALUES / "mlp.feeds.npz",
                 "--fetch", "fc_0.w_0@GRAD", "--fetch", grads["fc_0.w_0"], "--json")
    assert run.exit_code == 0, run.output
    vals = json.loads(run.stdout)["fetch"]
    by_name, by_id = vals["fc_0.w_0@GRAD"], vals[grads["fc_0.w_0"]]
    assert by_name["values"] == by_id["values"]


def test_append_run_prints_the_loss_and_gradients(tmp_path):
    out = tmp_path / "out.json"
    r = invoke("append", PIR / "mlp.json", out, "--run", "--params", VALUES / "mlp.params.npz",
               "--feeds", VALUES / "mlp.feeds.npz", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert "%16" in doc["run"] and len(doc["run"]) == 5
    loss = np.load(VALUES / "mlp.values.npz")["%16"]
    assert np.allclose(doc["run"]["%16"]["values"], loss.ravel(), rtol=1e-6)


def test_append_expect_golden(tmp_path):
    golden = tmp_path / "golden.json"
    r = invoke("append", PIR / "mlp.json", "--expect", golden, "--update")
    assert r.exit_code == 0 and golden.exists(), r.output
    assert invoke("append", PIR / "mlp.json", "--expect", golden).exit_code == 0
    r = invoke("append", PIR / "mlp.json", "--expect", golden, "--checkpoints", "%10")
    assert r.exit_code == 1 and "differs from golden" in r.stderr


def test_gradients_command(tmp_path):
    out = tmp_path / "g.json"
    r = invoke("gradients", "--target", "%16", "--input", "fc_1.w_0", "--input", "x", PIR / "mlp.json", out)
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("fc_1.w_0 -> %") and lines[1] == "x -> None"
    assert pybackward.load(out).num_ops() > 16


def test_checkpoints_on_the_command_line(tmp_path):
    out = tmp_path / "rc.json"
    r = invoke("append", PIR / "transformer.json", out, "--checkpoints", "auto", "--json")
    assert r.exit_code == 0, r.output
    plain = tmp_path / "plain.json"
    assert invoke("append", PIR / "transformer.json", plain).exit_code == 0
    assert pybackward.load(out).num_ops() > pybackward.load(plain).num_ops()


@pytest.mark.parametrize("args,says", [
    (["--loss", "%99"], "%99"),
    (["--loss", "nope"], "nope"),
    (["--aggregation", "pairwise"], "legacy programs only"),
])
def test_bad_options_are_one_line(args, says, tmp_path):
    out = tmp_path / "out.json"
    r = invoke("append", *args, PIR / "mlp.json", out)
    assert says in one_error(r) and not out.exists()


def test_a_program_with_a_backward_needs_force(tmp_path):
    out = tmp_path / "out.json"
    assert "already has a backward" in one_error(invoke("append", PIR / "mlp_bwd.json", out))
    assert not out.exists()
    assert invoke("append", "--force", "--loss", "%16", PIR / "mlp_bwd.json", out).exit_code == 0
