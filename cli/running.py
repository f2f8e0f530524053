"""Running programs from the command line: reading arrays, printing values."""
from __future__ import annotations

import functools

import click

import pybackward


def load_arrays(params, feeds_npz, feed_items, program=None) -> tuple[dict, dict]:
    """--params FILE (.npz, .pdparams, .pdiparams or a directory of per-var
    files; `program` names a .pdiparams' tensors), --feeds FILE and --feed
    name=file.npy, as name -> array."""
    from pybackward.paddle_files import load_arrays as read, read_npy
    params_d, feeds_d = {}, {}
    for p in params:
        params_d.update(read(p, program))
    for f in feeds_npz:
        feeds_d.update(read(f))
    for item in feed_items:
        name, sep, path = item.partition("=")
        if not sep:
            raise pybackward.ArgumentError(f"--feed takes name=file.npy, not {item!r}")
        feeds_d[name] = read_npy(path)
    return params_d, feeds_d


def summary(name: str, v) -> str:
    import numpy as np
    a = np.asarray(v)
    if a.size == 0:
        return f"{name}: {a.dtype}{list(a.shape)} (empty)"
    if a.dtype.kind in "fc":
        return (f"{name}: {a.dtype}{list(a.shape)} mean={a.mean():.6g} min={a.min():.6g} "
                f"max={a.max():.6g} |x|={np.linalg.norm(a.ravel()):.6g}")
    return f"{name}: {a.dtype}{list(a.shape)} {a.ravel()[:8].tolist()}{' ...' if a.size > 8 else ''}"


def evaluate(prog, startup, params, feeds, fetch, check_nan, hint: str = "",
             max_while_steps: int | None = None, timeout: float | None = None, progress=None) -> list:
    """Run PROG (after STARTUP) on the arrays. A --fetch name no block declares
    is refused first; a run that stops at a feed or parameter nobody gave is
    reported with every missing one and the options that give them.
    `max_while_steps` / `timeout` bound the run (None: the interpreter's defaults);
    `progress(done, total, op_type)` is told of each op of the main run."""
    from pybackward.interpreter import Executor, Scope
    from .userpath import check_fetch, missing_inputs_error
    check_fetch(prog, fetch)
    exe = Executor(check_nan=check_nan, max_while_steps=max_while_steps, timeout=timeout)
    scope = Scope()
    if startup:
        exe.run(pybackward.load(startup), scope=scope)
    exe.progress = progress
    for k, v in params.items():
        scope.set(k, v)
    given = set(scope.vars)
    try:
        return exe.run(prog, feed=feeds, fetch_list=list(fetch), scope=scope)
    except pybackward.ExecutionError as e:
        better = missing_inputs_error(prog, given, feeds, str(e), hint)
        if better is None:
            raise
        raise better from None


def value_to_json(v, max_values: int = 1024) -> dict:
    """A fetched value as JSON: dtype, shape, statistics, and the values
    themselves when there are at most `max_values` (non-finite as strings)."""
    import numpy as np
    from pybackward.text import jsonable
    a = np.asarray(v)
    doc = {"dtype": str(a.dtype), "shape": list(a.shape)}
    if a.size and a.dtype.kind in "fc":
        doc.update(mean=jsonable(float(a.mean().real)), min=jsonable(float(a.real.min())),
                   max=jsonable(float(a.real.max())), norm=jsonable(float(np.linalg.norm(a.ravel()))))
    if a.size <= max_values:
        doc["values"] = jsonable(a.tolist())
    return doc


def show_values(fetch, values, out, as_json: bool = False, quiet: bool = False) -> dict:
    """Print one summary line per value (or one JSON object); write them to OUT
    (its suffix says the format)."""
    import json
    if as_json:
        click.echo(json.dumps({"fetch": {n: value_to_json(v) for n, v in zip(fetch, values)}, "output": out}))
    else:
        for name, v in zip(fetch, values):
            click.echo(summary(name, v))
    if out:
        from pybackward.paddle_files import save_arrays
        save_arrays(out, dict(zip(fetch, values)))
        if not quiet:
            click.echo(f"wrote {out}", err=True)
    return dict(zip(fetch, values))


def execute(prog, startup, params, feeds, fetch, check_nan, out, hint: str = "", as_json: bool = False,
            max_while_steps: int | None = None, timeout: float | None = None, quiet: bool = False):
    """Run, with a progress line on a terminal (see progress.Progress), and show the values."""
    from .progress import Progress
    with Progress("run: op", quiet=quiet, min_interval=0.1) as bar:
        values = evaluate(prog, startup, params, feeds, fetch, check_nan, hint, max_while_steps, timeout,
                          progress=lambda done, total, op_type: bar.update(done, op_type, total=total))
    return show_values(fetch, values, out, as_json, quiet)


_RUN_OPTIONS = [
    click.option("--startup", type=click.Path(dir_okay=False), help="Startup program that initialises parameters."),
    click.option("--params", multiple=True, type=click.Path(),
                 help="Parameter values: .npz, .pdparams/.pdopt, .pdiparams or a directory of per-var files."),
    click.option("--feeds", "feeds_npz", multiple=True, type=click.Path(), help="Feed values (.npz, or as --params)."),
    click.option("--feed", "feed_items", multiple=True, help="A feed as name=file.npy (repeatable)."),
    click.option("--check-nan", is_flag=True, help="Stop at the first op that produces NaN or Inf."),
]


def run_options(fn):
    for opt in reversed(_RUN_OPTIONS):
        fn = opt(fn)
    return fn


def ops_option(fn):
    """`--ops FILE` (repeatable): custom-op grad rules (backward.yaml-shaped) registered
    before the command runs. Put it below @handle_errors so a bad file is one clean line."""
    @functools.wraps(fn)
    def wrapper(*args, ops_files=(), **kwargs):
        for path in ops_files:
            pybackward.register_ops(path)
        return fn(*args, **kwargs)
    return click.option("--ops", "ops_files", multiple=True, metavar="FILE", type=click.Path(dir_okay=False),
                        help="Grad rules for custom op types (a backward.yaml-shaped file; repeatable).")(wrapper)
