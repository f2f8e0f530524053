"""`pybackward convert IN.json OUT.pdmodel`: a PIR program as a legacy one (convert.to_legacy),
its parameter file carried beside it under the same names, refusals in one line (exit 2)
with nothing written, and (live Paddle) the result loaded by Paddle's legacy
`load_inference_model` giving what Paddle's PIR Executor gave on the original."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from conftest import TESTDATA, run_paddle
from pybackward.convert.record import has_record
from pybackward.interpreter.executor import Executor, Scope
from pybackward.tensors import paddle_files
from pybackward_cli.main import cli

PIR = TESTDATA / "pir"
VALUES = TESTDATA / "pir_values"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _stderr(r) -> str:
    return r.stderr if hasattr(r, "stderr") else r.output


def _copy(case: str, tmp_path, *suffixes: str):
    for s in (".json", *suffixes):
        shutil.copy(PIR / f"{case}{s}", tmp_path / f"{case}{s}")
    return tmp_path / f"{case}.json"


def _fetched(case: str) -> np.ndarray:
    """What Paddle's PIR Executor fetched on the golden (the value its pd_op.fetch reads)."""
    from pybackward import pir
    prog = pir.load(PIR / f"{case}.json")
    fetch = next(op for op in prog.ops if op.name == "pd_op.fetch")
    return np.load(VALUES / f"{case}.values.npz")[f"%{fetch.operands[0].id}"]


def test_an_inference_model_converts_with_its_parameters(tmp_path):
    src = _copy("cnn_infer", tmp_path, ".pdiparams")
    out = tmp_path / "legacy" / "model.pdmodel"
    out.parent.mkdir()
    r = invoke("convert", src, out)
    assert r.exit_code == 0, r.output
    prog = pybackward.load(str(out))
    assert not pybackward.formats.is_pir(prog)
    block = prog.global_block()
    assert block.ops[0].type == "feed" and block.ops[-1].type == "fetch"
    params = paddle_files.load_arrays(str(out.with_suffix(".pdiparams")), prog)
    assert params.keys() == dict(np.load(VALUES / "cnn_infer.params.npz")).keys()
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    feeds = dict(np.load(VALUES / "cnn_infer.feeds.npz"))
    (got,) = Executor().run(prog, feed=feeds, fetch_list=block.ops[-1].input("X"), scope=scope)
    np.testing.assert_allclose(got, _fetched("cnn_infer"), rtol=1e-5, atol=1e-6)


def test_a_training_program_converts_with_its_pdparams_and_json_report(tmp_path):
    src = _copy("mlp_bwd", tmp_path, ".pdparams")
    out = tmp_path / "mlp_bwd.pdmodel"
    r = invoke("convert", "--json", src, out)
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["kind"] == "legacy program" and report["ops"] == 18
    assert [p["output"] for p in report["params"]] == [str(tmp_path / "mlp_bwd.pdparams")]
    prog = pybackward.load(str(out))
    assert "fc_2.w_0@GRAD" in prog.global_block().vars


@pytest.mark.parametrize("case, count", [("pylayer", "1 op in the program has"),
                                         ("pylayer_bwd", "2 ops in the program have")])
def test_an_op_with_no_legacy_counterpart_is_one_line_exit_2_and_nothing_written(tmp_path, case, count):
    src = _copy(case, tmp_path, ".pdparams")
    out = tmp_path / "out.pdmodel"
    r = invoke("convert", src, out)
    err = _stderr(r)
    assert r.exit_code == 2
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and "'pd_op.pylayer'" in lines[0] and count in lines[0], lines
    assert "Traceback" not in err and not out.exists() and not (tmp_path / "out.pdparams").exists()


_PADDLE_LOAD = r"""
import sys, warnings
import numpy as np
warnings.filterwarnings("ignore")
import paddle
paddle.enable_static()
exe = paddle.static.Executor(paddle.CPUPlace())
for prefix, feeds_file, out_file in zip(*[iter(sys.argv[1:])] * 3):
    prog, feeds, fetches = paddle.static.load_inference_model(prefix, exe)
    x = np.load(feeds_file)
    out = exe.run(prog, feed={k: x[k] for k in feeds}, fetch_list=fetches)
    np.save(out_file, out[0])
"""


@pytest.mark.paddle
def test_paddles_legacy_loader_runs_the_converted_models(tmp_path):
    args = []
    for case in ("cnn_infer", "jit"):
        src = _copy(case, tmp_path, ".pdiparams")
        assert invoke("convert", src, tmp_path / f"{case}_legacy.pdmodel").exit_code == 0
        assert has_record(pybackward.load(str(tmp_path / f"{case}_legacy.pdmodel")))    # read with the record
        args += [str(tmp_path / f"{case}_legacy"), str(VALUES / f"{case}.feeds.npz"), str(tmp_path / f"{case}.npy")]
    r = run_paddle(_PADDLE_LOAD, *args)
    assert r.returncode == 0, r.stderr[-2000:]
    for case in ("cnn_infer", "jit"):
        np.testing.assert_allclose(np.load(tmp_path / f"{case}.npy"), _fetched(case), rtol=1e-5, atol=1e-6)
