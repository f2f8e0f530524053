"""A self-contained HTML picture of a program: laid out here, no Graphviz.

`graph_to_html(graph)` places the nodes of a `graph_view.Graph` with a simple
layered (Sugiyama-style) layout - cycles broken, layers by longest path,
order within a layer by a few barycenter sweeps - and writes one HTML file
holding an inline SVG and a few lines of plain JavaScript: drag to pan, the
wheel to zoom, `0` or the Fit button to see everything, a search box that
finds an op or var. No network access, no external script or font.

Clusters (sub-blocks, folded repeats of a layer) are kept together: within a
layer their nodes sit side by side, so each is drawn as a shaded outline
around exactly its own nodes, one band per layer it spans, labelled at its
top (nested clusters nest).

Linear in the graph's size apart from the sweeps (a few passes over the
edges), so large graphs lay out in seconds where Graphviz runs out of memory.
"""
from __future__ import annotations

import html
from collections import defaultdict

from ..base.names import printable_lines
from .graph import Graph


def _esc(s: str) -> str:
    """Text for the page: a name's control characters escaped (`base.names.printable`; line
    breaks kept), then HTML's markup characters."""
    return html.escape(printable_lines(s))

__all__ = ["cluster_bands", "graph_to_html", "layout"]

_FILL = {"forward": ("#dbe9f6", "#3b6ea5"), "backward": ("#fde2c8", "#d9822b"),
         "loss": ("#f8c9c9", "#c0392b"), "optimize": ("#d5f0d5", "#2e8b57"),
         "var": ("#ffffff", "#777777"), "param": ("#ffd966", "#b8860b"), "grad": ("#fff2cc", "#b8860b"),
         "block": ("#eeeeee", "#777777"), "empty": ("#ffffff", "#ffffff")}
_CHAR_W, _LINE_H, _PAD, _GAP_X, _GAP_Y = 6.6, 13, 8, 18, 46
_SWEEPS = 4


def _lines(g: Graph, nid: str) -> list[str]:
    n = g.nodes[nid]
    lines = n.label.split("\n")
    if n.repeat > 1 and n.kind in ("forward", "backward", "loss", "optimize"):
        lines[0] += f"  \u00d7{n.repeat}"
    return lines


