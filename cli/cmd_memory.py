"""`pybackward stats`: activation memory (pybackward.memory), plain and with checkpoints."""
from __future__ import annotations

import json

import click

import pybackward
from pybackward import memory as pm

# parse_bytes, resolve_checkpoints, append_with_checkpoints: shared with `append`, kept in common
# (scripts and tests import them from here too).
from .common import append_with_checkpoints, handle_errors, parse_bytes, resolve_checkpoints  # noqa: F401


def _has_backward(prog) -> bool:
    return any(isinstance(r, int) and r & 1 for r in (op.attr("op_role", 0) for op in prog.global_block().ops))


@click.command(short_help='Peak activation memory of PROGRAM; what backward reads.')
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="The size of every -1 dim.")
@click.option("--top", type=click.IntRange(min=0), default=8, show_default=True,
              help="How many vars to list at the peak.")
@click.option("--keep", multiple=True, help="A var live to the end (fetched, e.g. the loss); repeatable.")
@click.option("--loss", help="PROGRAM is a forward program: report its backward section (built in "
                             "memory), plain and with --checkpoints.")
@click.option("--checkpoints", metavar="auto|NAME[,NAME...]",
              help="With --loss: the peak with these checkpoints (\"auto\": pick them).")
@click.option("--memory-budget", metavar="BYTES", help="With --checkpoints auto: the fewest recomputed "
                                                      "ops whose peak fits (4096, 64KiB, 1.5MB, ...).")
@click.option("--no-grad", "no_grad", multiple=True, help="With --loss: a var that gets no gradient.")
@click.option("--saved", is_flag=True, help="List the forward values the backward section reads "
                                            "(what must stay in memory), per backward op.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def stats(program, batch, top, keep, loss, checkpoints, memory_budget, no_grad, saved, as_json):
    """Peak activation memory of PROGRAM by static liveness (block 0, op order).

    A var is live from its first write to its last read; every -1 dim counts
    as --batch. Parameters and their gradients are totalled apart. With
    --loss, PROGRAM is a forward program: the report is for its backward
    section, and --checkpoints shows what recompute would save.
    """
    if saved:
        _print_saved(program, batch, as_json)
        return
    if batch < 1:
        raise pybackward.ArgumentError(f"--batch must be at least 1, not {batch}")
    prog = pybackward.load(program)
    if loss is None:
        if checkpoints or memory_budget or no_grad:
            raise pybackward.ArgumentError("--checkpoints, --memory-budget and --no-grad need --loss")
        rep = pm.memory(prog, batch_size=batch, top=top, keep=keep)
        click.echo(rep.to_json() if as_json else str(rep))
        return
    if _has_backward(prog):
        raise pybackward.ArgumentError(f"{program} already has a backward section: drop --loss to "
                                       "report it as it is")
    prog.global_block().var(loss)
    lines: list[str] = []
    names = resolve_checkpoints(prog, loss, checkpoints, memory_budget, batch, no_grad, lines.append)
    plain = prog.clone()
    pybackward.append_backward(loss, program=plain, no_grad_set=set(no_grad) or None)
    rep = pm.memory(plain, batch_size=batch, top=top, keep=list(keep) + [loss])
    out: dict = {"plain": rep.to_dict()}
    after = None
    if names:
        ck = prog.clone()
        _, used = pybackward.append_backward(loss, program=ck, checkpoints=names,
                                             no_grad_set=set(no_grad) or None)
        after = pm.memory(ck, batch_size=batch, top=top, keep=list(keep) + [loss])
        out["checkpoints"] = used
        out["recompute"] = after.to_dict()
    if as_json:
        click.echo(json.dumps(out))
        return
    click.echo("without checkpoints:\n" + _indent(str(rep)))
    if after is not None:
        click.echo(f"with checkpoints {', '.join(out['checkpoints'])}:\n" + _indent(str(after)))
        ratio = after.peak_bytes / rep.peak_bytes if rep.peak_bytes else 1.0
        click.echo(f"peak activation memory {pm.human(rep.peak_bytes)} -> {pm.human(after.peak_bytes)} "
                   f"({ratio:.0%})")
    for line in lines:
        click.echo(line, err=True)


def _indent(s: str) -> str:
    return "\n".join("  " + line for line in s.splitlines())


def _print_saved(program: str, batch: int, as_json: bool) -> None:
    import json
    from pybackward.memory import human
    from pybackward.analysis.residuals import saved_residuals
    rows = saved_residuals(pybackward.load(program), batch)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows]))
        return
    total = sum(r.bytes or 0 for r in rows)
    click.echo(f"{len(rows)} forward values are read by the backward section ({human(total)} at batch {batch}):")
    for r in rows:
        size = human(r.bytes) if r.bytes is not None else "?"
        click.echo(f"  {r.name:<36} {size:>10}  read by {', '.join(r.readers)}")
