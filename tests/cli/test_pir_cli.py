"""PIR programs (.json) through the command line: show, diff, dot, convert, and the
format told by content everywhere a program is read (issue #31)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pybackward
from conftest import TESTDATA

PIR = TESTDATA / "pir"
GOLDENS = sorted(p.stem for p in PIR.glob("*.json") if p.with_suffix(".txt").exists())


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybackward_cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("name", GOLDENS)
def test_show_prints_what_paddle_prints(name):
    """`show` on a PIR file is Paddle's print(program), character for character (the .txt beside it)."""
    r = cli("show", PIR / f"{name}.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (PIR / f"{name}.txt").read_text()


def test_the_format_is_told_by_content_not_suffix(tmp_path):
    renamed = tmp_path / "model.pdmodel"
    shutil.copy(PIR / "mlp.json", renamed)
    r = cli("show", renamed)
    assert r.returncode == 0 and r.stdout == (PIR / "mlp.txt").read_text()
    assert isinstance(pybackward.load(renamed), pybackward.pir.Program)
    legacy = tmp_path / "legacy.json"
    shutil.copy(TESTDATA / "programs" / "fit_a_line" / "forward.pb", legacy)
    assert isinstance(pybackward.load(legacy), pybackward.Program)


def test_show_json_is_the_readable_file_and_options_of_legacy_listings_are_refused():
    r = cli("show", "--format", "json", PIR / "mlp_bwd.json")
    assert r.returncode == 0
    assert json.loads(r.stdout) == json.loads((PIR / "mlp_bwd.json").read_text())
    r = cli("show", "--backward-only", PIR / "mlp_bwd.json")
    assert r.returncode == 2 and "--backward-only" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_summary_names_feeds_parameters_and_the_backward_section():
    r = cli("show", "--summary", "--json", PIR / "mlp_bwd.json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    text = json.dumps(s)
    for name in ("x", "y", "fc_2.w_0", "fc_3.b_0"):
        assert f'"{name}"' in text
    assert s["has_backward"] is True and [f["name"] for f in s["feeds"]] == ["x", "y"]
    r2 = cli("show", "--summary", PIR / "mlp.json")
    assert r2.returncode == 0 and "fc_0.w_0" in r2.stdout and "backward: none" in r2.stdout


def test_diff_compares_canonically(tmp_path):
    r = cli("diff", PIR / "mlp.json", PIR / "mlp.json")
    assert r.returncode == 0 and r.stdout == ""
    # Paddle's readable form and its compact form are one program
    r = cli("diff", PIR / "mlp_bwd.json", PIR / "mlp_bwd.readable.json")
    assert r.returncode == 0, r.stdout
    r = cli("diff", PIR / "mlp.json", PIR / "mlp_bwd.json")
    assert r.returncode == 1 and "matmul_grad" in r.stdout
    r = cli("diff", "--json", PIR / "mlp.json", PIR / "mlp_bwd.json")
    assert r.returncode == 1 and json.loads(r.stdout)["equal"] is False
    r = cli("diff", PIR / "mlp.json", TESTDATA / "programs" / "fit_a_line" / "forward.pb")
    assert r.returncode == 2 and "PIR" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_dot_draws_regions_as_boxes(tmp_path):
    r = cli("dot", PIR / "cond_in_while_bwd.json")
    assert r.returncode == 0, r.stderr
    assert 'subgraph "cluster_' in r.stdout and "pd_op.while region 0" in r.stdout and "pd_op.if region" in r.stdout
    assert cli("dot", PIR / "cond_in_while_bwd.json").stdout == r.stdout          # stable node ids
    out = tmp_path / "w.html"
    r = cli("dot", PIR / "while_bwd.json", "-o", out)
    assert r.returncode == 0 and out.read_text().startswith("<!DOCTYPE html") or out.read_text().lower().startswith(
        "<!doctype html")
    r = cli("dot", "--around", "x", PIR / "mlp.json")
    assert r.returncode == 2 and "--around" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp", "mlp_bwd", "cond_bwd", "while_bwd", "transformer_bwd"])
def test_convert_rewrites_paddles_bytes(tmp_path, name):
    out = tmp_path / "out.json"
    r = cli("convert", PIR / f"{name}.json", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (PIR / f"{name}.json").read_bytes()


def test_convert_to_readable_and_back(tmp_path):
    readable = tmp_path / "m.readable.json"
    assert cli("convert", PIR / "mlp_bwd.json", readable).returncode == 0
    assert readable.read_bytes() == (PIR / "mlp_bwd.readable.json").read_bytes()
    back = tmp_path / "m.json"
    assert cli("convert", readable, back).returncode == 0
    assert back.read_bytes() == (PIR / "mlp_bwd.json").read_bytes()


@pytest.mark.parametrize("values", ["mlp.pdparams", "mlp.pdopt", "jit.pdiparams"])
def test_a_file_of_values_given_as_a_program_is_named_for_what_it_is(values):
    r = cli("show", PIR / values)
    assert r.returncode == 2 and "not a program" in r.stderr and "--params" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def _pir_corpus():
    import importlib.util
    corpus = TESTDATA.parent / "tests" / "bad_inputs" / "pir"
    spec = importlib.util.spec_from_file_location("pir_make_corpus_cli", corpus / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    cases = json.loads((corpus / "cases.json").read_text(encoding="utf-8"))["cases"]
    # legacy_pb is a legacy program given to the PIR reader: the commands read it as what it is
    return corpus, mod, [c for c in cases if not c.get("load") and c["id"] != "legacy_pb"]


CORPUS, MAKE, CLI_CASES = _pir_corpus()


@pytest.mark.parametrize("case", CLI_CASES, ids=[c["id"] for c in CLI_CASES])
def test_every_bad_pir_file_is_one_line_and_exit_2(case, tmp_path):
    """The PIR bad-input corpus through the commands: exit 2, one line naming the file, nothing written."""
    from click.testing import CliRunner
    from pybackward_cli.main import cli as group
    path = MAKE.generated(case["generated"], tmp_path) if "generated" in case else CORPUS / case["file"]
    before = path.stat().st_size
    for args in (["show", str(path)], ["show", "--summary", str(path)], ["diff", str(path), str(PIR / "mlp.json")],
                 ["dot", str(path), "-o", str(tmp_path / "out.html")],
                 ["convert", str(path), str(tmp_path / "out.json")]):
        r = CliRunner().invoke(group, args)
        err = r.stderr if hasattr(r, "stderr") else r.output
        assert r.exit_code == 2, (args, r.output)
        lines = [ln for ln in err.strip().splitlines() if ln]
        assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in err, (args, err)
        assert not (tmp_path / "out.html").exists() and not (tmp_path / "out.json").exists()
    assert path.stat().st_size == before


VALUES = TESTDATA / "pir_values"


@pytest.mark.slow
@pytest.mark.parametrize("name, run", [("mlp_bwd", "mlp_bwd"), ("cnn_bwd", "cnn_bwd"), ("cond_bwd", "cond_bwd-pos"),
                                       ("cond_bwd", "cond_bwd-neg"), ("while_bwd", "while_bwd")])
def test_run_gives_paddles_values(name, run, tmp_path):
    """`run` on a PIR program with Paddle's backward section: the loss and every NAME@GRAD, equal to
    what Paddle's PIR Executor computed on the same values (testdata/pir_values; the CNN's unseeded
    dropout drawn from Paddle's global generator after the paddle.seed it ran under)."""
    import numpy as np
    seed = json.loads((VALUES / "manifest.json").read_text())["runs"][run]["paddle_seed"]
    out = tmp_path / "r.npz"
    r = cli("run", PIR / f"{name}.json", "--params", VALUES / f"{run}.params.npz",
            "--feeds", VALUES / f"{run}.feeds.npz", "--out", out, "-q", "--paddle-seed", str(seed))
    assert r.returncode == 0, r.stderr
    got = dict(np.load(out))
    want = dict(np.load(VALUES / f"{run}.values.npz"))
    grads = [k for k in got if k.endswith("@GRAD")]
    assert grads, got.keys()
    prog = pybackward.load(PIR / f"{name}.json")
    for k, v in got.items():
        ref = k if k in want else (f"%{prog.value(k).id}" if not k.endswith("@GRAD") else None)
        if ref in want:
            np.testing.assert_allclose(v, want[ref], rtol=1e-5, atol=1e-6, err_msg=k)


def test_check_passes_on_paddles_backward_section():
    r = cli("check", PIR / "mlp_bwd.json", "--params", VALUES / "mlp_bwd.params.npz",
            "--feeds", VALUES / "mlp_bwd.feeds.npz")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(" ok") >= 4


@pytest.mark.slow
@pytest.mark.parametrize("name", ["jit", "cnn_infer"])
def test_a_pdiparams_beside_a_pir_program_is_read_by_its_names(name, tmp_path):
    """A PIR program's .pdiparams holds its parameters in sorted name order, without names: pybackward
    names them from the .json beside it (convert) and runs the program on them by default (run)."""
    import numpy as np
    out = tmp_path / "p.npz"
    r = cli("convert", PIR / f"{name}.pdiparams", out)
    assert r.returncode == 0, r.stderr
    got, want = dict(np.load(out)), dict(np.load(VALUES / f"{name}.params.npz"))
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    prog = pybackward.load(PIR / f"{name}.json")
    fetch = [op.attr("name") for op in prog.walk() if op.name == "pd_op.fetch"]
    r = cli("run", PIR / f"{name}.json", "--feeds", VALUES / f"{name}.feeds.npz", "--out", tmp_path / "r.npz", "-q")
    assert r.returncode == 0, r.stderr
    values, paddle = dict(np.load(tmp_path / "r.npz")), dict(np.load(VALUES / f"{name}.values.npz"))
    assert fetch and set(fetch) <= set(values)
    for n in fetch:
        np.testing.assert_allclose(values[n], paddle[f"%{prog.value(n).id}"], rtol=1e-5, atol=1e-6, err_msg=n)


def test_a_pdiparams_with_the_wrong_pir_program_is_refused(tmp_path):
    r = cli("convert", PIR / "jit.pdiparams", tmp_path / "p.npz", "--program", PIR / "cnn_infer.json")
    assert r.returncode == 2 and "jit.pdiparams" in r.stderr and not (tmp_path / "p.npz").exists()
    assert len(r.stderr.strip().splitlines()) == 1
