"""`pybackward stats`: activation memory (pybackward.memory), plain and with checkpoints."""
from __future__ import annotations

import json

import click

import pybackward
from pybackward.base.names import printable

# parse_bytes, resolve_checkpoints, append_with_checkpoints: shared with `append`, kept in common
# (scripts and tests import them from here too).
from .common import append_with_checkpoints, handle_errors, parse_bytes, resolve_checkpoints  # noqa: F401
from .common import legacy_only
from .common import Progress, checkpoint_choice, command_progress, quiet_option


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
@quiet_option
@handle_errors
def stats(program, batch, top, keep, loss, checkpoints, memory_budget, no_grad, saved, as_json, quiet):
    """Peak activation memory of PROGRAM by static liveness (block 0, op order).

    A var is live from its first write to its last read; every -1 dim counts
    as --batch. Parameters and their gradients are totalled apart. With
    --loss, PROGRAM is a forward program: the report is for its backward
    section, and --checkpoints shows what recompute would save.

    A PIR program (.json) is reported as it is, over its SSA values (a value
    is live from its op to its last use, regions included; named by data or
    parameter name, else %N as `run --fetch` takes it); with --loss, the PIR
    pass appends its backward section (--checkpoints: names, %N or auto);
    --memory-budget and --saved take legacy programs only so far.
    """
    if batch < 1:
        raise pybackward.ArgumentError(f"--batch must be at least 1, not {batch}")
    with command_progress("stats:", quiet) as bar:
        bar.stage(f"loading {program}")
        if saved:
            text = _saved_report(program, batch, as_json)
        else:
            prog = pybackward.load(program)
            from pybackward import pir
            if isinstance(prog, pir.Program):
                text = _pir_report(prog, program, batch, top, keep, loss, checkpoints, memory_budget, no_grad,
                                   as_json, bar)
            else:
                text = _report(prog, program, batch, top, keep, loss, checkpoints,
                               memory_budget, no_grad, as_json, bar)
    click.echo(text)


def _pir_report(prog, program: str, batch: int, top: int, keep, loss, checkpoints, memory_budget, no_grad,
                as_json: bool, bar: Progress) -> str:
    """The peak report of a PIR program (`pybackward.memory` over its SSA values): as it is,
    or (with --loss) of the backward section the PIR pass appends, plain and with
    --checkpoints (names / %N, or "auto": the pass's own sqrt(n) choice)."""
    from pybackward import memory as pm
    from pybackward import pir
    if loss is None:
        if checkpoints or memory_budget or no_grad:
            raise pybackward.ArgumentError("--checkpoints, --memory-budget and --no-grad need --loss")
        bar.stage("measuring")
        rep = pm.memory(prog, batch_size=batch, top=top, keep=keep)
        return rep.to_json() if as_json else str(rep)
    if memory_budget:
        raise pybackward.ArgumentError(f"{program}: is a PIR program; --memory-budget (the checkpoint search "
                                       "under a budget) takes legacy programs only so far: give --checkpoints "
                                       "NAME,... or auto")
    if pm.has_backward(prog):
        raise pybackward.ArgumentError(f"{program} already has a backward section: drop --loss to "
                                       "report it as it is")
    loss_v = prog.value(loss)
    names = None
    if checkpoints:
        names = "auto" if checkpoints.strip() == "auto" else [c.strip() for c in checkpoints.split(",") if c.strip()]
        for n in names if isinstance(names, list) else ():
            prog.value(n)
    keep_all = list(keep) + [loss]

    def appended(with_checkpoints):
        copy = pir.loads(pir.dumps(prog), program)
        res = pybackward.append_backward(f"%{loss_v.id}", program=copy, no_grad_set=set(no_grad) or None,
                                         checkpoints=with_checkpoints)
        return copy, (res[1] if with_checkpoints else None)

    bar.stage("appending the backward section")
    plain, _ = appended(None)
    rep = pm.memory(plain, batch_size=batch, top=top, keep=keep_all)
    out: dict = {"plain": rep.to_dict()}
    after = None
    if names:
        bar.stage("appending the backward section with checkpoints")
        ck, used = appended(names)
        after = pm.memory(ck, batch_size=batch, top=top, keep=keep_all)
        out["checkpoints"] = [pm.value_name(v) for v in used]
        out["recompute"] = after.to_dict()
    if as_json:
        return json.dumps(out)
    lines = ["without checkpoints:\n" + _indent(str(rep))]
    if after is not None:
        lines.append(f"with checkpoints {_names(out['checkpoints']) or 'none'}:\n" + _indent(str(after)))
        ratio = after.peak_bytes / rep.peak_bytes if rep.peak_bytes else 1.0
        lines.append(f"peak activation memory {pm.human(rep.peak_bytes)} -> {pm.human(after.peak_bytes)} "
                     f"({ratio:.0%})")
    return "\n".join(lines)


