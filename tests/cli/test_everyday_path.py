"""Issue #38, the everyday path: what a new user hit, item by item.

1. progress lines on the commands that can run for seconds (append, stats,
   gradients, run, check), on a terminal only;
2. `append` on an inference model says why there are no parameter gradients,
   and the `gradients` command it suggests works;
3. the same defaults everywhere: `check` takes the only loss candidate, `run`
   fetches the fetch ops (else the loss, and the gradients after `append`),
   and a run of `append`'s output says where its values are;
4. the missing-Graphviz error names `-o FILE.html`;
5. warnings name the user's line, and no ComplexWarning escapes a kernel;
6. `stats --checkpoints auto` says the choice once, `check` says `1 element`,
   `pybackward.static.save` / `save_inference_model` write Paddle's files;
7. the README says where its Python snippet runs.
"""
from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from pybackward.tensors import paddle_files as pf
from pybackward_cli import common
from pybackward_cli.main import cli

from conftest import PROGRAMS, ROOT, TESTDATA, run_paddle

MLP = TESTDATA / "paddle_files" / "mlp"
FIT = PROGRAMS / "fit_a_line"
MODELS = TESTDATA / "models"


def invoke(*args, **kw):
    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


def npz(path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def one_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output, r.stderr
    return lines[0]


@pytest.fixture
def terminal(monkeypatch):
    """stderr counts as a terminal and the progress line shows at once (not after a second)."""
    monkeypatch.setattr(common, "_isatty", lambda stream: True)
    monkeypatch.setattr(common, "PROGRESS_DELAY", 0.0, raising=False)
    monkeypatch.setattr(common, "REDRAW_INTERVAL", 0.0, raising=False)


# --------------------------------------------------------------------------
# 1. progress on every command that can run long
# --------------------------------------------------------------------------
def test_long_commands_draw_one_progress_line_on_a_terminal(terminal, tmp_path):
    lenet = MODELS / "lenet" / "forward.pb"
    r = invoke("append", "--checkpoints", "auto", lenet, tmp_path / "a.pb")
    assert r.exit_code == 0, r.output
    assert "\rappend: loading " in r.stderr
    assert "\rappend: choosing checkpoints (1 choice judged)" in r.stderr
    assert re.search(r"\rappend: choosing checkpoints \(\d+ choices judged\)", r.stderr)   # redrawn as it counts
    assert "\rappend: appending the backward section with checkpoints" in r.stderr
    # the choice and the summary are whole lines: the progress line is erased before each
    lines = r.stderr.split("\n")
    assert lines[0].split("\r")[-1].startswith("checkpoints (") and lines[-2].split("\r")[-1].startswith("wrote ")
    r = invoke("stats", "--loss", "mean_0.tmp_0", "--checkpoints", "auto", lenet)
    assert r.exit_code == 0 and "\rstats: choosing checkpoints (" in r.stderr, r.output
    r = invoke("gradients", "--target", "mean_0.tmp_0", "--input", "fc_0.w_0", FIT / "forward.pb", tmp_path / "g.pb")
    assert r.exit_code == 0 and "\rgradients: appending the gradients" in r.stderr, r.output
    r = invoke("append", "--run", "--loss", "mean_0.tmp_0", FIT / "forward.pb", tmp_path / "b.pb")
    assert r.exit_code == 0 and "\rappend: running op " in r.stderr, r.output
    r = invoke("run", FIT / "backward.pb", "--fetch", "fc_0.w_0@GRAD")
    assert r.exit_code == 0 and "\rrun: loading " in r.stderr and "\rrun: op " in r.stderr, r.output
    r = invoke("check", FIT / "forward.pb", "--loss", "mean_0.tmp_0")
    assert r.exit_code == 0 and "\rcheck loading " in r.stderr, r.output
    # stdout never gets the line, and --quiet drops it
    for args in (["append", "--checkpoints", "auto", lenet, tmp_path / "a.pb", "-q"],
                 ["stats", "--loss", "mean_0.tmp_0", "--checkpoints", "auto", lenet, "-q"]):
        r = invoke(*args)
        assert r.exit_code == 0 and "\r" not in r.stderr and "\r" not in r.stdout, r.output


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    r = invoke("append", "--checkpoints", "auto", MODELS / "lenet" / "forward.pb", tmp_path / "a.pb")
    assert r.exit_code == 0 and "\r" not in r.stderr, r.output


def test_the_progress_thread_draws_a_step_that_reports_nothing():
    class TTY(io.StringIO):
        def isatty(self) -> bool:
            return True
    out = TTY()
    with common.Progress("append:", stream=out, delay=0.05, tick=0.01) as bar:
        bar.stage("appending the backward section")       # under the delay: nothing yet
        assert out.getvalue() == ""
        deadline = time.monotonic() + 5
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)                                # the step itself reports nothing more
        assert out.getvalue() == "\rappend: appending the backward section"
        bar.echo("checkpoints (1): a")                      # a message line erases the progress line first
    assert "\r" + " " * 38 + "\rcheckpoints (1): a\n" in out.getvalue()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_append_checkpoints_auto_shows_progress_on_a_real_terminal(tmp_path):
    """A real terminal (a pty) and the real delay: the search on a model where
    it takes seconds draws the line, and erases it before the summary."""
    master, slave = os.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-m", "pybackward_cli.main", "append", "--checkpoints", "auto",
                          "--loss", "mean_0.tmp_0",
                              str(MODELS / "mobilenet_v3_small" / "forward.pb"), str(tmp_path / "m.pb")],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.wait(timeout=600) == 0 and p.stdout.read() == b""
    text = seen.decode()
    assert "\rappend: choosing checkpoints (" in text, text[:2000]
    assert re.search(r"\r +\rcheckpoints \(\d+\): ", text) and "wrote " in text


