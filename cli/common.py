"""What the `pybackward` commands share: the one module each command module
imports besides the library.

* errors and warnings: `handle_errors` (one stderr line, exit 2; 1 for a
  failed check), `recorded_deviations`, `one_line`, the finite-float types;
* progress: one overwritten line on a terminal for work that takes a while
  (`Progress`: shown only on a TTY, not with --quiet, after `delay` seconds;
  cleared when it ends, so piped or redirected stderr gets nothing), and
  `command_progress`, the line every command that can run for seconds
  shows: the step it is at, with a count where there is one;
* running programs: reading arrays (`load_arrays`), `evaluate` / `execute`,
  printing values, the run options;
* the everyday path through `append --run` and `run`: the values found
  beside the program, the loss when none is named, and the checks before a
  run whose errors say what to pass;
* checkpoints for `append --checkpoints` and `stats --checkpoints`.

Imports of the heavier library modules (the interpreter, Paddle's file
formats) stay inside the functions that need them: start-up time for the
commands that never run a program.
"""
from __future__ import annotations

import functools
import gc
import math
import re
import sys
import threading
import time
import warnings
from pathlib import Path

import click

import pybackward
from pybackward.base.errors import CheckFailedError, PaddleDeviationWarning, PyBackwardError
from pybackward.base.names import close_names, printable, printable_lines


# --------------------------------------------------------------------------
# Errors and warnings
# --------------------------------------------------------------------------
_CAUGHT: list[list[warnings.WarningMessage]] = []


def recorded_deviations() -> list[str]:
    """The PaddleDeviationWarnings the running command has raised so far (for --json)."""
    caught = _CAUGHT[-1] if _CAUGHT else []
    return [one_line(str(w.message)) for w in caught if issubclass(w.category, PaddleDeviationWarning)]


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
                click.echo(f"pybackward: {printable_lines(str(e))}", err=True)
                sys.exit(1)
            except PyBackwardError as e:
                click.echo(f"error: {one_line(str(e))}", err=True)
                sys.exit(2)
            except KeyboardInterrupt as e:
                where = ", ".join(reversed(getattr(e, "__notes__", None) or []))    # outermost op first
                click.echo("pybackward: interrupted" + (f" {one_line(where)}" if where else "")
                           + "; nothing more was written", err=True)
                sys.exit(130)
            finally:
                for w in caught:
                    if issubclass(w.category, pybackward.PyBackwardWarning):
                        click.echo(f"warning: {one_line(str(w.message))}", err=True)
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


def one_line(s: str) -> str:
    """A message on one line (as every error line the CLI prints), its control
    characters escaped (`base.names.printable`): a name in it cannot move the cursor,
    erase the line or forge another."""
    return printable(" ".join(s.split()))


# --------------------------------------------------------------------------
# Outputs that are inputs: the one refusal of every command that writes
# --------------------------------------------------------------------------
def refuse_outputs_over_inputs(outputs, inputs, hint: str = "") -> None:
    """Raise ArgumentError when a path the command will write would replace one it reads.

    Every command that writes (`append`, `gradients`, `convert`, `run --out`,
    `dot -o`, `--expect ... --update`) calls this once, with everything it will
    write and everything it reads, before it reads or writes anything else: one
    line, exit 2, nothing written, the inputs untouched. Without it `append a.pb
    a.pb` (or an OUT that is a symlink or a hard link to IN) replaced the input,
    and `append --out-dir x x/f.pb f.pb` wrote f.pb's result over the input
    x/f.pb.

    `outputs`: the paths to be written (None skipped); for a directory of per-var
    files, the files in it (`array_output_files`). `inputs`: the paths read (None
    skipped): files, and directories whose files are read (`--params DIR/`);
    `--feed NAME=PATH` items through `feed_paths`. An output is an input when it
    is the same file (the same path, a symlink to it, a hard link: compared by
    device and inode; for a file not there yet, the same real path: `append IN
    G --expect G`) or an existing file inside an input directory. `hint`:
    what to do instead, appended to the message (e.g. "use --in-place to
    replace IN").
    """
    import os
    files: dict[tuple[int, int], str] = {}
    dirs: list[tuple[str, str]] = []
    ctx = click.get_current_context(silent=True)
    read_before = list(ctx.meta.get(_READ_BEFORE_KEY, ())) if ctx is not None else []
    named: dict[str, str] = {}           # real path -> input, for inputs not there yet (a golden)
    for inp in [*inputs, *read_before]:
        if inp is None:
            continue
        name = os.fspath(inp)
        named.setdefault(os.path.realpath(name), name)
        try:
            st = os.stat(name)
        except (OSError, ValueError):
            continue                      # a missing input fails when it is read
        if os.path.isdir(name):
            dirs.append((os.path.realpath(name), name))
        else:
            files.setdefault((st.st_dev, st.st_ino), name)
    if not named:
        return
    for out in outputs:
        if out is None:
            continue
        name = os.fspath(out)
        try:
            st = os.stat(name)
        except (OSError, ValueError):
            same = named.get(os.path.realpath(name))
            if same is not None:          # e.g. OUT is the golden of --expect, still to be written
                raise pybackward.ArgumentError(f"{name}: is also the input {same}; nothing was written"
                                               + (f" ({hint})" if hint else ""))
            continue                      # nothing there: writing it replaces nothing
        same = files.get((st.st_dev, st.st_ino))
        if same is None and not os.path.isdir(name):
            real = os.path.realpath(name)
            same = next((label for d, label in dirs if real.startswith(d.rstrip(os.sep) + os.sep)), None)
        if same is not None:
            what = "(the same file)" if os.path.isfile(same) else "(a file in that directory)"
            raise pybackward.ArgumentError(
                f"{name}: would overwrite the input {same} {what}; nothing was written"
                + (f" ({hint})" if hint else ""))


