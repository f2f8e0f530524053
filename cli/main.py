"""`pybackward` commands. Each reports bad input as one line on stderr and
exits 2 (1 for a failed check); a traceback means a pybackward bug.

This module is the entry point only: the `cli` group and its error handling.
Each command lives in its own module (cmd_*.py), which imports the library
and `common` (what commands share) and nothing else of the CLI.
"""
from __future__ import annotations

import sys

import click

import pybackward

from . import cmd_append, cmd_check, cmd_convert, cmd_diff, cmd_dot, cmd_memory, cmd_ops, cmd_run, cmd_show
from .common import one_line

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
            click.echo(f"error: {one_line(e.format_message())} (see '{cmd} --help')", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            click.echo(f"error: {one_line(e.format_message())}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("pybackward: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(pybackward.__version__, prog_name="pybackward")
def cli() -> None:
    """Differentiate PaddlePaddle static programs (ProgramDesc files)."""


for _command in (cmd_show.show, cmd_convert.convert, cmd_ops.ops, cmd_run.run, cmd_check.check,
                 cmd_append.append, cmd_append.gradients, cmd_diff.diff, cmd_dot.dot, cmd_memory.stats):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="pybackward")


if __name__ == "__main__":
    main()