# --------------------------------------------------------------------------
# 2. no parameter gradients: say why, and what to run instead
# --------------------------------------------------------------------------
def test_append_on_an_inference_model_says_its_weights_are_not_parameters(tmp_path):
    out = tmp_path / "inf_bw.pb"
    r = invoke("append", "--loss", "fc_1.tmp_1", MLP / "inf.pdmodel", out)
    assert r.exit_code == 0, r.output
    line = r.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"wrote {out} (loss fc_1.tmp_1: 6 ops appended, 0 parameter gradients; ")
    assert "persistable vars that are not parameters (fc_0.b_0, fc_0.w_0, fc_1.b_0, fc_1.w_0)" in line
    assert "inference model or a jit.save program" in line
    assert "fc_1.tmp_1 is float32[-1, 3], not one element: the gradients are those of the sum of its elements" in line
    # the command it names works as printed, and gives the weights' gradients
    command = re.search(r"for their gradients: (pybackward gradients .*?); fc_1", line).group(1)
    args = shlex.split(command)[1:]
    assert args[-2:] == [str(MLP / "inf.pdmodel"), str(out)]
    r = invoke(*args)
    assert r.exit_code == 0 and "fc_0.w_0 -> fc_0.w_0@GRAD" in r.stdout, r.output
    x = tmp_path / "x.npy"
    np.save(x, npz(MLP / "feeds.npz")["x"])
    r = invoke("run", out, "--params", MLP / "inf.pdiparams", "--feed", f"x={x}", "--fetch", "fc_0.w_0@GRAD",
               "--json")
    assert r.exit_code == 0, r.output
    # a training program with parameters says nothing of the kind, and --json carries the note
    r = invoke("append", FIT / "forward.pb", tmp_path / "fit.pb")
    assert r.exit_code == 0 and r.stderr.strip().endswith("2 parameter gradients)"), r.output
    r = invoke("append", "--loss", "fc_1.tmp_1", "--json", MLP / "inf.pdmodel", out)
    assert "not parameters" in __import__("json").loads(r.stdout)["note"]


# --------------------------------------------------------------------------
# 3. the same defaults on every command
# --------------------------------------------------------------------------
def test_check_takes_the_only_loss_candidate_as_append_does():
    r = invoke("check", FIT / "forward.pb")                 # params.npz and feeds.npz beside it
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0].split()[:3] == ["var", "shape", "max"] and "fc_0.w_0" in r.stdout
    msg = one_error(invoke("check", PROGRAMS / "append_twice" / "forward.pb"))
    assert "2 loss candidates" in msg and "--loss NAME" in msg


