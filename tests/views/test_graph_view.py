"""Pictures at any size: repeated layers drawn once, sub-blocks as one node,
the neighbourhood of a var, the node limit, and the HTML view (no Graphviz)."""
from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import pybackward
from conftest import PROGRAMS
from pybackward.views import graph as graph_view, html as html_view
from pybackward.views.dot import program_to_dot
from pybackward_cli.main import cli
from test_memory import mlp

DOC = PROGRAMS / "doc_append_backward" / "backward.pb"


def deep_mlp(layers: int) -> pybackward.Program:
    p = mlp(layers, 8)
    pybackward.append_backward("mean_0.tmp_0", program=p)
    return p


def _ops_drawn(dot_text: str) -> int:
    return len(re.findall(r'^\s*"b\d+:op\d+" \[', dot_text, re.M))


def test_repeated_runs_find_the_layers():
    p = deep_mlp(20)
    runs = graph_view.repeated_runs(p.global_block().ops)
    assert [(r.period, r.count) for r in runs][:1] == [(3, 20)]      # mul, elementwise_add, relu x 20
    assert sum(r.period * r.count for r in runs) >= 2 * 3 * 20 - 6   # the backward layers too
    assert graph_view.repeated_runs([]) == []


def _runs_by_definition(tok: list[int], min_saved: int = 3, max_period: int = graph_view.MAX_PERIOD) -> list:
    """The folding as first written (with NumPy arrays; here in plain Python): for every
    period p, every maximal stretch of i with tok[i] == tok[i + p] is a candidate; the
    longest cover is taken first (then the shortest period, the earliest start)."""
    n = len(tok)
    cands = []
    for p in range(1, min(max_period, n // 2) + 1):
        eq = [tok[i] == tok[i + p] for i in range(n - p)] + [False]
        s = None
        for i, e in enumerate(eq):
            if e and s is None:
                s = i
            elif not e and s is not None:
                k = (i - s + p) // p
                if k >= 2 and p * (k - 1) >= min_saved:
                    cands.append((-p * k, p, s, k))
                s = None
    taken = [False] * n
    runs = []
    for _, p, s, k in sorted(cands):
        while k >= 2 and any(taken[s:s + p * k]):
            if taken[s]:
                s, k = s + p, k - 1
            elif taken[s + p * k - 1]:
                k -= 1
            else:
                break
        if k >= 2 and p * (k - 1) >= min_saved and not any(taken[s:s + p * k]):
            taken[s:s + p * k] = [True] * (p * k)
            runs.append((s, p, k))
    return sorted(runs)


def test_folding_finds_what_the_definition_finds():
    """The folding compares only pairs at multiples of each period and grows stretches by
    slices (no NumPy, for `dot`'s start-up): the same runs as the definition, on layers
    with noise, long periods, few distinct ops (many short stretches), and every limit."""
    import random
    rng = random.Random(37)
    cases = [[], [1], [0] * 9, [1, 2] * 2, [5] * 400 + [6] * 3 + [5] * 7, list(range(300)),
             [rng.randrange(20) for _ in range(397)] * 3 + [1, 2, 3]]
    for _ in range(400):
        tok: list[int] = []
        while len(tok) < rng.randint(10, 300):
            layer = [rng.randrange(rng.choice([2, 4, 8])) for _ in range(rng.randint(1, 15))]
            tok += layer * rng.randint(1, 6) + [rng.randrange(8) for _ in range(rng.randint(0, 3))]
        cases.append(tok)
    cases += [[rng.randrange(a) for _ in range(rng.randint(0, 200))] for a in (1, 2, 3) for _ in range(50)]
    for i, tok in enumerate(cases):
        for min_saved, max_period in ((3, graph_view.MAX_PERIOD), (1, 400), (5, 7), (2, 2)):
            got = [(r.start, r.period, r.count)
                   for r in graph_view.repeated_token_runs(tok, min_saved, max_period)]
            assert got == _runs_by_definition(tok, min_saved, max_period), (i, min_saved, max_period)


def test_folded_picture_draws_each_layer_once():
    p = deep_mlp(50)
    t = program_to_dot(p)
    assert _ops_drawn(t) < 20 and "x50: ops 0..149, 3 ops repeated 50 times" in t
    assert "repeated layers drawn once" in t
    assert "(and 49 more, one per copy)" in t                        # fc_0.w_0 stands for all 50
    unfolded = program_to_dot(p, fold=False, collapse=False, max_nodes=None)
    assert _ops_drawn(unfolded) == len(p.global_block().ops)


def test_twelve_thousand_ops_do_not_blow_up(tmp_path):
    p = deep_mlp(2000)                                                 # 12,001 ops
    assert len(p.global_block().ops) > 12000
    t0 = time.time()
    g = graph_view.build_graph(p)
    assert len(g.nodes) < 40 and time.time() - t0 < 60
    path = tmp_path / "big.pb"
    pybackward.save(p, path)
    r = CliRunner().invoke(cli, ["dot", str(path), "--no-fold"])         # collapsed by scope: too many nodes
    assert r.exit_code == 2
    assert "more than --max-nodes 1500" in r.output and "--around VAR --depth N" in r.output
    assert "--collapse" in r.output and "Traceback" not in r.output
    out = tmp_path / "big.html"                                          # the HTML view takes it whole
    r = CliRunner().invoke(cli, ["dot", str(path), "--no-fold", "--no-collapse", "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.count('<g class="n') > 24000 and len(page) < 40_000_000


def test_sub_blocks_one_node_each_unless_expanded():
    prog = pybackward.load(PROGRAMS / "nested_cond" / "backward.pb")
    expanded = program_to_dot(prog)
    assert expanded.count('subgraph "cluster_b') == 6
    one = program_to_dot(prog, expand=False)
    assert 'subgraph "cluster_b' not in one and "b1:op" not in one
    assert re.search(r'"blk1" \[label="block 1: \d+ ops in 3 blocks', one) and "shape=box3d" in one
    assert '-> "blk1" [style=dotted, label="sub_block"]' in one
    r = CliRunner().invoke(cli, ["dot", "--no-expand", str(PROGRAMS / "nested_cond" / "backward.pb")])
    assert r.exit_code == 0 and '"blk1"' in r.output


def test_around_draws_the_neighbourhood():
    prog = pybackward.load(DOC)
    t1 = program_to_dot(prog, around="my_fc.w_0", depth=1)
    assert _ops_drawn(t1) == 2 and '"b0:op1"' in t1 and '"b0:op11"' in t1    # mul, mul_grad
    assert "#e0218a" in re.search(r'"v0:my_fc.w_0" \[(.*)\];', t1).group(1)    # the centre is marked
    t2 = program_to_dot(prog, around="my_fc.w_0", depth=2)
    assert 2 < _ops_drawn(t2) < len(prog.global_block().ops)
    r = CliRunner().invoke(cli, ["dot", str(DOC), "--around", "my_fc.w0"])
    assert r.exit_code == 2 and "close: my_fc.w_0" in r.output
    r = CliRunner().invoke(cli, ["dot", str(DOC), "--around", "my_fc.w_0", "--depth", "0"])
    assert r.exit_code == 2


def test_html_is_self_contained_and_needs_no_graphviz(tmp_path):
    out = tmp_path / "p.html"
    env = dict(os.environ, PYBACKWARD_DOT=str(tmp_path / "no-dot"), PATH="")
    r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "dot", str(PROGRAMS / "while_loop" /
                        "backward.pb"), "-o", str(out)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<script>" in page
    assert not re.search(r"<script[^>]+src|<link|@import|url\((?!#)", page)
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]   # the namespace only
    g = graph_view.build_graph(pybackward.load(PROGRAMS / "while_loop" / "backward.pb"))
    assert page.count('<g class="n') == len(g.nodes)
    assert "wheel" in page and "pointermove" in page                     # pan and zoom


def test_layout_puts_producers_above_consumers():
    g = graph_view.build_graph(pybackward.load(DOC))
    pos = html_view.layout(g)
    below = sum(pos[e.dst][1] > pos[e.src][1] for e in g.edges)
    assert below == len(g.edges)                                         # a DAG: every edge points down
    for (x, y, w, h) in pos.values():
        assert w > 0 and h > 0


@pytest.mark.graphviz
def test_png_sizes_stay_sane(tmp_path):
    big = tmp_path / "big.pb"
    pybackward.save(deep_mlp(2000), big)
    for args, limit in (([str(big)], 3000), ([str(PROGRAMS / "transformer_encoder" / "backward.pb"),
                                              "--around", "softmax_0.tmp_0", "--depth", "2"], 3000)):
        out = tmp_path / "p.png"
        r = CliRunner().invoke(cli, ["dot", *args, "-o", str(out)])
        assert r.exit_code == 0, r.output
        w, h = struct.unpack(">II", out.read_bytes()[16:24])
        assert max(w, h) < limit, (args, w, h)


@pytest.mark.parametrize("name", ["nested_cond", "while_multi", "cond_in_while"])
def test_html_cluster_outlines_hold_exactly_their_nodes(name):
    g = graph_view.build_graph(pybackward.load(PROGRAMS / name / "backward.pb"), expand=True)
    assert g.clusters, "the program has sub-blocks"
    pos = html_view.layout(g)
    bands = html_view.cluster_bands(g, pos)
    assert set(bands) <= set(g.clusters) and bands

    def inside(nid, rects):
        x, y, w, h = pos[nid]
        cx, cy = x + w / 2, y + h / 2
        return any(rx <= cx <= rx + rw and ry <= cy <= ry + rh for rx, ry, rw, rh in rects)

    def members(cid):
        out = set()
        for nid, n in g.nodes.items():
            c = n.cluster
            while c is not None:
                if c == cid:
                    out.add(nid)
                    break
                c = g.clusters[c].parent if c in g.clusters else None
        return out

    for cid, rects in bands.items():
        mine = members(cid)
        assert mine and all(inside(n, rects) for n in mine), cid
        others = [n for n in g.nodes if n not in mine and n in pos]
        assert not any(inside(n, rects) for n in others), (cid, [n for n in others if inside(n, rects)])
    page = html_view.graph_to_html(g)
    assert page.count('<g class="c"') == len(bands)
