"""`show --format paddle` / pybackward.views.paddle_text: the text Paddle's print(program) gives.

The recorded texts (`testdata/paddle_text/`, by `testdata/gen_paddle_text.py`
with Paddle 3.3.1) are compared exactly, without Paddle; the live test has
Paddle print programs pybackward wrote (its own backward section, odd var
types and attr types) and compares again.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from pybackward.views.paddle_text import extra_attrs, program_to_paddle_text
from pybackward_cli.main import cli

from conftest import PROGRAMS, TESTDATA, run_paddle

RECORDED = sorted((TESTDATA / "paddle_text").glob("*/*.txt"))


def _source(txt: Path) -> Path:
    return PROGRAMS / txt.parent.name / (txt.stem + ".pb")


def test_recordings_cover_control_flow_and_both_sides():
    cases = {p.parent.name for p in RECORDED}
    assert {"while_loop", "cond_block", "nested_cond", "while_array", "fit_a_line"} <= cases
    # Every golden program is recorded (run testdata/gen_paddle_text.py CASE for a new one).
    assert cases == {p.name for p in PROGRAMS.iterdir() if (p / "forward.pb").exists()}
    assert {p.stem for p in RECORDED} == {"startup", "forward", "backward"}
    assert len(RECORDED) >= 100


@pytest.mark.parametrize("txt", RECORDED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_matches_what_paddle_printed(txt):
    assert program_to_paddle_text(pybackward.load(_source(txt))) == txt.read_text()


def test_cli_prints_it_as_print_does():
    txt = TESTDATA / "paddle_text" / "cond_block" / "backward.txt"
    r = CliRunner().invoke(cli, ["show", "--format", "paddle", str(_source(txt))])
    assert r.exit_code == 0, r.output
    assert r.output == txt.read_text() + "\n"          # print() adds one newline
    r = CliRunner().invoke(cli, ["show", "--format", "paddle", "--block", "1", str(_source(txt))])
    assert r.exit_code == 0 and r.output.startswith("{ // block_idx:1  parent_idx:0")
    assert r.output.count("{ // block_idx") == 1
    r = CliRunner().invoke(cli, ["show", "--format", "paddle", "--backward-only", str(_source(txt))])
    assert r.exit_code == 2 and "takes only --block" in r.output


def test_extra_attrs_hidden_for_grad_ops_too():
    assert "use_mkldnn" in extra_attrs("mul") and extra_attrs("mul") == extra_attrs("mul_grad")
    assert extra_attrs("not_an_op_type") == frozenset()


def _odd_program(path: Path) -> None:
    """A program with pybackward's backward section, a feed var, a tensor array,
    a frozen parameter, and attrs of many types."""
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb")
    prog.block(0).var("fc_0.w_0").desc.stop_gradient = True
    pybackward.append_backward("mean_0.tmp_0", program=prog)
    b = prog.block(0).desc
    feed = b.vars.add(name="feed")
    feed.type.type = pybackward.base.dtypes.VarType.FEED_MINIBATCH
    arr = b.vars.add(name="arr 'q'", persistable=True)
    arr.type.type = pybackward.base.dtypes.VarType.DENSE_TENSOR_ARRAY
    arr.type.tensor_array.tensor.data_type = pybackward.base.dtypes.VarType.INT64
    prog.sync()
    op = prog.block(0).ops[-1]
    from pybackward.base import attrs
    op.set_attr("z_floats", [0.1, -2.5, 1e-8])
    op.set_attr("z_float", 0.3)
    op.set_attr("z_f64", attrs.Float64(0.3))
    op.set_attr("z_strs", ["a'b", 'c"d', ""])
    op.set_attr("z_long", attrs.Long(2 ** 40))
    op.set_attr("z_bools", [True, False])
    op.set_attr("a_str", "x y")
    pybackward.save(prog, path)


PRINT = r"""
import sys, paddle
paddle.enable_static()
sys.stdout.write(str(paddle.static.Program.parse_from_string(open(sys.argv[1], "rb").read())))
"""


@pytest.mark.paddle
def test_live_paddle_prints_the_same(tmp_path):
    paths = [tmp_path / "odd.pb"]
    _odd_program(paths[0])
    for case in ("while_loop", "nested_cond", "transformer_encoder"):
        prog = pybackward.load(PROGRAMS / case / "forward.pb")
        loss = json.loads((PROGRAMS / case / "case.json").read_text())["loss"]
        pybackward.append_backward(loss, program=prog)
        paths.append(tmp_path / f"{case}.pb")
        pybackward.save(prog, paths[-1])
    for p in paths:
        r = run_paddle(PRINT, str(p))
        assert r.returncode == 0, r.stderr[-2000:]
        assert program_to_paddle_text(pybackward.load(p)) == r.stdout, p.name
