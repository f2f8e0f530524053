"""`pybackward append` and `pybackward gradients`: one file, a batch of files
(`--out-dir`), and the comparison with a golden program (`--expect`)."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import click

import pybackward
from pybackward.base.errors import PyBackwardError
from pybackward.base.names import printable
from pybackward.base.suffixes import check_program_path

from .common import (PausedCollector, Progress, append_with_checkpoints, beside_hint, command_progress, evaluate,
                     feed_paths, handle_errors, info, legacy_only, load_arrays, one_line, ops_option, quiet_option,
                     recorded_deviations, refuse_outputs_over_inputs, resolve_loss, run_command, run_options,
                     run_progress, show_values, type_text, value_to_json, with_values_beside)


def _write_output(prog, out: str | None, in_place: bool, src: str) -> str:
    """Write atomically to OUT, or over SRC with --in-place.

    `save` writes a uniquely named temporary file beside the target and
    renames it over the target, so IN holds the old bytes or the complete new
    program, concurrent runs never share a file, and no other file (no `IN~`)
    is created or removed.
    """
    if in_place:
        if out:
            raise pybackward.ArgumentError("give OUT or --in-place, not both")
        pybackward.save(prog, src)
        return src
    if not out:
        raise pybackward.ArgumentError("missing OUT (or pass --in-place to overwrite the input)")
    pybackward.save(prog, out)
    return out


def expect_options(fn):
    fn = click.option("--update", is_flag=True,
                      help="With --expect: rewrite the golden (binary, and its .pbtxt beside it) "
                           "when it differs or is missing, and exit 0.")(fn)
    fn = click.option("--expect", "expect", metavar="GOLDEN", type=click.Path(dir_okay=False),
                      help="Compare the result with this golden program: print the differences and "
                           "exit 1 when they differ (OUT is optional then).")(fn)
    return fn


def _compare_golden(prog, expect: str, update: bool, label: str, as_json: bool, quiet: bool = False):
    """Compare with the golden; print the diff (unless JSON). Returns the result
    and the message of a failure (None when it passed)."""
    from pybackward.views.diff import check_golden, golden_paths
    res = check_golden(prog, expect, update=update, label=label)
    _, text = golden_paths(expect)
    if res.diff is not None and not res.diff.equal and not as_json:
        click.echo(res.diff.to_text(color=True))
    if res.updated:
        info(f"{'updated' if res.exists else 'wrote'} golden {expect} (and {text})", quiet)
        return res, None
    if not res.exists:
        return res, f"golden {expect} does not exist (rerun with --update to write it)"
    if not res.equal:
        return res, f"the result differs from golden {expect} (rerun with --update to accept it)"
    if not as_json:
        info(f"matches golden {expect}", quiet)
    return res, None


@click.command()
@click.option("--loss", default=None,
              help="Name of the loss variable (default: the program's only loss candidate, "
                   "see `pybackward show --summary`).")
@click.option("--parameter", "parameters", multiple=True, help="Only return the grads of these parameters.")
@click.option("--no-grad", "no_grad", multiple=True, help="A variable that gets no gradient (repeatable).")
@click.option("--aggregation", type=click.Choice(["sum", "pairwise"]), default="sum",
              help="How repeated gradients are added: one sum op (Paddle's default) or a grad_add chain.")
@click.option("--checkpoints", metavar="auto|NAME[,NAME...]", default=None,
              help="Recompute (Paddle's checkpoints): keep these vars for the backward pass and run "
                   "the forward ops between them again there; \"auto\" picks them (pybackward.memory) "
                   "and prints the estimated peak activation memory before and after.")
@click.option("--memory-budget", metavar="BYTES", default=None,
              help="With --checkpoints auto: the fewest recomputed ops whose estimated peak activation "
                   "memory fits (4096, 64KiB, 1.5MB, 2GiB).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --checkpoints auto: the size of every -1 dim in the memory estimate.")
@click.option("--verify", is_flag=True,
              help="Check the result: every grad var has its forward var's shape and dtype, every grad op "
                   "uses only its registered slots (exit 1 if not).")
@click.option("--json", "as_json", is_flag=True, help="Print the (param, grad) pairs (and any comparison) as JSON.")
@click.option("--pairs", "show_pairs", is_flag=True,
              help="Print each parameter and its gradient (`PARAM -> GRAD`, one a line) on stdout; by "
                   "default only a summary line is printed (on stderr).")
@quiet_option
@click.option("--force", is_flag=True,
              help="Append even if IN already has a backward section (ops with the backward op_role, or "
                   "@GRAD vars); by default such a file is refused, as a second section read back from a "
                   "file gets wrongly declared gradients.")
@click.option("--in-place", is_flag=True, help="Overwrite IN (atomically: IN holds the old program or the complete new one).")
@click.option("--out-dir", "out_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Process every IN, writing each to DIR (as DIR/NAME, or under its path relative to "
                   "the inputs' common directory when names repeat); a bad file is reported and the "
                   "others still complete.")
@expect_options
@click.option("--run", "run_after", is_flag=True,
              help="Run the result and print the loss and parameter gradients (with --params/--feeds; "
                   "defaults: params.npz and feeds.npz beside IN).")
@run_options
@click.option("--paddle-exact", is_flag=True,
              help="Write Paddle's program even where its gradients are wrong (docs/deviations.md).")
@click.argument("paths", metavar="IN [OUT] | IN... --out-dir DIR", nargs=-1, type=click.Path(dir_okay=False))
@handle_errors
@ops_option
def append(loss, parameters, no_grad, aggregation, checkpoints, memory_budget, batch, verify, as_json, show_pairs,
           quiet, force, in_place, out_dir, expect, update, run_after, startup, params, feeds_npz, feed_items, check_nan,
           paddle_exact, paths):
    """Append the backward section of --loss to IN and write OUT.

    \b
    pybackward append --loss L IN OUT
    pybackward append --loss L --in-place IN
    pybackward append --loss L IN --expect GOLDEN [--update]
    pybackward append --loss L IN... --out-dir DIR
    """
    if update and not expect:
        raise pybackward.ArgumentError("--update rewrites the golden named by --expect GOLDEN; give it")

    used: dict[int, list[str] | None] = {}

    def compute(prog, progress=None):
        from pybackward.backward.guards import refuse_existing_backward
        from pybackward.backward.steps import all_or_nothing
        # Without checkpoints, the copy the pass keeps to restore the program if it fails is
        # taken here, once: the guard reads its bytes (three counts in C, not every op's attrs),
        # and the pass's own `all_or_nothing` opens inside this one (nothing changes the
        # program in between) and takes none.
        saved = prog.desc.SerializePartialToString() if checkpoints is None else None
        if not force:
            refuse_existing_backward(prog, data=saved)
        with all_or_nothing(prog, saved) if saved is not None else contextlib.nullcontext():
            pairs, used[id(prog)] = append_with_checkpoints(
                prog, resolve_loss(prog, loss), checkpoints, memory_budget, batch, progress=progress,
                parameter_list=list(parameters) or None, no_grad_set=set(no_grad) or None,
                aggregation=aggregation, paddle_exact=paddle_exact)
        if verify:
            from pybackward.backward.verify import check_backward
            check_backward(prog)
        return pairs

    def rows_of(pairs):
        return [[p.name, g.name if g is not None else None] for p, g in pairs]

    if out_dir is not None:
        for flag, name in ((in_place, "--in-place"), (expect, "--expect"), (run_after, "--run")):
            if flag:
                raise pybackward.ArgumentError(f"{name} takes one IN; it does not combine with --out-dir")
        _batch(paths, out_dir, lambda prog: {"params_grads": rows_of(compute(prog))}, as_json, show_pairs, quiet)
        return
    src, out = _single_paths(paths, in_place, expect)
    values = with_values_beside(src, params, startup, feeds_npz, feed_items) if run_after else (params, feeds_npz)
    refuse_overwrites(src, None if in_place else out, expect, update,
                      [startup, *values[0], *values[1], *feed_paths(feed_items)])
    with command_progress("append:", quiet) as bar, PausedCollector() as collector:
        bar.stage(f"loading {src}")
        prog = pybackward.load(src)
        if pybackward.formats.is_pir(prog):
            from .pir_backward import append_pir
            if aggregation != "sum" or verify:
                raise pybackward.ArgumentError(f"{src}: is a PIR program; --aggregation and --verify "
                                               "apply to legacy programs only")
            append_pir(prog, src, out, in_place=in_place, loss=loss, parameters=parameters, no_grad=no_grad,
                       checkpoints=checkpoints, memory_budget=memory_budget, as_json=as_json,
                       show_pairs=show_pairs, quiet=quiet, force=force, expect=expect, update=update,
                       run_after=run_after, params=params, startup=startup, feeds_npz=feeds_npz,
                       feed_items=feed_items, check_nan=check_nan, paddle_exact=paddle_exact, progress=bar,
                       batch=batch)
            return
        if out:
            check_program_path(out)
        loss = resolve_loss(prog, loss)
        ops_before = sum(len(b.ops) for b in prog.blocks)
        pairs = compute(prog, bar)
        appended = sum(len(b.ops) for b in prog.blocks) - ops_before
        rows = rows_of(pairs)
        values = fetch = None
        params, feeds_npz = with_values_beside(src, params, startup, feeds_npz, feed_items)
        if run_after:  # run before anything is written: a failed run leaves no output behind
            collector.resume()
            bar.stage("reading the values")
            p, f = load_arrays(params, feeds_npz, feed_items, prog)
            fetch = [loss] + [g for _, g in rows if g]
            values = evaluate(prog, startup, p, f, fetch, check_nan, beside_hint(src),
                              progress=run_progress(bar, "running op"))
        if out or in_place:
            bar.stage(f"writing {out or src}")
        written = _write_output(prog, out, in_place, src) if (out or in_place) else None
    n_grads = sum(1 for _, g in rows if g)
    note = _loss_note(prog, loss, n_grads, src, written or "OUT")
    failure = None
    result = None
    if not as_json:
        if show_pairs:
            for p_name, g in rows:
                click.echo(f"{printable(p_name)} -> {printable(g)}")
        if written:
            info(f"wrote {written} (loss {loss}: {appended} ops appended, {n_grads} parameter "
                 f"gradient{'s' * (n_grads != 1)}{'; ' + note if note else ''})", quiet)
            again = run_command(written, params, feeds_npz, feed_items, startup) if run_after else None
            if again:
                info(f"run it again: {again}", quiet)
    if expect:
        result, failure = _compare_golden(prog, expect, update, written or f"{src} (with backward)", as_json,
                                          quiet)
    if as_json:
        doc = {"output": written, "params_grads": rows}
        if note:
            doc["note"] = note
        if recorded_deviations():
            doc["deviations"] = recorded_deviations()
        if used.get(id(prog)):
            doc["checkpoints"] = used[id(prog)]
        if result is not None:
            doc["expect"] = result.to_json()
        if values is not None:
            doc["loss"] = loss
            doc["run"] = {n: value_to_json(v) for n, v in zip(fetch, values)}
        click.echo(json.dumps(doc))
    if failure:
        raise pybackward.CheckFailedError(failure)
    if values is not None and not as_json:
        show_values(fetch, values, None)


def _loss_note(prog, loss: str, n_grads: int, src: str, out: str) -> str | None:
    """What the summary line adds when the result is likely not what was meant:
    no parameter gradients (an inference model or a `jit.save` program, whose
    weights are persistable vars, not parameters: name them and the
    `gradients` command that differentiates them), and a loss that is not one
    element (its gradients are those of the sum of its elements)."""
    notes = []
    if n_grads == 0:
        from pybackward.base import dtypes
        from pybackward.views.summary import persistables_behind     # for this note only (start-up)
        weights = [v for v in persistables_behind(prog, loss)
                   if not v.is_parameter and v.data_type is not None and dtypes.is_float(v.data_type)]
        if weights:
            import shlex        # for this note only (start-up)
            names = [v.name for v in weights]
            listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
            inputs = " ".join(f"--input {shlex.quote(n)}" for n in names[:8])
            if len(names) > 8:
                inputs += f" ... ({len(names) - 8} more --input)"
            notes.append(f"{loss} is computed from persistable vars that are not parameters ({listed}), as "
                         "in an inference model or a jit.save program; for their gradients: pybackward "
                         f"gradients --target {shlex.quote(loss)} {inputs} {shlex.quote(src)} {shlex.quote(out)}")
        elif not any(v.is_parameter for v in prog.global_block().vars.values()):
            notes.append("the program declares no parameters")
        else:
            notes.append(f"{loss} is computed from none of the program's parameters")
    var = prog.global_block().var(loss)
    if any(d != 1 for d in var.shape):
        notes.append(f"{loss} is {type_text(var)}, not one element: the gradients are those of the sum "
                     "of its elements")
    return "; ".join(notes) or None


def refuse_overwrites(src: str, out: str | None, expect: str | None, update: bool, values=(),
                      hint: str = "give another OUT, or --in-place to replace IN") -> None:
    """`append` and `gradients`: refuse (before anything is read) an OUT that is IN (use
    --in-place for that), the golden or a file of `values`, and an `--expect GOLDEN --update`
    whose golden (or its .pbtxt) is IN or a file of values."""
    inputs = [src, *values]
    refuse_outputs_over_inputs([out], [*inputs, expect],
                               hint=hint if out else "")
    if expect and update:
        from pybackward.views.diff import golden_paths
        refuse_outputs_over_inputs(golden_paths(expect), inputs, hint="--update rewrites the golden")


def _single_paths(paths, in_place: bool, expect: str | None) -> tuple[str, str | None]:
    if not paths:
        raise pybackward.ArgumentError("missing IN: the program to differentiate")
    if len(paths) > 2:
        raise pybackward.ArgumentError(f"{len(paths)} paths given: give IN OUT, or pass --out-dir DIR "
                                       "to process many inputs")
    src = paths[0]
    out = paths[1] if len(paths) == 2 else None
    if not out and not in_place and not expect:
        raise pybackward.ArgumentError("missing OUT (or pass --in-place to overwrite the input)")
    return src, out


def _batch(paths, out_dir: str, compute, as_json: bool, show_pairs: bool = False, quiet: bool = False) -> None:
    """Differentiate every input into OUT_DIR; report each failure and go on; exit 1 if any failed."""
    if not paths:
        raise pybackward.ArgumentError("missing IN: give one or more programs with --out-dir")
    inputs: list[str] = []
    seen: set[str] = set()
    for p in paths:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            inputs.append(p)
    # Unique file names go straight into DIR; otherwise each keeps its path
    # relative to the inputs' common directory (a/forward.pb, b/forward.pb).
    common = None
    if len({os.path.basename(p) for p in inputs}) < len(inputs):
        try:
            common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in inputs])
        except ValueError:  # different drives
            common = None
    dest_root = Path(out_dir)
    results: list[dict] = []
    dests = {src: dest_root / (os.path.relpath(os.path.abspath(src), common) if common else os.path.basename(src))
             for src in inputs}
    # Any output that is any input (`--out-dir x x/f.pb f.pb`: f.pb's result would replace
    # x/f.pb) is refused before anything is read or written.
    refuse_outputs_over_inputs(dests.values(), inputs, hint="use --in-place for that, or another --out-dir")

    def one(src: str) -> dict:
        dst = dests[src]
        try:
            prog = legacy_only(pybackward.load(src), "append", src)
            doc = compute(prog)
            dst.parent.mkdir(parents=True, exist_ok=True)
            pybackward.save(prog, dst)
            return {"input": src, "output": str(dst), **doc}
        except PyBackwardError as e:
            msg = one_line(str(e))
        except OSError as e:
            msg = f"{e.filename or dst}: {e.strerror or e}"
        if src not in msg:
            msg = f"{src}: {msg}"
        return {"input": src, "error": msg}

    def report(r: dict) -> None:
        if as_json:
            return
        if "error" in r:
            click.echo(f"error: {one_line(r['error'])}", err=True)
        else:
            click.echo(f"{r['input']} -> {r['output']}")
            if show_pairs:
                for p_name, g in r["params_grads"]:
                    click.echo(f"  {printable(p_name)} -> {printable(g)}")

    with Progress("append", len(inputs), quiet=quiet) as progress:
        for i, src in enumerate(inputs):
            progress.update(i, os.path.basename(src))
            results.append(one(src))
            progress.clear()
            report(results[-1])
    failed = sum(1 for r in results if "error" in r)
    if as_json:
        click.echo(json.dumps({"out_dir": str(dest_root), "results": results,
                               "ok": len(results) - failed, "failed": failed}))
    info(f"{len(results) - failed} of {len(results)} programs written to {dest_root}"
         + (f", {failed} failed" if failed else ""), quiet)
    if failed:
        click.get_current_context().exit(1)


@click.command(short_help="Append the gradients of --target with respect to --input.")
@click.option("--target", "targets", multiple=True, required=True, help="A target variable (repeatable).")
@click.option("--input", "inputs", multiple=True, required=True, help="A variable to differentiate with respect to.")
@click.option("--target-grad", "target_grads", multiple=True,
              help="The gradient of each target (a variable name; '-' for ones).")
@click.option("--no-grad", "no_grad", multiple=True, help="A variable that gets no gradient (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the gradient names (and any comparison) as JSON.")
@click.option("--force", is_flag=True, help="Append even if IN already has a backward section.")
@quiet_option
@expect_options
@click.argument("src", metavar="IN", type=click.Path(dir_okay=False))
@click.argument("out", metavar="OUT", required=False, type=click.Path(dir_okay=False))
@click.option("--paddle-exact", is_flag=True,
              help="Write Paddle's program even where its gradients are wrong (docs/deviations.md).")
@handle_errors
@ops_option
def gradients(targets, inputs, target_grads, no_grad, as_json, force, quiet, expect, update, paddle_exact, src, out):
    """Append the gradients of --target w.r.t. --input to IN and write OUT
    (OUT is optional with --expect GOLDEN)."""
    if update and not expect:
        raise pybackward.ArgumentError("--update rewrites the golden named by --expect GOLDEN; give it")
    if not out and not expect:
        raise pybackward.ArgumentError("missing OUT (or pass --expect GOLDEN to compare with a golden)")
    refuse_overwrites(src, out, expect, update, hint="give another OUT")
    with command_progress("gradients:", quiet) as bar, PausedCollector():
        bar.stage(f"loading {src}")
        prog = pybackward.load(src)
        if pybackward.formats.is_pir(prog):
            from .pir_backward import gradients_pir
            gradients_pir(prog, out, targets=targets, inputs=inputs, target_grads=target_grads, no_grad=no_grad,
                          as_json=as_json, force=force, quiet=quiet, expect=expect, update=update,
                          paddle_exact=paddle_exact, progress=bar)
            return
        from pybackward.backward.guards import refuse_existing_backward
        if not force:
            refuse_existing_backward(prog)
        tgrads = [None if g == "-" else g for g in target_grads] or None
        bar.stage("appending the gradients")
        grads = pybackward.gradients(list(targets), list(inputs), tgrads, set(no_grad) or None, program=prog,
                                     paddle_exact=paddle_exact)
        if out:
            bar.stage(f"writing {out}")
            pybackward.save(prog, out)
    rows = {x: (g.name if g is not None else None) for x, g in zip(inputs, grads)}
    if not as_json:
        for x, g in rows.items():
            click.echo(f"{printable(x)} -> {printable(g)}")
        if out:
            info(f"wrote {out}", quiet)
    result = failure = None
    if expect:
        result, failure = _compare_golden(prog, expect, update, out or f"{src} (with gradients)", as_json,
                                          quiet)
    if as_json:
        doc = {"output": out, "gradients": rows}
        if recorded_deviations():
            doc["deviations"] = recorded_deviations()
        if result is not None:
            doc["expect"] = result.to_json()
        click.echo(json.dumps(doc))
    if failure:
        raise pybackward.CheckFailedError(failure)