def layout(g: Graph) -> dict[str, tuple[float, float, float, float]]:
    """node id -> (x, y, width, height): top-left corners, layers top to bottom."""
    ids = list(g.nodes)
    index = {n: i for i, n in enumerate(ids)}
    succ: list[list[int]] = [[] for _ in ids]
    for e in g.edges:
        if e.src in index and e.dst in index and e.src != e.dst:
            succ[index[e.src]].append(index[e.dst])
    # Break cycles: drop the edges a depth-first search finds pointing back.
    state = [0] * len(ids)          # 0 new, 1 on the stack, 2 done
    dag: list[list[int]] = [[] for _ in ids]
    for root in range(len(ids)):
        if state[root]:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:
            v, k = stack[-1]
            if k < len(succ[v]):
                stack[-1] = (v, k + 1)
                w = succ[v][k]
                if state[w] == 1:
                    continue                       # a back edge
                dag[v].append(w)
                if state[w] == 0:
                    state[w] = 1
                    stack.append((w, 0))
            else:
                state[v] = 2
                stack.pop()
    # Layers: longest path from the sources (Kahn's order).
    indeg = [0] * len(ids)
    for v in range(len(ids)):
        for w in dag[v]:
            indeg[w] += 1
    layer = [0] * len(ids)
    queue = [v for v in range(len(ids)) if indeg[v] == 0]
    for v in queue:                                # the list grows while we walk it
        for w in dag[v]:
            layer[w] = max(layer[w], layer[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                queue.append(w)
    layers: dict[int, list[int]] = defaultdict(list)
    for v in range(len(ids)):
        layers[layer[v]].append(v)
    order = [layers[k] for k in sorted(layers)]
    pred: list[list[int]] = [[] for _ in ids]
    for v in range(len(ids)):
        for w in dag[v]:
            pred[w].append(v)
    pos = [0.0] * len(ids)
    group = _cluster_keys(g, ids)

    def number() -> None:
        for row in order:
            for i, v in enumerate(row):
                pos[v] = i / max(len(row), 1)

    for row in order:                               # clusters together from the start
        row.sort(key=lambda v: group[v])
    number()
    for sweep in range(_SWEEPS):
        rows = order if sweep % 2 == 0 else order[::-1]
        nbrs = pred if sweep % 2 == 0 else dag
        for row in rows:
            keyed = []
            for v in row:
                ns = nbrs[v]
                keyed.append((group[v], sum(pos[u] for u in ns) / len(ns) if ns else pos[v], pos[v], v))
            keyed.sort()
            row[:] = [k[-1] for k in keyed]
            for i, v in enumerate(row):
                pos[v] = i / max(len(row), 1)
    sizes = {}
    for v, nid in enumerate(ids):
        lines = _lines(g, nid)
        sizes[v] = (max(len(s) for s in lines) * _CHAR_W + 2 * _PAD, len(lines) * _LINE_H + 2 * _PAD - 4)
    widths = [sum(sizes[v][0] for v in row) + _GAP_X * (len(row) - 1) for row in order]
    full = max(widths, default=0)
    out: dict[str, tuple[float, float, float, float]] = {}
    y = 40.0
    for row, w in zip(order, widths):
        x = (full - w) / 2
        h = max(sizes[v][1] for v in row)
        for v in row:
            sw, sh = sizes[v]
            out[ids[v]] = (x, y + (h - sh) / 2, sw, sh)
            x += sw + _GAP_X
        y += h + _GAP_Y
    return out


def _cluster_path(g: Graph, cluster: str | None) -> tuple[str, ...]:
    path: list[str] = []
    seen: set[str] = set()
    while cluster is not None and cluster in g.clusters and cluster not in seen:
        seen.add(cluster)
        path.append(cluster)
        cluster = g.clusters[cluster].parent
    return tuple(reversed(path))


def _cluster_keys(g: Graph, ids: list[str]) -> list[tuple[int, ...]]:
    """Per node, its clusters from the outermost in, as ranks: sorting a layer by
    it puts each cluster's nodes side by side (nested ones inside their parent);
    nodes of the drawn block itself come first."""
    rank = {c: i + 1 for i, c in enumerate(g.clusters)}
    return [tuple(rank[c] for c in _cluster_path(g, g.nodes[n].cluster)) for n in ids]


def cluster_bands(g: Graph, pos: dict[str, tuple[float, float, float, float]]
                  ) -> dict[str, list[tuple[float, float, float, float]]]:
    """cluster id -> the rectangles (x, y, w, h) of its outline, one per layer its
    nodes (or its nested clusters' nodes) occupy, top to bottom; each band
    reaches down to the next when that is the next layer, so the outline of a
    cluster on consecutive layers is one shape."""
    rows: dict[str, dict[float, list[float]]] = defaultdict(dict)   # keyed by a layer's centre line
    for nid, n in g.nodes.items():
        if nid not in pos:
            continue
        x, y, w, h = pos[nid]
        for c in _cluster_path(g, n.cluster):
            r = rows[c].setdefault(round(y + h / 2, 1), [x, x + w, y, y + h])
            r[0], r[1], r[2], r[3] = min(r[0], x), max(r[1], x + w), min(r[2], y), max(r[3], y + h)
    layer_of = {k: i for i, k in enumerate(sorted({round(y + h / 2, 1) for _, y, _, h in pos.values()}))}
    bands: dict[str, list[tuple[float, float, float, float]]] = {}
    for c, by_row in rows.items():
        pad = max(4.0, 14.0 - 3 * len(_cluster_path(g, c)))
        keys = sorted(by_row)
        out = []
        for i, k in enumerate(keys):
            x0, x1, top, bottom = by_row[k]
            starts = i == 0 or layer_of[keys[i - 1]] != layer_of[k] - 1
            top -= pad + (12 if starts else 0)
            joins = i + 1 < len(keys) and layer_of[keys[i + 1]] == layer_of[k] + 1
            end = by_row[keys[i + 1]][2] - pad if joins else bottom + pad   # down to the next band, if adjacent
            out.append((x0 - pad, top, x1 - x0 + 2 * pad, end - top))
        bands[c] = out
    return bands


_SCRIPT = r"""
(function () {
  var svg = document.getElementById('g'), vp = document.getElementById('vp');
  var W = +svg.dataset.w, H = +svg.dataset.h, s = 1, tx = 0, ty = 0;
  function apply() { vp.setAttribute('transform', 'translate(' + tx + ',' + ty + ') scale(' + s + ')'); }
  function fit() {
    var r = svg.getBoundingClientRect();
    s = Math.min(r.width / W, r.height / H, 1); tx = (r.width - W * s) / 2; ty = 10; apply();
  }
  svg.addEventListener('wheel', function (e) {
    e.preventDefault();
    var r = svg.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    var k = Math.exp(-e.deltaY * 0.0015);
    tx = mx - (mx - tx) * k; ty = my - (my - ty) * k; s *= k; apply();
  }, {passive: false});
  var drag = null;
  svg.addEventListener('pointerdown', function (e) { drag = [e.clientX - tx, e.clientY - ty]; svg.setPointerCapture(e.pointerId); });
  svg.addEventListener('pointermove', function (e) { if (drag) { tx = e.clientX - drag[0]; ty = e.clientY - drag[1]; apply(); } });
  svg.addEventListener('pointerup', function () { drag = null; });
  document.getElementById('fit').onclick = fit;
  document.addEventListener('keydown', function (e) { if (e.key === '0' && e.target.tagName !== 'INPUT') fit(); });
  var hits = [], at = 0;
  document.getElementById('q').addEventListener('keydown', function (e) {
    if (e.key !== 'Enter') return;
    var q = this.value.toLowerCase();
    hits.forEach(function (n) { n.classList.remove('hit'); });
    hits = q ? Array.prototype.filter.call(document.querySelectorAll('g.n'), function (n) {
      return n.dataset.t.toLowerCase().indexOf(q) >= 0; }) : [];
    hits.forEach(function (n) { n.classList.add('hit'); });
    document.getElementById('found').textContent = q ? hits.length + ' found' : '';
    if (!hits.length) return;
    var n = hits[at++ % hits.length], r = svg.getBoundingClientRect();
    s = Math.max(s, 1); tx = r.width / 2 - (+n.dataset.x) * s; ty = r.height / 2 - (+n.dataset.y) * s; apply();
  });
  fit();
})();
"""

_STYLE = """
html, body { margin: 0; height: 100%; font-family: Helvetica, Arial, sans-serif; }
#bar { position: fixed; top: 0; left: 0; right: 0; padding: 6px 10px; background: #f7f7f7;
       border-bottom: 1px solid #ddd; font-size: 13px; }
#g { position: absolute; top: 34px; left: 0; width: 100%; height: calc(100% - 34px); cursor: grab; }
text { font-size: 11px; font-family: Helvetica, Arial, sans-serif; }
path.e { fill: none; stroke: #555; stroke-width: 1; }
path.back { stroke-dasharray: 4 3; stroke: #999; }
path.sub { stroke-dasharray: 1 3; }
g.hl > rect { stroke: #e0218a; stroke-width: 3; }
g.hit > rect { stroke: #00a0ff; stroke-width: 4; }
"""


def graph_to_html(g: Graph) -> str:
    """The whole HTML page (inline SVG, CSS and JavaScript; nothing fetched)."""
    pos = layout(g)
    w = max((x + sw for x, _, sw, _ in pos.values()), default=100) + 40
    h = max((y + sh for _, y, _, sh in pos.values()), default=100) + 40
    parts: list[str] = []
    bands = cluster_bands(g, pos)
    for cid in sorted(bands, key=lambda c: len(_cluster_path(g, c))):   # outer ones first, underneath
        c = g.clusters[cid]
        fill, stroke = ("#f4f4f4", "#9a9a9a") if c.kind == "block" else ("#eef3e6", "#7a9a4a")
        rects = "".join(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"/>'
                        for x, y, w, h in bands[cid])
        x, y, _, _ = bands[cid][0]
        parts.append(f'<g class="c" fill="{fill}" stroke="{stroke}" stroke-dasharray="5 3">'
                     f'<title>{_esc(c.label)}</title>{rects}'
                     f'<text x="{x + 5:.1f}" y="{y + 12:.1f}" stroke="none" fill="#555">'
                     f'{_esc(c.label.split(chr(10))[0])}</text></g>')
    for e in g.edges:
        if e.src not in pos or e.dst not in pos:
            continue
        x1, y1, w1, h1 = pos[e.src]
        x2, y2, w2, _ = pos[e.dst]
        a, b = (x1 + w1 / 2, y1 + h1), (x2 + w2 / 2, y2)
        cls = "e" + (" back" if b[1] <= a[1] else "") + (" sub" if e.style == "dotted" else "")
        dy = max(abs(b[1] - a[1]) / 2, 30)
        title = f"<title>{_esc(e.label)}</title>" if e.label else ""
        parts.append(f'<path class="{cls}" marker-end="url(#a)" d="M{a[0]:.1f},{a[1]:.1f} '
                     f'C{a[0]:.1f},{a[1] + dy:.1f} {b[0]:.1f},{b[1] - dy:.1f} {b[0]:.1f},{b[1]:.1f}">{title}</path>')
    for nid, n in g.nodes.items():
        x, y, sw, sh = pos[nid]
        fill, stroke = _FILL.get(n.kind, _FILL["var"])
        is_var = n.kind in ("var", "param", "grad")
        rx = sh / 2 if is_var else 5
        dash = ' stroke-dasharray="4 2"' if n.kind == "grad" else ""
        width = 2.5 if n.kind in ("param", "grad", "loss") or n.emphasis or n.repeat > 1 else 1
        lines = _lines(g, nid)
        text = "".join(f'<tspan x="{x + sw / 2:.1f}" dy="{_LINE_H if i else 0}">{_esc(s)}</tspan>'
                       for i, s in enumerate(lines))
        parts.append(
            f'<g class="n{" hl" if n.highlight else ""}" data-t="{_esc(" ".join(lines))}" '
            f'data-x="{x + sw / 2:.1f}" data-y="{y + sh / 2:.1f}"><title>{_esc(n.label)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{sw:.1f}" height="{sh:.1f}" rx="{rx:.1f}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"{dash}/>'
            f'<text x="{x + sw / 2:.1f}" y="{y + _PAD + 9:.1f}" text-anchor="middle">{text}</text></g>')
    title = _esc(g.title)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{title}</title><style>{_STYLE}</style></head><body>\n"
        f'<div id="bar"><b>{title}</b> &nbsp; {len(g.nodes)} nodes &nbsp; '
        '<button id="fit">Fit (0)</button> &nbsp; <input id="q" placeholder="find an op or var, Enter"> '
        '<span id="found"></span> &nbsp; <small>drag to pan, wheel to zoom; blue forward, orange backward, '
        'red the loss, gold parameters, dashed their gradients</small></div>\n'
        f'<svg id="g" xmlns="http://www.w3.org/2000/svg" data-w="{w:.0f}" data-h="{h:.0f}">'
        '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>'
        '<g id="vp">\n' + "\n".join(parts) + "\n</g></svg>\n"
        f"<script>{_SCRIPT}</script>\n</body></html>\n")
