"""The command line, through click's runner and as a real subprocess."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import PROGRAMS
from pybackward._proto import framework_pb2 as pb
from pybackward_cli.main import cli

FIT = PROGRAMS / "fit_a_line" / "forward.pb"


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybackward_cli.main", *args],
                          capture_output=True, text=True, cwd=cwd)


def test_version_and_help():
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and "pybackward" in r.output
    for cmd in ([], ["show"], ["append"], ["gradients"], ["convert"]):
        r = CliRunner().invoke(cli, cmd + ["--help"])
        assert r.exit_code == 0 and "Usage" in r.output


def test_show_lists_blocks_vars_and_ops():
    r = CliRunner().invoke(cli, ["show", str(FIT)])
    assert r.exit_code == 0
    assert "block 0 (parent -1): 9 vars, 5 ops" in r.output
    assert "var fc_0.w_0 : fp32[13, 1]  (persistable, is_parameter)" in r.output
    assert "Out=fc_0.tmp_0 = mul(X=x, Y=fc_0.w_0) {op_role=0, x_num_col_dims=1, y_num_col_dims=1}" in r.output
    r = CliRunner().invoke(cli, ["show", "--no-attrs", "--no-vars", "--block", "0", str(FIT)])
    assert "{" not in r.output and "var " not in r.output


def test_convert_round_trips_through_text(tmp_path):
    txt, back = tmp_path / "p.pbtxt", tmp_path / "p.pb"
    assert CliRunner().invoke(cli, ["convert", str(FIT), str(txt)]).exit_code == 0
    assert txt.read_text().startswith("blocks {")
    assert CliRunner().invoke(cli, ["convert", str(txt), str(back)]).exit_code == 0
    assert back.read_bytes() == FIT.read_bytes()


def test_append_writes_output_and_prints_pairs(tmp_path):
    out = tmp_path / "out.pb"
    r = run("append", "--loss", "mean_0.tmp_0", "--json", str(FIT), str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["params_grads"] == [["fc_0.b_0", "fc_0.b_0@GRAD"], ["fc_0.w_0", "fc_0.w_0@GRAD"]]
    assert out.read_bytes() == (PROGRAMS / "fit_a_line" / "backward.pb").read_bytes()


def test_append_in_place_keeps_no_backup_after_success(tmp_path):
    f = tmp_path / "m.pb"
    f.write_bytes(FIT.read_bytes())
    r = run("append", "--loss", "mean_0.tmp_0", "--in-place", str(f))
    assert r.returncode == 0, r.stderr
    assert f.read_bytes() == (PROGRAMS / "fit_a_line" / "backward.pb").read_bytes()
    assert not (tmp_path / "m.pb~").exists()


def _foreign_message() -> bytes:
    v = pb.VarDesc(name="x")
    v.type.type = pb.VarType.DENSE_TENSOR
    return pb.OpProto(type="relu", comment="c").SerializeToString()


def _program_with(edit) -> bytes:
    d = pb.ProgramDesc()
    d.ParseFromString(FIT.read_bytes())
    edit(d)
    return d.SerializeToString()


def _cycle(d):
    d.blocks.add(idx=1, parent_idx=2)
    d.blocks.add(idx=2, parent_idx=1)


def _bad_sub_block(d):
    op = d.blocks[0].ops[0]
    op.attrs.add(name="sub_block", type=pb.AttrType.BLOCK, block_idx=9)


def _int_loss(d):
    for v in d.blocks[0].vars:
        if v.name == "mean_0.tmp_0":
            v.type.dense_tensor.tensor.data_type = pb.VarType.INT64


def _undeclared(d):
    d.blocks[0].ops[0].inputs[0].arguments[0] = "ghost"


FIT_BYTES = FIT.read_bytes()
random.seed(7)
#: (name, file bytes, extra args, expected message fragment). Each: exit 2, one
#: line on stderr, no traceback, no output file, the input untouched.
BAD_INPUTS = [
    ("empty file", b"", [], "empty file"),
    ("random bytes", bytes(random.randrange(256) for _ in range(300)), [], "not a valid ProgramDesc"),
    ("truncated program", FIT_BYTES[: len(FIT_BYTES) // 2], [], "truncated or corrupt"),
    ("truncated at byte 7", FIT_BYTES[:7], [], "ProgramDesc"),
    ("a PNG", b"\x89PNG\r\n\x1a\n" + bytes(40), [], "PNG"),
    ("another message", _foreign_message(), [], "ProgramDesc"),
    ("parent cycle", _program_with(_cycle), [], "parent blocks form a cycle"),
    ("sub_block out of range", _program_with(_bad_sub_block), [], "attr 'sub_block' names block 9"),
    ("undeclared var", _program_with(_undeclared), [], "var 'ghost'"),
    ("loss not in program", FIT_BYTES, ["--loss", "nope"], "no such variable"),
    ("int loss", _program_with(_int_loss), ["--loss", "mean_0.tmp_0"], "must be a floating-point tensor, not INT64"),
    ("loss produced by no op", FIT_BYTES, ["--loss", "fc_0.w_0"], "produced by no op"),
    ("unknown --no-grad", FIT_BYTES, ["--loss", "mean_0.tmp_0", "--no-grad", "zzz"], "no such variable"),
]


@pytest.mark.parametrize("name,data,args,fragment", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line(tmp_path, name, data, args, fragment):
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(data)
    if args:
        r = run("append", *args, str(src), str(out))
    else:
        r = run("show", str(src))
        r2 = run("append", "--loss", "mean_0.tmp_0", str(src), str(out))
        assert r2.returncode == 2 and "Traceback" not in r2.stderr
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines
    assert str(src) in lines[0] or "nope" in lines[0] or "zzz" in lines[0]
    assert not out.exists()
    assert src.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pb"]


def test_missing_file_and_directory(tmp_path):
    r = run("show", str(tmp_path / "none.pb"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = run("show", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_run_prints_and_writes_fetched_values(tmp_path):
    import numpy as np
    d = PROGRAMS / "fit_a_line"
    out = tmp_path / "r.npz"
    r = run("run", str(d / "backward.pb"), "--params", str(d / "params.npz"), "--feeds", str(d / "feeds.npz"),
            "--fetch", "mean_0.tmp_0", "--fetch", "fc_0.w_0@GRAD", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("mean_0.tmp_0: float32[] mean=")
    got = np.load(out)
    want = np.load(d / "grads.npz")
    np.testing.assert_allclose(got["fc_0.w_0@GRAD"], want["fc_0.w_0@GRAD"], rtol=1e-5, atol=1e-6)


def test_run_missing_feed_is_a_clear_error(tmp_path):
    import shutil
    alone = tmp_path / "forward.pb"       # no params.npz / feeds.npz beside it
    shutil.copy(FIT, alone)
    r = run("run", str(alone), "--fetch", "mean_0.tmp_0", "--params", str(FIT.parent / "params.npz"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "block 0, op 0 (mul), var 'x': input 'X' has no value" in r.stderr


def test_append_run_prints_gradients():
    r = run("append", "--loss", "mean_0.tmp_0", "--run", str(FIT), os.devnull)
    assert r.returncode == 0, r.stderr
    assert "fc_0.w_0@GRAD: float32[13, 1]" in r.stdout


def test_check_passes_and_fails(tmp_path):
    d = PROGRAMS / "fit_a_line"
    args = ["check", str(FIT), "--loss", "mean_0.tmp_0", "--params", str(d / "params.npz"),
            "--feeds", str(d / "feeds.npz")]
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert {row["var"] for row in rows} == {"fc_0.w_0", "fc_0.b_0"} and all(row["ok"] for row in rows)
    r = run(*args, "--rtol", "0", "--atol", "0", "--eps", "1e-2")
    assert r.returncode == 1 and "gradient check failed" in r.stderr


def test_ops_lists_the_registry():
    from pybackward.ops import registry
    r = run("ops", "--json")
    assert r.returncode == 0
    rows = {row["type"]: row for row in json.loads(r.stdout)}
    assert set(rows) == set(registry.all_ops())
    assert rows["mul"]["grad"] == "mul_grad" and rows["mul"]["differentiable"] == ["X", "Y"]
    assert rows["mul_grad"]["grad_of"] == "mul" and rows["fill_constant"]["grad"] is None


def test_ops_missing_names_unsupported_types(tmp_path):
    d = pb.ProgramDesc()
    d.ParseFromString(FIT_BYTES)
    d.blocks[0].ops[0].type = "dequantize"           # Paddle's op type, no kernel here
    f = tmp_path / "p.pb"
    f.write_bytes(d.SerializeToString())
    r = run("ops", "--missing", str(f))
    assert r.returncode == 1 and "dequantize" in r.stdout and "no kernel" in r.stdout
    d.blocks[0].ops[0].type = "my_custom_op"         # no op type of Paddle's
    f.write_bytes(d.SerializeToString())
    r = run("ops", "--missing", str(f))
    assert r.returncode == 1 and "my_custom_op" in r.stdout and "unknown op type" in r.stdout
    assert run("ops", "--missing", str(FIT)).returncode == 0


def test_ops_coverage_checks_every_paddle_op_type():
    r = run("ops", "--coverage", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert len(data["ops"]) == 764
    t = data["totals"]
    assert t["with_maker"] == 384 and t["equal"] == 384 and t["differs"] == 0
    assert t["empty"] + t["none"] + t["sub_block"] == 380
    rows = {row["type"]: row for row in data["ops"]}
    assert rows["matmul_v2"]["grad"] == "equal" and rows["matmul_v2"]["kernel"]
    assert rows["shape"]["grad"] == "empty" and rows["dequantize"]["grad"] == "none"
    assert rows["relu"]["paddle_cpu"] and not rows["flash_attn"]["paddle_cpu"]
    assert rows["sum"]["grad_ops"] == ["scale"] and rows["split"]["grad_kernel"] == "yes"
    assert t["cpu"] == sum(row["paddle_cpu"] for row in data["ops"]) > 500
    assert t["cpu_with_maker"] == 324   # 339 registered, 15 of them cannot run (gen_cpu_kernels.py says why)
    # issue #22: every op type Paddle runs on CPU has a kernel here, forward and (differentiable ones) backward
    assert t["cpu_kernels"] == t["cpu"] and t["cpu_grad_kernels"] == t["cpu_with_maker"]
    r = run("ops", "--coverage")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("764 op types: 384 with a grad maker, 384 equal")


def test_append_with_checkpoints_matches_the_api(tmp_path):
    import pybackward
    src = PROGRAMS / "recompute_mlp" / "forward.pb"
    out = tmp_path / "rc.pb"
    spec = json.loads((PROGRAMS / "recompute_mlp" / "case.json").read_text())["variants"]["default"]
    names = ",".join(spec["checkpoints"])
    r = run("append", "--loss", spec["targets"][0], "--checkpoints", names, "--json", str(src), str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["checkpoints"] == spec["checkpoint_names"]
    prog = pybackward.load(src)
    pybackward.append_backward(spec["targets"][0], program=prog, checkpoints=list(spec["checkpoints"]))
    assert out.read_bytes() == pybackward.dumps(prog)
    r = run("append", "--loss", spec["targets"][0], "--checkpoints", "auto", str(src), str(tmp_path / "a.pb"))
    assert r.returncode == 0, r.stderr
    assert "estimated peak activation memory" in r.stderr
