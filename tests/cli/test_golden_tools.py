"""Golden-file tooling: `show` dumps, `append/gradients --expect`, batch `append
--out-dir`, pybackward.testing, and the examples/ci_golden project."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

import pybackward
from conftest import PROGRAMS, ROOT
from pybackward.testing import assert_program_matches
from pybackward_cli.main import cli

FIT = PROGRAMS / "fit_a_line" / "forward.pb"
FIT_BWD = PROGRAMS / "fit_a_line" / "backward.pb"
NESTED = PROGRAMS / "nested_cond" / "backward.pb"
EXAMPLE = ROOT / "examples" / "ci_golden"


def run(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybackward_cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


# -- show --------------------------------------------------------------------
def test_show_sections_by_op_role():
    full = invoke("show", "--no-vars", "--no-attrs", FIT_BWD).output.splitlines()
    bwd = invoke("show", "--no-vars", "--no-attrs", "--backward-only", FIT_BWD).output.splitlines()
    fwd = invoke("show", "--no-vars", "--no-attrs", "--forward-only", FIT_BWD).output.splitlines()
    assert full[0] == "block 0 (parent -1): 16 vars, 11 ops"
    assert bwd[0] == "block 0 (parent -1): 15 of 16 vars, 6 of 11 ops (backward)"    # what is shown, of the block
    assert fwd[0] == "block 0 (parent -1): 9 of 16 vars, 5 of 11 ops (forward)"
    assert [ln[:8] for ln in bwd[1:]] == [f"  [{i:>3}]B" for i in range(5, 11)]
    assert [ln[:8] for ln in fwd[1:]] == ["  [  0] ", "  [  1] ", "  [  2] ", "  [  3] ", "  [  4]L"]
    assert "  [  4]L Out=mean_0.tmp_0 = reduce_mean(X=square_error_cost_0.tmp_1)" in fwd
    # with a section, only the vars its ops use are listed
    r = invoke("show", "--backward-only", "--no-attrs", FIT_BWD)
    assert "var fc_0.w_0@GRAD : fp32[13, 1]" in r.output and "var fc_0.tmp_0 :" in r.output
    assert "var square_error_cost_0.tmp_0 :" in r.output and "var y :" in r.output
    r = invoke("show", "--forward-only", FIT_BWD)
    assert "@GRAD" not in r.output
    r = run("show", "--backward-only", "--forward-only", str(FIT_BWD))
    assert r.returncode == 2 and r.stderr.strip() == "error: give --backward-only or --forward-only, not both"


def test_show_nests_sub_blocks_under_their_op():
    lines = invoke("show", "--no-vars", "--no-attrs", NESTED).output.splitlines()
    i = next(k for k, ln in enumerate(lines) if "= conditional_block(Cond=less_than_0.tmp_0" in ln)
    assert lines[i + 1] == "         block 1 (parent 0): 6 vars, 6 ops"
    assert lines[i + 2].startswith("           [  0]  Out=matmul_v2_1.tmp_0 = matmul_v2(")
    j = next(k for k, ln in enumerate(lines) if "conditional_block(Cond=less_than_1.tmp_0" in ln)
    assert lines[j + 1] == "                  block 2 (parent 1): 2 vars, 3 ops"
    assert sum(ln.lstrip().startswith("block ") for ln in lines) == 7
    assert lines[i + 15].startswith("  [  6]")  # back in block 0 after blocks 1 (2, 3 inside it)
    # --backward-only keeps the grad blocks under conditional_block_grad, drops the forward ones
    bwd = invoke("show", "--no-vars", "--no-attrs", "--backward-only", NESTED).output
    assert "block 1 (parent 0)" not in bwd and "         block 4 (parent 0, forward block 1)" in bwd
    flat = invoke("show", "--flat", "--no-vars", NESTED).output.splitlines()
    assert [ln.split(" (")[0] for ln in flat if ln.startswith("block")] == [f"block {i}" for i in range(7)]


def test_show_formats():
    r = invoke("show", "--format", "json", FIT_BWD)
    d = json.loads(r.output)
    [b] = d["blocks"]
    assert b["idx"] == 0 and len(b["ops"]) == 11 and len(b["vars"]) == 16
    mul = b["ops"][0]
    assert mul["type"] == "mul" and mul["inputs"] == {"X": ["x"], "Y": ["fc_0.w_0"]} and mul["role"] == 0
    assert mul["attrs"]["x_num_col_dims"] == 1 and "op_callstack" in mul["attrs"]
    assert {"name": "fc_0.w_0", "type": "dense_tensor", "dtype": "fp32", "shape": [13, 1], "persistable": True,
            "is_parameter": True, "stop_gradient": False, "need_check_feed": False} in b["vars"]
    d = json.loads(invoke("show", "--format", "json", "--backward-only", FIT_BWD).output)
    assert [o["index"] for o in d["blocks"][0]["ops"]] == list(range(5, 11))
    d = json.loads(invoke("show", "--format", "json", "--block", "2", NESTED).output)
    assert [b["idx"] for b in d["blocks"]] == [2]
    r = invoke("show", "--format", "pbtxt", FIT_BWD)
    assert r.output == (PROGRAMS / "fit_a_line" / "backward.pbtxt").read_text()
    r = invoke("show", "--format", "pbtxt", "--forward-only", FIT_BWD)
    assert r.output.count("\n  ops {") == 5 and 'type: "mul_grad"' not in r.output  # vars kept as they are
    p = run("show", "--format", "json", str(FIT))
    assert p.returncode == 0 and json.loads(p.stdout)["source"] == str(FIT)


# -- append / gradients --expect -------------------------------------------------
def _changed_golden(tmp_path):
    g = pybackward.load(FIT_BWD)
    g.global_block().ops[9].set_attr("axis", -1)
    path = tmp_path / "golden.pb"
    pybackward.save(g, path)
    return path


def test_append_expect_equal_and_different(tmp_path):
    r = invoke("append", "--loss", "mean_0.tmp_0", FIT, "--expect", FIT_BWD)
    assert r.exit_code == 0, r.output
    golden = _changed_golden(tmp_path)
    r = run("append", "--loss", "mean_0.tmp_0", "--pairs", str(FIT), "--expect", str(golden))
    assert r.returncode == 1
    assert r.stdout.splitlines()[:5] == [
        "fc_0.b_0 -> fc_0.b_0@GRAD", "fc_0.w_0 -> fc_0.w_0@GRAD",
        f"--- {golden}", f"+++ {FIT} (with backward)", "@@ block 0 ops -7,4 +7,4 @@"]
    assert "?       attr axis: -1 -> 1" in r.stdout
    assert r.stdout.rstrip().endswith("programs differ: 1 op changed")
    assert r.stderr.strip() == (f"pybackward: the result differs from golden {golden} "
                                "(rerun with --update to accept it)")
    # OUT is still written when given
    out = tmp_path / "out.pb"
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), str(out), "--expect", str(golden))
    assert r.returncode == 1 and out.read_bytes() == FIT_BWD.read_bytes() and f"+++ {out}\n" in r.stdout


def test_append_expect_update_writes_binary_and_pbtxt(tmp_path):
    golden = _changed_golden(tmp_path)
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), "--expect", str(golden), "--update")
    assert r.returncode == 0, r.stderr
    assert "?       attr axis: -1 -> 1" in r.stdout
    assert f"updated golden {golden} (and {tmp_path / 'golden.pbtxt'})" in r.stderr
    assert golden.read_bytes() == FIT_BWD.read_bytes()
    assert (tmp_path / "golden.pbtxt").read_text() == (PROGRAMS / "fit_a_line" / "backward.pbtxt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["golden.pb", "golden.pbtxt"]  # no temp files left
    mtime = golden.stat().st_mtime_ns
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), "--expect", str(golden), "--update")
    assert r.returncode == 0 and "matches golden" in r.stderr and golden.stat().st_mtime_ns == mtime


def test_append_expect_missing_golden(tmp_path):
    golden = tmp_path / "new" / "g.pb"
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), "--expect", str(golden))
    assert r.returncode == 1 and "does not exist (rerun with --update to write it)" in r.stderr
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), "--expect", str(golden), "--update")
    assert r.returncode == 0 and f"wrote golden {golden}" in r.stderr
    assert golden.read_bytes() == FIT_BWD.read_bytes() and (tmp_path / "new" / "g.pbtxt").exists()
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"junk")
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), "--expect", str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(bad) in r.stderr


def test_append_expect_json(tmp_path):
    golden = _changed_golden(tmp_path)
    r = invoke("append", "--loss", "mean_0.tmp_0", "--json", FIT, "--expect", golden)
    assert r.exit_code == 1
    doc = json.loads(r.output.splitlines()[0])
    assert doc["output"] is None and doc["params_grads"][0] == ["fc_0.b_0", "fc_0.b_0@GRAD"]
    e = doc["expect"]
    assert e["golden"] == str(golden) and e["equal"] is False and e["updated"] is False
    assert e["diff"]["blocks"][0]["ops"][0]["changes"] == [{"what": "attr", "name": "axis", "a": -1, "b": 1}]


def test_gradients_expect(tmp_path):
    case = PROGRAMS / "doc_gradients"
    src, golden = case / "forward.pb", case / "backward.pb"
    args = ["--target", "relu_1.tmp_0", "--input", "x"]
    r = run("gradients", *args, str(src), "--expect", str(golden))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "x -> x@GRAD\n" and f"matches golden {golden}" in r.stderr
    g2 = tmp_path / "g.pb"
    r = run("gradients", *args, str(src), "--expect", str(g2), "--update", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["expect"]["updated"] is True
    assert g2.read_bytes() == golden.read_bytes()
    r = run("gradients", *args, str(src), "--expect", str(case / "backward_target_grad.pb"))
    assert r.returncode == 1 and "differs from golden" in r.stderr and r.stdout.startswith("x -> x@GRAD\n--- ")
    r = run("gradients", *args, str(src))
    assert r.returncode == 2 and "missing OUT" in r.stderr


def test_single_file_forms_unchanged(tmp_path):
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT))
    assert r.returncode == 2 and r.stderr.strip() == "error: missing OUT (or pass --in-place to overwrite the input)"
    f = tmp_path / "m.pb"
    f.write_bytes(FIT.read_bytes())
    r = run("append", "--loss", "mean_0.tmp_0", "--in-place", str(f), str(tmp_path / "o.pb"))
    assert r.returncode == 2 and "give OUT or --in-place, not both" in r.stderr
    assert f.read_bytes() == FIT.read_bytes()
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), str(tmp_path / "a.pb"), str(tmp_path / "b.pb"))
    assert r.returncode == 2 and "--out-dir" in r.stderr and not (tmp_path / "a.pb").exists()
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), str(tmp_path / "a.pb"), "--update")
    assert r.returncode == 2 and "--expect GOLDEN" in r.stderr and not (tmp_path / "a.pb").exists()


# -- batch ---------------------------------------------------------------------
def test_batch_reports_bad_files_and_finishes_the_rest(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(FIT.read_bytes()[:20])
    good2 = PROGRAMS / "doc_append_backward" / "forward.pb"
    out = tmp_path / "out"
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), str(bad), str(good2), "--out-dir", str(out))
    assert r.returncode == 1
    # names repeat (forward.pb twice), so each keeps its path below the inputs' common directory
    rel_fit = os.path.relpath(FIT, os.path.commonpath([str(FIT.parent), str(tmp_path), str(good2.parent)]))
    assert (out / rel_fit).read_bytes() == FIT_BWD.read_bytes()
    err = r.stderr.strip().splitlines()
    assert len(err) == 2 and err[0].startswith(f"error: {bad}: not a valid ProgramDesc")
    assert err[1] == f"2 of 3 programs written to {out}, 1 failed"
    assert len(r.stdout.splitlines()) == 2 and "\r" not in r.stderr  # no progress bar off a terminal
    # unique names go straight into DIR; --json gives every result
    out2 = tmp_path / "out2"
    f2 = tmp_path / "fit.pb"
    f2.write_bytes(FIT.read_bytes())
    r = invoke("append", "--loss", "mean_0.tmp_0", "--json", f2, bad, "--out-dir", out2)
    assert r.exit_code == 1
    doc = json.loads(next(ln for ln in r.output.splitlines() if ln.startswith("{")))
    assert doc["ok"] == 1 and doc["failed"] == 1
    assert doc["results"][0] == {"input": str(f2), "output": str(out2 / "fit.pb"),
                                 "params_grads": [["fc_0.b_0", "fc_0.b_0@GRAD"], ["fc_0.w_0", "fc_0.w_0@GRAD"]]}
    assert doc["results"][1]["input"] == str(bad) and "not a valid ProgramDesc" in doc["results"][1]["error"]
    assert (out2 / "fit.pb").read_bytes() == FIT_BWD.read_bytes()


def test_batch_all_good_exits_0_and_refuses_to_overwrite_inputs(tmp_path):
    for n in ("a", "b"):
        (tmp_path / f"{n}.pb").write_bytes(FIT.read_bytes())
    r = run("append", "--loss", "mean_0.tmp_0", str(tmp_path / "a.pb"), str(tmp_path / "b.pb"),
            "--out-dir", str(tmp_path / "o"))
    assert r.returncode == 0 and r.stderr.strip() == f"2 of 2 programs written to {tmp_path / 'o'}"
    r = run("append", "--loss", "mean_0.tmp_0", str(tmp_path / "a.pb"), "--out-dir", str(tmp_path))
    assert r.returncode == 2 and "would overwrite the input" in r.stderr     # refused before anything is written
    assert (tmp_path / "a.pb").read_bytes() == FIT.read_bytes()
    r = run("append", "--loss", "mean_0.tmp_0", str(FIT), "--out-dir", str(tmp_path), "--expect", str(FIT_BWD))
    assert r.returncode == 2 and "--expect takes one IN" in r.stderr


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def _batch_on_a_terminal(tmp_path, *flags) -> tuple[subprocess.CompletedProcess, str]:
    master, slave = os.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "append", "--loss", "mean_0.tmp_0",
                            str(FIT), str(PROGRAMS / "doc_append_backward" / "forward.pb"), *flags,
                            "--out-dir", str(tmp_path / "o")], stdout=subprocess.PIPE, stderr=slave, timeout=120)
        os.close(slave)
        slave = None
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    return p, b"".join(chunks).decode().replace("\r\n", "\n")     # the terminal's own line ends


def test_batch_on_a_terminal_shows_no_progress_for_quick_work(tmp_path):
    # progress starts only after a second: two small files finish before it
    p, err = _batch_on_a_terminal(tmp_path)
    assert p.returncode == 0 and "\r" not in err and "2 of 2 programs written" in err
    assert p.stdout.decode().count(" -> ") == 2                  # one IN -> OUT line per file
    p, err = _batch_on_a_terminal(tmp_path, "--quiet")
    assert p.returncode == 0 and err == ""
    p, err = _batch_on_a_terminal(tmp_path, "--pairs")
    assert "  fc_0.w_0 -> fc_0.w_0@GRAD" in p.stdout.decode()


# -- pybackward.testing ----------------------------------------------------------
def test_assert_program_matches(tmp_path, monkeypatch):
    monkeypatch.delenv("PYBACKWARD_UPDATE_GOLDENS", raising=False)
    prog = pybackward.load(FIT)
    pybackward.append_backward("mean_0.tmp_0", program=prog)
    assert assert_program_matches(prog, FIT_BWD).equal
    assert assert_program_matches(FIT_BWD, FIT_BWD.with_suffix(".pbtxt")).equal
    assert assert_program_matches(FIT_BWD.read_bytes(), FIT_BWD).equal
    golden = _changed_golden(tmp_path)
    with pytest.raises(AssertionError) as e:
        assert_program_matches(prog, golden)
    msg = str(e.value)
    assert msg.startswith(f"program differs from golden {golden} (run pytest with --update-goldens")
    assert f"--- {golden}\n+++ {FIT} (under test)\n@@ block 0 ops -7,4 +7,4 @@" in msg
    assert "?       attr axis: -1 -> 1" in msg
    assert assert_program_matches(prog, golden, ignore_attrs={"axis"}).equal
    with pytest.raises(AssertionError, match="does not exist; run pytest with --update-goldens"):
        assert_program_matches(prog, tmp_path / "none.pb")
    monkeypatch.setenv("PYBACKWARD_UPDATE_GOLDENS", "1")
    res = assert_program_matches(prog, golden)
    assert res.updated and golden.read_bytes() == FIT_BWD.read_bytes() and golden.with_suffix(".pbtxt").exists()
    with pytest.raises(TypeError):
        assert_program_matches(42, golden)


def test_update_goldens_option_is_registered(pytestconfig):
    try:
        value = pytestconfig.getoption("update_goldens")
    except ValueError:
        pytest.skip("the pybackward pytest plugin is not loaded (plugin autoloading off?)")
    assert value is False


# -- examples/ci_golden ------------------------------------------------------------
def _pytest(where, *args, cwd=None):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYBACKWARD_UPDATE_GOLDENS", None)
    env.pop("PYTEST_ADDOPTS", None)
    if env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args = ("-p", "pybackward.testing", *args)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(where)],
                          capture_output=True, text=True, cwd=cwd or where, env=env, timeout=300)


def test_example_project_passes_as_committed():
    assert (EXAMPLE / "goldens" / "fit_a_line.backward.pb").read_bytes() == FIT_BWD.read_bytes()
    assert (EXAMPLE / "model" / "fit_a_line.pb").read_bytes() == FIT.read_bytes()
    r = _pytest(EXAMPLE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout


def test_example_project_fails_readably_then_updates(tmp_path):
    ex = tmp_path / "ci_golden"
    shutil.copytree(EXAMPLE, ex, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    model = pybackward.load(ex / "model" / "fit_a_line.pb")
    model.var("x").stop_gradient = False  # the change the README shows
    pybackward.save(model, ex / "model" / "fit_a_line.pb")
    r = _pytest(ex)
    assert r.returncode == 1
    golden = ex / "goldens" / "fit_a_line.backward.pb"
    want = [f"E       AssertionError: program differs from golden {golden} (run pytest with --update-goldens "
            "to accept the change):",
            f"E       --- {golden}",
            f"E       +++ {ex / 'model' / 'fit_a_line.pb'} (under test)",
            "E       @@ block 0 ops -8,3 +8,3 @@",
            "E       ?       output X@GRAD: [] -> [x@GRAD]",
            "E       @@ block 0 vars @@",
            "E       - var x : fp32[-1, 13]  (stop_gradient)",
            "E       + var x : fp32[-1, 13]",
            "E       ?     stop_gradient: True -> False",
            "E       + var x@GRAD : fp32[-1, 13]",
            "E       programs differ: 1 op changed, 1 var added, 1 var changed"]
    lines = r.stdout.splitlines()
    for w in want:
        assert w in lines, (w, r.stdout)
    # the README shows the same failure, paths aside
    readme = (EXAMPLE / "README.md").read_text()
    for w in want[3:]:
        assert w in readme, w
    # the CLI check from the README's CI step fails the same way
    c = run("append", "--loss", "mean_0.tmp_0", "model/fit_a_line.pb", "--expect", "goldens/fit_a_line.backward.pb",
            cwd=ex)
    assert c.returncode == 1 and "?       output X@GRAD: [] -> [x@GRAD]" in c.stdout
    r = _pytest(ex, "--update-goldens")
    assert r.returncode == 0, r.stdout
    assert "x@GRAD" in (ex / "goldens" / "fit_a_line.backward.pbtxt").read_text()
    assert _pytest(ex).returncode == 0
