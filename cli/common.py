"""What the `pybackward` commands share: the one module each command module
imports besides the library.

* errors and warnings: `handle_errors` (one stderr line, exit 2; 1 for a
  failed check), `recorded_deviations`, `one_line`, the finite-float types;
* progress: one overwritten line on a terminal for work that takes a while
  (`Progress`: shown only on a TTY, not with --quiet, after `delay` seconds;
  cleared when it ends, so piped or redirected stderr gets nothing);
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

import difflib
import functools
import math
import re
import sys
import time
import warnings
from pathlib import Path

import click

import pybackward
from pybackward import memory as pm
from pybackward.base.errors import CheckFailedError, PaddleDeviationWarning, PyBackwardError
from pybackward.views.summary import needed_inputs


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
                click.echo(f"pybackward: {e}", err=True)
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
    """A message on one line (as every error line the CLI prints)."""
    return " ".join(s.split())


# --------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------
class Progress:
    def __init__(self, label: str, total: int | None = None, *, stream=None, quiet: bool = False,
                 delay: float = 1.0, min_interval: float = 0.0, clock=time.monotonic):
        self.label = label
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.enabled = not quiet and _isatty(self.stream)
        self.delay = delay
        self.clock = clock
        self.start = clock()
        #: Redraw at most this often (for updates per op, thousands a second).
        self.min_interval = min_interval
        self._drawn_at = float("-inf")
        self._shown = 0          # width of the line on screen (0: nothing shown)

    def update(self, done: int, item: str | None = None, total: int | None = None) -> None:
        """`done` of `total` finished; `item` is the one being worked on."""
        if total is not None:
            self.total = total
        if not self.enabled:
            return
        now = self.clock()
        if now - self.start < self.delay or now - self._drawn_at < self.min_interval:
            return
        self._drawn_at = now
        text = f"{self.label} {done}/{self.total}" if self.total is not None else f"{self.label} {done}"
        if item:
            text += f" {item}"
        self._write("\r" + text + " " * max(0, self._shown - len(text)))
        self._shown = len(text)

    def clear(self) -> None:
        """Erase the line (before other output, and at the end)."""
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _write(self, s: str) -> None:
        self.stream.write(s)
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.clear()


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
    """A summary line on stderr, unless --quiet."""
    if not quiet:
        click.echo(msg, err=True)


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
    import numpy as np
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


def execute(prog, startup, params, feeds, fetch, check_nan, out, hint: str = "", as_json: bool = False,
            max_while_steps: int | None = None, timeout: float | None = None, quiet: bool = False,
            files=None):
    """Run, with a progress line on a terminal (see Progress), and show the values."""
    with Progress("run: op", quiet=quiet, min_interval=0.1) as bar:
        values = evaluate(prog, startup, params, feeds, fetch, check_nan, hint, max_while_steps, timeout,
                          progress=lambda done, total, op_type: bar.update(done, op_type, total=total),
                          files=files)
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


def beside_hint(src: str) -> str:
    stem = Path(src).with_suffix("").name
    return (f" (without --params and --feeds, pybackward reads params.npz or {stem}.pdparams or "
            f"{stem}.pdiparams, and feeds.npz, beside {src})")


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
            close = difflib.get_close_matches(name, sorted(declared), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise pybackward.ArgumentError(f"{prog.source or 'the program'}: block 0, var '{name}': cannot "
                                           f"fetch: no block declares a var by that name (--fetch){hint}")


def missing_inputs_error(prog, given, feeds, error: str, hint: str = ""):
    """When a run failed on a feed or persistable var nobody gave (the
    interpreter's `error` names it), an error listing every missing one with
    the options that give them; else None (the run's own error stands)."""
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
    shown = [f"{v.name} ({_type_text(v)})" for v in vs[:6]]
    return ", ".join(shown) + (f" and {len(vs) - 6} more" if len(vs) > 6 else "")


def _type_text(v) -> str:
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


def resolve_checkpoints(prog, loss: str, spec: str | None, budget: str | int | None = None,
                        batch: int = 1, no_grad=(), echo=None):
    """What `append --checkpoints SPEC` passes to append_backward.

    SPEC is "auto" (pick them: `memory.choose_checkpoints`, within `budget`
    bytes if given) or comma-separated var names; None means no recompute.
    The choice and the estimated peak before and after go to `echo`
    (default: stderr). Returns a list of names, or None (no recompute: no
    SPEC, or "auto" found nothing worth recomputing).
    """
    echo = echo or (lambda s: click.echo(s, err=True))
    budget = parse_bytes(budget)
    if spec is None:
        if budget is not None:
            raise pybackward.ArgumentError("--memory-budget needs --checkpoints auto")
        return None
    if spec.strip() == "auto":
        choice = pm.choose_checkpoints(prog, loss, budget=budget, batch_size=batch,
                                       no_grad_set=set(no_grad) or None)
        echo(str(choice))
        return list(choice.checkpoints) or None
    if budget is not None:
        raise pybackward.ArgumentError("--memory-budget goes with --checkpoints auto, not with names")
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise pybackward.ArgumentError("--checkpoints takes \"auto\" or comma-separated var names")
    for n in names:
        prog.global_block().var(n)
    return names


def append_with_checkpoints(prog, loss: str, checkpoints: str | None, memory_budget=None,
                            batch: int = 1, echo=None, **kwargs):
    """`append_backward` for `append --checkpoints SPEC [--memory-budget B] [--batch N]`.

    Returns (params_grads, checkpoint names or None); `kwargs` go to
    append_backward (parameter_list, no_grad_set, aggregation, ...).
    """
    no_grad = kwargs.get("no_grad_set") or ()
    names = resolve_checkpoints(prog, loss, checkpoints, memory_budget, batch, no_grad, echo)
    if names is None:
        return pybackward.append_backward(loss, program=prog, **kwargs), None
    pairs, used = pybackward.append_backward(loss, program=prog, checkpoints=names, **kwargs)
    return pairs, used
