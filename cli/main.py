"""`pybackward` commands. Each reports bad input as one line on stderr and
exits 2 (1 for a failed check); a traceback means a pybackward bug."""
from __future__ import annotations

import functools
import sys

import click

import pybackward
from pybackward.errors import CheckFailedError, PyBackwardError


def handle_errors(fn):
    """Turn PyBackwardError into one stderr line and exit code 2 (1 for failed checks)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CheckFailedError as e:
            click.echo(f"pybackward: {e}", err=True)
            sys.exit(1)
        except PyBackwardError as e:
            click.echo(f"error: {_one_line(str(e))}", err=True)
            sys.exit(2)
    return wrapper


def _one_line(s: str) -> str:
    return " ".join(s.split())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(pybackward.__version__, prog_name="pybackward")
def cli() -> None:
    """Differentiate PaddlePaddle static programs (ProgramDesc files)."""


@cli.command()
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--block", "block", type=int, default=None, help="Show only this block.")
@click.option("--no-attrs", is_flag=True, help="Hide op attributes.")
@click.option("--all-attrs", is_flag=True, help="Show every attr, op_callstack and the like included.")
@click.option("--no-vars", is_flag=True, help="Hide variable declarations.")
@handle_errors
def show(program, block, no_attrs, all_attrs, no_vars):
    """Print a readable listing of PROGRAM (binary or .pbtxt)."""
    prog = pybackward.load(program)
    click.echo(pybackward.text.program_to_text(prog, show_attrs=not no_attrs, all_attrs=all_attrs,
                                               show_vars=not no_vars, block=block))


@cli.command()
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
@handle_errors
def convert(src, dst):
    """Convert SRC to DST: binary <-> protobuf text format (by the .pbtxt suffix)."""
    prog = pybackward.load(src)
    pybackward.save(prog, dst)
    click.echo(f"wrote {dst}")


def main() -> None:
    cli(prog_name="pybackward")


if __name__ == "__main__":
    main()
