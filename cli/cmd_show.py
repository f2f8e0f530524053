"""`pybackward show`: a readable listing of a program (or Paddle's print, pbtxt, JSON, a summary)."""
from __future__ import annotations

import click

import pybackward

from .common import handle_errors


@click.command()
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--block", "block", type=click.IntRange(min=0), default=None,
              help="Show only this block (and its sub-blocks).")
@click.option("--no-attrs", is_flag=True, help="Hide op attributes.")
@click.option("--all-attrs", is_flag=True, help="Show every attr, op_callstack and the like included.")
@click.option("--no-vars", is_flag=True, help="Hide variable declarations.")
@click.option("--backward-only", is_flag=True,
              help="Only the backward ops (op_role bit 1), and the vars they use.")
@click.option("--forward-only", is_flag=True,
              help="Only the forward ops (the loss op included; no backward or optimizer ops).")
@click.option("--flat", is_flag=True, help="List block by block instead of nesting sub-blocks under their ops.")
@click.option("--format", "fmt", type=click.Choice(["text", "pbtxt", "json", "paddle"]), default="text", show_default=True,
              help="text: Paddle-style listing; pbtxt: protobuf text format; json: blocks, vars and ops as "
                   "data; paddle: exactly what Paddle's print(program) prints.")
@click.option("--summary", "as_summary", is_flag=True,
              help="Only a summary: feeds, parameters, loss candidates, backward present or not, op types.")
@click.option("--json", "as_json", is_flag=True, help="With --summary: print it as JSON.")
@handle_errors
def show(program, block, no_attrs, all_attrs, no_vars, backward_only, forward_only, flat, fmt, as_summary, as_json):
    """Print a readable listing of PROGRAM (legacy or PIR).

    PROGRAM is a legacy ProgramDesc (binary or .pbtxt) or a PIR program
    (.json), told apart by content; a PIR program prints as Paddle prints it.

    Each op prints as `outputs = type(inputs) {attrs}` after its index and a
    mark: B backward, L the loss op, O optimizer. Sub-blocks are listed,
    indented, under the op that owns them.
    """
    import json
    if backward_only and forward_only:
        raise pybackward.ArgumentError("give --backward-only or --forward-only, not both")
    section = "backward" if backward_only else "forward" if forward_only else None
    if as_json and not as_summary:
        raise pybackward.ArgumentError("--json goes with --summary (for a full listing as JSON: --format json)")
    prog = pybackward.load(program)
    if pybackward.formats.is_pir(prog):
        _show_pir(prog, block, no_attrs, all_attrs, no_vars, section, flat, fmt, as_summary, as_json)
        return
    if as_summary:
        s = pybackward.summary(prog)
        click.echo(json.dumps(s.to_json()) if as_json else s.to_text())
        return
    text = pybackward.legacy.text
    if fmt == "pbtxt":
        click.echo(text.program_to_pbtxt(prog, block=block, section=section), nl=False)
    elif fmt == "paddle":
        from pybackward.views.paddle_text import program_to_paddle_text
        if section or no_attrs or all_attrs or no_vars or flat:
            raise pybackward.ArgumentError("--format paddle prints what Paddle prints; of the listing options "
                                           "it takes only --block")
        click.echo(program_to_paddle_text(prog, block=block))
    elif fmt == "json":
        click.echo(json.dumps(text.program_to_dict(prog, show_attrs=not no_attrs, all_attrs=True,
                                                   show_vars=not no_vars, block=block, section=section)))
    else:
        click.echo(text.program_to_text(prog, show_attrs=not no_attrs, all_attrs=all_attrs,
                                        show_vars=not no_vars, block=block, section=section, nested=not flat))


def _show_pir(prog, block, no_attrs, all_attrs, no_vars, section, flat, fmt, as_summary, as_json) -> None:
    """A PIR program: Paddle's own print(program) text, its JSON, or the summary."""
    import json
    from pybackward import pir
    if as_summary:
        s = pir.summary(prog)
        click.echo(json.dumps(s.to_json()) if as_json else s.to_text())
        return
    given = [o for o, on in (("--block", block is not None), ("--no-attrs", no_attrs), ("--all-attrs", all_attrs),
                             ("--no-vars", no_vars), ("--backward-only/--forward-only", section), ("--flat", flat))
             if on]
    if given:
        raise pybackward.ArgumentError(f"{prog.source}: a PIR program prints as Paddle prints it; "
                                       f"{', '.join(given)} apply to legacy programs")
    if fmt == "pbtxt":
        raise pybackward.ArgumentError(f"{prog.source}: a PIR program is JSON, not protobuf: "
                                       "--format json prints it (indented), text or paddle lists it")
    if fmt == "json":
        click.echo(pir.dumps(prog, readable=True).decode("utf-8"))
    else:
        click.echo(pir.to_text(prog), nl=False)
