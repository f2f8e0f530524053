"""Custom op types: grad rules from a backward.yaml-shaped file (`--ops`, `register_ops`)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import pybackward
from pybackward.ops import custom, registry
from conftest import ROOT

EX = ROOT / "examples" / "custom_op"
RULES = EX / "rules.yaml"


@pytest.fixture
def clean_registry():
    """Custom registrations are process-global: undo them after the test."""
    before = set(registry.all_ops())
    yield
    table = registry.all_registered()
    for t in set(table) - before:
        del table[t]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "pybackward_cli.main", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_cli_appends_a_custom_op_with_rules(tmp_path):
    out = tmp_path / "out.pb"
    r = cli("append", "--ops", str(RULES), "--loss", "mean_0.tmp_0", str(EX / "model.pb"), str(out))
    assert r.returncode == 0, r.stderr
    prog = pybackward.load(out)
    g = [op for op in prog.global_block().ops if op.type == "my_scaled_square_grad"]
    assert len(g) == 1
    fwd = next(op for op in prog.global_block().ops if op.type == "my_scaled_square")
    assert g[0].inputs == {"Out@GRAD": [fwd.output("Out")[0] + "@GRAD"], "X": fwd.input("X")}
    assert g[0].outputs == {"X@GRAD": [fwd.input("X")[0] + "@GRAD"]}
    assert g[0].attr("alpha") == pytest.approx(0.5) and g[0].attr("op_role") == 1
    # without the rules the op is unknown, with one clear line
    r = cli("append", "--loss", "mean_0.tmp_0", str(EX / "model.pb"), str(tmp_path / "no.pb"))
    assert r.returncode == 2 and "my_scaled_square" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no.pb").exists()


def test_python_example_runs_and_matches_finite_differences():
    r = subprocess.run([sys.executable, str(EX / "run_example.py")], capture_output=True, text=True, cwd=EX)
    assert r.returncode == 0, r.stderr
    assert "my_scaled_square_grad" in r.stdout and "OFF" not in r.stdout


def test_register_ops_with_kernels_runs_the_gradient(clean_registry):
    sys.path.insert(0, str(EX))
    try:
        from kernels import KERNELS
    finally:
        sys.path.pop(0)
    assert pybackward.register_ops(RULES, kernels=KERNELS) == ["my_scaled_square"]
    rows = pybackward.check_gradients(pybackward.load(EX / "model.pb"), "mean_0.tmp_0",
                                      feed=dict(np.load(EX / "feeds.npz")), params=dict(np.load(EX / "params.npz")))
    assert rows and all(r.ok for r in rows)


BAD = {
    "not_a_mapping": ("- backward_op : g\n  just words\n", r"rules\.yaml:2: expected 'key : value'"),
    "no_forward": ("- backward_op : g\n  args : (Tensor X)\n  output : Tensor(X@GRAD)\n", "has no 'forward'"),
    "bad_signature": ("- backward_op : g\n  forward : f Tensor X\n  args : (Tensor X)\n  output : Tensor(X@GRAD)\n",
                      "forward signature"),
    "unknown_arg": ("- backward_op : g\n  forward : f (Tensor X) -> Tensor(Out)\n  args : (Tensor Z, Tensor Out@GRAD)\n"
                    "  output : Tensor(X@GRAD)\n", "args names 'Z'"),
    "grad_of_output": ("- backward_op : g\n  forward : f (Tensor X) -> Tensor(Out)\n  args : (Tensor Out@GRAD)\n"
                       "  output : Tensor(Out@GRAD)\n", "not the gradient of an input slot"),
    "clash": ("- backward_op : relu_grad2\n  forward : relu (Tensor X) -> Tensor(Out)\n  args : (Tensor Out@GRAD)\n"
              "  output : Tensor(X@GRAD)\n", "'relu' is already known"),
    "empty": ("# nothing\n", "no rules"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_rules_files_are_refused_with_one_line(case, tmp_path, clean_registry):
    text, msg = BAD[case]
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    before = set(registry.all_ops())
    with pytest.raises(custom.RulesFileError, match=msg):
        pybackward.register_ops(path)
    assert set(registry.all_ops()) == before  # nothing half-registered
    r = cli("append", "--ops", str(path), "--loss", "mean_0.tmp_0", str(EX / "model.pb"), str(tmp_path / "o.pb"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o.pb").exists()


def test_paddle_spelling_of_grads_and_json_rules(tmp_path, clean_registry):
    path = tmp_path / "r.json"
    path.write_text('[{"backward_op": "twice_grad", "forward": "twice (Tensor X) -> Tensor(Out)",'
                    ' "args": "(Tensor out_grad)", "output": "Tensor(x_grad)"}]')
    assert pybackward.register_ops(path) == ["twice"]
    spec = registry.get("twice").grad
    assert spec.inputs == ("Out@GRAD",) and spec.outputs == ("X@GRAD",)


def test_a_kernel_for_an_op_the_file_does_not_declare_is_refused(clean_registry):
    with pytest.raises(pybackward.ArgumentError, match="does not declare"):
        pybackward.register_ops(RULES, kernels={"other_op": lambda c: {}})
