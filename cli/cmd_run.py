"""`pybackward run`: run a program with the NumPy interpreter and print the fetched values."""
from __future__ import annotations

import click

import pybackward
from pybackward.base.limits import MAX_WHILE_STEPS

from .common import (POSITIVE, array_output_files, beside_hint, command_progress, default_fetch, execute,
                     execute_pir, feed_paths, handle_errors, load_arrays, pir_only_options, quiet_option,
                     refuse_outputs_over_inputs, run_options, with_values_beside)


@click.command(short_help='Run PROGRAM with the NumPy interpreter; print the fetched values.')
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--fetch", multiple=True,
              help="A variable to fetch (repeatable). Default: what the program's fetch ops fetch (an "
                   "inference model's outputs), else its loss candidate and, after `append`, the "
                   "parameter gradients.")
@click.option("--out", type=click.Path(),
              help="Write the fetched values here: .npz, .pdparams, .pdiparams or DIR/ (by the suffix).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the fetched values as one JSON object (dtype, shape, statistics, values up to 1024).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop a `while` op after N steps (per run of the op; default "
                   f"{MAX_WHILE_STEPS}).")
@click.option("--timeout", type=POSITIVE, default=None, metavar="SECONDS",
              help="Stop the run after this many seconds (checked between ops and at each loop step).")
@click.option("--files", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Let the program's save / load ops read and write files, under DIR only "
                   "(their relative file_path is taken from DIR). Without it they are refused.")
@click.option("--paddle-seed", type=click.IntRange(min=0), default=None, metavar="N",
              help="PIR programs: draw the random ops without a seed of their own (a dropout without "
                   "fix_seed) from Paddle's global generator after paddle.seed(N), so they equal Paddle's.")
@quiet_option
@run_options
@handle_errors
def run(program, fetch, out, as_json, max_steps, timeout, files, paddle_seed, quiet, startup, params, feeds_npz,
        feed_items, check_nan):
    """Run PROGRAM with the NumPy interpreter and print the fetched values.

    Without --params/--startup and --feeds/--feed, the values beside PROGRAM
    are used: params.npz (else PROGRAM's .pdparams or .pdiparams) and feeds.npz.
    Without --fetch: the program's fetch ops, else its loss candidate (and
    the parameter gradients of a program with a backward section).
    A run stopped by --max-steps or --timeout prints one line naming the op
    and the step reached, and exits 2; Ctrl-C exits 130.
    """
    with command_progress("run:", quiet) as bar:
        bar.stage(f"loading {program}")
        prog = pybackward.load(program)
        params, feeds_npz = with_values_beside(program, params, startup, feeds_npz, feed_items)
        if pybackward.formats.is_pir(prog):
            pir_only_options(prog, **{"--startup": startup, "--files": files})
            _refuse_overwrites(program, out, fetch, params, feeds_npz, feed_items, startup)
            bar.stage("reading the values")
            p, f = load_arrays(params, feeds_npz, feed_items, prog)
            execute_pir(prog, p, f, fetch, check_nan, out, as_json, max_steps, timeout, quiet, progress=bar,
                        paddle_seed=paddle_seed)
            return
        if paddle_seed is not None:
            raise pybackward.ArgumentError(f"{program}: --paddle-seed applies to PIR programs (a legacy program's "
                                           "random ops carry their seeds)")
        fetch = list(fetch) or default_fetch(prog)
        _refuse_overwrites(program, out, fetch, params, feeds_npz, feed_items, startup)
        bar.stage("reading the values")
        p, f = load_arrays(params, feeds_npz, feed_items, prog)
        execute(prog, startup, p, f, fetch, check_nan, out, hint=beside_hint(program, prog), as_json=as_json,
                max_while_steps=max_steps, timeout=timeout, quiet=quiet, files=files, progress=bar)


def _refuse_overwrites(program: str, out: str | None, fetch, params, feeds_npz, feed_items, startup) -> None:
    """--out (a file, or the per-var files of a DIR/) may not replace the program or a
    file of values the run reads: refused before the run."""
    if out:
        refuse_outputs_over_inputs(array_output_files(out, fetch),
                                   [program, startup, *params, *feeds_npz, *feed_paths(feed_items)],
                                   hint="give another --out")
