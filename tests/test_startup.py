"""Start-up guard (issue #37): commands that run no kernel import neither NumPy nor an op family.

Every command pays for what it imports before it does anything: NumPy alone
is ~0.1 s, the op families (NumPy kernels) were ~0.3 s, against a floor of
~0.04 s for Python + protobuf + parse + serialise of a small model. `append`,
`show`, `--help` and the other program commands need neither: they read the
op index (pybackward/data/op_index.json) and import an op's family only when
they meet an op whose grad rule is code. Each command runs in a fresh process,
which reports the modules it imported; benchmarks/bench_startup.py times them.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LENET = ROOT / "testdata" / "models" / "lenet"

#: Runs the CLI in this process, then prints the modules it imported.
PROBE = r"""
import json, sys
sys.argv = ["pybackward"] + sys.argv[1:]
from pybackward_cli.main import main
try:
    main(skip_teardown=False)
except SystemExit as e:
    code = e.code
else:
    code = 0
heavy = sorted(m for m in sys.modules
               if m == "numpy" or (m.startswith("pybackward.ops.") and m.count(".") >= 3))
legacy = sorted(m for m in sys.modules if m in ("google.protobuf", "pybackward.legacy", "pybackward.backward.api"))
commands = sorted(m for m in sys.modules if m.startswith("pybackward_cli.cmd_"))
lazy = sorted(m for m in sys.modules if m in LAZY)
print(json.dumps({"code": code, "heavy": heavy, "legacy": legacy, "commands": commands, "lazy": lazy}),
      file=sys.stderr)
