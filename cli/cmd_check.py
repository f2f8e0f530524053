"""`pybackward check`: gradients against central finite differences in float64."""
from __future__ import annotations

import click

import pybackward

from .common import (NON_NEGATIVE, POSITIVE, command_progress, handle_errors, legacy_only, load_arrays, ops_option,
                     pir_only_options, quiet_option, resolve_loss, run_options, with_values_beside)


@click.command(short_help='Check the gradients of --loss against finite differences (float64).')
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--loss", default=None,
              help="Name of the loss variable (default: the program's only loss candidate, as `append` "
                   "takes it; see `pybackward show --summary`).")
@click.option("--wrt", multiple=True, help="Check only these vars (default: every parameter with a gradient).")
@click.option("--eps", type=POSITIVE, default=1e-6, show_default=True, help="Finite-difference step (float64).")
@click.option("--rtol", type=NON_NEGATIVE, default=None, help="Relative tolerance (default by dtype).")
@click.option("--atol", type=NON_NEGATIVE, default=None, help="Absolute tolerance (default by dtype).")
@click.option("--max-elements", type=click.IntRange(min=0), default=64, show_default=True,
              help="Check larger tensors along random directions instead of element by element.")
@click.option("--directions", type=click.IntRange(min=1), default=4, show_default=True,
              help="Random directions per large tensor.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@quiet_option
@run_options
@handle_errors
@ops_option
def check(program, loss, wrt, eps, rtol, atol, max_elements, directions, as_json, quiet,
          startup, params, feeds_npz, feed_items, check_nan):
    """Check the gradients of --loss against central finite differences in float64.

    Values not given are read from beside PROGRAM, as `run` does; without
    --loss, the program's only loss candidate is checked, as `append` takes it.
    A PIR program (.json) is checked with the backward section it has.
    """
    import json
    with command_progress("check", quiet) as progress:
        progress.stage(f"loading {program}")
        prog = pybackward.load(program)
        if pybackward.formats.is_pir(prog):
            rows = _check_pir(prog, program, loss, wrt, eps, rtol, atol, max_elements, directions, startup, params,
                              feeds_npz, feed_items, progress)
        else:
            rows = _check_legacy(prog, program, loss, wrt, eps, rtol, atol, max_elements, directions, startup,
                                 params, feeds_npz, feed_items, progress)
    if as_json:
        click.echo(json.dumps([r.__dict__ | {"shape": list(r.shape)} for r in rows]))
    else:
        from pybackward.interpreter.gradcheck import rows_to_table
        click.echo(rows_to_table(rows))
    bad = [r.var for r in rows if not r.ok]
    if bad:
        raise pybackward.CheckFailedError(f"gradient check failed for {', '.join(bad)}")


def _check_legacy(prog, program, loss, wrt, eps, rtol, atol, max_elements, directions, startup, params, feeds_npz,
                  feed_items, progress):
    """A legacy program: its backward section appended to a float64 copy, then checked."""
    import numpy as np
    from pybackward.interpreter.executor import Executor, Scope
    from pybackward.backward.guards import refuse_existing_backward
    refuse_existing_backward(prog, "check takes the forward program")
    loss = resolve_loss(prog, loss)
    params, feeds_npz = with_values_beside(program, params, startup, feeds_npz, feed_items)
    p, f = load_arrays(params, feeds_npz, feed_items, prog)
    if startup:
        progress.stage(f"running {startup}")
        scope = Scope()
        Executor().run(legacy_only(pybackward.load(startup), "--startup", startup), scope=scope)
        p = {**{k: v for k, v in scope.vars.items() if isinstance(v, np.ndarray)}, **p}
    progress.stage(f"appending the backward section of {loss}")
    rows = pybackward.check_gradients(prog, loss, f, p, list(wrt) or None, eps=eps,
                                      rtol=rtol, atol=atol, max_elements=max_elements,
                                      directions=directions,
                                      progress=lambda i, n, name: progress.update(i, name, total=n))
    return rows


def _check_pir(prog, program, loss, wrt, eps, rtol, atol, max_elements, directions, startup, params, feeds_npz,
               feed_items, progress):
    """A PIR program: the backward section it has (Paddle's) checked on a float64 copy."""
    from pybackward.interpreter.pir_gradcheck import check_gradients
    pir_only_options(prog, **{"--loss": loss, "--startup": startup})
    params, feeds_npz = with_values_beside(program, params, startup, feeds_npz, feed_items)
    p, f = load_arrays(params, feeds_npz, feed_items, prog)
    progress.stage("checking the backward section")
    return check_gradients(prog, f, p, list(wrt) or None, eps=eps, rtol=rtol, atol=atol, max_elements=max_elements,
                           directions=directions, progress=lambda i, n, name: progress.update(i, name, total=n))
