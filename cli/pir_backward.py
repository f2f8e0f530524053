"""`append` and `gradients` on PIR programs (`.json`): the commands' PIR path.

The same options as for legacy files. A value is named by REF: `%N` (its id in
IN) or a parameter / data / fetch / shadow_output name. Gradients have no
names in PIR; the pairs print `%N` ids in OUT, and `run --fetch NAME@GRAD`
finds them again.
"""
from __future__ import annotations

import json

import click

import pybackward

from pybackward.base.names import printable

from .common import evaluate_pir, info, load_arrays, recorded_deviations, run_command, with_values_beside


def _ref(v) -> str:
    """How a user names value `v`: its parameter / data name, else `%N`."""
    op = v.defining_op
    if op is not None and op.name == "builtin.parameter":
        return op.attr("parameter_name")
    if op is not None and op.name == "pd_op.data":
        return op.attr("name")
    return f"%{v.id}"


def resolve_pir_loss(prog, loss: str | None):
    """--loss REF, or the program's only loss candidate."""
    from pybackward.pir.summary import loss_candidates
    if loss:
        return prog.value(loss)
    cands = loss_candidates(prog)
    where = prog.source or "the program"
    if len(cands) == 1:
        return prog.value(cands[0].name)
    if not cands:
        raise pybackward.ArgumentError(f"{where}: no --loss given and no loss candidate (a one-element float "
                                       "value that no op reads); give --loss %N or a name")
    listed = ", ".join(f"{c.name} ({c.dtype}{c.shape}, from {c.op})" for c in cands)
    raise pybackward.ArgumentError(f"{where}: no --loss given and {len(cands)} loss candidates: {listed}; "
                                   "give --loss REF")


def refuse_existing_pir_backward(prog) -> None:
    from pybackward.pir.summary import backward_start
    if backward_start(prog) < len(prog.ops):
        raise pybackward.ArgumentError(f"{prog.source or 'the program'}: already has a backward section "
                                       "(grad ops); pass --force to append another")


def compare_pir_golden(prog, expect: str, update: bool, as_json: bool, quiet: bool) -> tuple[dict, str | None]:
    """Compare with a golden PIR program, canonically (value ids renumbered)."""
    import os
    from pybackward.pir.canonical import diff, equal
    exists = os.path.exists(expect)
    if update:
        pybackward.save(prog, expect)
        info(f"{'updated' if exists else 'wrote'} golden {expect}", quiet)
        return {"golden": expect, "equal": True, "updated": True}, None
    if not exists:
        return {"golden": expect, "exists": False}, f"golden {expect} does not exist (rerun with --update to write it)"
    gold = pybackward.load(expect)
    again = pybackward.loads(pybackward.dumps(prog))
    if equal(again, gold):
        if not as_json:
            info(f"matches golden {expect}", quiet)
        return {"golden": expect, "equal": True}, None
    lines = diff(again, gold, names=("result", expect))
    if not as_json:
        click.echo("\n".join(lines))
    return ({"golden": expect, "equal": False, "diff": lines[:200]},
            f"the result differs from golden {expect} (rerun with --update to accept it)")


def append_pir(prog, src: str, out: str | None, *, in_place: bool, loss: str | None, parameters, no_grad,
               checkpoints: str | None, memory_budget, as_json: bool, show_pairs: bool, quiet: bool, force: bool,
               expect: str | None, update: bool, run_after: bool, params, startup, feeds_npz, feed_items,
               check_nan: bool, paddle_exact: bool, progress, batch: int = 1) -> None:
    """`pybackward append` on a PIR program."""
    from pybackward.backward.pir.api import append_backward
    if not force:
        refuse_existing_pir_backward(prog)
    loss_v = resolve_pir_loss(prog, loss)
    cps = None
    if checkpoints:
        cps = "auto" if checkpoints == "auto" else [c for c in checkpoints.split(",") if c]
    ops_before = prog.num_ops()
    progress.stage("appending the backward section")
    from .common import parse_bytes
    budget = parse_bytes(memory_budget)
    if budget is not None and cps is None:
        cps = "auto"
    got = append_backward(loss_v, list(parameters) or None, list(no_grad) or None, checkpoints=cps,
                          program=prog, paddle_exact=paddle_exact, memory_budget=budget, batch_size=batch)
    pairs, used = got if isinstance(got, tuple) else (got, None)
    appended = prog.num_ops() - ops_before
    rows = [[_ref(p), None if g is None else f"%{g.id}"] for p, g in pairs]
    loss_ref = _ref(loss_v)
    values = None
    if run_after:
        params, feeds_npz = with_values_beside(src, params, startup, feeds_npz, feed_items)
        progress.stage("reading the values")
        p, f = load_arrays(params, feeds_npz, feed_items, prog)
        fetch = [loss_ref] + [g for _, g in rows if g]
        values = evaluate_pir(prog, p, f, fetch, check_nan, progress)
    written = None
    if out or in_place:
        target = src if in_place else out
        progress.stage(f"writing {target}")
        pybackward.save(prog, target)
        written = target
    n_grads = sum(1 for _, g in rows if g)
    if not as_json:
        if show_pairs:
            for p_name, g in rows:
                click.echo(f"{printable(p_name)} -> {printable(g)}")
        if written:
            info(f"wrote {written} (loss {loss_ref}: {appended} ops appended, {n_grads} parameter "
                 f"gradient{'s' * (n_grads != 1)}; run --fetch NAME@GRAD finds them)", quiet)
            again = run_command(written, params, feeds_npz, feed_items, startup) if run_after else None
            if again:
                info(f"run it again: {again}", quiet)
    result = failure = None
    if expect:
        result, failure = compare_pir_golden(prog, expect, update, as_json, quiet)
    if as_json:
        doc = {"output": written, "loss": loss_ref, "params_grads": rows}
        if used:
            doc["checkpoints"] = [_ref(v) for v in used]
        if recorded_deviations():
            doc["deviations"] = recorded_deviations()
        if result is not None:
            doc["expect"] = result
        if values is not None:
            from .common import value_to_json
            doc["run"] = {n: value_to_json(v) for n, v in values.items()}
        click.echo(json.dumps(doc))
    if failure:
        raise pybackward.CheckFailedError(failure)
    if values is not None and not as_json:
        from .common import show_values
        show_values(list(values), list(values.values()), None)


def gradients_pir(prog, out: str | None, *, targets, inputs, target_grads, no_grad, as_json: bool, force: bool,
                  quiet: bool, expect: str | None, update: bool, paddle_exact: bool, progress) -> None:
    """`pybackward gradients` on a PIR program."""
    from pybackward.backward.pir.api import gradients
    if not force:
        refuse_existing_pir_backward(prog)
    tgrads = [None if g == "-" else g for g in target_grads] or None
    progress.stage("appending the gradients")
    grads = gradients(list(targets), list(inputs), tgrads, list(no_grad) or None, program=prog,
                      paddle_exact=paddle_exact)
    if out:
        progress.stage(f"writing {out}")
        pybackward.save(prog, out)
    rows = [[x, None if g is None else f"%{g.id}"] for x, g in zip(inputs, grads)]
    result = failure = None
    if expect:
        result, failure = compare_pir_golden(prog, expect, update, as_json, quiet)
    if as_json:
        doc = {"output": out, "grads": rows}
        if result is not None:
            doc["expect"] = result
        click.echo(json.dumps(doc))
    else:
        for x, g in rows:
            click.echo(f"{printable(x)} -> {printable(g)}")
        if out:
            info(f"wrote {out}", quiet)
    if failure:
        raise pybackward.CheckFailedError(failure)
