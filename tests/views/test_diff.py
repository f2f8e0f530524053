"""`pybackward diff` and pybackward.views.diff: alignment, attrs ignored, output, exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from click.testing import CliRunner

import pybackward
from conftest import PROGRAMS
from pybackward.views.diff import DEFAULT_IGNORED_ATTRS, align_ops, diff_programs, op_signature
from pybackward_cli.main import cli

FIT_BWD = PROGRAMS / "fit_a_line" / "backward.pb"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybackward_cli.main", *args], capture_output=True, text=True)


def _small_change(tmp_path):
    """fit_a_line's backward with the loss-grad fill value changed and a scale op added."""
    prog = pybackward.load(FIT_BWD)
    blk = prog.global_block()
    blk.ops[5].set_attr("value", 2.0)
    blk.append_op("scale", {"X": ["fc_0.w_0@GRAD"]}, {"Out": ["fc_0.w_0@GRAD"]}, {"scale": 0.5, "op_role": 1})
    out = tmp_path / "changed.pb"
    pybackward.save(prog, out)
    return out


EXPECTED = """\
--- {a}
+++ {b}
@@ block 0 ops -3,5 +3,5 @@
  [  3]  Out=square_error_cost_0.tmp_1 = square(X=square_error_cost_0.tmp_0) {{op_role=0}}
  [  4]L Out=mean_0.tmp_0 = reduce_mean(X=square_error_cost_0.tmp_1) {{dim=[], in_dtype=-1, keep_dim=False, op_role=256, out_dtype=-1, reduce_all=True}}
- [  5]B Out=mean_0.tmp_0@GRAD = fill_constant() {{dtype=5, force_cpu=False, op_role=257, place_type=-1, shape=[], str_value='', value=1.0}}
+ [  5]B Out=mean_0.tmp_0@GRAD = fill_constant() {{dtype=5, force_cpu=False, op_role=257, place_type=-1, shape=[], str_value='', value=2.0}}
?       attr value: 1.0 -> 2.0
  [  6]B X@GRAD=square_error_cost_0.tmp_1@GRAD = reduce_mean_grad(Out@GRAD=mean_0.tmp_0@GRAD, X=square_error_cost_0.tmp_1) {{dim=[], in_dtype=-1, keep_dim=False, op_role=1, out_dtype=-1, reduce_all=True}}
  [  7]B X@GRAD=square_error_cost_0.tmp_0@GRAD = square_grad(Out@GRAD=square_error_cost_0.tmp_1@GRAD, X=square_error_cost_0.tmp_0) {{op_role=1}}
@@ block 0 ops -9,2 +9,3 @@
  [  9]B X@GRAD=fc_0.tmp_0@GRAD, Y@GRAD=fc_0.b_0@GRAD = elementwise_add_grad(Out@GRAD=fc_0.tmp_1@GRAD, X=fc_0.tmp_0, Y=fc_0.b_0) {{axis=1, op_role=1, op_role_var=['fc_0.b_0', 'fc_0.b_0@GRAD']}}
  [ 10]B X@GRAD=[], Y@GRAD=fc_0.w_0@GRAD = mul_grad(Out@GRAD=fc_0.tmp_0@GRAD, X=x, Y=fc_0.w_0) {{op_role=1, op_role_var=['fc_0.w_0', 'fc_0.w_0@GRAD'], x_num_col_dims=1, y_num_col_dims=1}}
+ [ 11]B Out=fc_0.w_0@GRAD = scale(X=fc_0.w_0@GRAD) {{scale=0.5, op_role=1}}
programs differ: 1 op added, 1 op changed
"""


def test_small_change_is_printed_exactly(tmp_path):
    b = _small_change(tmp_path)
    r = CliRunner().invoke(cli, ["diff", str(FIT_BWD), str(b)])
    assert r.exit_code == 1
    assert r.output == EXPECTED.format(a=FIT_BWD, b=b)
    p = run("diff", str(FIT_BWD), str(b))
    assert p.returncode == 1 and p.stderr == ""
    assert p.stdout == EXPECTED.format(a=FIT_BWD, b=b)
    assert "\x1b[" not in p.stdout  # no colour when stdout is not a terminal


