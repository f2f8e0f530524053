"""One overwritten progress line on a terminal, for work that takes a while.

Shown only when the stream is a TTY (and not --quiet), and only once the work
has run for `delay` seconds; cleared when it ends, so nothing of it is left in
the output. Piped or redirected stderr gets nothing.
"""
from __future__ import annotations

import sys
import time

import click


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
