"""Errors running PIR programs (issue #33, item 4): every missing feed and parameter named in one
line with the option that gives it, through the API and the CLI (`run`, `check`); an op without
a kernel named with whether Paddle has a CPU kernel for it."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import TESTDATA
from pybackward import pir
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.pir_executor import PirExecutor

PIR = TESTDATA / "pir"
VALUES = TESTDATA / "pir_values"


class _Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(*args) -> _Result:
    """The command in-process (CliRunner), in the current directory."""
    from click.testing import CliRunner
    from pybackward_cli.main import cli as main
    r = CliRunner().invoke(main, [str(a) for a in args])
    return _Result(r.exit_code, r.stdout, r.stderr)


@pytest.fixture
def partial(tmp_path, monkeypatch):
    """mlp_bwd.json alone in a directory (no values beside it), with some of its values; the
    test runs there."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(PIR / "mlp_bwd.json", tmp_path / "mlp_bwd.json")
    params = dict(np.load(VALUES / "mlp_bwd.params.npz"))
    feeds = dict(np.load(VALUES / "mlp_bwd.feeds.npz"))
    np.savez(tmp_path / "p.npz", **{k: v for k, v in params.items() if k not in ("fc_2.w_0", "fc_3.b_0")})
    np.savez(tmp_path / "f.npz", x=feeds["x"])
    np.save(tmp_path / "y.npy", feeds["y"])
    return tmp_path


@pytest.mark.parametrize("command", ["run", "check"])
def test_every_missing_feed_and_parameter_is_named_with_its_option(command, partial):
    r = cli(command, "mlp_bwd.json", "--params", "p.npz", "--feeds", "f.npz")
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "mlp_bwd.json: missing feeds: 'y' (give them with feeds= / --feeds FILE.npz / --feed NAME=FILE.npy)" in err
    assert "missing parameters: 'fc_3.b_0', 'fc_2.w_0' (give them with params= / --params FILE" in err


def test_nothing_given_names_everything(partial):
    r = cli("run", "mlp_bwd.json")
    assert r.returncode == 2
    assert "missing feeds: 'x', 'y'" in r.stderr
    assert "missing parameters: 'fc_3.b_0', 'fc_3.w_0', 'fc_2.b_0', 'fc_2.w_0'" in r.stderr


def test_the_options_named_do_give_them(partial):
    r = cli("run", "mlp_bwd.json", "--params", VALUES / "mlp_bwd.params.npz", "--feeds", "f.npz",
            "--feed", "y=y.npy")
    assert r.returncode == 0, r.stderr
    assert "fc_2.w_0@GRAD" in r.stdout


def _one_op(name: str) -> pir.Program:
    from pybackward.pir.model import Operation, make_value_ids
    from pybackward.pir.types import Attr, dense
    p = pir.Program()
    p.source = "one.json"
    x = p.block.append(Operation("pd_op.data", [], [dense("float32", [2, 3])], {
        "name": Attr.str_("x"), "shape": Attr.int_array([2, 3]), "dtype": Attr.dtype("float32")})).results[0]
    p.block.append(Operation(name, [x], [dense("float32", [2, 3])], {}))
    make_value_ids(p)
    return p


@pytest.mark.parametrize("name,words", [
    ("pd_op.flash_attn", "Paddle 3.3.1 has no CPU kernel for it either"),
    ("pd_op.rms_norm", "Paddle 3.3.1 has no CPU kernel for it either"),
    ("pd_op.sqrt_double_grad", "Paddle 3.3.1 has a CPU kernel for it"),
    ("pd_op.no_such_op", "Paddle 3.3.1 registers no op of that name"),
])
def test_an_op_without_a_kernel_says_whether_paddle_runs_it_on_cpu(name, words):
    with pytest.raises(ExecutionError) as e:
        PirExecutor().run(_one_op(name), {"x": np.ones((2, 3), np.float32)}, {}, fetch=[])
    msg = str(e.value)
    assert f"no kernel for PIR op '{name}'" in msg and words in msg and "\n" not in msg, msg


@pytest.mark.slow
def test_the_real_command_says_it_on_one_stderr_line(partial):
    r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "run", "mlp_bwd.json"], capture_output=True,
                       text=True, cwd=partial, timeout=120)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "missing feeds: 'x', 'y'" in r.stderr