def test_colour_only_when_asked_or_on_a_terminal(tmp_path):
    b = _small_change(tmp_path)
    r = CliRunner().invoke(cli, ["diff", "--color", str(FIT_BWD), str(b)], color=True)
    assert "\x1b[31m- [  5]B" in r.output and "\x1b[32m+ [ 11]B" in r.output and "\x1b[36m@@" in r.output
    r = CliRunner().invoke(cli, ["diff", "--no-color", str(FIT_BWD), str(b)], color=True)
    assert "\x1b[" not in r.output


def test_equal_programs_exit_0_silently_binary_or_text():
    r = CliRunner().invoke(cli, ["diff", str(FIT_BWD), str(FIT_BWD.with_suffix(".pbtxt"))])
    assert (r.exit_code, r.output) == (0, "")
    p = run("diff", "--json", str(FIT_BWD), str(FIT_BWD))
    assert p.returncode == 0 and json.loads(p.stdout)["equal"] is True


def test_json_names_every_change(tmp_path):
    b = _small_change(tmp_path)
    r = CliRunner().invoke(cli, ["diff", "--json", str(FIT_BWD), str(b)])
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["equal"] is False and d["ignored_attrs"] == sorted(DEFAULT_IGNORED_ATTRS)
    assert d["summary"]["ops_added"] == 1 and d["summary"]["ops_changed"] == 1
    [blk] = d["blocks"]
    changed, added = blk["ops"]
    assert changed == {"change": "changed", "a_index": 5, "b_index": 5, "type": "fill_constant",
                       "changes": [{"what": "attr", "name": "value", "a": 1.0, "b": 2.0}]}
    assert added["change"] == "added" and added["b_index"] == 11 and added["a_index"] is None
    assert added["op"]["type"] == "scale" and added["op"]["attrs"] == {"scale": 0.5, "op_role": 1}


def _with_callstack(tmp_path):
    prog = pybackward.load(FIT_BWD)
    prog.global_block().ops[0].set_attr("op_callstack", ["model.py:12"])
    prog.global_block().ops[1].set_attr("op_device", "gpu:0")
    out = tmp_path / "cs.pb"
    pybackward.save(prog, out)
    return out


def test_meaningless_attrs_ignored_unless_asked(tmp_path):
    b = _with_callstack(tmp_path)
    assert CliRunner().invoke(cli, ["diff", str(FIT_BWD), str(b)]).exit_code == 0
    r = CliRunner().invoke(cli, ["diff", "--all-attrs", str(FIT_BWD), str(b)])
    assert r.exit_code == 1
    assert "?       attr op_callstack: ['  File " in r.output and "-> ['model.py:12']" in r.output
    assert "?       attr op_device: '' -> 'gpu:0'" in r.output
    # long values are shortened on the `?` line (the JSON has them whole)
    hint = next(ln for ln in r.output.splitlines() if ln.startswith("?       attr op_callstack"))
    assert len(hint) < 400 and " ... " in hint
    r = CliRunner().invoke(cli, ["diff", "--all-attrs", "--ignore-attr", "op_callstack", str(FIT_BWD), str(b)])
    assert r.exit_code == 1 and "op_callstack" not in r.output and "op_device" in r.output
    # and an attr that matters can be left out too
    c = _small_change(tmp_path)
    r = CliRunner().invoke(cli, ["diff", "--ignore-attr", "value", "--json", str(FIT_BWD), str(c)])
    assert json.loads(r.output)["summary"]["ops_changed"] == 0


def test_alignment_is_by_content_not_position():
    a = pybackward.load(FIT_BWD)
    b = a.clone()
    b.global_block().insert_op(1, "scale", {"X": ["fc_0.tmp_0"]}, {"Out": ["fc_0.tmp_0"]}, {"scale": 3.0})
    b.global_block().remove_op(8)  # was op 7 (square_grad)
    d = diff_programs(a, b)
    kinds = [(e.kind, e.a_index, e.b_index) for e in d.blocks[0].ops if e.kind != "equal"]
    assert kinds == [("added", None, 1), ("removed", 7, None)]
    # every other op is matched to itself, shifted by one where needed
    eq = [(e.a_index, e.b_index) for e in d.blocks[0].ops if e.kind == "equal"]
    assert eq == [(0, 0)] + [(i, i + 1) for i in range(1, 7)] + [(i, i) for i in range(8, 11)]


