"""save / save_combine / load / load_combine (ops/io/file_io.py) against the files Paddle 3.3.1 wrote and read
(testdata/file_ops/gen_file_ops.py), and the rule that a program touches files only where allowed."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.executor import Executor, Scope
from pybackward_cli.main import cli
from conftest import TESTDATA

D = TESTDATA / "file_ops"
VALUES = dict(np.load(D / "values.npz"))


def test_save_ops_write_the_bytes_paddle_writes(tmp_path):
    prog = pybackward.load(D / "save.pb")
    Executor(files=tmp_path).run(prog, feed={"x": VALUES["x"]}, scope=Scope())
    for name in ("y.t", "xy.comb"):
        assert (tmp_path / "out" / name).read_bytes() == (D / "paddle_out" / name).read_bytes(), name


def test_load_ops_read_paddles_files_and_compute_its_value(tmp_path):
    shutil.copytree(D / "in", tmp_path / "in")
    (z,) = Executor(files=tmp_path).run(pybackward.load(D / "load.pb"), fetch_list=["z"], scope=Scope())
    np.testing.assert_array_equal(z, VALUES["z"])


def test_without_permission_no_file_is_touched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExecutionError, match=r"op 2 \(save\): op save reads or writes the file 'out/y.t': "
                                             r"a program touches files only when allowed to"):
        Executor().run(pybackward.load(D / "save.pb"), feed={"x": VALUES["x"]}, scope=Scope())
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("path", ["../escape.t", "/etc/passwd"])
def test_paths_outside_the_directory_are_refused(tmp_path, path):
    from pybackward._proto import framework_pb2 as pb
    d = pb.ProgramDesc()
    d.ParseFromString((D / "load.pb").read_bytes())
    for a in d.blocks[0].ops[0].attrs:
        if a.name == "file_path":
            a.s = path
    (tmp_path / "files").mkdir()
    with pytest.raises(ExecutionError, match="is outside the directory the run may use"):
        Executor(files=tmp_path / "files").run(pybackward.loads(d.SerializeToString()), scope=Scope())


def test_run_files_option(tmp_path):
    shutil.copytree(D / "in", tmp_path / "in")
    r = CliRunner().invoke(cli, ["run", str(D / "load.pb"), "--fetch", "z", "--files", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["run", str(D / "load.pb"), "--fetch", "z"])
    assert r.exit_code == 2 and "--files DIR" in r.stderr and "Traceback" not in r.stderr
