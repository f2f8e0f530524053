"""Pictures of programs: Graphviz DOT text, rendered by the `dot` program.

`program_to_dot` draws one block (block 0 by default) with its sub-blocks as
nested clusters: ops are boxes (forward blue, backward orange, the loss op
red, optimizer ops green), vars are ellipses, parameters are gold and bold,
their gradients gold and dashed. `highlight` (a regular expression) marks
every op whose type and every var whose name it matches.

What is drawn - every op, or one node per name scope; repeated layers once;
sub-blocks as clusters or one node each; the neighbourhood of a var - is
decided by `graph_view.build_graph`; this module writes its `Graph` as DOT.

`render(dot_text, path)` writes `.dot`/`.gv` as text and `.svg`/`.png`/`.pdf`
through Graphviz's `dot` (found on PATH, or `$PYBACKWARD_DOT`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable

from ..base.errors import ArgumentError, PyBackwardError
from ..base.files import write_atomic
from ..base.names import printable
from .graph import (
    DEFAULT_COLLAPSE_ABOVE, DEFAULT_MAX_NODES, Cluster, Edge, Graph, Node, build_graph, name_scope, op_kind)  # noqa: F401
from ..legacy.program import Program
#: Output suffixes `render` understands, and Graphviz's name for each.
FORMATS = {".dot": None, ".gv": None, ".svg": "svg", ".png": "png", ".pdf": "pdf"}

_OP_STYLE = {
    "forward": 'fillcolor="#dbe9f6", color="#3b6ea5"',
    "backward": 'fillcolor="#fde2c8", color="#d9822b"',
    "loss": 'fillcolor="#f8c9c9", color="#c0392b", penwidth=2',
    "optimize": 'fillcolor="#d5f0d5", color="#2e8b57"',
}
_VAR_STYLE = {
    "var": 'style=filled, fillcolor="#ffffff", color="#777777"',
    "param": 'style="filled,bold", fillcolor="#ffd966", color="#b8860b", penwidth=2',
    "grad": 'style="filled,dashed", fillcolor="#fff2cc", color="#b8860b", penwidth=2',
}
_HIGHLIGHT = 'color="#e0218a", fontcolor="#e0218a", penwidth=3'
_BLOCK_STYLE = 'style=filled, fillcolor="#eeeeee", color="#777777"'
_REPEAT_STYLE = 'style="filled,rounded"; fillcolor="#f3f0ff"; color="#6a5acd"; penwidth=2'


def quote(s: str) -> str:
    """A DOT string literal; `\n` breaks a label's lines, every other control character
    of a name is escaped (`base.names.printable`), so Graphviz writes SVG an XML parser reads."""
    s = "\n".join(printable(line) for line in s.split("\n"))
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def program_to_dot(program: Program, block: int = 0, highlight: str | None = None,
                   collapse: bool | None = None, collapse_above: int = DEFAULT_COLLAPSE_ABOVE,
                   legend: bool = True, fold: bool = True, expand: bool | None = None,
                   around: str | None = None, depth: int = 2,
                   max_nodes: int | None = DEFAULT_MAX_NODES) -> str:
    """The DOT text of `block` (and its sub-blocks) of `program` (options: `graph_view.build_graph`)."""
    g = build_graph(program, block, highlight=highlight, collapse=collapse, collapse_above=collapse_above,
                    fold=fold, expand=expand, around=around, depth=depth, max_nodes=max_nodes)
    return graph_to_dot(g, legend=legend)


def _node_line(n: Node) -> str:
    if n.kind == "empty":
        return f"{quote(n.id)} [label={quote(n.label)}, shape=plaintext];"
    if n.kind == "block":
        return f"{quote(n.id)} [label={quote(n.label)}, shape=box3d, {_BLOCK_STYLE}];"
    if n.kind in _VAR_STYLE:
        style = _VAR_STYLE[n.kind] + (", " + _HIGHLIGHT if n.highlight else "")
        return f"{quote(n.id)} [label={quote(n.label)}, shape=ellipse, {style}];"
    style = _OP_STYLE[n.kind]
    if n.emphasis:
        style += ", penwidth=2, peripheries=2"
    if n.highlight:
        style += ", " + _HIGHLIGHT
    return f"{quote(n.id)} [label={quote(n.label)}, shape=box, style=\"filled,rounded\", {style}];"


def _edge_line(e: Edge) -> str:
    attrs = []
    if e.lhead:
        attrs.append(f"lhead={quote('cluster_' + e.lhead)}")
    if e.style:
        attrs.append(f"style={e.style}")
    if e.label:
        attrs.append(f"label={quote(e.label)}")
    return f"{quote(e.src)} -> {quote(e.dst)}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";"


def graph_to_dot(g: Graph, legend: bool = True) -> str:
    """A `graph_view.Graph` as DOT text."""
    lines = ["digraph program {",
             '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, compound=true, newrank=true];',
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#555555", arrowsize=0.6];',
             f"  label={quote(g.title)}; labelloc=t;"]
    by_cluster: dict[str | None, list[Node]] = {}
    for n in g.nodes.values():
        by_cluster.setdefault(n.cluster if n.cluster in g.clusters or n.cluster == "outer" else None,
                              []).append(n)

    def cluster(c: Cluster, indent: str) -> Iterable[str]:
        yield f"{indent}subgraph {quote('cluster_' + c.id)} {{"
        if c.kind == "repeat":
            yield f"{indent}  label={quote(c.label)}; {_REPEAT_STYLE};"
        else:
            yield f"{indent}  label={quote(c.label)}; style=dashed; color=\"#999999\";"
        for n in by_cluster.get(c.id, []):
            yield f"{indent}  {_node_line(n)}"
        for child in g.children(c.id):
            yield from cluster(child, indent + "  ")
        yield f"{indent}}}"

    for key in ("outer", None):
        lines.extend(f"  {_node_line(n)}" for n in by_cluster.get(key, []))
    for c in g.children(None):
        lines.extend(cluster(c, "  "))
    lines.extend(f"  {_edge_line(e)}" for e in g.edges)
    if legend:
        lines.extend(_legend(g.collapsed))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _legend(collapsed: bool) -> list[str]:
    rows = [("forward op", "box", _OP_STYLE["forward"], 'style="filled,rounded"'),
            ("backward op", "box", _OP_STYLE["backward"], 'style="filled,rounded"'),
            ("loss op", "box", _OP_STYLE["loss"], 'style="filled,rounded"')]
    if not collapsed:
        rows += [("parameter", "ellipse", _VAR_STYLE["param"], ""),
                 ("parameter gradient", "ellipse", _VAR_STYLE["grad"], ""),
                 ("variable", "ellipse", _VAR_STYLE["var"], "")]
    out = ['  subgraph "cluster_legend" {', '    label="legend"; style=solid; color="#cccccc"; fontsize=9;']
    for i, (label, shape, style, extra) in enumerate(rows):
        out.append(f"    {quote(f'legend:{i}')} [label={quote(label)}, shape={shape}, fontsize=9, "
                   f"{style}{', ' + extra if extra else ''}];")
    out.append("    " + " -> ".join(quote(f"legend:{i}") for i in range(len(rows))) + " [style=invis];")
    out.append("  }")
    return out


def dot_program() -> str | None:
    """The Graphviz `dot` executable: $PYBACKWARD_DOT, else `dot` on PATH (None if absent)."""
    explicit = os.environ.get("PYBACKWARD_DOT")
    if explicit:
        return explicit if (os.path.isfile(explicit) and os.access(explicit, os.X_OK)) else shutil.which(explicit)
    return shutil.which("dot")


def render(dot_text: str, path: str | os.PathLike) -> None:
    """Write DOT text to `path`: as is for .dot/.gv, else rendered by Graphviz (atomically)."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ArgumentError(f"{path}: cannot tell the picture format from the suffix "
                            f"(use one of {', '.join(FORMATS)})")
    fmt = FORMATS[suffix]
    if fmt is None:
        write_atomic(path, dot_text.encode("utf-8"))
        return
    exe = dot_program()
    if exe is None:
        raise PyBackwardError(f"{path}: cannot render {fmt}: Graphviz's `dot` program is not installed "
                              "(install Graphviz, e.g. `apt-get install graphviz`; or draw an HTML page, "
                              "which needs no Graphviz, with -o FILE.html; or write DOT text with -o FILE.dot)")
    try:
        r = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PyBackwardError(f"{path}: cannot run Graphviz ({exe}): {e}") from None
    if r.returncode != 0 or not r.stdout:
        msg = " ".join(r.stderr.decode("utf-8", "replace").split()) or f"exit status {r.returncode}"
        raise PyBackwardError(f"{path}: Graphviz failed: {msg}")
    write_atomic(path, r.stdout)
