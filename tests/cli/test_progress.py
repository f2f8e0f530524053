"""The progress line (cli/progress.py) and --quiet / --pairs on the commands."""
from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner

from pybackward_cli.main import cli
from pybackward_cli.progress import Progress

PROGRAMS = Path(__file__).resolve().parents[2] / "testdata" / "programs"
FIT = PROGRAMS / "fit_a_line" / "forward.pb"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_progress_waits_a_second_overwrites_one_line_and_clears_it():
    out, clock = FakeTTY(), FakeClock()
    with Progress("check", 3, stream=out, clock=clock) as p:
        p.update(0, "a_long_name")
        assert out.getvalue() == ""                       # under a second: nothing
        clock.t += 1.5
        p.update(1, "a_long_name")
        assert out.getvalue() == "\rcheck 1/3 a_long_name"
        p.update(2, "b")                                  # shorter: the rest of the old line blanked
        assert out.getvalue().split("\r")[-1] == "check 2/3 b" + " " * 10
        assert "\n" not in out.getvalue()
    assert out.getvalue().endswith("\r" + " " * len("check 2/3 b") + "\r")   # cleared at the end


def test_progress_silent_when_not_a_tty_or_quiet():
    clock = FakeClock()
    for stream, quiet in ((io.StringIO(), False), (FakeTTY(), True)):
        with Progress("append", 2, stream=stream, quiet=quiet, clock=clock) as p:
            clock.t += 5
            p.update(1, "x")
        assert stream.getvalue() == ""


def test_append_prints_one_summary_line_and_pairs_only_on_request(tmp_path):
    r = CliRunner().invoke(cli, ["append", "--loss", "mean_0.tmp_0", str(FIT), str(tmp_path / "a.pb")])
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr == (f"wrote {tmp_path / 'a.pb'} (loss mean_0.tmp_0: 6 ops appended, "
                        "2 parameter gradients)\n")               # stderr not a TTY: no progress either
    r = CliRunner().invoke(cli, ["append", "--loss", "mean_0.tmp_0", "--pairs", str(FIT), str(tmp_path / "a.pb")])
    assert r.stdout == "fc_0.b_0 -> fc_0.b_0@GRAD\nfc_0.w_0 -> fc_0.w_0@GRAD\n"
    r = CliRunner().invoke(cli, ["append", "--loss", "mean_0.tmp_0", "-q", str(FIT), str(tmp_path / "a.pb")])
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""
    r = CliRunner().invoke(cli, ["append", "--loss", "mean_0.tmp_0", "-q", str(FIT), "--out-dir", str(tmp_path)])
    assert r.exit_code == 0 and r.stderr == "" and r.stdout == f"{FIT} -> {tmp_path / 'forward.pb'}\n"


def test_quiet_keeps_errors_and_silences_summaries(tmp_path):
    r = CliRunner().invoke(cli, ["append", "--loss", "nope", "-q", str(FIT), str(tmp_path / "a.pb")])
    assert r.exit_code == 2 and r.stderr.startswith("error: ")
    r = CliRunner().invoke(cli, ["gradients", "--target", "mean_0.tmp_0", "--input", "fc_0.w_0", "-q",
                                 str(FIT), str(tmp_path / "g.pb")])
    assert r.exit_code == 0 and r.stdout == "fc_0.w_0 -> fc_0.w_0@GRAD\n" and r.stderr == ""


def test_run_and_check_read_the_values_beside_the_program(tmp_path):
    import json
    import shutil
    import numpy as np
    for name in ("backward.pb", "forward.pb", "params.npz", "feeds.npz"):
        shutil.copy(PROGRAMS / "fit_a_line" / name, tmp_path / name)
    prog = tmp_path / "backward.pb"
    r = CliRunner().invoke(cli, ["run", str(prog), "--fetch", "fc_0.w_0@GRAD", "--json"])
    assert r.exit_code == 0, r.output
    want = np.load(PROGRAMS / "fit_a_line" / "grads.npz")["fc_0.w_0@GRAD"]
    got = np.asarray(json.loads(r.stdout)["fetch"]["fc_0.w_0@GRAD"]["values"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    r = CliRunner().invoke(cli, ["check", str(tmp_path / "forward.pb"), "--loss", "mean_0.tmp_0", "-q"])
    assert r.exit_code == 0, r.output
    (tmp_path / "params.npz").unlink()                      # nothing beside: the error says what to pass
    r = CliRunner().invoke(cli, ["run", str(prog), "--fetch", "fc_0.w_0@GRAD"])
    assert r.exit_code == 2 and "--params" in r.stderr and "params.npz" in r.stderr, r.stderr


def test_run_draws_progress_per_op_through_the_interpreter():
    import numpy as np
    import pybackward
    from pybackward.interpreter.executor import Executor, Scope
    seen = []
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "backward.pb")
    scope = Scope()
    for k, v in np.load(PROGRAMS / "fit_a_line" / "params.npz").items():
        scope.set(k, v)
    Executor(progress=lambda done, total, op: seen.append((done, total, op))).run(
        prog, feed=dict(np.load(PROGRAMS / "fit_a_line" / "feeds.npz")), scope=scope)
    n = len(prog.global_block().ops)
    assert [d for d, _, _ in seen] == list(range(n)) and {t for _, t, _ in seen} == {n}
    assert [o for _, _, o in seen] == [op.type for op in prog.global_block().ops]


def test_progress_redraws_at_most_every_min_interval():
    out, clock = FakeTTY(), FakeClock()
    with Progress("run: op", stream=out, clock=clock, min_interval=0.1) as p:
        clock.t += 2
        for i in range(50):
            p.update(i, "mul", total=50)
            clock.t += 0.01
    assert out.getvalue().count("\r") - 2 == 5              # 0.5 s of updates: 5 redraws, then cleared


def test_convert_and_dot_speak_json(tmp_path):
    import json
    r = CliRunner().invoke(cli, ["convert", str(FIT), str(tmp_path / "p.pbtxt"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "program" and doc["blocks"] == 1 and doc["ops"] > 0 and doc["output"].endswith("p.pbtxt")
    r = CliRunner().invoke(cli, ["convert", str(PROGRAMS / "fit_a_line" / "params.npz"),
                                 str(tmp_path / "p.pdparams"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["arrays"]["fc_0.w_0"] == {"dtype": "float32", "shape": [13, 1]}
    r = CliRunner().invoke(cli, ["dot", str(FIT), "--json"])
    doc = json.loads(r.stdout)
    assert doc["dot"].startswith("digraph") and doc["nodes"] > 0 and doc["output"] is None
    r = CliRunner().invoke(cli, ["dot", str(FIT), "-o", str(tmp_path / "p.html"), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["output"] == str(tmp_path / "p.html")
    assert (tmp_path / "p.html").exists()