def test_changes_to_slots_vars_and_blocks():
    a = pybackward.load(PROGRAMS / "cond_block" / "forward.pb")
    b = pybackward.load(PROGRAMS / "cond_block" / "backward.pb")
    d = diff_programs(a, b)
    assert [x.status for x in d.blocks] == ["changed", "equal", "added"]
    text = d.to_text()
    assert "@@ block 2 added: block 2 (parent 0, forward block 1): 4 vars, 3 ops @@" in text
    assert "+ [  1]B X@GRAD=matmul_v2_1.tmp_0@GRAD = tanh_grad(" in text
    back = diff_programs(b, a).to_text()
    assert "@@ block 2 removed:" in back and "- var tanh_0.tmp_0@GRAD : fp32[-1, 8]" in back

    c = b.clone()
    v = c.global_block().vars["w"]
    v.desc.type.dense_tensor.tensor.dims[0] = 9
    v.desc.type.dense_tensor.tensor.data_type = pybackward.legacy.program.VarType.FP64
    c.desc.blocks[2].parent_idx = 1
    c.global_block().ops[9].set_input("X", ["w"])
    c.sync()
    d = diff_programs(b, c, a_label="b", b_label="c")
    text = d.to_text()
    assert "?     dtype: fp32 -> fp64" in text and "?     shape: [8, 8] -> [9, 8]" in text
    assert "@@ block 2 @@\n? parent_idx: 0 -> 1" in text
    assert "?       input X: [x] -> [w]" in text


def test_attr_type_change_is_reported():
    from pybackward.base import attrs
    a = pybackward.load(FIT_BWD)
    b = a.clone()
    b.global_block().ops[1].set_attr("axis", 1, attr_type=attrs.LONG)
    [e] = [e for e in diff_programs(a, b).blocks[0].ops if e.kind != "equal"]
    assert [c.text() for c in e.changes] == ["attr type axis: INT -> LONG"]


def test_order_of_vars_slots_and_attrs_carries_no_meaning():
    a = pybackward.load(FIT_BWD)
    b = a.clone()
    vars_ = list(b.desc.blocks[0].vars)
    copies = [type(v)() for v in reversed(vars_)]
    for c, v in zip(copies, reversed(vars_)):
        c.CopyFrom(v)
    del b.desc.blocks[0].vars[:]
    b.desc.blocks[0].vars.extend(copies)
    attrs_ = list(b.desc.blocks[0].ops[4].attrs)
    rev = [type(x)() for x in attrs_]
    for c, x in zip(rev, reversed(attrs_)):
        c.CopyFrom(x)
    del b.desc.blocks[0].ops[4].attrs[:]
    b.desc.blocks[0].ops[4].attrs.extend(rev)
    b.sync()
    assert diff_programs(a, b).equal


def test_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x00garbage")
    for args in ([str(FIT_BWD), str(bad)], [str(tmp_path / "none.pb"), str(FIT_BWD)]):
        p = run("diff", *args)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("error: ")


def test_alignment_of_large_programs_is_fast():
    prog = pybackward.Program()
    blk = prog.global_block()
    blk.create_var("v0", (4,))
    for i in range(4000):
        blk.create_var(f"v{i + 1}", (4,))
        blk.append_op("relu" if i % 3 else "tanh", {"X": [f"v{i}"]}, {"Out": [f"v{i + 1}"]}, {"op_role": 0})
    other = prog.clone()
    other.global_block().ops[2000].set_attr("op_role", 1)
    other.global_block().remove_op(10)
    t = time.perf_counter()
    entries = align_ops(prog.global_block().ops, other.global_block().ops)
    assert time.perf_counter() - t < 5
    assert [(e.kind, e.a_index) for e in entries if e.kind != "equal"] == [("removed", 10), ("changed", 2000)]


def test_signature_ignores_noise_attrs_by_default():
    a = pybackward.load(FIT_BWD).global_block().ops[0]
    sig = op_signature(a)
    assert sig[0] == "mul" and not any(k in DEFAULT_IGNORED_ATTRS for k, _, _ in sig[3])