"""

#: Modules `append` of a legacy program imports only on the path that needs them (issue #37):
#: recompute and what it imports (the checkpoint chooser, the liveness model, logging), with
#: --checkpoints; views.summary, for the note on a result without parameter gradients.
#: (google.protobuf.text_format is not among them: the generated framework_pb2 imports it
#: through protobuf's own modules, for binary programs too.)
LAZY_ON_APPEND = ["logging", "pybackward.analysis.checkpoint_choice", "pybackward.analysis.liveness",
                  "pybackward.backward.recompute", "pybackward.views.summary"]
PROBE = f"LAZY = {LAZY_ON_APPEND!r}\n" + PROBE


def _imports(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    return json.loads(r.stderr.strip().splitlines()[-1])


def _program_commands(tmp: Path) -> dict[str, list[str]]:
    fwd, bwd = str(LENET / "forward.pb"), str(LENET / "backward.pb")
    return {
        "--help": ["--help"],
        "show": ["show", fwd],
        "show --summary": ["show", "--summary", fwd],
        "append": ["append", "--loss", "mean_0.tmp_0", fwd, str(tmp / "out.pb")],
        "gradients": ["gradients", "--target", "mean_0.tmp_0", "--input", "conv2d_0.w_0", fwd,
                      str(tmp / "grads.pb")],
        "diff": ["diff", fwd, bwd],
        "dot": ["dot", fwd, "-o", str(tmp / "g.dot")],
        "ops": ["ops"],
        "ops --missing": ["ops", "--missing", fwd],
        "convert (text)": ["convert", fwd, str(tmp / "f.pbtxt")],
    }


#: Commands that still import NumPy, each with why; strict: the day one is fixed, its entry must go.
#: (`dot` was one until views/graph.py folded repeated op runs without NumPy arrays.)
KNOWN_GAPS: dict[str, str] = {}


@pytest.mark.parametrize("name", list(_program_commands(Path("."))))
def test_program_commands_import_no_numpy_and_no_kernel(name, tmp_path, request):
    if name in KNOWN_GAPS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_GAPS[name], strict=True))
    out = _imports(*_program_commands(tmp_path)[name])
    assert out["code"] in (0, 1, None), out       # diff exits 1: the programs differ
    assert out["heavy"] == [], f"`pybackward {name}` imported {out['heavy']}"


PIR = ROOT / "testdata" / "pir_backward"


def _pir_commands(tmp: Path) -> dict[str, list[str]]:
    """The same commands on a PIR program (Paddle 3.x's .json): LeNet rebuilt by Paddle in PIR mode."""
    fwd = str(PIR / "lenet.json")
    return {
        "show": ["show", fwd],
        "show --summary": ["show", "--summary", fwd],
        "append": ["append", fwd, str(tmp / "out.json")],
        "gradients": ["gradients", "--target", "%37", "--input", "conv2d_0.w_0", fwd, str(tmp / "grads.json")],
        "convert": ["convert", fwd, str(tmp / "out.readable.json")],
        "diff": ["diff", fwd, str(PIR / "lenet.bwd.json")],
    }


@pytest.mark.parametrize("name", list(_pir_commands(Path("."))))
def test_pir_commands_import_no_numpy_no_kernel_and_no_legacy_ir(name, tmp_path):
    """On a PIR program the program commands need neither NumPy and the op families, nor the
    legacy IR (protobuf, the legacy program model, the legacy pass: ~0.1 s of start-up each)."""
    out = _imports(*_pir_commands(tmp_path)[name])
    assert out["code"] in (0, 1, None), out       # diff exits 1: the programs differ
    assert out["heavy"] == [], f"`pybackward {name}` on a PIR program imported {out['heavy']}"
    if name not in PIR_LEGACY_IMPORTS:
        assert out["legacy"] == [], f"`pybackward {name}` on a PIR program imported {out['legacy']}"


#: PIR commands that still import the legacy IR, and why (NumPy and the families they do not import).
PIR_LEGACY_IMPORTS = {"diff": "views/diff.py imports legacy.io at the top (another engineer's file)"}


def test_a_command_imports_its_own_module_only(tmp_path):
    """The CLI imports a command's module when the command is looked up (cli/main.py's
    LazyCommands): `append` does not pay for the other commands' modules and options; `--help`,
    which lists every command, imports them all."""
    for args in (_program_commands(tmp_path)["append"], _pir_commands(tmp_path)["append"]):
        out = _imports(*args)
        assert out["code"] in (0, None) and out["commands"] == ["pybackward_cli.cmd_append"], out
    out = _imports(*_program_commands(tmp_path)["dot"])
    assert out["commands"] == ["pybackward_cli.cmd_dot"], out
    out = _imports("--help")
    assert len(out["commands"]) == 9, out      # cmd_append holds append and gradients


def test_the_probe_sees_a_pir_run_import_kernels(tmp_path):
    """The PIR guard is not vacuous: `run` on the PIR program executes kernels, and `append` on a
    legacy program imports the legacy IR."""
    out = _imports("run", str(PIR / "lenet.json"), "--feeds", str(PIR / "lenet.feeds.npz"),
                   "--params", str(PIR / "lenet.pdparams"))
    assert out["code"] in (0, None), out
    assert "numpy" in out["heavy"] and "pybackward.ops.nn.conv" in out["heavy"]
    out = _imports(*_program_commands(tmp_path)["append"])
    assert "google.protobuf" in out["legacy"] and "pybackward.legacy" in out["legacy"]


def test_the_probe_sees_a_kernel_command_import_them(tmp_path):
    """The guard is not vacuous: `run` executes kernels, and the probe sees NumPy and the families."""
    out = _imports("run", str(LENET / "forward.pb"))
    assert out["code"] in (0, None), out
    assert "numpy" in out["heavy"] and "pybackward.ops.nn.conv" in out["heavy"]


def test_append_of_a_binary_program_imports_only_what_it_runs(tmp_path):
    """`append` (no checkpoints, parameter gradients found) of a binary legacy program imports
    none of LAZY_ON_APPEND; with --checkpoints it imports recompute (the probe is not vacuous)."""
    out = _imports(*_program_commands(tmp_path)["append"])
    assert out["code"] in (0, None) and out["lazy"] == [], out
    fwd = str(LENET / "forward.pb")
    out = _imports("append", "--loss", "mean_0.tmp_0", "--checkpoints", "conv2d_0.tmp_0", fwd,
                   str(tmp_path / "ck.pb"))
    assert out["code"] in (0, None), out
    assert {"pybackward.backward.recompute", "pybackward.analysis.checkpoint_choice"} <= set(out["lazy"])
    assert "pybackward.backward.recompute" not in _imports("--help")["lazy"]


def test_append_output_is_unchanged(tmp_path):
    """The lazy registry gives the same bytes as the golden file."""
    out = tmp_path / "out.pb"
    r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "append", "--loss", "mean_0.tmp_0",
                        str(LENET / "forward.pb"), str(out)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (LENET / "backward.pb").read_bytes()


def test_import_pybackward_is_light_and_complete():
    """`import pybackward` imports no NumPy and no family, yet every public name is there."""
    code = ("import json, sys, pybackward\n"
            "light = 'numpy' not in sys.modules and not any(m.count('.') >= 3 and m.startswith('pybackward.ops.')"
            " for m in sys.modules)\n"
            "missing = [n for n in pybackward.__all__ if getattr(pybackward, n, None) is None]\n"
            "print(json.dumps([light, missing, callable(pybackward.memory), pybackward.pir.__name__]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [True, [], True, "pybackward.pir"]


def test_bench_startup_runs(tmp_path):
    """benchmarks/bench_startup.py still runs (one round) and reports every row and both targets."""
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_startup.py"), "--repeat", "1",
                        "--json", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["results"]
    assert {"floor", "pybackward --help", "pybackward append", "pybackward run"} <= set(rows)
    assert "--help" in r.stdout.splitlines()[-1] and "3x the floor" in r.stdout.splitlines()[-1]