def test_run_fetches_the_fetch_ops_else_the_loss_and_the_gradients(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, npz(MLP / "feeds.npz")["x"])
    r = invoke("run", MLP / "inf.pdmodel", "--feed", f"x={x}", "--out", tmp_path / "o.npz")   # inf.pdiparams beside
    assert r.exit_code == 0, r.output
    got = npz(tmp_path / "o.npz")
    assert list(got) == ["fc_1.tmp_1"]
    np.testing.assert_allclose(got["fc_1.tmp_1"], npz(MLP / "inf_out.npz")["fc_1.tmp_1"], rtol=2e-6, atol=1e-7)
    r = invoke("run", MLP / "m.pdmodel")                    # a forward program: its loss
    assert r.exit_code == 0 and r.stdout.startswith("mean_1.tmp_0: float32[]") and len(r.stdout.splitlines()) == 1
    r = invoke("run", FIT / "backward.pb", "--out", tmp_path / "g.npz")   # after append: the loss and the gradients
    assert r.exit_code == 0, r.output
    got, want = npz(tmp_path / "g.npz"), npz(FIT / "grads.npz")
    assert sorted(got) == ["fc_0.b_0@GRAD", "fc_0.w_0@GRAD", "mean_0.tmp_0"]
    for k in ("fc_0.b_0@GRAD", "fc_0.w_0@GRAD"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
    msg = one_error(invoke("run", PROGRAMS / "doc_gradients" / "forward.pb"))
    assert "no --fetch given" in msg and "give --fetch NAME" in msg


def test_append_run_names_the_run_of_its_output_and_that_run_works(tmp_path):
    out = tmp_path / "elsewhere" / "m_bw.pb"
    out.parent.mkdir()
    r = invoke("append", "--run", MLP / "m.pdmodel", out)
    assert r.exit_code == 0, r.output
    again = [ln for ln in r.stderr.splitlines() if ln.startswith("run it again: ")]
    assert again == [f"run it again: pybackward run {out} --params {MLP / 'm.pdparams'} "
                     f"--feeds {MLP / 'feeds.npz'}"]
    r = invoke(*shlex.split(again[0].removeprefix("run it again: "))[1:], "--out", tmp_path / "v.npz")
    assert r.exit_code == 0, r.output
    got, want = npz(tmp_path / "v.npz"), npz(MLP / "grads.npz")
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-6, atol=1e-7, err_msg=k)
    # without the values, the error says where a program `append` wrote finds them
    msg = one_error(invoke("run", out))
    assert "a program `pybackward append` wrote runs on the values of its input" in msg
    assert "--params IN.pdparams" in msg


# --------------------------------------------------------------------------
# 4. the missing-Graphviz error names the picture that needs none
# --------------------------------------------------------------------------
def test_missing_graphviz_suggests_html(tmp_path):
    env = {"PYBACKWARD_DOT": str(tmp_path / "no-such-dot")}
    msg = one_error(invoke("dot", FIT / "forward.pb", "-o", tmp_path / "g.svg", env=env))
    assert "-o FILE.html" in msg and "needs no Graphviz" in msg and "-o FILE.dot" in msg
    r = invoke("dot", FIT / "forward.pb", "-o", tmp_path / "g.html", env=env)    # and it does need none
    assert r.exit_code == 0 and (tmp_path / "g.html").read_text().lstrip().startswith("<!"), r.output


