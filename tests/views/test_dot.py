"""`pybackward dot`: the DOT text we generate, and rendering (skipped without Graphviz, failed with CI=true)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import pybackward
from conftest import PROGRAMS, ROOT
from pybackward.views import dot as _dot
from pybackward_cli.main import cli

DOC = PROGRAMS / "doc_append_backward" / "backward.pb"
needs_graphviz = pytest.mark.graphviz     # conftest: skips without `dot`, fails with CI=true


def run(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybackward_cli.main", *args], capture_output=True, text=True,
                          env=env)


def _node(text: str, node_id: str) -> str:
    m = re.search(rf'^\s*"{re.escape(node_id)}" \[(.*)\];$', text, re.M)
    assert m, f"no node {node_id}"
    return m.group(1)


def test_full_view_colours_roles_and_marks_parameters():
    r = CliRunner().invoke(cli, ["dot", str(DOC)])
    assert r.exit_code == 0, r.output
    t = r.output
    assert t.startswith("digraph program {") and t.rstrip().endswith("}")
    assert 'label="doc_append_backward/backward.pb: block 0, 13 ops"' in t
    assert 'fillcolor="#dbe9f6"' in _node(t, "b0:op1")        # mul: forward
    assert 'fillcolor="#f8c9c9"' in _node(t, "b0:op5")        # reduce_mean: the loss op
    assert 'fillcolor="#fde2c8"' in _node(t, "b0:op11")       # mul_grad: backward
    assert 'label="[11] mul_grad"' in _node(t, "b0:op11")
    assert 'style="filled,bold"' in _node(t, "v0:my_fc.w_0")  # parameter
    assert 'style="filled,dashed"' in _node(t, "v0:my_fc.w_0@GRAD")  # its gradient
    assert 'fillcolor="#ffffff"' in _node(t, "v0:my_fc.tmp_0")
    assert '"v0:my_fc.w_0" -> "b0:op1" [label="Y"];' in t
    assert '"b0:op11" -> "v0:my_fc.w_0@GRAD" [label="Y@GRAD"];' in t
    assert "cluster_legend" in t
    assert "cluster_legend" not in CliRunner().invoke(cli, ["dot", "--no-legend", str(DOC)]).output


def test_highlight_marks_matching_ops_and_vars():
    t = CliRunner().invoke(cli, ["dot", "--highlight", "^mul|my_fc\\.w_0$", str(DOC)]).output
    assert "#e0218a" in _node(t, "b0:op1") and "#e0218a" in _node(t, "b0:op11")
    assert "#e0218a" in _node(t, "v0:my_fc.w_0") and "#e0218a" not in _node(t, "v0:my_fc.w_0@GRAD")
    assert "#e0218a" not in _node(t, "b0:op2")
    r = run("dot", "--highlight", "(", str(DOC))
    assert r.returncode == 2 and "not a regular expression" in r.stderr and "Traceback" not in r.stderr


def test_sub_blocks_are_nested_clusters_and_block_selects():
    t = CliRunner().invoke(cli, ["dot", str(PROGRAMS / "nested_cond" / "backward.pb")]).output
    assert t.count("subgraph \"cluster_b") == 6
    assert re.search(r'subgraph "cluster_b1" \{(?:(?!\n  \}).)*subgraph "cluster_b2"', t, re.S)
    assert 'lhead="cluster_b1", style=dotted' in t
    assert 'label="block 4 (grad of block 1)"' in t
    t = CliRunner().invoke(cli, ["dot", "--block", "2", str(PROGRAMS / "nested_cond" / "backward.pb")]).output
    assert '"b2:op1" [label="[1] tanh"' in t and "b0:op" not in t
    # vars of the enclosing blocks are drawn outside (they belong to block 1 / 0)
    assert '"v1:matmul_v2_1.tmp_0"' in t
    r = CliRunner().invoke(cli, ["dot", "--block", "9", str(DOC)])
    assert r.exit_code == 2 and "block index 9 out of range" in r.output


def test_collapsed_view_groups_by_name_scope():
    prog = pybackward.load(PROGRAMS / "transformer_encoder" / "backward.pb")
    n = len(prog.global_block().ops)
    auto = _dot.program_to_dot(prog, collapse_above=n - 1, fold=False)
    assert "(collapsed by name scope)" in auto
    assert "(collapsed" not in _dot.program_to_dot(prog, collapse_above=n, fold=False)
    assert "(collapsed" not in _dot.program_to_dot(prog, collapse=False, collapse_above=1)
    t = _dot.program_to_dot(prog, collapse=True, fold=False)
    fc = _node(t, "g:fc_0:forward")
    assert 'label="fc_0\\n2 ops: mul, elementwise_add\\nparams: fc_0.w_0, fc_0.b_0"' in fc
    assert "peripheries=2" in fc
    grad = _node(t, "g:fc_0:backward")
    assert "fc_0 (grad)" in grad and "grads: fc_0.b_0@GRAD, fc_0.w_0@GRAD" in grad and "#fde2c8" in grad
    assert '"g:fc_0:forward" -> ' in t
    r = CliRunner().invoke(cli, ["dot", "--collapse", str(DOC)])
    assert '"g:my_fc:forward"' in r.output and "b0:op" not in r.output
    r = CliRunner().invoke(cli, ["dot", "--collapse-above", "5", str(DOC)])
    assert "(collapsed by name scope)" in r.output
    r = CliRunner().invoke(cli, ["dot", "--collapse-above", "5", "--no-collapse", str(DOC)])
    assert "(collapsed" not in r.output


def test_name_scope():
    assert _dot.name_scope("fc_3.w_0") == "fc_3"
    assert _dot.name_scope("fc_3.tmp_1@GRAD@RENAME@block0@1") == "fc_3"
    assert _dot.name_scope("grad/fc_3.tmp_1@GRAD") == "fc_3"
    assert _dot.name_scope("x@GRAD") == "x" and _dot.name_scope("x") == "x"


def test_dot_output_file_and_errors(tmp_path):
    out = tmp_path / "g.dot"
    r = CliRunner().invoke(cli, ["dot", str(DOC), "-o", str(out)])
    assert r.exit_code == 0 and out.read_text().startswith("digraph program {")
    r = run("dot", str(DOC), "-o", str(tmp_path / "g.jpg2"))
    assert r.returncode == 2 and "cannot tell the picture format" in r.stderr
    env = dict(__import__("os").environ, PYBACKWARD_DOT=str(tmp_path / "no-such-dot"))
    r = run("dot", str(DOC), "-o", str(tmp_path / "g.svg"), env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (f"error: {tmp_path / 'g.svg'}: cannot render svg: Graphviz's `dot` program is not "
                                "installed (install Graphviz, e.g. `apt-get install graphviz`; or draw an HTML "
                                "page, which needs no Graphviz, with -o FILE.html; or write DOT text with -o FILE.dot)")
    assert not (tmp_path / "g.svg").exists()
    r = run("dot", str(tmp_path / "none.pb"))
    assert r.returncode == 2 and "no such file" in r.stderr


@needs_graphviz
@pytest.mark.parametrize("suffix,magic", [(".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_render_with_graphviz(tmp_path, suffix, magic):
    out = tmp_path / f"g{suffix}"
    r = run("dot", str(PROGRAMS / "nested_cond" / "backward.pb"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes().startswith(magic)


@needs_graphviz
def test_every_golden_program_renders(tmp_path):
    """Graphviz accepts our DOT for each program, full and collapsed."""
    for f in sorted(PROGRAMS.glob("*/backward.pb"))[:12]:
        prog = pybackward.load(f)
        for collapse in (False, True):
            r = subprocess.run(["dot", "-Tsvg", "-o", "/dev/null"], input=_dot.program_to_dot(prog, collapse=collapse),
                               capture_output=True, text=True)
            assert r.returncode == 0 and not r.stderr, (f, collapse, r.stderr)


def test_docs_picture_is_the_current_dot():
    """docs/doc_append_backward.{dot,svg}: the picture in the README is made from this DOT text
    (regenerate with `pybackward dot testdata/programs/doc_append_backward/backward.pb -o docs/...`)."""
    want = _dot.program_to_dot(pybackward.load(DOC))
    assert (ROOT / "docs" / "doc_append_backward.dot").read_text() == want
    svg = (ROOT / "docs" / "doc_append_backward.svg").read_text()
    assert svg.startswith("<?xml") and "my_fc.w_0@GRAD" in svg and "lookup_table_v2_grad" in svg
