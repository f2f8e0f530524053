"""`pybackward diff`: what changed between two programs, block by block."""
from __future__ import annotations

import json
import sys

import click

import pybackward

from .common import handle_errors


@click.command(short_help='Compare programs A and B: ops added, removed or changed; vars.')
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--ignore-attr", "ignore_attrs", multiple=True, metavar="NAME",
              help="Leave this attr out of the comparison (repeatable).")
@click.option("--all-attrs", is_flag=True,
              help="Compare every attr: op_callstack, op_namescope and op_device are ignored by default.")
@click.option("-U", "--context", type=click.IntRange(min=0), default=2, show_default=True,
              help="Unchanged ops shown around each change.")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@click.option("--color/--no-color", default=None, help="Colour the output (default: when stdout is a terminal).")
@handle_errors
def diff(a, b, ignore_attrs, all_attrs, context, as_json, color):
    """Compare programs A and B (binary or .pbtxt): ops added, removed and
    changed (aligned by content), vars added, removed and changed. Two PIR
    programs (.json) are compared canonically: value ids renumbered in walk
    order and Paddle's unordered attribute lists sorted, as a unified diff.

    Exit status: 0 equal, 1 different, 2 bad input.
    """
    from pybackward.views.diff import DEFAULT_IGNORED_ATTRS, diff_programs
    pa, pb = pybackward.load(a), pybackward.load(b)
    if pybackward.formats.is_pir(pa) or pybackward.formats.is_pir(pb):
        _diff_pir(pa, pb, a, b, ignore_attrs, all_attrs, context, as_json)
        return
    ignore = (frozenset() if all_attrs else DEFAULT_IGNORED_ATTRS) | frozenset(ignore_attrs)
    d = diff_programs(pa, pb, ignore, a_label=a, b_label=b)
    if as_json:
        click.echo(json.dumps(d.to_json()))
    elif not d.equal:
        click.echo(d.to_text(color=True, context=context), color=color)
    elif sys.stdout.isatty():
        click.echo(f"{a} and {b}: programs are equal")
    if not d.equal:
        click.get_current_context().exit(1)


def _diff_pir(pa, pb, a: str, b: str, ignore_attrs, all_attrs, context: int, as_json: bool) -> None:
    from pybackward import pir
    if not (isinstance(pa, pir.Program) and isinstance(pb, pir.Program)):
        pir_one, other = (a, b) if isinstance(pa, pir.Program) else (b, a)
        raise pybackward.ArgumentError(f"{pir_one} is a PIR program and {other} a legacy one: diff compares "
                                       "programs of one IR")
    if ignore_attrs or all_attrs:
        raise pybackward.ArgumentError("--ignore-attr and --all-attrs apply to legacy programs: PIR programs "
                                       "are compared whole (canonically)")
    lines = pir.diff(pa, pb, (a, b), context)
    if as_json:
        click.echo(json.dumps({"a": a, "b": b, "equal": not lines, "diff": lines}))
    elif lines:
        click.echo("\n".join(lines))
    elif sys.stdout.isatty():
        click.echo(f"{a} and {b}: programs are equal (canonically)")
    if lines:
        click.get_current_context().exit(1)
