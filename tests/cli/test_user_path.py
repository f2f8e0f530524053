"""The everyday path on the command line: Paddle's saved files in --params and
convert, show --summary, append without --loss, and errors that name the fix."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from pybackward.tensors import paddle_files as pf
from pybackward_cli.main import cli

from conftest import PROGRAMS, TESTDATA

MLP = TESTDATA / "paddle_files" / "mlp"
CASE = json.loads((MLP / "case.json").read_text())
LOSS = CASE["loss"]


def invoke(*args, cwd=None):
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, [str(a) for a in args])
    with runner.isolated_filesystem(temp_dir=cwd):
        return runner.invoke(cli, [str(a) for a in args])


def npz(path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.output and "Errno" not in r.output
    return lines[0]


@pytest.fixture
def saved(tmp_path):
    """m.pdmodel + m.pdparams + feeds.npz as paddle.static.save left them, in a fresh directory."""
    for name in ("m.pdmodel", "m.pdparams", "m.pdopt", "feeds.npz"):
        shutil.copy(MLP / name, tmp_path / name)
    return tmp_path


# -- Paddle's files in, Paddle's gradients out ---------------------------
def test_append_run_on_a_paddle_saved_pair_gives_paddles_gradients(tmp_path):
    out = tmp_path / "out.pb"
    r = invoke("append", "--loss", LOSS, "--run", "--params", MLP / "m.pdparams", "--feeds", MLP / "feeds.npz",
               MLP / "m.pdmodel", out)
    assert r.exit_code == 0, r.output
    assert "fc_0.w_0@GRAD: float32[4, 8]" in r.stdout and out.exists()
    res = tmp_path / "res.npz"
    fetch = [a for g in [LOSS, *CASE["grads"]] for a in ("--fetch", g)]
    r = invoke("run", out, *fetch, "--params", MLP / "m.pdparams", "--feeds", MLP / "feeds.npz", "--out", res)
    assert r.exit_code == 0, r.output
    got, want = npz(res), npz(MLP / "grads.npz")
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-6, atol=1e-7, err_msg=k)


def test_append_run_finds_the_pdparams_beside_the_pdmodel_and_the_only_loss(saved):
    r = invoke("append", "--run", saved / "m.pdmodel", saved / "out.pb")
    assert r.exit_code == 0, r.output
    assert f"{LOSS}: float32[]" in r.stdout and "fc_1.b_0@GRAD: float32[3]" in r.stdout
    want = npz(MLP / "grads.npz")[LOSS]
    assert f"mean={float(want):.6g}" in r.stdout
    (saved / "m.pdparams").rename(saved / "m.pdiparams.bak")
    pf.save_arrays(saved / "m.pdiparams", pf.load_arrays(MLP / "m.pdparams"))   # the .pdiparams is found too
    r = invoke("append", "--run", saved / "m.pdmodel", saved / "out.pb")
    assert r.exit_code == 0 and f"mean={float(want):.6g}" in r.stdout, r.output


@pytest.mark.parametrize("params", ["inf.pdiparams", "vars", "m.pdparams", "values.npz"])
def test_run_an_inference_model_with_each_params_format_matches_paddle(tmp_path, params):
    x = tmp_path / "x.npy"
    np.save(x, npz(MLP / "feeds.npz")["x"])
    out = tmp_path / "logits.pdparams"                    # --out writes the format its suffix names
    r = invoke("run", MLP / "inf.pdmodel", "--fetch", CASE["logits"], "--params", MLP / params,
               "--feed", f"x={x}", "--out", out)
    assert r.exit_code == 0, r.output
    got = pf.load_arrays(out)[CASE["logits"]]
    np.testing.assert_allclose(got, npz(MLP / "inf_out.npz")[CASE["logits"]], rtol=2e-6, atol=1e-7)


def test_convert_between_every_format_keeps_paddles_bytes(tmp_path):
    steps = [(MLP / "m.pdparams", "a.npz", ()), ("a.npz", "b.pdiparams", ()),
             ("b.pdiparams", "c/", ("--program", MLP / "inf.pdmodel")), ("c", "d.npz", ()),
             ("a.npz", "e.pdparams", ())]
    for src, dst, extra in steps:
        src = src if not isinstance(src, str) else tmp_path / src
        r = invoke("convert", src, f"{tmp_path}/{dst}", *extra)
        assert r.exit_code == 0, r.output
        assert "wrote" in r.stdout and "(4 arrays)" in r.stdout
    assert (tmp_path / "b.pdiparams").read_bytes() == (MLP / "inf.pdiparams").read_bytes()
    for f in (MLP / "vars").iterdir():
        assert (tmp_path / "c" / f.name).read_bytes() == f.read_bytes()
    if np.__version__.startswith("2."):
        assert (tmp_path / "e.pdparams").read_bytes() == (MLP / "m.pdparams").read_bytes()
    # programs still convert as before, and never into an array format
    r = invoke("convert", MLP / "m.pdmodel", tmp_path / "m.pbtxt")
    assert r.exit_code == 0 and (tmp_path / "m.pbtxt").read_text().startswith("blocks {")
    assert "looks like a program" in one_line_error(invoke("convert", MLP / "m.pdmodel", tmp_path / "m.npz"))
    assert "cannot tell which format" in one_line_error(invoke("convert", MLP / "m.pdparams", tmp_path / "m.pb"))


# -- show --summary and append without --loss ----------------------------
def test_show_summary_text_and_json():
    r = invoke("show", "--summary", MLP / "m.pdmodel")
    assert r.exit_code == 0, r.output
    assert "feeds (2):" in r.stdout and "x      float32[-1, 4]" in r.stdout
    assert f"loss candidates (one float element, read by no op): {LOSS}" in r.stdout
    r = invoke("show", "--summary", "--json", PROGRAMS / "fit_a_line" / "backward.pb")
    doc = json.loads(r.stdout)
    assert doc["has_backward"] and doc["loss_marked"] and [v["name"] for v in doc["losses"]] == ["mean_0.tmp_0"]
    assert [f["name"] for f in doc["feeds"]] == ["x", "y"] and doc["parameter_elements"] == 14
    assert "--json goes with --summary" in one_line_error(invoke("show", "--json", MLP / "m.pdmodel"))


def test_append_without_loss_uses_the_only_candidate_or_lists_them(tmp_path):
    r = invoke("append", PROGRAMS / "fit_a_line" / "forward.pb", tmp_path / "a.pb")
    assert r.exit_code == 0 and "(loss mean_0.tmp_0: " in r.stderr and r.stdout == "", r.output
    r = invoke("append", "--pairs", PROGRAMS / "fit_a_line" / "forward.pb", tmp_path / "a.pb")
    assert r.exit_code == 0 and "fc_0.w_0 -> fc_0.w_0@GRAD" in r.stdout, r.output
    msg = one_line_error(invoke("append", PROGRAMS / "append_twice" / "forward.pb", tmp_path / "b.pb"))
    assert "2 loss candidates: mean_0.tmp_0" in msg and "reduce_sum_0.tmp_0" in msg and "--loss NAME" in msg
    msg = one_line_error(invoke("append", PROGRAMS / "doc_gradients" / "forward.pb", tmp_path / "c.pb"))
    assert "no loss candidate" in msg and "--loss NAME" in msg
    assert not (tmp_path / "b.pb").exists() and not (tmp_path / "c.pb").exists()


# -- errors that name the fix ----------------------------------------------
def test_run_reads_the_values_saved_beside_the_program():
    r = invoke("run", MLP / "m.pdmodel", "--fetch", LOSS)          # m.pdparams and feeds.npz beside it
    assert r.exit_code == 0 and r.stdout.startswith(f"{LOSS}: float32[]"), r.output


def test_missing_params_and_feeds_name_every_option(tmp_path):
    shutil.copy(MLP / "m.pdmodel", tmp_path / "m.pdmodel")               # nothing beside it
    msg = one_line_error(invoke("run", tmp_path / "m.pdmodel", "--fetch", LOSS))
    assert "var 'x': input 'X' has no value" in msg
    for part in ("parameters fc_0.w_0 (float32[4, 8]), fc_0.b_0 (float32[8])", "fc_1.w_0", "--params FILE", ".pdparams", ".pdiparams",
                 "--startup", "feeds x (float32[-1, 4]), label (int64[-1, 1])", "--feeds", "--feed NAME=FILE.npy"):
        assert part in msg, part
    msg = one_line_error(invoke("run", tmp_path / "m.pdmodel", "--fetch", LOSS, "--params", MLP / "m.pdparams",
                                "--feeds", MLP / "inf_out.npz"))   # the wrong feeds file
    assert "parameters" not in msg and "feeds x (float32[-1, 4]), label (int64[-1, 1])" in msg


def test_append_run_without_values_names_the_files_it_looked_for_and_writes_nothing(tmp_path):
    shutil.copy(MLP / "m.pdmodel", tmp_path / "m.pdmodel")
    msg = one_line_error(invoke("append", "--run", tmp_path / "m.pdmodel", tmp_path / "out.pb"))
    assert "--params FILE" in msg and "params.npz or m.pdparams or m.pdiparams, and feeds.npz, beside" in msg
    assert not (tmp_path / "out.pb").exists()


def test_append_run_that_fails_leaves_no_output_and_the_input_untouched(saved):
    np.savez(saved / "feeds.npz", x=np.zeros((4, 5), np.float32), label=np.zeros((4, 1), np.int64))
    before = (saved / "m.pdmodel").read_bytes()
    msg = one_line_error(invoke("append", "--run", saved / "m.pdmodel", saved / "out.pb"))
    assert "feed has shape [4, 5]" in msg
    assert not (saved / "out.pb").exists()
    one_line_error(invoke("append", "--run", "--in-place", saved / "m.pdmodel"))
    assert (saved / "m.pdmodel").read_bytes() == before and not (saved / "m.pdmodel~").exists()


def test_fetch_of_an_undeclared_name_suggests_close_ones():
    msg = one_line_error(invoke("run", MLP / "m.pdmodel", "--fetch", "mean_1.tmp", "--params", MLP / "m.pdparams",
                                "--feeds", MLP / "feeds.npz"))
    assert "var 'mean_1.tmp': cannot fetch: no block declares a var by that name" in msg
    assert "did you mean 'mean_1.tmp_0'" in msg


def test_missing_and_foreign_value_files_are_explained(tmp_path):
    (tmp_path / "pic.npz").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    (tmp_path / "p.pdparams").write_text("not a pickle")
    np.savez(tmp_path / "two.npz", a=np.ones(1))
    cases = [(("--params", tmp_path / "missing.npz"), "missing.npz: no such file"),
             (("--params", tmp_path / "pic.npz"), "pic.npz: not a .npz archive: this is a PNG image"),
             (("--params", tmp_path / "p.pdparams"), "p.pdparams: not a Paddle pickle"),
             (("--feeds", tmp_path / "nope"), "nope: no such file"),
             (("--feed", f"x={tmp_path / 'two.npz'}"), "a .npz archive, not one .npy array"),
             (("--feed", f"x={tmp_path / 'none.npy'}"), "none.npy: no such file")]
    for args, want in cases:
        msg = one_line_error(invoke("run", MLP / "m.pdmodel", "--fetch", LOSS, *args))
        assert want in msg, (want, msg)


@pytest.mark.parametrize("out", ["out.png", "out.json", "out.npz", "out.pdparams", "out.svg"])
def test_a_program_is_not_written_under_another_formats_suffix(tmp_path, out):
    msg = one_line_error(invoke("append", "--loss", "mean_0.tmp_0", PROGRAMS / "fit_a_line" / "forward.pb",
                                tmp_path / out))
    assert f"the suffix {out[3:]} says" in msg and "not a program" in msg
    assert not (tmp_path / out).exists()
    one_line_error(invoke("gradients", "--target", "mean_0.tmp_0", "--input", "x",
                          PROGRAMS / "fit_a_line" / "forward.pb", tmp_path / out))
    assert not (tmp_path / out).exists()
    if out.endswith((".png", ".svg")):      # (.json: convert writes the PIR form, docs/convert.md)
        one_line_error(invoke("convert", MLP / "m.pdmodel", tmp_path / out))
        assert not (tmp_path / out).exists()


# -- what append and run print -------------------------------------------
def test_append_says_what_it_wrote_in_one_line(tmp_path):
    r = invoke("append", "--loss", LOSS, MLP / "m.pdmodel", tmp_path / "out.pb")
    assert r.exit_code == 0, r.output
    assert r.stderr.strip() == f"wrote {tmp_path / 'out.pb'} (loss {LOSS}: 9 ops appended, 4 parameter gradients)"


def test_run_json_is_one_document_with_the_values(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, npz(MLP / "feeds.npz")["x"])
    r = invoke("run", MLP / "inf.pdmodel", "--fetch", CASE["logits"], "--params", MLP / "inf.pdiparams",
               "--feed", f"x={x}", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    got = doc["fetch"][CASE["logits"]]
    want = npz(MLP / "inf_out.npz")[CASE["logits"]]
    assert got["dtype"] == "float32" and got["shape"] == [4, 3] and doc["output"] is None
    np.testing.assert_allclose(np.array(got["values"], np.float32), want, rtol=2e-6, atol=1e-7)
    assert got["max"] == pytest.approx(float(want.max()), rel=1e-6)


def test_append_run_json_puts_the_run_in_the_same_document(saved):
    r = invoke("append", "--run", "--json", saved / "m.pdmodel", saved / "out.pb")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)             # stdout is exactly one JSON document
    assert doc["loss"] == LOSS and doc["output"] == str(saved / "out.pb")
    assert sorted(doc["run"]) == sorted([LOSS, *CASE["grads"]])
    want = npz(MLP / "grads.npz")
    for name, v in doc["run"].items():
        np.testing.assert_allclose(np.array(v["values"], np.float32), want[name], rtol=2e-6, atol=1e-7)
