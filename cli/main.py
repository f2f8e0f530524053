"""`pybackward` commands. Each reports bad input as one line on stderr and
exits 2 (1 for a failed check); a traceback means a pybackward bug."""
from __future__ import annotations

import functools
import math
import os
import sys
import warnings

import click

import pybackward
from pybackward.backward.guards import refuse_existing_backward
from pybackward.backward.maker_check import coverage_rows, coverage_totals
from pybackward.errors import CheckFailedError, PaddleDeviationWarning, PyBackwardError
from pybackward.ops.control_flow import MAX_WHILE_STEPS

from .progress import Progress, quiet_option
from .running import execute as _execute, load_arrays as _load_arrays, ops_option, run_options as _run_options
from .userpath import beside_hint, with_values_beside


_CAUGHT: list[list[warnings.WarningMessage]] = []


def recorded_deviations() -> list[str]:
    """The PaddleDeviationWarnings the running command has raised so far (for --json)."""
    caught = _CAUGHT[-1] if _CAUGHT else []
    return [_one_line(str(w.message)) for w in caught if issubclass(w.category, PaddleDeviationWarning)]


def handle_errors(fn):
    """Turn PyBackwardError into one stderr line and exit code 2 (1 for failed
    checks), Ctrl-C into one line and exit code 130, and each warning
    (PaddleDeviationWarning included) into one `warning:` line."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pybackward.PyBackwardWarning)
            _CAUGHT.append(caught)
            try:
                return fn(*args, **kwargs)
            except CheckFailedError as e:
                click.echo(f"pybackward: {e}", err=True)
                sys.exit(1)
            except PyBackwardError as e:
                click.echo(f"error: {_one_line(str(e))}", err=True)
                sys.exit(2)
            except KeyboardInterrupt as e:
                where = ", ".join(reversed(getattr(e, "__notes__", None) or []))    # outermost op first
                click.echo("pybackward: interrupted" + (f" {_one_line(where)}" if where else "")
                           + "; nothing more was written", err=True)
                sys.exit(130)
            finally:
                for w in caught:
                    if issubclass(w.category, pybackward.PyBackwardWarning):
                        click.echo(f"warning: {_one_line(str(w.message))}", err=True)
                _CAUGHT.pop()
    return wrapper


class FiniteFloat(click.FloatRange):
    """A float in a range that is also finite: click's FloatRange lets NaN
    through every bound (NaN compares false) and inf through an open top."""

    name = "float"

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


#: A step, a tolerance, a time: a finite float > 0 / >= 0.
POSITIVE = FiniteFloat(min=0, min_open=True)
NON_NEGATIVE = FiniteFloat(min=0)


def _one_line(s: str) -> str:
    return " ".join(s.split())


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class OneLineErrors(click.Group):
    """click's own errors (a bad option value, a missing argument) as one
    `error:` line and exit 2, like every other bad input; click prints a
    usage block of three lines otherwise."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS_IS_HELP as e:          # `pybackward` alone: the help, as click shows it
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "pybackward"
            click.echo(f"error: {_one_line(e.format_message())} (see '{cmd} --help')", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            click.echo(f"error: {_one_line(e.format_message())}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("pybackward: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(pybackward.__version__, prog_name="pybackward")
def cli() -> None:
    """Differentiate PaddlePaddle static programs (ProgramDesc files)."""


@cli.command()
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
    """Print a readable listing of PROGRAM (binary or .pbtxt).

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
    if as_summary:
        s = pybackward.summary(prog)
        click.echo(json.dumps(s.to_json()) if as_json else s.to_text())
        return
    text = pybackward.text
    if fmt == "pbtxt":
        click.echo(text.program_to_pbtxt(prog, block=block, section=section), nl=False)
    elif fmt == "paddle":
        from pybackward.paddle_text import program_to_paddle_text
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


@cli.command()
@click.argument("src", type=click.Path())
@click.argument("dst", type=click.Path())
@click.option("--program", "program", type=click.Path(dir_okay=False),
              help="For arrays: the program whose persistable vars a .pdiparams holds (default: the "
                   ".pdmodel beside it); writing a .pdiparams, its vars must be exactly these.")
@click.option("--json", "as_json", is_flag=True,
              help="Print what was written as JSON (arrays: name, dtype, shape; programs: blocks, ops, vars).")
@handle_errors
def convert(src, dst, program, as_json):
    """Convert SRC to DST, each format told by its suffix.

    \b
    programs: binary (.pb, .pdmodel, ...) <-> protobuf text format (.pbtxt / .txt)
    arrays:   .npz, .pdparams / .pdopt, .pdiparams, DIR/ (one file per var) -> any of these
    """
    from pybackward import paddle_files
    to_arrays = (paddle_files.is_array_path(dst) and not os.path.isdir(dst)) or dst.endswith(("/", os.sep))
    if paddle_files.is_array_path(src) or to_arrays:
        prog = pybackward.load(program) if program else None
        arrays = paddle_files.load_arrays(src, prog)
        paddle_files.save_arrays(dst, arrays, prog)
        if as_json:
            import json
            click.echo(json.dumps({"input": src, "output": dst, "kind": "arrays",
                                   "arrays": {n: {"dtype": str(a.dtype), "shape": list(a.shape)}
                                              for n, a in arrays.items()}}))
        else:
            click.echo(f"wrote {dst} ({len(arrays)} arrays)")
        return
    if program:
        raise pybackward.ArgumentError("--program goes with array files (.npz, .pdparams, .pdiparams, DIR/)")
    prog = pybackward.load(src)
    pybackward.save(prog, dst)
    if as_json:
        import json
        click.echo(json.dumps({"input": src, "output": dst, "kind": "program", "blocks": prog.num_blocks,
                               "ops": sum(len(b.ops) for b in prog.blocks),
                               "vars": sum(len(b.vars) for b in prog.blocks)}))
    else:
        click.echo(f"wrote {dst}")


def coverage_totals_line(t: dict) -> str:
    return (f"{t['op_types']} op types: {t['with_maker']} with a grad maker, {t['equal']} equal to Paddle's "
            f"({t['differs']} differ, {t['unchecked']} unchecked), {t['empty']} empty makers, "
            f"{t['none']} without one, {t['sub_block']} sub-block; kernels: {t['kernels']} forward, "
            f"{t['grad_kernels']} of {t['with_maker']} grad; Paddle runs {t['cpu']} on CPU: "
            f"{t['cpu_kernels']} with a forward kernel here, {t['cpu_grad_kernels']} of its "
            f"{t['cpu_with_maker']} differentiable ones forward and backward")


@cli.command(short_help='List the registered op types and what each supports.')
@click.option("--missing", "missing", type=click.Path(dir_okay=False),
              help="List the op types PROGRAM uses that pybackward cannot differentiate or run.")
@click.option("--coverage", is_flag=True,
              help="Every op type Paddle 3.3.1 knows: family, grad rule checked against Paddle's "
                   "recorded makers, kernel; then totals.")
@click.option("--records", type=click.Path(file_okay=False),
              help="With --coverage: the grad-maker records (default: testdata/grad_makers of a checkout).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@handle_errors
@ops_option
def ops(missing, coverage, records, as_json):
    """List the registered op types and what each supports (read from the registry)."""
    import json
    from pybackward.ops import registry
    table = registry.all_ops()
    if coverage:
        rows = coverage_rows(records)
        totals = coverage_totals(rows)
        if as_json:
            click.echo(json.dumps({"ops": rows, "totals": totals}))
            return
        click.echo(f"{'op type':<44} {'family':<13} {'grad rule':<10} {'kernel':<6} {'grad kernel':<11} "
                   "Paddle CPU")
        for r in rows:
            click.echo(f"{r['type']:<44} {r['family']:<13} {r['grad']:<10} "
                       f"{'yes' if r['kernel'] else 'no':<6} {r['grad_kernel']:<11} "
                       f"{'yes' if r['paddle_cpu'] else 'no'}")
        click.echo(coverage_totals_line(totals))
        return
    if missing:
        prog = pybackward.load(missing)
        used: dict[str, int] = {}
        for b in prog.blocks:
            for op in b.ops:
                used[op.type] = used.get(op.type, 0) + 1
        rows = []
        for t, n in sorted(used.items()):
            d = table.get(t)
            problem = ("unknown op type" if d is None else
                       "no kernel" if d.kernel is None else None)
            if problem:
                rows.append({"type": t, "uses": n, "problem": problem})
        if as_json:
            click.echo(json.dumps(rows))
        elif not rows:
            click.echo(f"every op type in {missing} is supported ({len(used)} types)")
        else:
            for r in rows:
                click.echo(f"{r['type']:<32} x{r['uses']:<4} {r['problem']}")
        if rows:
            raise pybackward.CheckFailedError(f"{len(rows)} op types in {missing} are not supported")
        return
    rows = []
    for t, d in table.items():
        if d.grad is None:
            grad = None
        elif isinstance(d.grad, registry.GradSpec):
            grad = d.grad.type
        else:
            grad = "(maker)"
        rows.append({"type": t, "kernel": d.kernel is not None, "grad": grad,
                     "grad_of": d.grad_of, "inputs": list(d.inputs), "outputs": list(d.outputs),
                     "differentiable": list(d.differentiable_inputs or ()),
                     "attrs": list(d.attrs_handled)})
    if as_json:
        click.echo(json.dumps(rows))
        return
    click.echo(f"{'op type':<34} {'kernel':<7} {'grad op':<34} attrs handled")
    for r in rows:
        grad = r["grad"] or ("-" if not r["grad_of"] else f"(grad of {r['grad_of']})")
        click.echo(f"{r['type']:<34} {'yes' if r['kernel'] else 'no':<7} {grad:<34} {', '.join(r['attrs'])}")
    click.echo(f"{len(rows)} op types", err=True)


@cli.command(short_help='Run PROGRAM with the NumPy interpreter; print the fetched values.')
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--fetch", multiple=True, required=True, help="A variable to fetch (repeatable).")
@click.option("--out", type=click.Path(),
              help="Write the fetched values here: .npz, .pdparams, .pdiparams or DIR/ (by the suffix).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the fetched values as one JSON object (dtype, shape, statistics, values up to 1024).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop a `while` op after N steps (per run of the op; default "
                   f"{MAX_WHILE_STEPS}).")
@click.option("--timeout", type=POSITIVE, default=None, metavar="SECONDS",
              help="Stop the run after this many seconds (checked between ops and at each loop step).")
@quiet_option
@_run_options
@handle_errors
def run(program, fetch, out, as_json, max_steps, timeout, quiet, startup, params, feeds_npz, feed_items,
        check_nan):
    """Run PROGRAM with the NumPy interpreter and print the fetched values.

    Without --params/--startup and --feeds/--feed, the values beside PROGRAM
    are used: params.npz (else PROGRAM's .pdparams or .pdiparams) and feeds.npz.

    A run stopped by --max-steps or --timeout prints one line naming the op
    and the step reached, and exits 2; Ctrl-C exits 130.
    """
    prog = pybackward.load(program)
    params, feeds_npz = with_values_beside(program, params, startup, feeds_npz, feed_items)
    p, f = _load_arrays(params, feeds_npz, feed_items, prog)
    _execute(prog, startup, p, f, fetch, check_nan, out, hint=beside_hint(program), as_json=as_json,
             max_while_steps=max_steps, timeout=timeout, quiet=quiet)


@cli.command(short_help='Check the gradients of --loss against finite differences (float64).')
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--loss", required=True, help="Name of the loss variable.")
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
@_run_options
@handle_errors
@ops_option
def check(program, loss, wrt, eps, rtol, atol, max_elements, directions, as_json, quiet,
          startup, params, feeds_npz, feed_items, check_nan):
    """Check the gradients of --loss against central finite differences in float64.

    Values not given are read from beside PROGRAM, as `run` does.
    """
    import json
    import numpy as np
    from pybackward.interpreter import Executor, Scope
    prog = pybackward.load(program)
    params, feeds_npz = with_values_beside(program, params, startup, feeds_npz, feed_items)
    p, f = _load_arrays(params, feeds_npz, feed_items, prog)
    if startup:
        scope = Scope()
        Executor().run(pybackward.load(startup), scope=scope)
        p = {**{k: v for k, v in scope.vars.items() if isinstance(v, np.ndarray)}, **p}
    refuse_existing_backward(prog, "check takes the forward program")
    with Progress("check", quiet=quiet) as progress:
        rows = pybackward.check_gradients(prog, loss, f, p, list(wrt) or None, eps=eps,
                                          rtol=rtol, atol=atol, max_elements=max_elements,
                                          directions=directions,
                                          progress=lambda i, n, name: progress.update(i, name, total=n))
    if as_json:
        click.echo(json.dumps([r.__dict__ | {"shape": list(r.shape)} for r in rows]))
    else:
        from pybackward.gradcheck import rows_to_table
        click.echo(rows_to_table(rows))
    bad = [r.var for r in rows if not r.ok]
    if bad:
        raise pybackward.CheckFailedError(f"gradient check failed for {', '.join(bad)}")


def _load_command_modules() -> None:
    """Commands kept in their own modules (cli/cmd_*.py) register themselves on import."""
    import importlib
    import pkgutil
    from pathlib import Path
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"{__package__}.{info.name}")


_load_command_modules()


def main() -> None:
    cli(prog_name="pybackward")


if __name__ == "__main__":
    # Run as `python -m pybackward_cli.main`: this module is `__main__`, and the
    # cmd_* modules registered their commands on the package's own copy of it.
    import importlib
    importlib.import_module(f"{__package__ or 'pybackward_cli'}.main").main()
