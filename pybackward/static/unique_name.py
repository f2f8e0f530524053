"""Unique names, as Paddle's `paddle.utils.unique_name` makes them.

A generator keeps one counter per key: `generate("fc")` gives `fc_0`, then
`fc_1`, ... Every `Program` owns one (`program._name_generator`), and the
layers name their vars and parameters from the *current main program's*
generator: `fc_0.w_0`, `fc_0.tmp_1`, `tmp_3`, `mean_0.tmp_0`. So a fresh
`Program` starts numbering from zero again.

The module-level `generate` / `guard` / `switch` work on a separate global
generator, exactly as in Paddle 3.3.1's legacy static mode: `guard()` gives
the global generator a fresh namespace, and does *not* renumber the layers of
a program (their names come from the program's own generator).
"""
from __future__ import annotations

import contextlib
import copy
from collections import defaultdict
from typing import Iterator

__all__ = ["UniqueNameGenerator", "generate", "guard", "switch"]


class UniqueNameGenerator:
    """Per-key counters: `generate(key)` -> `prefix + key + "_" + n`."""

    def __init__(self, prefix: str | None = None):
        self.ids: defaultdict[str, int] = defaultdict(int)
        self.prefix = "" if prefix is None else prefix

    def __call__(self, key: str) -> str:
        return self.generate(key)

    def generate(self, key: str) -> str:
        n = self.ids[key]
        self.ids[key] += 1
        return f"{self.prefix}{key}_{n}"

    # Paddle's name for the same thing in static mode.
    generate_with_ignorable_key = generate

    def clone(self) -> "UniqueNameGenerator":
        other = UniqueNameGenerator(self.prefix)
        other.ids = copy.deepcopy(self.ids)
        return other

    def __repr__(self) -> str:
        return f"UniqueNameGenerator(prefix={self.prefix!r}, ids={dict(self.ids)})"


generator = UniqueNameGenerator()


def generate(key: str) -> str:
    """A unique name from the global generator: `fc_0`, `fc_1`, ..."""
    return generator(key)


generate_with_ignorable_key = generate


def switch(new_generator: UniqueNameGenerator | None = None) -> UniqueNameGenerator:
    """Install `new_generator` (a fresh one if None) as the global generator;
    return the previous one."""
    global generator
    old = generator
    generator = UniqueNameGenerator() if new_generator is None else new_generator
    return old


@contextlib.contextmanager
def guard(new_generator: UniqueNameGenerator | str | bytes | None = None) -> Iterator[None]:
    """A fresh global namespace inside the `with` block (a str or bytes gives
    the names that prefix, as in Paddle)."""
    if isinstance(new_generator, bytes):
        new_generator = new_generator.decode()
    if isinstance(new_generator, str):
        new_generator = UniqueNameGenerator(new_generator)
    old = switch(new_generator)
    try:
        yield
    finally:
        switch(old)