def _report(prog, program: str, batch: int, top: int, keep, loss, checkpoints, memory_budget, no_grad,
            as_json: bool, bar: Progress) -> str:
    """The peak report: of PROGRAM as it is, or (with --loss) of its backward
    section, plain and with --checkpoints (said once: the checkpoints, the
    peak before and after, and for "auto" what is recomputed and the budget)."""
    from pybackward import memory as pm
    if loss is None:
        if checkpoints or memory_budget or no_grad:
            raise pybackward.ArgumentError("--checkpoints, --memory-budget and --no-grad need --loss")
        bar.stage("measuring")
        rep = pm.memory(prog, batch_size=batch, top=top, keep=keep)
        return rep.to_json() if as_json else str(rep)
    if _has_backward(prog):
        raise pybackward.ArgumentError(f"{program} already has a backward section: drop --loss to "
                                       "report it as it is")
    prog.global_block().var(loss)
    names, choice = checkpoint_choice(prog, loss, checkpoints, memory_budget, batch, no_grad, bar)
    bar.stage("appending the backward section")
    plain = prog.clone()
    pybackward.append_backward(loss, program=plain, no_grad_set=set(no_grad) or None)
    rep = pm.memory(plain, batch_size=batch, top=top, keep=list(keep) + [loss])
    out: dict = {"plain": rep.to_dict()}
    after = None
    if names:
        bar.stage("appending the backward section with checkpoints")
        ck = prog.clone()
        _, used = pybackward.append_backward(loss, program=ck, checkpoints=names,
                                             no_grad_set=set(no_grad) or None)
        after = pm.memory(ck, batch_size=batch, top=top, keep=list(keep) + [loss])
        out["checkpoints"] = used
        out["recompute"] = after.to_dict()
    if choice is not None:
        out["choice"] = {"checkpoints": list(choice.checkpoints), "recomputed_ops": choice.recomputed_ops,
                         "forward_ops": choice.forward_ops, "budget": choice.budget, "fits": choice.fits}
    if as_json:
        return json.dumps(out)
    lines = ["without checkpoints:\n" + _indent(str(rep))]
    if after is not None:
        lines.append(f"with checkpoints {_names(out['checkpoints'])}:\n" + _indent(str(after)))
        ratio = after.peak_bytes / rep.peak_bytes if rep.peak_bytes else 1.0
        last = (f"peak activation memory {pm.human(rep.peak_bytes)} -> {pm.human(after.peak_bytes)} "
                f"({ratio:.0%})")
        if choice is not None:
            last += f"; recomputes {choice.recomputed_ops} of {choice.forward_ops} forward ops"
        lines.append(last)
    elif choice is not None:
        lines.append("checkpoints auto: none" + (" needed" if choice.budget is not None and choice.fits
                                                 else " lowers the estimated peak"))
    if choice is not None and choice.budget is not None:
        lines.append(f"budget {pm.human(choice.budget)}: "
                     + ("fits" if choice.fits else "does not fit even with the lowest peak found"))
    return "\n".join(lines)


def _names(names) -> str:
    """Names from the program for the text report, escaped (`base.names.printable`): a name
    holding ESC sequences or a CR cannot rewrite the terminal."""
    return ", ".join(printable(n) for n in names)


def _indent(s: str) -> str:
    return "\n".join("  " + line for line in s.split("\n"))


def _saved_report(program: str, batch: int, as_json: bool) -> str:
    from pybackward.memory import human
    from pybackward.analysis.residuals import saved_residuals
    rows = saved_residuals(legacy_only(pybackward.load(program), "stats --saved", program), batch)
    if as_json:
        return json.dumps([r.__dict__ for r in rows])
    total = sum(r.bytes or 0 for r in rows)
    lines = [f"{len(rows)} forward values are read by the backward section ({human(total)} at batch {batch}):"]
    for r in rows:
        size = human(r.bytes) if r.bytes is not None else "?"
        lines.append(f"  {printable(r.name):<36} {size:>10}  read by {_names(r.readers)}")
    return "\n".join(lines)
