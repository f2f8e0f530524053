"""`pybackward convert` between the IRs: a legacy program to PIR JSON (as Paddle's
translator makes it) with its parameter file carried beside, and bad input
refused in one line with nothing written."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from pybackward import pir
from pybackward.tensors import paddle_files
from pybackward_cli.main import cli

from conftest import TESTDATA, require_paddle

MLP = TESTDATA / "paddle_files" / "mlp"
GOLDEN = TESTDATA / "convert" / "to_pir"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _stderr(r) -> str:
    return r.stderr if hasattr(r, "stderr") else r.output


@pytest.fixture
def model(tmp_path):
    for f in ("inf.pdmodel", "inf.pdiparams"):
        shutil.copy(MLP / f, tmp_path / f)
    return tmp_path / "inf.pdmodel"


def test_legacy_to_pir_writes_paddles_translation_and_the_parameters(model, tmp_path):
    out = tmp_path / "out.json"
    r = invoke("convert", model, out)
    assert r.exit_code == 0, r.output
    assert "pir program" in r.output and "out.pdiparams (4 arrays)" in r.output
    assert pir.equal(pir.load(str(out)), pir.load(str(GOLDEN / "paddle_files/mlp/inf.json")))
    legacy = paddle_files.read_combined(str(model.with_suffix(".pdiparams")), pybackward.load(str(model)))
    got = paddle_files.read_combined(str(tmp_path / "out.pdiparams"), pir.load(str(out)))
    assert sorted(got) == sorted(legacy) and all(np.array_equal(got[k], legacy[k]) for k in got)


def test_format_of_the_input_is_told_by_content(model, tmp_path):
    odd = tmp_path / "model.bin"
    shutil.copy(model, odd)
    r = invoke("convert", odd, tmp_path / "x.json")
    assert r.exit_code == 0, r.output
    assert pir.equal(pir.load(str(tmp_path / "x.json")), pir.load(str(GOLDEN / "paddle_files/mlp/inf.json")))
    assert not (tmp_path / "x.pdiparams").exists()      # no model.pdiparams beside it


def test_json_report_and_readable_output(model, tmp_path):
    out = tmp_path / "o.readable.json"
    r = invoke("convert", "--json", model, out)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["kind"] == "pir program" and rep["ops"] == 23
    assert rep["params"] == [{"input": str(tmp_path / "inf.pdiparams"), "output": str(tmp_path / "o.pdiparams"),
                              "arrays": 4}]
    assert out.read_text().startswith("{\n    ")
    assert pir.equal(pir.load(str(out)), pir.load(str(GOLDEN / "paddle_files/mlp/inf.json")))


def test_a_training_program_converts_without_parameter_files(tmp_path):
    out = tmp_path / "b.json"
    r = invoke("convert", TESTDATA / "models/lenet/backward.pb", out)
    assert r.exit_code == 0, r.output
    assert pir.equal(pir.load(str(out)), pir.load(str(GOLDEN / "models/lenet/backward.json")))


def test_op_without_pir_counterpart_is_one_line_exit_2_and_nothing_written(tmp_path):
    src = tmp_path / "b.pdmodel"
    shutil.copy(TESTDATA / "programs/while_loop/backward.pb", src)
    (tmp_path / "b.pdiparams").write_bytes(b"")
    out = tmp_path / "out.json"
    r = invoke("convert", src, out)
    err = _stderr(r)
    assert r.exit_code == 2
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and "'while_grad'" in lines[0] and "1 op with no PIR counterpart" in lines[0]
    assert "Traceback" not in err and not out.exists() and not (tmp_path / "out.pdiparams").exists()


def test_garbage_input_is_one_line_exit_2_and_nothing_written(tmp_path):
    src = tmp_path / "junk.pdmodel"
    src.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    r = invoke("convert", src, tmp_path / "out.json")
    assert r.exit_code == 2
    assert len(_stderr(r).strip().splitlines()) == 1 and str(src) in _stderr(r)
    assert not (tmp_path / "out.json").exists()


def test_a_parameter_file_missing_a_parameter_is_refused_before_writing(model, tmp_path):
    arrays = paddle_files.read_combined(str(model.with_suffix(".pdiparams")), pybackward.load(str(model)))
    arrays.pop("fc_1.b_0")
    paddle_files.write_combined(str(model.with_suffix(".pdiparams")), arrays)
    r = invoke("convert", model, tmp_path / "out.json")
    assert r.exit_code == 2 and "holds 3 tensors" in _stderr(r) and len(_stderr(r).strip().splitlines()) == 1
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "out.pdiparams").exists()


def test_pir_to_legacy_goes_through_to_legacy(model, tmp_path):
    """The other direction dispatches to `convert.to_legacy` and carries the parameters back."""
    assert invoke("convert", model, tmp_path / "p.json").exit_code == 0
    r = invoke("convert", tmp_path / "p.json", tmp_path / "back.pdmodel")
    assert r.exit_code == 0, r.output
    back = pybackward.load(str(tmp_path / "back.pdmodel"))
    assert not pybackward.formats.is_pir(back)
    assert (tmp_path / "back.pdiparams").exists()


_PADDLE_RUN = r"""
import sys, warnings
import numpy as np
warnings.filterwarnings("ignore")
import paddle
paddle.enable_static()
exe = paddle.static.Executor(paddle.CPUPlace())
prog, feeds, fetches = paddle.static.load_inference_model(sys.argv[1], exe)
x = np.load(sys.argv[2])
out = exe.run(prog, feed={k: x[k] for k in feeds}, fetch_list=fetches)
np.save(sys.argv[3], out[0])
"""


@pytest.mark.paddle
def test_paddle_loads_and_runs_the_converted_model(model, tmp_path):
    """Paddle 3.3.1 (PIR mode) loads the .json + .pdiparams and gets the legacy model's output."""
    py = require_paddle()
    assert invoke("convert", model, tmp_path / "p.json").exit_code == 0
    env = dict(os.environ)
    env.pop("FLAGS_enable_pir_api", None)
    r = subprocess.run([py, "-c", _PADDLE_RUN, str(tmp_path / "p"), str(MLP / "feeds.npz"), str(tmp_path / "o.npy")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    want = np.load(MLP / "inf_out.npz")
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), want[want.files[0]])
