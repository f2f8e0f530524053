"""`pybackward` commands. Each reports bad input as one line on stderr and
exits 2 (1 for a failed check); a traceback means a pybackward bug.

This module is the entry point only: the `cli` group and its error handling.
Each command lives in its own module (cmd_*.py), which imports the library
and `common` (what commands share) and nothing else of the CLI. A command's
module is imported when the command is looked up (`pybackward append ...`
imports `cmd_append` alone, not the other nine commands' modules and their
options: start-up, issue #37); `--help` and `cli.commands` import them all.
"""
from __future__ import annotations

import importlib
import sys

import click

import pybackward

_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

#: Every command: its module in this package and the click command's name there.
COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("cmd_show", "show"), "convert": ("cmd_convert", "convert"), "ops": ("cmd_ops", "ops"),
    "run": ("cmd_run", "run"), "check": ("cmd_check", "check"), "append": ("cmd_append", "append"),
    "gradients": ("cmd_append", "gradients"), "diff": ("cmd_diff", "diff"), "dot": ("cmd_dot", "dot"),
    "stats": ("cmd_memory", "stats"),
}


class LazyCommands(click.Group):
    """A group whose commands are imported when looked up (`COMMANDS`).

    click asks `get_command` for the command it runs and `list_commands` for
    the help; `commands` (click's dict, also read for "Did you mean ...?") is
    complete whenever it is read."""

    def __init__(self, *args, **kwargs):
        self._lazy = dict(COMMANDS)
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> dict[str, click.Command]:      # type: ignore[override]
        for name in list(self._lazy):
            self._load(name)
        return self._commands

    @commands.setter
    def commands(self, value) -> None:
        self._commands = dict(value or {})

    def _load(self, name: str) -> None:
        module, attr = self._lazy.pop(name)
        self._commands.setdefault(name, getattr(importlib.import_module(f"{__package__}.{module}"), attr))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            self._load(cmd_name)
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self._commands, *self._lazy})


class OneLineErrors(LazyCommands):
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
            from .common import one_line
            cmd = e.ctx.command_path if e.ctx is not None else "pybackward"
            click.echo(f"error: {one_line(e.format_message())} (see '{cmd} --help')", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            from .common import one_line
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


def main(*, skip_teardown: bool = True) -> None:
    """The `pybackward` program: run the command, then end the process.

    Ending it, Python tears down what the command built: module teardown and a
    last garbage collection walk every object still alive, and a loaded
    program holds reference cycles (block <-> op views). After `append` on the
    3,000-layer MLP that is ~0.1-0.2 s (171,000 objects in cycles, a gc pass of
    ~80 ms) after the output was written; ~30 ms after LeNet's. Nothing of it is
    needed: the output was written atomically and closed, and the OS frees the
    memory. So once the command has finished, `main` flushes stdout and
    stderr, runs the atexit handlers (logging's flush, weakref finalizers) and
    ends the process with the command's exit code (`os._exit`), skipping only
    the teardown. It exits the usual way instead when the exit status is not an
    int (click's `sys.exit("message")`), a flush fails (a closed pipe: Python's
    own report and status 120 then, as before), another non-daemon thread is
    running, or Python runs interactively (`python -i`). Callers that go on
    after `main` (in-process probes) pass `skip_teardown=False` and get the
    SystemExit."""
    try:
        cli(prog_name="pybackward")
    except SystemExit as e:
        if skip_teardown:
            _end_process(e.code)
        raise


def _end_process(code) -> None:
    """`os._exit(code)` after flushing and the atexit handlers; returns (to exit the usual way)
    when that could lose output, a thread's work or the exit status (see `main`)."""
    import atexit
    import os
    import threading
    if code is None:
        code = 0
    if not isinstance(code, int) or not 0 <= code <= 255 or sys.flags.inspect:
        return
    if any(t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):     # what the handlers printed
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        os._exit(120)                                # Python's status when the final flush fails
    os._exit(code)


if __name__ == "__main__":
    main()