#: Where the click context keeps the inputs read before a command's body runs (`--ops` files).
_READ_BEFORE_KEY = "pybackward.read_before"


def array_output_files(dst, names) -> list[str]:
    """The files `save_arrays(DST, arrays)` writes, for `refuse_outputs_over_inputs`:
    DST itself, or DST/NAME for each array name when DST is a directory of per-var files."""
    import os
    from pybackward.tensors.paddle_files import array_format
    dst = os.fspath(dst)
    try:
        fmt = array_format(dst, writing=True)
    except PyBackwardError:
        return [dst]                      # refused by the writer, with its own message
    return [os.path.join(dst, str(n)) for n in names] if fmt == "dir" else [dst]


def feed_paths(feed_items) -> list[str]:
    """The files of `--feed NAME=PATH` items (for `refuse_outputs_over_inputs`)."""
    return [item.partition("=")[2] for item in feed_items if "=" in item]


# --------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------
class Progress:
    """One overwritten line on stderr for work that takes a while (see the module doc).

    `update(done, item, total)` draws `LABEL done/total item` (what `check`
    shows); `stage(text)` draws `LABEL text`, for a step that has no count
    (loading, the gradient pass, writing). With `tick` (seconds), a thread
    draws the latest line once `delay` has passed even when the step itself
    reports nothing for a while; `echo` prints a message line without
    tearing the progress line."""

    def __init__(self, label: str, total: int | None = None, *, stream=None, quiet: bool = False,
                 delay: float | None = None, min_interval: float = 0.0, clock=time.monotonic,
                 tick: float | None = None):
        self.label = label
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.enabled = not quiet and _isatty(self.stream)
        self.delay = PROGRESS_DELAY if delay is None else delay
        self.clock = clock
        self.start = clock()
        #: Redraw at most this often (for updates per op, thousands a second).
        self.min_interval = min_interval
        self.tick = tick
        self._drawn_at = float("-inf")
        self._shown = 0          # width of the line on screen (0: nothing shown)
        self._text: str | None = None      # the latest line asked for
        self._drawn: str | None = None     # the line on screen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, done: int, item: str | None = None, total: int | None = None) -> None:
        """`done` of `total` finished; `item` is the one being worked on."""
        if total is not None:
            self.total = total
        if not self.enabled:
            return
        text = f"{self.label} {done}/{self.total}" if self.total is not None else f"{self.label} {done}"
        if item:
            text += f" {item}"
        self._show(text)

    def stage(self, text: str) -> None:
        """The step being worked on, when it has no count: `LABEL text`."""
        if self.enabled:
            self._show(f"{self.label} {text}")

    def _show(self, text: str) -> None:
        text = printable(text)      # op types and names come from the program
        with self._lock:
            self._text = text
            now = self.clock()
            if now - self.start < self.delay or now - self._drawn_at < self.min_interval:
                return
            self._draw(now)

    def _draw(self, now: float) -> None:
        text = self._text or ""
        self._drawn_at = now
        self._drawn = text
        self._write("\r" + text + " " * max(0, self._shown - len(text)))
        self._shown = len(text)

    def poll(self) -> None:
        """Draw the latest line if it is due and not on screen yet (what the `tick` thread calls)."""
        with self._lock:
            now = self.clock()
            if self._text is not None and self._text != self._drawn and now - self.start >= self.delay:
                self._draw(now)

    def echo(self, message: str) -> None:
        """Print a line on the stream (a summary, the checkpoints chosen) while the progress line is up."""
        with self._lock:
            self._erase()
            self._drawn = None
            click.echo(printable_lines(message), file=self.stream)

    def clear(self) -> None:
        """Erase the line (before other output, and at the end); nothing is drawn
        again until the next `update` or `stage`."""
        with self._lock:
            self._erase()
            self._text = None

    def _erase(self) -> None:
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0
            self._drawn = None

    def _write(self, s: str) -> None:
        self.stream.write(s)
        self.stream.flush()

    def _ticking(self) -> None:
        while not self._stop.wait(self.tick):
            self.poll()

    def __enter__(self) -> "Progress":
        if self.enabled and self.tick:
            self._thread = threading.Thread(target=self._ticking, name="pybackward-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.clear()


#: Seconds of work before a progress line appears (short commands print none).
PROGRESS_DELAY = 1.0
#: How often a command's progress thread looks for a line to draw (`Progress(tick=...)`).
TICK = 0.25
#: Redraw a progress line at most this often when it changes thousands of times a second (per op).
REDRAW_INTERVAL = 0.1


class PausedCollector:
    """Python's cyclic garbage collector off while a command builds and changes its program.

    A loaded program and the pass's result are tens of thousands of objects
    (hundreds of thousands for the 3,000-layer MLP) that live until the command
    ends; every collection that runs meanwhile walks them and frees nothing
    (reference counting frees the pass's temporaries). The loader and the pass
    pause the collector themselves, but the steps between them, and the first
    allocations after each, paid for collections of all of it: ~40-100 ms of the
    MLP's `append`. `resume()` (at the latest when the block ends) moves what was
    built meanwhile to the oldest generation without walking it (`gc.freeze`,
    `gc.unfreeze`: O(1)) and turns the collector back on, so the next young
    collection does not walk it either; it is collected, like any old object,
    by a later full collection (an in-process caller that runs many commands
    gets its memory back). Run before anything that may make cyclic garbage in
    bulk (the interpreter: `append --run`)."""

    def __init__(self) -> None:
        self._was_on = False

    def __enter__(self) -> "PausedCollector":
        self._was_on = gc.isenabled()
        gc.disable()
        return self

    def resume(self) -> None:
        if self._was_on:
            self._was_on = False
            gc.freeze()
            gc.unfreeze()
            gc.enable()

    def __exit__(self, *exc) -> None:
        self.resume()


def command_progress(label: str, quiet: bool = False) -> Progress:
    """The progress line of a command that can run for seconds: on a terminal,
    after PROGRESS_DELAY, redrawn at most every REDRAW_INTERVAL, and drawn by a
    thread every TICK while a step reports nothing."""
    return Progress(label, quiet=quiet, min_interval=REDRAW_INTERVAL, tick=TICK)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def quiet_option(fn):
    """`--quiet` / `-q`: no summary or progress lines on stderr (errors and warnings still print)."""
    return click.option("-q", "--quiet", is_flag=True,
                        help="No summary or progress lines on stderr (errors and warnings still print).")(fn)


def info(msg: str, quiet: bool) -> None:
    """A summary line on stderr, unless --quiet (names in it escaped: `base.names.printable`)."""
    if not quiet:
        click.echo(printable_lines(msg), err=True)


# --------------------------------------------------------------------------
# Running programs
# --------------------------------------------------------------------------
def load_arrays(params, feeds_npz, feed_items, program=None) -> tuple[dict, dict]:
    """--params FILE (.npz, .pdparams, .pdiparams or a directory of per-var
    files; `program` names a .pdiparams' tensors), --feeds FILE and --feed
    name=file.npy, as name -> array."""
    from pybackward.tensors.paddle_files import load_arrays as read, read_npy
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
    """One line of a fetched value: its name (escaped: `base.names.printable`), dtype, shape and statistics."""
    import numpy as np
    name = printable(name)
    a = np.asarray(v)
    if a.size == 0:
        return f"{name}: {a.dtype}{list(a.shape)} (empty)"
    if a.dtype.kind in "fc":
        return (f"{name}: {a.dtype}{list(a.shape)} mean={a.mean():.6g} min={a.min():.6g} "
                f"max={a.max():.6g} |x|={np.linalg.norm(a.ravel()):.6g}")
    return f"{name}: {a.dtype}{list(a.shape)} {a.ravel()[:8].tolist()}{' ...' if a.size > 8 else ''}"


def evaluate(prog, startup, params, feeds, fetch, check_nan, hint: str = "",
             max_while_steps: int | None = None, timeout: float | None = None, progress=None,
             files=None) -> list:
    """Run PROG (after STARTUP) on the arrays. A --fetch name no block declares
    is refused first; a run that stops at a feed or parameter nobody gave is
    reported with every missing one and the options that give them.
    `max_while_steps` / `timeout` bound the run (None: the interpreter's defaults);
    `progress(done, total, op_type)` is told of each op of the main run;
    `files` is the directory its save / load ops may use (None: none)."""
    from pybackward.interpreter.executor import Executor, Scope
    check_fetch(prog, fetch)
    exe = Executor(check_nan=check_nan, max_while_steps=max_while_steps, timeout=timeout, files=files)
    scope = Scope()
    if startup:
        exe.run(legacy_only(pybackward.load(startup), "--startup", startup), scope=scope)
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
    from pybackward.legacy.text import jsonable
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
        from pybackward.tensors.paddle_files import save_arrays
        save_arrays(out, dict(zip(fetch, values)))
        if not quiet:
            click.echo(f"wrote {out}", err=True)
    return dict(zip(fetch, values))


def run_progress(bar: Progress, what: str = "op"):
    """The interpreter's `progress(done, total, op_type)`, drawing `LABEL WHAT done/total op_type` on `bar`."""
    return lambda done, total, op_type: bar.stage(f"{what} {done}/{total} {op_type}")


def execute(prog, startup, params, feeds, fetch, check_nan, out, hint: str = "", as_json: bool = False,
            max_while_steps: int | None = None, timeout: float | None = None, quiet: bool = False,
            files=None, progress: Progress | None = None):
    """Run, with a progress line on a terminal (see Progress; `progress`: the
    command's own line, else one of its own), and show the values."""
    if progress is None:
        with Progress("run: op", quiet=quiet, min_interval=REDRAW_INTERVAL) as bar:
            values = evaluate(prog, startup, params, feeds, fetch, check_nan, hint, max_while_steps, timeout,
                              progress=lambda done, total, op_type: bar.update(done, op_type, total=total),
                              files=files)
    else:
        values = evaluate(prog, startup, params, feeds, fetch, check_nan, hint, max_while_steps, timeout,
                          progress=run_progress(progress), files=files)
        progress.clear()
    return show_values(fetch, values, out, as_json, quiet)


def execute_pir(prog, params, feeds, fetch, check_nan, out, as_json: bool = False,
                max_while_steps: int | None = None, timeout: float | None = None, quiet: bool = False,
                progress: Progress | None = None, paddle_seed: int | None = None) -> dict:
    """Run a PIR program (forward, and its backward section if it has one) and show the
    values: FETCH (`%N`, a parameter / data / fetch / shadow_output name, or NAME@GRAD),
    or by default its fetches, its loss and every NAME@GRAD."""
    from pybackward.interpreter.pir_executor import run as run_pir
    opts = dict(check_nan=check_nan, max_while_steps=max_while_steps, timeout=timeout, paddle_seed=paddle_seed)
    if progress is not None:
        opts["progress"] = run_progress(progress)
    values = run_pir(prog, feeds, params, list(fetch) or None, **opts)
    if progress is not None:
        progress.clear()
    return show_values(list(values), list(values.values()), out, as_json, quiet)


def evaluate_pir(prog, params, feeds, fetch, check_nan, progress: Progress | None = None) -> dict:
    """Run a PIR program and return {ref: value} for FETCH (no printing)."""
    from pybackward.interpreter.pir_executor import run as run_pir
    opts = {"check_nan": check_nan}
    if progress is not None:
        opts["progress"] = run_progress(progress)
    values = run_pir(prog, feeds, params, list(fetch), **opts)
    if progress is not None:
        progress.clear()
    return values


def pir_only_options(prog, **given) -> None:
    """Refuse the options that apply to legacy programs only, naming them."""
    named = [name for name, value in given.items() if value]
    if named:
        raise pybackward.ArgumentError(f"{prog.source or 'the program'}: is a PIR program; "
                                       f"{', '.join(named)} apply to legacy programs only")


def legacy_only(prog, what: str, source: str | None = None):
    """The program, if it is a legacy one; else one line saying what takes PIR programs today."""
    from pybackward.formats import require_legacy
    return require_legacy(prog, what, source)


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
        ctx = click.get_current_context(silent=True)
        if ctx is not None:     # inputs too: `refuse_outputs_over_inputs` adds them
            ctx.meta.setdefault(_READ_BEFORE_KEY, []).extend(ops_files)
        return fn(*args, **kwargs)
    return click.option("--ops", "ops_files", multiple=True, metavar="FILE", type=click.Path(dir_okay=False),
                        help="Grad rules for custom op types (a backward.yaml-shaped file; repeatable).")(wrapper)


# --------------------------------------------------------------------------
# The values beside the program, the loss, the checks before a run
# --------------------------------------------------------------------------
#: What --params takes, for messages.
PARAMS_FORMATS = ".npz, .pdparams, .pdiparams or a directory of per-var files"


def values_beside(src: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parameter and feed files `append --run`, `run` and `check` use when none is given:
    params.npz (else SRC's own .pdparams, else .pdiparams, as paddle.static.save /
    save_inference_model name them) and feeds.npz in SRC's directory."""
    here = Path(src).parent
    params: tuple[str, ...] = ()
    for cand in (here / "params.npz", Path(src).with_suffix(".pdparams"), Path(src).with_suffix(".pdiparams")):
        if cand.is_file() and cand != Path(src):
            params = (str(cand),)
            break
    feeds = (str(here / "feeds.npz"),) if (here / "feeds.npz").is_file() else ()
    return params, feeds


def beside_hint(src: str, prog=None) -> str:
    """What a run of SRC reads when no values are given; for a program with a
    backward section (one `pybackward append` wrote), where its values are."""
    stem = Path(src).with_suffix("").name
    hint = (f" (without --params and --feeds, pybackward reads params.npz or {stem}.pdparams or "
            f"{stem}.pdiparams, and feeds.npz, beside {src}")
    if isinstance(prog, pybackward.Program) and pybackward.summary(prog).has_backward:
        hint += ("; a program `pybackward append` wrote runs on the values of its input: "
                 "--params IN.pdparams (or params.npz) --feeds feeds.npz from beside IN")
    return hint + ")"


def run_command(out: str, params, feeds_npz, feed_items, startup: str | None = None) -> str | None:
    """The `pybackward run OUT ...` that runs a written program on the values
    used here (given, or found beside the input), when a plain `pybackward
    run OUT` would not find the same beside OUT (None when it would, or when
    there are no values to name)."""
    import shlex
    if not params and not feeds_npz and not feed_items and not startup:
        return None
    if values_beside(out) == (tuple(params), tuple(feeds_npz)) and not feed_items and not startup:
        return None
    args = ["pybackward", "run", out]
    for flag, items in (("--startup", [startup] if startup else []), ("--params", params),
                        ("--feeds", feeds_npz), ("--feed", feed_items)):
        for item in items:
            args += [flag, item]
    return " ".join(shlex.quote(str(a)) for a in args)


def default_fetch(prog) -> list[str]:
    """What `run` fetches without --fetch: the targets of the program's fetch
    ops (an inference model's outputs), else its loss candidates and, when it
    has a backward section, the parameter gradients it computes. (A legacy
    program's; a PIR program names its fetches with --fetch.)"""
    if not isinstance(prog, pybackward.Program):
        raise pybackward.ArgumentError(f"{getattr(prog, 'source', None) or 'the program'}: give --fetch NAME "
                                       "(the values to print)")
    block = prog.global_block()
    fetched = []
    for op in block.ops:
        if op.type == "fetch":
            col = op.attr("col", 0)
            fetched.extend((col if isinstance(col, int) else 0, n) for n in op.input("X"))
    if fetched:
        names = [n for _, n in sorted(fetched, key=lambda item: item[0])]
        return list(dict.fromkeys(names))
    info_ = pybackward.summary(prog)
    names = [c.name for c in info_.losses]
    if names and info_.has_backward:
        names += [f"{p.name}@GRAD" for p in info_.parameters if block.has_var(f"{p.name}@GRAD")]
    if not names:
        raise pybackward.ArgumentError(f"{prog.source or 'the program'}: no --fetch given, and the program has "
                                       "no fetch ops and no loss candidate; give --fetch NAME "
                                       "(`pybackward show --summary` lists feeds and outputs)")
    return names


def with_values_beside(src: str, params, startup, feeds_npz, feed_items) -> tuple[tuple, tuple]:
    """(params, feeds_npz) for a run of SRC: the ones given, else those found
    beside it (`values_beside`): params only when neither --params nor
    --startup is given, feeds only when neither --feeds nor --feed is."""
    found_params, found_feeds = values_beside(src)
    if not params and not startup:
        params = found_params
    if not feeds_npz and not feed_items:
        feeds_npz = found_feeds
    return tuple(params), tuple(feeds_npz)


def resolve_loss(prog, loss: str | None) -> str:
    """--loss, or the program's only loss candidate (`pybackward.summary`)."""
    if loss:
        return loss
    cands = pybackward.summary(prog).losses
    where = prog.source or "the program"
    if len(cands) == 1:
        return cands[0].name
    if not cands:
        raise pybackward.ArgumentError(f"{where}: no --loss given and no loss candidate (a one-element float "
                                       "var that no op reads); give --loss NAME "
                                       "(`pybackward show --summary` lists feeds and outputs)")
    listed = ", ".join(f"{c.name} ({c.dtype}{c.shape}, from {c.op})" for c in cands)
    raise pybackward.ArgumentError(f"{where}: no --loss given and {len(cands)} loss candidates: {listed}; "
                                   "give --loss NAME")


def check_fetch(prog, fetch) -> None:
    """Every --fetch name is declared by some block (else: did you mean ...)."""
    declared: set[str] | None = None
    for name in fetch:
        if declared is None:
            declared = {n for b in prog.blocks for n in b.vars}
        if name not in declared:
            close = close_names(name, sorted(declared), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise pybackward.ArgumentError(f"{prog.source or 'the program'}: block 0, var '{name}': cannot "
                                           f"fetch: no block declares a var by that name (--fetch){hint}")


def missing_inputs_error(prog, given, feeds, error: str, hint: str = ""):
    """When a run failed on a feed or persistable var nobody gave (the
    interpreter's `error` names it), an error listing every missing one with
    the options that give them; else None (the run's own error stands)."""
    from pybackward.views.summary import needed_inputs
    need_feeds, need_state = needed_inputs(prog)
    miss_feeds = [v for v in need_feeds if v.name not in feeds and v.name not in given]
    miss_state = [v for v in need_state if v.name not in feeds and v.name not in given]
    if not any(f"var '{v.name}'" in error for v in miss_feeds + miss_state):
        return None
    parts = []
    if miss_state:
        what = "parameters" if all(v.is_parameter for v in miss_state) else "persistable vars"
        parts.append(f"{what} {_listing(miss_state)} - give --params FILE ({PARAMS_FORMATS}) "
                     "or --startup STARTUP.pb")
    if miss_feeds:
        parts.append(f"feeds {_listing(miss_feeds)} - give --feeds FEEDS.npz or --feed NAME=FILE.npy")
    first = error.split(": not fed,")[0]      # where the run stopped: file, block, op, var
    return pybackward.ArgumentError(f"{first}. Not given: " + "; ".join(parts) + hint)


def _listing(vs) -> str:
    shown = [f"{v.name} ({type_text(v)})" for v in vs[:6]]
    return ", ".join(shown) + (f" and {len(vs) - 6} more" if len(vs) > 6 else "")


def type_text(v) -> str:
    """`float32[-1, 4]`: a var's dtype and declared shape."""
    try:
        dt = v.dtype
    except pybackward.PyBackwardError:
        dt = None
    return f"{dt if dt is not None else '?'}{list(v.shape)}"


# --------------------------------------------------------------------------
# Checkpoints (append --checkpoints, stats --checkpoints)
# --------------------------------------------------------------------------
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2,
          "mib": 1024 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3}


def parse_bytes(text: str | int | None) -> int | None:
    """'4096', '64KiB', '1.5MB', '2G' -> bytes (None stays None)."""
    if text is None or isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise pybackward.ArgumentError(f"not a byte count: {text!r} (try 4096, 64KiB, 1.5MB, 2GiB)")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0:
        raise pybackward.ArgumentError(f"the memory budget must be positive, not {text!r}")
    return n


def choose_checkpoints(prog, loss: str, budget: int | None = None, batch: int = 1, no_grad=(),
                       progress: Progress | None = None):
    """`memory.choose_checkpoints`, telling `progress` of each choice it judges
    (the search builds and measures a backward section per choice: seconds
    to minutes on a large model)."""
    from pybackward.analysis.checkpoint_choice import choose
    from pybackward.backward.api import append_for_choice
    judged = 0

    def build(copy, loss_name, checkpoints, no_grad_names):
        nonlocal judged
        judged += 1
        if progress is not None:
            progress.stage(f"choosing checkpoints ({judged} choice{'s' * (judged != 1)} judged)")
        return append_for_choice(copy, loss_name, checkpoints, no_grad_names)
    return choose(prog, loss, build, budget=budget, batch_size=batch, no_grad_set=set(no_grad) or None)


def checkpoint_choice(prog, loss: str, spec: str | None, budget: str | int | None = None, batch: int = 1,
                      no_grad=(), progress: Progress | None = None):
    """SPEC ("auto" or comma-separated names, None: no recompute) as
    (checkpoint names or None, the CheckpointChoice when SPEC is "auto")."""
    budget = parse_bytes(budget)
    if spec is None:
        if budget is not None:
            raise pybackward.ArgumentError("--memory-budget needs --checkpoints auto")
        return None, None
    if spec.strip() == "auto":
        choice = choose_checkpoints(prog, loss, budget, batch, no_grad, progress)
        return list(choice.checkpoints) or None, choice
    if budget is not None:
        raise pybackward.ArgumentError("--memory-budget goes with --checkpoints auto, not with names")
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise pybackward.ArgumentError("--checkpoints takes \"auto\" or comma-separated var names")
    for n in names:
        prog.global_block().var(n)
    return names, None


def resolve_checkpoints(prog, loss: str, spec: str | None, budget: str | int | None = None,
                        batch: int = 1, no_grad=(), echo=None, progress: Progress | None = None):
    """What `append --checkpoints SPEC` passes to append_backward.

    SPEC is "auto" (pick them: `memory.choose_checkpoints`, within `budget`
    bytes if given) or comma-separated var names; None means no recompute.
    The choice and the estimated peak before and after go to `echo`
    (default: stderr, through `progress` when given). Returns a list of
    names, or None (no recompute: no SPEC, or "auto" found nothing worth
    recomputing).
    """
    if echo is None:
        echo = progress.echo if progress is not None else (lambda s: click.echo(s, err=True))
    names, choice = checkpoint_choice(prog, loss, spec, budget, batch, no_grad, progress)
    if choice is not None:
        echo(str(choice))
    return names


def append_with_checkpoints(prog, loss: str, checkpoints: str | None, memory_budget=None,
                            batch: int = 1, echo=None, progress: Progress | None = None, **kwargs):
    """`append_backward` for `append --checkpoints SPEC [--memory-budget B] [--batch N]`.

    Returns (params_grads, checkpoint names or None); `kwargs` go to
    append_backward (parameter_list, no_grad_set, aggregation, ...).
    `progress` shows the search for "auto" and then the pass.
    """
    no_grad = kwargs.get("no_grad_set") or ()
    names = resolve_checkpoints(prog, loss, checkpoints, memory_budget, batch, no_grad, echo, progress)
    if progress is not None:
        progress.stage("appending the backward section" + (" with checkpoints" if names else ""))
    if names is None:
        return pybackward.append_backward(loss, program=prog, **kwargs), None
    pairs, used = pybackward.append_backward(loss, program=prog, checkpoints=names, **kwargs)
    return pairs, used