# --------------------------------------------------------------------------
# 5. warnings: the user's line; no ComplexWarning out of a kernel
# --------------------------------------------------------------------------
def test_deviation_warnings_name_the_users_line(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""\
        import pybackward
        from pybackward import static
        main, start = static.Program(), static.Program()
        with static.program_guard(main, start):
            x = static.data("x", [2, 3], "float32")
            x.stop_gradient = False
            static.data("tg2", [2, 4], "float32")
            y1 = static.nn.fc(x, 3)
            y2 = static.nn.fc(y1, 4)
        prog = pybackward.loads(pybackward.dumps(main))
        pybackward.gradients([y1.name, y2.name], ["x"], [None, "tg2"], program=prog)
        static.gradients([y1, y2], [x], [None, main.global_block().var("tg2")])
        """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    where = re.findall(r"^(.*?):(\d+): PaddleDeviationWarning", r.stderr, re.M)
    assert where == [(str(script), "11"), (str(script), "12")], r.stderr


@pytest.fixture
def complex_scalars(tmp_path):
    """scale with a complex ScaleTensor and pow with a complex FactorTensor, on a real X."""
    from pybackward import static
    main, start = static.Program(), static.Program()
    with static.program_guard(main, start):
        x = static.data("x", [2], "float32")
        s = static.data("s", [1], "complex64")
        f = static.data("f", [1], "complex64")
        b = main.global_block()
        b.append_op(type="scale", inputs={"X": [x], "ScaleTensor": [s]},
                    outputs={"Out": [b.create_var(name="scaled", shape=[2], dtype="float32")]},
                    attrs={"scale": 1.0, "bias": 0.0, "bias_after_scale": True})
        b.append_op(type="pow", inputs={"X": [x], "FactorTensor": [f]},
                    outputs={"Out": [b.create_var(name="powered", shape=[2], dtype="float32")]},
                    attrs={"factor": 1.0})
    path = tmp_path / "complex_scalars.pb"
    pybackward.save(main, path)
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.array([1.0, 2.0], "float32"), s=np.array([2 + 3j], "complex64"),
             f=np.array([2 + 1j], "complex64"))
    return path, feeds


def test_no_complex_warning_escapes_the_scalar_tensor_kernels(complex_scalars, tmp_path):
    path, feeds = complex_scalars
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        r = invoke("run", path, "--feeds", feeds, "--fetch", "scaled", "--fetch", "powered",
                   "--out", tmp_path / "o.npz")
    assert r.exit_code == 0, (r.output, r.exception)
    got = npz(tmp_path / "o.npz")
    np.testing.assert_array_equal(got["scaled"], [2.0, 4.0])    # the real part, as Paddle's scale on real X
    np.testing.assert_array_equal(got["powered"], [1.0, 4.0])


def test_no_complex_warning_from_a_double_grad_check():
    """elementwise_mul_grad's own grad on complex inputs with a real Out@GRAD
    (tests/ops/test_registry.py's double-grad sweep): DDOut stays complex and
    opcheck takes a real input's gradient as the real part, without a warning."""
    from pybackward.ops import opcheck, registry
    from pybackward.ops.registry import Sample
    ops = registry.all_ops()
    gdef, fdef = ops["elementwise_mul_grad"], ops["elementwise_mul"]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    y = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    sample = Sample({"X": [x], "Y": [y], "Out@GRAD": [rng.standard_normal((2, 3))]}, {"axis": -1},
                    {s: 1 for s in gdef.outputs})
    assert fdef.type == "elementwise_mul"
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        results = opcheck.check_op_grad(gdef, sample)
    assert results and all(r.ok for r in results), results


# --------------------------------------------------------------------------
# 6. small things
# --------------------------------------------------------------------------
def test_stats_checkpoints_auto_says_the_choice_once():
    r = invoke("stats", "--loss", "mean_0.tmp_0", "--checkpoints", "auto", MODELS / "lenet" / "forward.pb")
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and r.stdout.count("with checkpoints conv2d_0.tmp_1:\n") == 1   # the list: once
    assert r.stdout.count("39.8 KiB -> 30.7 KiB") == 1 and "estimated peak" not in r.stdout
    assert r.stdout.rstrip().endswith("peak activation memory 39.8 KiB -> 30.7 KiB (77%); "
                                      "recomputes 2 of 19 forward ops")
    r = invoke("stats", "--loss", "mean_0.tmp_0", "--checkpoints", "auto", "--memory-budget", "1MiB",
               MODELS / "lenet" / "forward.pb")
    assert r.exit_code == 0 and r.stdout.endswith("checkpoints auto: none needed\nbudget 1.0 MiB: fits\n")


def test_check_says_1_element():
    r = invoke("check", FIT / "forward.pb", "--loss", "mean_0.tmp_0")
    assert r.exit_code == 0, r.output
    assert re.search(r"\b1 element\b", r.stdout) and "1 elements" not in r.stdout and "13 elements" in r.stdout


def _build(static, F, mean, reshape):
    """conv2d -> batch_norm(relu) -> max_pool -> fc(relu) -> dropout -> fc -> softmax_with_cross_entropy -> mean."""
    main, startup = static.Program(), static.Program()
    main.random_seed = startup.random_seed = 2024
    with static.program_guard(main, startup):
        img = static.data('img', [None, 3, 8, 8], 'float32')
        label = static.data('label', [None, 1], 'int64')
        c = static.nn.conv2d(img, 4, 3, padding=1)
        c = static.nn.batch_norm(c, act='relu')
        c = F.max_pool2d(c, 2)
        c = reshape(c, [-1, 4 * 4 * 4])
        h = static.nn.fc(c, 8, activation='relu')
        h = F.dropout(h, p=0.3)
        logits = static.nn.fc(h, 3)
        loss = mean(F.softmax_with_cross_entropy(logits, label))
    return main, startup, img, label, logits, loss


def _save_both(static, exe, main, img, label, logits, loss, d) -> None:
    static.save(main, os.path.join(d, "m"))
    static.save_inference_model(os.path.join(d, "inf"), [img], [logits], exe, program=main)
    static.save_inference_model(os.path.join(d, "inf2"), [img, label], [logits, loss], exe, program=main)


@pytest.fixture
def saved_by_static(tmp_path):
    from pybackward import static
    main, startup, img, label, logits, loss = _build(static, static.nn.functional, static.mean, static.reshape)
    rng = np.random.RandomState(0)
    feeds = {"img": rng.uniform(-1, 1, (2, 3, 8, 8)).astype("float32"),
             "label": rng.randint(0, 3, (2, 1)).astype("int64")}
    with static.scope_guard(static.Scope()):
        exe = static.Executor()
        exe.run(startup)
        _save_both(static, exe, main, img, label, logits, loss, str(tmp_path))
    np.savez(tmp_path / "feeds.npz", **feeds)
    return tmp_path, feeds


def test_static_save_and_save_inference_model_write_files_the_cli_runs(saved_by_static):
    d, feeds = saved_by_static
    img = d / "img.npy"
    np.save(img, feeds["img"])
    r = invoke("run", d / "inf.pdmodel", "--feed", f"img={img}", "--out", d / "o.npz")   # inf.pdiparams beside it
    assert r.exit_code == 0, r.output
    got = npz(d / "o.npz")
    assert list(got) == ["fc_1.tmp_1"]                     # the fetch op: the logits, in eval mode (is_test)
    summary = pybackward.summary(pybackward.load(d / "inf.pdmodel"))
    assert not summary.parameters and [v.name for v in summary.feeds] == ["img"]
    assert len(summary.other_persistables) == 10 and "dropout" in summary.op_types
    r = invoke("append", "--run", d / "m.pdmodel", d / "m_bw.pb")   # m.pdparams and feeds.npz beside it
    assert r.exit_code == 0, r.output
    assert "mean_0.tmp_0: float32[]" in r.stdout and "conv2d_0.w_0@GRAD: float32[4, 3, 3, 3]" in r.stdout
    assert sorted(pf.load_arrays(d / "m.pdparams")) == sorted(v.name for v in summary_params(d / "m.pdmodel"))
    assert pf.load_arrays(d / "m.pdopt") == {}
    r = invoke("run", d / "inf2.pdmodel", "--feeds", d / "feeds.npz", "--out", d / "o2.npz")
    assert r.exit_code == 0 and list(npz(d / "o2.npz")) == ["fc_1.tmp_1", "mean_0.tmp_0"], r.output


def summary_params(path):
    return [v for v in pybackward.load(path).global_block().vars.values() if v.is_parameter]


_PADDLE_SAVES = r"""
import sys
import paddle
from paddle import static
paddle.enable_static()
ns = {}
exec(sys.argv[1], ns)
main, startup, img, label, logits, loss = ns["_build"](static, paddle.nn.functional, paddle.mean, paddle.reshape)
scope = static.Scope()
with static.scope_guard(scope):
    exe = static.Executor(paddle.CPUPlace())
    exe.run(startup)
    ns["_save_both"](static, exe, main, img, label, logits, loss, sys.argv[2])
print("ok")
"""


@pytest.mark.paddle
def test_static_saves_are_paddles_files_byte_for_byte(saved_by_static, tmp_path_factory):
    """The same build saved by Paddle 3.3.1 and by pybackward.static: the same
    bytes, but for the Python stacks Paddle records in op_callstack."""
    import inspect
    from pybackward._proto import framework_pb2 as pb
    ours, _ = saved_by_static
    theirs = tmp_path_factory.mktemp("paddle_saved")
    code = "import os\n" + inspect.getsource(_build) + "\n" + inspect.getsource(_save_both)
    r = run_paddle(_PADDLE_SAVES, code, str(theirs))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]

    def without_callstacks(data: bytes) -> bytes:
        d = pb.ProgramDesc()
        d.ParseFromString(data)
        for b in d.blocks:
            for op in b.ops:
                for a in op.attrs:
                    if a.name == "op_callstack":
                        del a.strings[:]
        return d.SerializeToString()

    for name in ("m.pdparams", "m.pdopt", "inf.pdiparams", "inf2.pdiparams"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    for name in ("m.pdmodel", "inf.pdmodel", "inf2.pdmodel"):
        assert without_callstacks((ours / name).read_bytes()) == without_callstacks((theirs / name).read_bytes()), name


# --------------------------------------------------------------------------
# 7. the README says where its Python runs
# --------------------------------------------------------------------------
def test_readme_python_snippet_says_where_to_run_and_runs_there(tmp_path):
    text = (ROOT / "README.md").read_text()
    m = re.search(r"From Python(.*?)```python\n(.*?)```\n(.*?)\n\n", text, re.S)
    around = " ".join((m.group(1) + m.group(3)).split())
    assert "checkout's root" in around and "namespace package" in around
    assert "module 'pybackward' has no attribute 'load'" in around
    code = m.group(2)
    r = subprocess.run([sys.executable, "-c", code.replace("/tmp/pybackward-out.pb", str(tmp_path / "o.pb"))],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "embedding_0.w_0@GRAD" in r.stdout, r.stderr
    # where the README says it fails, it fails the way the README says (the
    # folder `git clone` makes, next to the script, with this editable install)
    beside = tmp_path / "beside"
    (beside / "pybackward").mkdir(parents=True)
    (beside / "pybackward" / "README.md").write_text("a checkout\n")
    r = subprocess.run([sys.executable, "-c", "import pybackward; pybackward.load"], capture_output=True, text=True,
                       cwd=beside)
    assert r.returncode == 0 or "module 'pybackward' has no attribute 'load'" in r.stderr, r.stderr


# 6 (the lead's part). `diff` of equal programs says so on a terminal; `show --backward-only` heads its
# listing with what it shows, not the whole block's counts.
def _on_a_terminal(args: list[str]) -> str:
    import os
    import pty
    import subprocess
    import sys
    master, slave = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", *args], stdout=slave,
                           stderr=subprocess.PIPE, timeout=120)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    assert r.returncode == 0, r.stderr
    return out.decode()


@pytest.mark.parametrize("a", ["programs/fit_a_line/backward.pb", "pir/mlp_bwd.json"])
def test_diff_of_equal_programs_says_so_on_a_terminal(a):
    from conftest import TESTDATA
    path = str(TESTDATA / a)
    assert "programs are equal" in _on_a_terminal(["diff", path, path])
    r = CliRunner().invoke(cli, ["diff", path, path])                  # piped: nothing, exit 0
    assert r.exit_code == 0 and r.output == ""


def test_show_one_side_heads_the_listing_with_what_it_shows():
    from conftest import PROGRAMS
    r = CliRunner().invoke(cli, ["show", "--backward-only", "--no-vars", str(PROGRAMS / "fit_a_line" / "backward.pb")])
    assert r.exit_code == 0
    head = r.output.splitlines()[0]
    assert head == "block 0 (parent -1): 15 of 16 vars, 6 of 11 ops (backward)", head
    assert len([ln for ln in r.output.splitlines() if ln.startswith("  [")]) == 6
