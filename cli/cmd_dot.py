"""`pybackward dot`: a picture of a program (Graphviz, or a self-contained HTML page)."""
from __future__ import annotations

from pathlib import Path

import click

import pybackward

from .common import handle_errors, refuse_outputs_over_inputs


@click.command(short_help="Draw PROGRAM's graph (HTML, SVG, PNG, PDF or DOT).")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write here: .html (laid out by pybackward, pan and zoom, no Graphviz needed), "
                   ".svg, .png or .pdf (rendered by Graphviz's `dot`), or .dot/.gv text. "
                   "Default: DOT text on stdout.")
@click.option("--block", type=click.IntRange(min=0), default=0, show_default=True,
              help="Draw this block (and its sub-blocks).")
@click.option("--highlight", metavar="REGEX", help="Mark the ops whose type and the vars whose name match.")
@click.option("--around", metavar="VAR", help="Draw only the ops within --depth steps of VAR.")
@click.option("--depth", type=click.IntRange(min=1), default=2, show_default=True, metavar="N",
              help="With --around: how many ops away from VAR.")
@click.option("--collapse/--no-collapse", default=None,
              help="One node per name scope (the var name before its first '.'), or every op and var. "
                   "Default: collapse above --collapse-above ops.")
@click.option("--collapse-above", type=click.IntRange(min=0), default=80, show_default=True, metavar="N",
              help="Collapse programs with more than N ops to draw (unless --no-collapse).")
@click.option("--fold/--no-fold", default=True, show_default=True,
              help="Draw a layer repeated N times (the same op sequence over and over) once, marked xN.")
@click.option("--expand/--no-expand", default=None,
              help="Draw sub-blocks op by op (nested), or one node per sub-block. "
                   "Default: expand up to --collapse-above ops.")
@click.option("--max-nodes", type=click.IntRange(min=1), default=None, metavar="N",
              help="Refuse pictures with more nodes than this (default 1500; 50000 for .html).")
@click.option("--no-legend", is_flag=True, help="Leave out the legend.")
@click.option("--json", "as_json", is_flag=True,
              help="Print what was drawn as JSON on stdout: output, nodes, edges, clusters "
                   "(and the DOT text when there is no -o).")
@handle_errors
def dot(program, output, block, highlight, around, depth, collapse, collapse_above, fold, expand, max_nodes,
        no_legend, as_json):
    """Draw PROGRAM's graph: forward ops blue, backward orange, the loss op red;
    parameters gold, their gradients gold and dashed."""
    from pybackward.views import dot as _dot, graph as graph_view, html as html_view
    from pybackward.base.files import write_atomic
    html = bool(output) and Path(output).suffix.lower() in (".html", ".htm")
    if max_nodes is None:
        max_nodes = HTML_MAX_NODES if html else graph_view.DEFAULT_MAX_NODES
    refuse_outputs_over_inputs([output], [program], hint="give another -o")
    prog = pybackward.load(program)
    if pybackward.formats.is_pir(prog):
        from pybackward.views.pir_graph import build_pir_graph
        given = [o for o, on in (("--block", block != 0), ("--around", around is not None), ("--collapse", collapse),
                                 ("--expand/--no-expand", expand is not None)) if on]
        if given:
            raise pybackward.ArgumentError(f"{program}: a PIR program is drawn whole, its regions as boxes; "
                                           f"{', '.join(given)} apply to legacy programs")
        g = build_pir_graph(prog, highlight=highlight, max_nodes=max_nodes)
    else:
        g = graph_view.build_graph(prog, block=block, highlight=highlight, collapse=collapse,
                                   collapse_above=collapse_above, fold=fold, expand=expand, around=around,
                                   depth=depth, max_nodes=max_nodes)
    report = {"program": program, "output": output, "title": g.title, "collapsed": g.collapsed,
              "nodes": len(g.nodes), "edges": len(g.edges), "clusters": len(g.clusters)}
    if html:
        write_atomic(output, html_view.graph_to_html(g).encode("utf-8"))
        _done(report, as_json, f"wrote {output} ({len(g.nodes)} nodes)")
        return
    text = _dot.graph_to_dot(g, legend=not no_legend)
    if not output:
        if as_json:
            _done({**report, "dot": text}, True, "")
        else:
            click.echo(text, nl=False)
        return
    _dot.render(text, output)
    _done(report, as_json, f"wrote {output}")


def _done(report: dict, as_json: bool, line: str) -> None:
    if as_json:
        import json
        click.echo(json.dumps(report))
    else:
        click.echo(line, err=True)


#: The node limit of the HTML view: it lays out in seconds where Graphviz would not.
HTML_MAX_NODES = 50000
