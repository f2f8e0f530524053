"""Running builder programs the way `paddle.static.Executor` is used:
parameters live in a global scope across runs, so `exe.run(startup)` then
`exe.run(main, feed=..., fetch_list=[loss])` works as in Paddle.

The kernels are pybackward's NumPy interpreter (`pybackward.Executor`).
Random ops with a nonzero seed attr (startup programs whose
`random_seed` was set, dropout with `fix_seed`) draw exactly Paddle's
mt19937 stream; with seed 0 Paddle draws from its global generator, which a
program does not describe - the interpreter then seeds from its own
generator (`Executor(seed=...)`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

from ..interpreter.executor import Executor as _Executor
from ..interpreter.executor import Scope
from .framework import Program, default_main_program

__all__ = ["Executor", "Scope", "global_scope", "scope_guard", "CPUPlace"]

_global_scope = Scope()


def global_scope() -> Scope:
    """The scope `Executor.run` uses when none is given."""
    return _global_scope


@contextlib.contextmanager
def scope_guard(scope: Scope) -> Iterator[None]:
    """Make `scope` the global scope inside the `with` block."""
    global _global_scope
    prev, _global_scope = _global_scope, scope
    try:
        yield
    finally:
        _global_scope = prev


class CPUPlace:
    """Accepted for compatibility (everything runs on NumPy)."""

    def __repr__(self) -> str:
        return "Place(cpu)"


class Executor(_Executor):
    """`Executor(place=None)`: `run(program=None, feed=None, fetch_list=None,
    scope=None, return_numpy=True)` with Paddle's defaults (the default main
    program, the global scope)."""

    def __init__(self, place: Any = None, seed: int = 0, check_nan: bool = False):
        super().__init__(seed=seed, check_nan=check_nan)
        self.place = place

    def run(self, program: Program | None = None, feed: Mapping[str, Any] | None = None,
            fetch_list: Sequence[Any] | Any | None = None, scope: Scope | None = None,
            return_numpy: bool = True, **_ignored: Any) -> list:
        program = default_main_program() if program is None else program
        if fetch_list is not None and not isinstance(fetch_list, (list, tuple)):
            fetch_list = [fetch_list]
        return super().run(program, feed=feed, fetch_list=fetch_list,
                           scope=global_scope() if scope is None else scope,
                           return_numpy=return_numpy)
